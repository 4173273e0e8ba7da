"""Whole-body control core (no ROS): task-space inverse dynamics QP, standing balance, command integration."""
