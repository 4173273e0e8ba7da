"""Perception: head camera (MuJoCo offscreen RGB / depth), fiducial markers with 6-DoF pose, depth to a ground
plane and a height map; pure cores without rclpy (docs/perception.md)."""
