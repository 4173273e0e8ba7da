"""What the walking controller planned, beside what the robot did: ``/walking/plan`` and ``/walking/status``
recorded by an evaluation, the achieved footsteps from the simulator's ground truth, and the
``footsteps_*.png`` figure (planned vs achieved footsteps, CoM, ZMP and DCM).

Achieved footsteps are the sole frames at each touchdown (a foot's planned contact switching on in
``/walking/status``), by forward kinematics of the ground-truth base pose and the measured joint positions
(pinocchio); the controller's own estimate is not used for them.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import numpy as np


class WalkingRecorder:
    """Subscribes ``/walking/plan`` and ``/walking/status`` (call :meth:`setup` from the probe's setup)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.plans: list[tuple[float, list[tuple[float, float, float]]]] = []  # (stamp s, [(x, y, yaw)])
        self.status: list[list[float]] = []
        self.fields: list[str] = []

    def setup(self, node: Any) -> None:
        from nav_msgs.msg import Path as PathMsg
        from std_msgs.msg import Float64MultiArray

        node.create_subscription(PathMsg, "/walking/plan", self._on_plan, 100)
        node.create_subscription(Float64MultiArray, "/walking/status", self._on_status, 1000)

    def _on_plan(self, msg: Any) -> None:
        if not msg.poses:
            return  # the empty plan of a standing robot (latched at start-up and after each walk): no plan
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        steps = []
        for ps in msg.poses:
            o = ps.pose.orientation
            steps.append((ps.pose.position.x, ps.pose.position.y, 2.0 * math.atan2(o.z, o.w)))
        with self.lock:
            self.plans.append((t, steps))

    def _on_status(self, msg: Any) -> None:
        with self.lock:
            if not self.fields and msg.layout.dim:
                self.fields = msg.layout.dim[0].label.split(",")
            self.status.append(list(msg.data))

    def status_array(self) -> dict[str, np.ndarray]:
        """``/walking/status`` as columns by field name (time ``t`` in s of the driver clock)."""
        with self.lock:
            rows, fields = list(self.status), list(self.fields)
        if not rows or not fields:
            return {}
        data = np.array(rows)
        return {name: data[:, i] for i, name in enumerate(fields)}


def achieved_footsteps(
    config: Any,
    status: dict[str, np.ndarray],
    truth_t: np.ndarray,
    truth_pos: np.ndarray,
    truth_quat_wxyz: np.ndarray,
    joint_t: np.ndarray,
    joint_q: np.ndarray,
) -> list[tuple[float, str, float, float]]:
    """``(t, side, x, y)`` of each touchdown: the sole position (world frame, m) from ground truth."""
    import pinocchio as pin

    from humanoid_control.model.robot_model import load_pinocchio_model

    if not status or len(truth_t) == 0 or len(joint_t) == 0:
        return []
    pm = load_pinocchio_model(config)
    data = pm.model.createData()
    out = []
    for side in ("left", "right"):
        c = status[f"contact_{side}"]
        rises = np.flatnonzero((c[1:] > 0.5) & (c[:-1] < 0.5)) + 1
        for i in rises:
            t = float(status["t"][i])
            k = int(np.clip(np.searchsorted(truth_t, t), 0, len(truth_t) - 1))
            j = int(np.clip(np.searchsorted(joint_t, t), 0, len(joint_t) - 1))
            w, x, y, z = truth_quat_wxyz[k]
            q = pm.neutral_q(joint_q[j], 0.0)
            q[0:3] = truth_pos[k]
            q[3:7] = (x, y, z, w)
            pin.framesForwardKinematics(pm.model, data, q)
            p = data.oMf[pm.sole_frame_ids[side]].translation
            out.append((t, side, float(p[0]), float(p[1])))
    out.sort()
    return out


def footstep_errors(
    plans: list[tuple[float, list[tuple[float, float, float]]]],
    touchdowns: list[tuple[float, str, float, float]],
    tolerance: float = 0.35,
) -> list[float]:
    """Per touchdown, the distance (m) to the nearest step of the same side planned before it (within
    ``tolerance``; touchdowns with no such step are left out)."""
    errors = []
    for t, _side, x, y in touchdowns:
        best = math.inf
        for tp, steps in plans:
            if tp > t:
                break
            for sx, sy, _ in steps[:2]:
                best = min(best, math.hypot(sx - x, sy - y))
        if best <= tolerance:
            errors.append(best)
    return errors


def plot_footsteps(
    path: Path,
    plans: list[tuple[float, list[tuple[float, float, float]]]],
    touchdowns: list[tuple[float, str, float, float]],
    status: dict[str, np.ndarray],
    truth_t: np.ndarray,
    truth_pos: np.ndarray,
    title: str,
) -> None:
    """Top view (planned steps, achieved touchdowns, base path, CoM, ZMP) and, against time, the DCM and
    ZMP x and y with their plans."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(11, 8))
    top = fig.add_subplot(2, 1, 1)
    first = [s[0] for _, s in plans if s]
    if first:
        f = np.array(first)
        top.plot(f[:, 0], f[:, 1], "s", mfc="none", mec="0.5", ms=9, label="planned next step (each plan)")
    for side, colour in (("left", "tab:blue"), ("right", "tab:red")):
        pts = np.array([(x, y) for _, s, x, y in touchdowns if s == side])
        if len(pts):
            top.plot(
                pts[:, 0], pts[:, 1], "x", color=colour, ms=7, label=f"achieved {side} touchdown (truth)"
            )
    if len(truth_pos):
        top.plot(truth_pos[:, 0], truth_pos[:, 1], color="0.3", lw=0.8, label="base (truth)")
    if status:
        top.plot(status["com_x"], status["com_y"], color="tab:green", lw=0.8, label="CoM (estimated)")
        top.plot(
            status["zmp_x"], status["zmp_y"], color="tab:orange", lw=0.5, alpha=0.7, label="ZMP commanded"
        )
    top.set_aspect("equal", adjustable="datalim")
    top.set_xlabel("x (m, odom)")
    top.set_ylabel("y (m)")
    top.grid(alpha=0.3)
    top.legend(fontsize=7, loc="best")
    top.set_title(title)
    if status:
        t = status["t"] - status["t"][0]
        for i, axis in enumerate(("x", "y")):
            ax = fig.add_subplot(2, 2, 3 + i)
            ax.plot(t, status[f"dcm_{axis}"], lw=1.0, label="DCM")
            ax.plot(t, status[f"dcm_ref_{axis}"], "--", lw=1.0, label="DCM planned")
            ax.plot(t, status[f"zmp_{axis}"], lw=0.7, label="ZMP commanded")
            ax.plot(t, status[f"zmp_ref_{axis}"], ":", lw=1.0, label="ZMP planned")
            ax.set_xlabel("time (s)")
            ax.set_ylabel(f"{axis} (m, odom)")
            ax.grid(alpha=0.3)
            if i == 0:
                ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
