"""``humanoid-eval compare``: the learned policy and the model-based walking controller side by side.

Both run the same command script through the ROS graph in lockstep (``humanoid-eval locomotion``: the policy
runner, ``--policy`` (default ``holosoma/g1_ppo``); then ``mpc_walk``: driver, state estimator, walking
controller), each recording its series (:func:`~.locomotion_eval.save_series`). Scored from ground truth, the
measured joints and the simulated contact forces; written to ``compare.json``, ``compare.md`` (one table)
and ``compare.png`` (one figure) in the output folder:

- **tracking error per segment** (vx, vy, wz; m/s, m/s, rad/s, heading frame, after each segment's settle
  time): ``tracking_mean_err``, the segment mean's error ``|achieved_mean - commanded|`` (what the issue's
  acceptance bounds), and ``tracking_abs_err_mean``, the mean per-tick ``|achieved - commanded|`` (the
  locomotion evaluation's ``abs_err_mean``: it includes the gait's sway);
- **foot slip** (mm): per foot, the horizontal travel of its sole frame origin (forward kinematics of the
  true base pose and the measured joints) between consecutive ticks during which the foot carries at least
  ``LOADED_FRACTION`` of the body weight (a loaded foot should not move), summed over both feet and the run;
  also per metre walked;
- **peak and mean torque**: the largest ``|tau|`` of any joint (N m, which joint), the largest ``|tau|`` as a
  fraction of its joint's limit (and that joint), the mean ``|tau|`` over joints and ticks (N m);
- **cost of transport**: ``sum_j |tau_j qdot_j|`` integrated over the run (J; joint speeds by finite
  differences of the measured positions) over ``m g d`` (total mass, 9.81, ``distance_m``: the base's
  horizontal path length after a moving average over one gait cycle, ``GAIT_WINDOW_S``, so the sideways sway
  does not count as distance; the raw path is ``path_length_m``): dimensionless, lower is cheaper.

``--recorded DIR`` scores the runs already in ``DIR/policy`` and ``DIR/mpc_walk`` (their ``series.npz``
and locomotion JSON) without running anything.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

GRAVITY = 9.81
LOADED_FRACTION = 0.2  # a foot counts as loaded (should not slip) above this share of the body weight
SERIES_KEYS = ("truth_t", "pos", "quat_wxyz", "joint_t", "joint_q", "joint_effort")
RUNS = ("policy", "mpc_walk")
GAIT_WINDOW_S = 1.0  # one gait cycle of both controllers (two steps of 0.5 s; the policy's 50-step phase)


def path_length_m(t: np.ndarray, pos: np.ndarray, window_s: float) -> float:
    """Horizontal path length (m) of ``pos`` (N, 3; m) sampled at times ``t`` (s), after a moving average over
    ``window_s`` (s; the ends padded with the first and last positions), which takes out the gait's sideways
    sway; 0: the raw path."""
    if len(pos) < 2:
        return 0.0
    xy = np.asarray(pos, float)[:, :2]
    if window_s > 0.0:
        dt = float(np.median(np.diff(t)))
        half = max(round(0.5 * window_s / max(dt, 1e-9)), 0)
        if half > 0:
            padded = np.concatenate([np.repeat(xy[:1], half, 0), xy, np.repeat(xy[-1:], half, 0)])
            kernel = np.full(2 * half + 1, 1.0 / (2 * half + 1))
            xy = np.stack([np.convolve(padded[:, i], kernel, mode="valid") for i in range(2)], axis=1)
    return float(np.sum(np.linalg.norm(np.diff(xy, axis=0), axis=1)))


class CompareError(ValueError):
    """A recorded run is missing or malformed."""


def load_series(path: Path) -> dict[str, np.ndarray]:
    """A run's ``series.npz`` (:func:`~.locomotion_eval.save_series`); :class:`CompareError` naming what is
    wrong."""
    path = Path(path)
    if not path.is_file():
        raise CompareError(f"no recorded series: {path}")
    try:
        with np.load(path, allow_pickle=False) as f:
            data = {k: np.asarray(f[k]) for k in f.files}
    except (OSError, ValueError) as exc:
        raise CompareError(f"{path}: not a readable series ({exc})") from None
    missing = [k for k in SERIES_KEYS if k not in data]
    if missing:
        raise CompareError(f"{path}: missing arrays {missing}")
    n, m = len(data["truth_t"]), len(data["joint_t"])
    shapes = {
        "pos": (n, 3),
        "quat_wxyz": (n, 4),
        "joint_q": (m, data["joint_q"].shape[1] if data["joint_q"].ndim == 2 else -1),
        "joint_effort": data["joint_q"].shape,
    }
    for k, shape in shapes.items():
        if data[k].shape != shape:
            raise CompareError(f"{path}: {k} has shape {data[k].shape}, expected {shape}")
    for k in SERIES_KEYS:
        if not np.all(np.isfinite(data[k])):
            raise CompareError(f"{path}: {k} holds NaN or infinite values")
    return data


def sole_positions(config: Any, pmodel: Any, series: dict[str, np.ndarray]) -> tuple[np.ndarray, dict]:
    """Sole frame origins (m, world) per side at the ticks where ground truth and joints share a stamp;
    returns (times s, {side: (N, 3)})."""
    import pinocchio as pin

    tt = np.round(series["truth_t"], 4)
    jt = np.round(series["joint_t"], 4)
    _common, it, ij = np.intersect1d(tt, jt, return_indices=True)
    model, data = pmodel.model, pmodel.model.createData()
    out: dict[str, list[np.ndarray]] = {s: [] for s in pmodel.sole_frame_ids}
    q = np.zeros(model.nq)
    for a, b in zip(it, ij, strict=True):
        w, x, y, z = series["quat_wxyz"][a]
        q[:3], q[3:7], q[7:] = series["pos"][a], (x, y, z, w), series["joint_q"][b]
        pin.framesForwardKinematics(model, data, q)
        for side, fid in pmodel.sole_frame_ids.items():
            out[side].append(data.oMf[fid].translation.copy())
    return series["truth_t"][it], {s: np.array(v).reshape(-1, 3) for s, v in out.items()}


def foot_slip_mm(
    t: np.ndarray,
    soles: dict[str, np.ndarray],
    contacts: dict[str, tuple[np.ndarray, np.ndarray]],
    weight: float,
) -> dict[str, float]:
    """Horizontal sole travel (mm) while loaded, per side and ``total``: between consecutive samples ``t``
    (s) whose contact force (``contacts[side]`` = (times s, fz N), nearest sample) is at least
    ``LOADED_FRACTION * weight`` (N) at both."""
    out: dict[str, float] = {}
    for side, xyz in soles.items():
        if side not in contacts or len(t) < 2:
            out[side] = 0.0
            continue
        ct, fz = contacts[side]
        idx = np.clip(np.searchsorted(ct, t - 1e-6), 0, max(len(ct) - 1, 0))
        loaded = fz[idx] >= LOADED_FRACTION * weight if len(ct) else np.zeros(len(t), bool)
        both = loaded[1:] & loaded[:-1]
        step = np.linalg.norm(np.diff(xyz[:, :2], axis=0), axis=1)
        out[side] = round(float(step[both].sum() * 1000.0), 2)
    out["total"] = round(sum(out.values()), 2)
    return out


def effort_metrics(
    joint_t: np.ndarray, joint_q: np.ndarray, effort: np.ndarray, limits: np.ndarray, names: list[str]
) -> dict[str, Any]:
    """Peak and mean torque and the mechanical energy ``sum |tau qdot| dt`` (J) of a run."""
    absx = np.abs(effort)
    flat = int(np.argmax(absx)) if absx.size else 0
    k, j = divmod(flat, max(absx.shape[1], 1)) if absx.size else (0, 0)
    frac = absx / limits if absx.size else absx
    jf = int(np.argmax(frac.max(axis=0))) if absx.size else 0
    if len(joint_t) >= 2:
        qd = np.gradient(joint_q, joint_t, axis=0)
        power = np.sum(np.abs(effort * qd), axis=1)
        energy = float(np.sum(0.5 * (power[1:] + power[:-1]) * np.diff(joint_t)))
    else:
        energy = 0.0
    return {
        "peak_torque_Nm": round(float(absx[k, j]), 3) if absx.size else 0.0,
        "peak_torque_joint": names[j] if absx.size else None,
        "peak_torque_fraction": round(float(frac.max()), 4) if absx.size else 0.0,
        "peak_torque_fraction_joint": names[jf] if absx.size else None,
        "mean_abs_torque_Nm": round(float(absx.mean()), 4) if absx.size else 0.0,
        "energy_J": round(energy, 3),
    }


def score_run(
    config: Any, pmodel: Any, series: dict[str, np.ndarray], result: dict[str, Any]
) -> dict[str, Any]:
    """One run's comparison figures (module docstring) from its series and locomotion result."""
    import pinocchio as pin

    mass = float(pin.computeTotalMass(pmodel.model))
    keep = (series["truth_t"] >= 0.0) & (series["truth_t"] <= result.get("script_s", math.inf) + 1e-9)
    jkeep = (series["joint_t"] >= 0.0) & (series["joint_t"] <= result.get("script_s", math.inf) + 1e-9)
    s = {k: v[keep] for k, v in series.items() if k in ("truth_t", "pos", "quat_wxyz")}
    s.update({k: v[jkeep] for k, v in series.items() if k in ("joint_t", "joint_q", "joint_effort")})
    path_length = path_length_m(s["truth_t"], s["pos"], 0.0)
    distance = path_length_m(s["truth_t"], s["pos"], GAIT_WINDOW_S)
    t, soles = sole_positions(config, pmodel, s)
    contacts = {
        side: (series[f"contact_{side}_t"], series[f"contact_{side}_fz"])
        for side in soles
        if f"contact_{side}_t" in series
    }
    slip = foot_slip_mm(t, soles, contacts, mass * GRAVITY)
    eff = effort_metrics(
        s["joint_t"], s["joint_q"], s["joint_effort"], config.array("effort"), list(config.joint_names)
    )
    cot = eff["energy_J"] / (mass * GRAVITY * distance) if distance > 1e-6 else None
    segs = result.get("segments") or {}
    segments = {name: seg.get("abs_err_mean") for name, seg in segs.items()}
    mean_err = {
        name: [round(abs(a - c), 4) for a, c in zip(seg["achieved_mean"], seg["commanded"], strict=True)]
        if seg.get("achieved_mean") is not None
        else None
        for name, seg in segs.items()
    }
    return {
        "fell": bool(result.get("fell", False)),
        "time_survived_s": result.get("time_survived_s"),
        "tracking_mean_err": mean_err,
        "tracking_abs_err_mean": segments,
        "achieved_mean": {n: seg.get("achieved_mean") for n, seg in (result.get("segments") or {}).items()},
        "commanded": {n: seg.get("commanded") for n, seg in (result.get("segments") or {}).items()},
        "foot_slip_mm": slip["total"],
        "foot_slip_mm_per_side": {k: v for k, v in slip.items() if k != "total"},
        "foot_slip_mm_per_m": round(slip["total"] / distance, 2) if distance > 1e-6 else None,
        **eff,
        "distance_m": round(distance, 3),
        "path_length_m": round(path_length, 3),
        "mass_kg": round(mass, 3),
        "cost_of_transport": round(cot, 4) if cot is not None else None,
    }


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, (list, tuple)):
        return " / ".join(_fmt(x, digits) for x in v)
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def compare_table(scores: dict[str, dict[str, Any]], labels: dict[str, str]) -> str:
    """The markdown table of ``compare.md``: one column per run."""
    runs = list(scores)
    head = "| | " + " | ".join(labels.get(r, r) for r in runs) + " |\n|---|" + "---|" * len(runs) + "\n"
    rows = []
    segments = list(next(iter(scores.values()))["tracking_abs_err_mean"]) if scores else []
    for seg in segments:
        cmd = next(iter(scores.values()))["commanded"].get(seg)
        cells = [_fmt(scores[r]["tracking_mean_err"].get(seg)) for r in runs]
        label = f"`{seg}` (cmd {_fmt(cmd, 2)}): error of the mean vx / vy / wz"
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
        cells = [_fmt(scores[r]["tracking_abs_err_mean"].get(seg)) for r in runs]
        rows.append(f"| `{seg}`: mean per-tick abs error (with sway) | " + " | ".join(cells) + " |")
    for key, label, digits in (
        ("fell", "fell", 0),
        ("foot_slip_mm", "foot slip (mm, loaded feet)", 1),
        ("foot_slip_mm_per_m", "foot slip per metre walked (mm/m)", 1),
        ("peak_torque_Nm", "peak torque (N m)", 1),
        ("peak_torque_joint", "peak torque joint", 0),
        ("peak_torque_fraction", "largest torque / its limit", 2),
        ("peak_torque_fraction_joint", "... at joint", 0),
        ("mean_abs_torque_Nm", "mean abs torque (N m)", 2),
        ("energy_J", "mechanical energy sum abs(tau qdot) (J)", 0),
        ("distance_m", "distance walked, sway averaged out (m)", 2),
        ("cost_of_transport", "cost of transport", 3),
    ):
        rows.append(f"| {label} | " + " | ".join(_fmt(scores[r].get(key), digits) for r in runs) + " |")
    return head + "\n".join(rows) + "\n"


