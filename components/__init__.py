"""Pulumi ComponentResources that model the estate (hosts, DPUs, networks, clusters, GPUs)."""
