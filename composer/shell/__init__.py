"""The composer's I/O: the Kubernetes API, the Director, threads, HTTP endpoints, settings."""
