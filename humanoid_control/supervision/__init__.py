"""Supervision of a learned policy by the model-based controllers: the viability monitor and the bumpless
hand-over between two laws (no rclpy; the supervised controller itself is in ``humanoid_policy``)."""