def plot_compare(path: Path, scores: dict[str, dict[str, Any]], labels: dict[str, str]) -> None:
    """``compare.png``: tracking error per segment and axis, foot slip, torque and cost of transport."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = list(scores)
    segments = list(scores[runs[0]]["tracking_abs_err_mean"])
    fig, axes = plt.subplots(1, 4, figsize=(15, 4.2), gridspec_kw={"width_ratios": [3, 1, 1, 1]})
    width = 0.8 / max(len(runs), 1)
    x = np.arange(len(segments))
    for i, r in enumerate(runs):
        err = [scores[r]["tracking_mean_err"][s] or [0.0, 0.0, 0.0] for s in segments]
        axes[0].bar(x + i * width, [sum(e) for e in err], width, label=labels.get(r, r))
    axes[0].set_xticks(x + 0.4 - 0.5 * width, segments)
    axes[0].set_ylabel("|vx err| + |vy err| + |wz err| (m/s, rad/s)")
    axes[0].set_title("tracking error of the segment mean, summed over the axes")
    axes[0].legend(fontsize=8)
    for ax, key, title in (
        (axes[1], "foot_slip_mm", "foot slip (mm)"),
        (axes[2], "mean_abs_torque_Nm", "mean |torque| (N m)"),
        (axes[3], "cost_of_transport", "cost of transport"),
    ):
        ax.bar(range(len(runs)), [scores[r].get(key) or 0.0 for r in runs], color=["C0", "C1"][: len(runs)])
        ax.set_xticks(range(len(runs)), [labels.get(r, r) for r in runs], fontsize=7)
        ax.set_title(title)
    for ax in axes:
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle("learned policy vs model-based walking, same command script (lockstep, ground truth)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_compare(
    out_dir: Path, robot: str, results: dict[str, dict[str, Any]], policy: str
) -> dict[str, Any]:
    """Score the recorded runs ``out_dir/<run>`` (``series.npz``) with their ``results``; write the files."""
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.model.robot_model import load_pinocchio_model

    config = load_robot_config(robot)
    pmodel = load_pinocchio_model(config)
    scores = {
        r: score_run(config, pmodel, load_series(Path(out_dir) / r / "series.npz"), results[r]) for r in RUNS
    }
    labels = {"policy": policy, "mpc_walk": "mpc_walk"}
    table = compare_table(scores, labels)
    md = (
        f"# {labels['policy']} vs mpc_walk\n\nSame command script, lockstep ROS graph, scored from ground "
        "truth (humanoid_bringup/evaluation/compare_eval.py).\n\n" + table
    )
    (Path(out_dir) / "compare.md").write_text(md)
    plot_compare(Path(out_dir) / "compare.png", scores, labels)
    out = {
        "evaluation": "compare",
        "policy": policy,
        "runs": scores,
        "files": {k: str(Path(out_dir) / f"compare.{k}") for k in ("md", "json", "png")},
    }
    (Path(out_dir) / "compare.json").write_text(json.dumps(out, indent=2))
    return out


def run_compare(
    out_dir: Path,
    policy: str = "holosoma/g1_ppo",
    robot: str = "g1",
    script: list[tuple[str, float, tuple[float, float, float]]] | None = None,
    recorded: bool = False,
    log: Any = print,
) -> dict[str, Any]:
    """Run (or, ``recorded``, reuse) both evaluations on the same script; score and write them."""
    from humanoid_bringup.evaluation.locomotion_eval import run_locomotion

    out_dir = Path(out_dir)
    results: dict[str, dict[str, Any]] = {}
    for run in RUNS:
        folder = out_dir / run
        name = "mpc_walk" if run == "mpc_walk" else policy.replace("/", "_")
        if recorded:
            path = folder / f"locomotion_{name}.json"
            if not path.is_file():
                raise CompareError(f"no recorded locomotion result: {path}")
            try:
                results[run] = json.loads(path.read_text())
            except json.JSONDecodeError as exc:
                raise CompareError(f"{path}: invalid JSON ({exc})") from None
            continue
        log(f"compare: {run} ...")
        results[run] = run_locomotion(
            policy, controller=run, out_dir=folder, script=script, robot=robot, log=log, record=True
        )
        log(f"compare: {run}: fell {results[run]['fell']}, realtime factor {results[run]['realtime_factor']}")
    return write_compare(out_dir, robot, results, policy)
