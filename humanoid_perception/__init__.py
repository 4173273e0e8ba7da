"""humanoid_perception."""
