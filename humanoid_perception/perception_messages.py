"""ROS message builders of the perception node (:mod:`humanoid_perception.perception_node`).

Poses, the rviz2 MarkerArray (and its publisher, where visualization_msgs is installed) and the height map's
PointCloud2; the message packages are imported where they are used.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from humanoid_perception.camera_mount import matrix_to_quat_xyzw


def pose_message(pose_type: Any, t: np.ndarray) -> Any:
    """geometry_msgs/Pose from a 4x4 transform."""
    p = pose_type()
    p.position.x, p.position.y, p.position.z = (float(v) for v in t[:3, 3])
    q = matrix_to_quat_xyzw(t[:3, :3])
    p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w = (float(v) for v in q)
    return p


def marker_array(observations: list[Any], poses: Any, length: float) -> Any:
    """visualization_msgs/MarkerArray: DELETEALL, then per marker a flat cube and its id as text."""
    from visualization_msgs.msg import Marker, MarkerArray

    out = MarkerArray()
    clear = Marker()
    clear.header = poses.header
    clear.action = Marker.DELETEALL
    out.markers.append(clear)
    for ob, pose in zip(observations, poses.poses, strict=False):
        cube = Marker()
        cube.header = poses.header
        cube.ns, cube.id, cube.type, cube.action = "marker", int(ob.id), Marker.CUBE, Marker.ADD
        cube.pose = pose
        side = float(getattr(ob, "length_m", 0.0) or length)  # the marker's own size where the core knows it
        cube.scale.x, cube.scale.y, cube.scale.z = side, side, 0.005
        cube.color.r, cube.color.g, cube.color.b, cube.color.a = 0.1, 0.8, 0.2, 0.8
        text = Marker()
        text.header = poses.header
        text.ns, text.id, text.type, text.action = (
            "marker_id",
            int(ob.id),
            Marker.TEXT_VIEW_FACING,
            Marker.ADD,
        )
        text.pose = pose
        text.pose.position.z += 0.1
        text.scale.z = 0.1
        text.color.r = text.color.g = text.color.b = text.color.a = 1.0
        text.text = str(ob.id)
        out.markers.extend([cube, text])
    return out


def pointcloud_message(points: np.ndarray, stamp: Any, frame_id: str) -> Any:
    """sensor_msgs/PointCloud2 (float32 x, y, z; unorganized) from an (N, 3) array."""
    from sensor_msgs.msg import PointCloud2, PointField

    pts = np.ascontiguousarray(np.asarray(points, dtype="<f4").reshape(-1, 3))
    msg = PointCloud2()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.height, msg.width = 1, int(pts.shape[0])
    msg.fields = [
        PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1) for i, n in enumerate("xyz")
    ]
    msg.is_bigendian = False
    msg.point_step, msg.row_step = 12, 12 * int(pts.shape[0])
    msg.is_dense = True
    msg.data = pts.tobytes()
    return msg
