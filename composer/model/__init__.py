"""The composer's values: what it reads of pods, nodes and the Director, and its node annotations (pure)."""
