"""humanoid_bringup."""
