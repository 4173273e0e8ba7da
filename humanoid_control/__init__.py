"""humanoid_control."""
