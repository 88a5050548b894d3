"""The composer's rounds and control loop, and the wiring of one replica from its settings."""
