"""Where the head camera is: forward kinematics of the camera mount (pure: pinocchio, no rclpy).

``T_odom_optical = T_odom_base (estimator's /odom) . T_base_parent(q) (pinocchio, joint angles from
/joint_states) . T_parent_optical (the configured mount, REP-103 optical axes)``. 4x4 homogeneous transforms;
positions in m. The base is the robot configuration's base body (the free-flyer root of the pinocchio model
built from the same MJCF as MuJoCo's, ``humanoid_control.model.robot_model.load_pinocchio_model``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: rotation from a camera *link* frame (x forward, y left, z up) to its *optical* frame (z forward, x right,
#: y down), REP-103: columns are the optical axes in link coordinates
R_LINK_OPTICAL = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


def quat_xyzw_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrix of a unit quaternion (x, y, z, w), normalized first."""
    x, y, z, w = np.asarray(q, dtype=float) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def matrix_to_quat_xyzw(r: np.ndarray) -> np.ndarray:
    """Unit quaternion (x, y, z, w) of a rotation matrix (w >= 0)."""
    m = np.asarray(r, dtype=float)
    tr = m[0, 0] + m[1, 1] + m[2, 2]
    if tr > 0.0:
        s = 2.0 * np.sqrt(tr + 1.0)
        q = [(m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, 0.25 * s]
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = [0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s, (m[2, 1] - m[1, 2]) / s]
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * np.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = [(m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s, (m[0, 2] - m[2, 0]) / s]
    else:
        s = 2.0 * np.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = [(m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s, (m[1, 0] - m[0, 1]) / s]
    out = np.array(q)
    out /= np.linalg.norm(out)
    return out if out[3] >= 0 else -out


def transform(rotation: np.ndarray, translation: np.ndarray) -> np.ndarray:
    """4x4 homogeneous transform."""
    t = np.eye(4)
    t[:3, :3] = rotation
    t[:3, 3] = translation
    return t


class CameraMount:
    """Forward kinematics base -> camera optical frame for a camera fixed to ``parent`` (a body of the robot
    model) at ``T_parent_optical``.

    Args:
        config: the robot configuration (``humanoid_control.model.robot_config.RobotConfig``).
        parent: name of the body the camera is fixed to (a pinocchio frame of the same name).
        t_parent_optical: 4x4 pose of the optical frame in the parent body frame.
    """

    def __init__(self, config: Any, parent: str, t_parent_optical: np.ndarray) -> None:
        import pinocchio as pin

        from humanoid_control.model.robot_model import load_pinocchio_model

        self.config = config
        self.pmodel = load_pinocchio_model(config)
        model = self.pmodel.model
        if not model.existFrame(parent):
            raise ValueError(f"camera parent '{parent}' is not a frame of the robot model")
        self.frame_id = model.getFrameId(parent)
        self.data = model.createData()
        self.t_parent_optical = np.asarray(t_parent_optical, dtype=float)
        self._pin = pin

    def base_to_optical(self, joints: np.ndarray) -> np.ndarray:
        """T_base_optical (4x4) at joint angles ``joints`` (rad, configuration order)."""
        q = self.pmodel.neutral_q(np.asarray(joints, dtype=float))
        self._pin.framesForwardKinematics(self.pmodel.model, self.data, q)
        placement = self.data.oMf[self.frame_id]
        return transform(placement.rotation, placement.translation) @ self.t_parent_optical

    def odom_to_optical(
        self, base_position: np.ndarray, base_quat_xyzw: np.ndarray, joints: np.ndarray
    ) -> np.ndarray:
        """T_odom_optical (4x4) from the base pose in odom (position m, quaternion x, y, z, w) and the
        joint angles."""
        t_odom_base = transform(quat_xyzw_to_matrix(base_quat_xyzw), np.asarray(base_position, dtype=float))
        return t_odom_base @ self.base_to_optical(joints)
