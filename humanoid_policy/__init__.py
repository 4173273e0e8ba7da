"""humanoid_policy."""
