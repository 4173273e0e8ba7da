"""Autonomous behaviours: the marker-approach task as a pure state machine (``approach.py``, no rclpy) and
its node (``autonomy_node.py``: ``/autonomy/cmd_vel`` through the mode manager)."""
