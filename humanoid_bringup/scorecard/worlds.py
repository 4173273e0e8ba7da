"""The scorecard's worlds: seeded MuJoCo model edits (``mujoco.MjSpec``, before compiling) per family (a
picture of one: :mod:`humanoid_bringup.scorecard.render`).

:func:`world_for` draws everything random of a trial's world from the family's generator
(:meth:`~humanoid_bringup.scorecard.scenarios.Family.rng`: file seed, trial seed, level key) and returns a
:class:`World`: the ``edit`` for :class:`~humanoid_control.hardware.mujoco_sim.MujocoBackend` plus what the
mid-run events need (payload and ball names, the drawn values, reported as figures).

Frames and units: world frame (z up, floor at z = 0 at spawn, the robot at the origin facing +x), m, kg, rad
(deg in the files). Terrain lies across the walking path (+x) from ``start_x_m``; a slope or step down lowers
the floor plane and puts a platform under the spawn, so the robot always starts at z = 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from humanoid_bringup.scorecard.scenarios import Family, Level, robot_body

PAYLOAD_BODY = "scorecard_payload"
BALL_BODY = "scorecard_ball"
BAR_GEOM = "scorecard_trip_bar"
PARK_BALL = (0.0, 30.0)  # m (x, y): where the ball waits on the floor until it is thrown
EMPTY_MASS_KG = 1e-6  # the payload body's mass while nothing is attached (kg)
TERRAIN_WIDTH_M = 2.0  # across the path (m)


@dataclass
class World:
    """A trial's world: ``edit`` (MjSpec -> None, applied before compiling) and the drawn values
    (``drawn``: JSON-safe, reported with the figures)."""

    edits: list[Callable[[Any], None]] = field(default_factory=list)
    drawn: dict[str, Any] = field(default_factory=dict)

    def edit(self, spec: Any) -> None:
        """Apply every edit to ``spec`` (a ``mujoco.MjSpec``)."""
        for e in self.edits:
            e(spec)


def _uniform(rng: np.random.Generator, bounds: list[float]) -> float:
    lo, hi = bounds
    return float(rng.uniform(lo, hi)) if hi > lo else float(lo)


def floor_plane(spec: Any) -> Any:
    """The scene's floor plane geom (``ValueError`` if the scene has none)."""
    import mujoco

    for g in spec.worldbody.geoms:
        if g.type == mujoco.mjtGeom.mjGEOM_PLANE:
            return g
    raise ValueError("the robot's scene has no floor plane")


def add_box(
    spec: Any,
    name: str,
    center: tuple[float, float, float],
    half: tuple[float, float, float],
    pitch: float = 0.0,
    rgba: tuple[float, float, float, float] = (0.55, 0.5, 0.45, 1.0),
) -> Any:
    """A static box geom in the world (centre, half sizes m; pitched by ``pitch`` rad about y), with the
    floor's contact parameters."""
    import mujoco

    floor = floor_plane(spec)
    quat = [math.cos(0.5 * pitch), 0.0, math.sin(0.5 * pitch), 0.0]
    return spec.worldbody.add_geom(
        name=name,
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=list(half),
        pos=list(center),
        quat=quat,
        rgba=list(rgba),
        friction=list(floor.friction),
        solref=list(floor.solref),
        solimp=list(floor.solimp),
        condim=floor.condim,
    )


def _platform(spec: Any, x_end: float, drop: float) -> None:
    """Lower the floor plane by ``drop`` (m) and put a platform with its top at z = 0 under the spawn, from
    far behind to ``x_end``."""
    floor = floor_plane(spec)
    floor.pos = [floor.pos[0], floor.pos[1], floor.pos[2] - drop]
    back = -5.0
    add_box(
        spec,
        "scorecard_platform",
        (0.5 * (back + x_end), 0.0, -0.5 * drop - 0.05),
        (0.5 * (x_end - back), TERRAIN_WIDTH_M, 0.5 * drop + 0.05),
    )


def _ramp(spec: Any, x0: float, z0: float, length: float, angle: float) -> None:
    """A ramp whose top surface runs from (x0, z0) along +x for ``length`` (m, horizontal) at ``angle``
    (rad, positive: up)."""
    thick = 0.2
    half_len = 0.5 * length / math.cos(angle)
    top_mid = np.array([x0 + 0.5 * length, 0.0, z0 + 0.5 * length * math.tan(angle)])
    normal = np.array([-math.sin(angle), 0.0, math.cos(angle)])
    c = top_mid - 0.5 * thick * normal
    add_box(
        spec,
        "scorecard_ramp",
        (float(c[0]), 0.0, float(c[2])),
        (half_len, TERRAIN_WIDTH_M, 0.5 * thick),
        pitch=-angle,
    )


def terrain_world(family: Family, level: Level, rng: np.random.Generator) -> World:
    """``terrain``: a random heightfield, a slope up or down, or a step up or down across the path."""
    from humanoid_control.hardware.scene import HeightfieldSpec, SceneSpec, apply_scene

    s, p = family.settings, level.params
    x0 = float(s["start_x_m"]) + float(rng.uniform(0.0, s["jitter_m"]))
    world = World(drawn={"start_x_m": round(x0, 4)})
    kind = p["kind"]
    if kind == "rough":
        height = _uniform(rng, p["height_m"])
        length = float(p["length_m"])
        hf = HeightfieldSpec(
            center=(x0 + 0.5 * length, 0.0),
            size=(length, 1.4),
            max_height=height,
            resolution=0.02,
            feature=float(p["feature_m"]),
            edge=0.1,
            seed=int(rng.integers(0, 2**31 - 1)),
        )
        world.drawn.update(height_m=round(height, 4), heightfield_seed=hf.seed)
        world.edits.append(
            lambda spec: apply_scene(spec, SceneSpec(name="scorecard_terrain", heightfield=hf))
        )
    elif kind == "slope":
        angle = math.radians(float(p["slope_deg"]))
        length = float(p["length_m"])
        rise = length * math.tan(angle)
        world.drawn.update(slope_deg=float(p["slope_deg"]), rise_m=round(rise, 4))

        def slope(spec: Any) -> None:
            if rise >= 0:
                _ramp(spec, x0, 0.0, length, angle)
                add_box(
                    spec,
                    "scorecard_plateau",
                    (x0 + length + 2.5, 0.0, 0.5 * rise - 0.05),
                    (2.5, TERRAIN_WIDTH_M, 0.5 * rise + 0.05),
                )
            else:
                _platform(spec, x0, -rise)
                _ramp(spec, x0, 0.0, length, angle)

        world.edits.append(slope)
    else:  # step
        h = _uniform(rng, p["height_m"])
        world.drawn.update(step_m=round(h, 4))

        def step(spec: Any) -> None:
            if h >= 0:
                add_box(
                    spec,
                    "scorecard_step",
                    (x0 + 2.5, 0.0, 0.5 * h - 0.05),
                    (2.5, TERRAIN_WIDTH_M, 0.5 * h + 0.05),
                )
            else:
                _platform(spec, x0, -h)

        world.edits.append(step)
    return world


def trip_world(family: Family, level: Level, rng: np.random.Generator) -> World:
    """``trip``: a fixed bar (``height_m`` x ``depth_m``, 1.6 m wide) across the path at a seeded distance."""
    s, p = family.settings, level.params
    x = float(p["distance_m"]) + float(rng.uniform(-s["jitter_m"], s["jitter_m"]))
    h, dep = float(p["height_m"]), float(p["depth_m"])
    world = World(drawn={"bar_x_m": round(x, 4), "bar_height_m": h})
    world.edits.append(
        lambda spec: add_box(
            spec, BAR_GEOM, (x, 0.0, 0.5 * h), (0.5 * dep, 0.8, 0.5 * h), rgba=(0.8, 0.3, 0.2, 1)
        )
    )
    return world


def floor_world(family: Family, level: Level, rng: np.random.Generator) -> World:
    """``floor``: the floor's friction (it wins over the feet's: geom priority) and softness (solref,
    solimp)."""
    p = level.params
    world = World(drawn={"friction": p["friction"]})

    def floor(spec: Any) -> None:
        g = floor_plane(spec)
        g.friction = [float(p["friction"]), g.friction[1], g.friction[2]]
        g.priority = 2
        if "solref" in p:
            g.solref = list(p["solref"])
        if "solimp" in p:
            g.solimp = list(p["solimp"])

    world.edits.append(floor)
    return world


def payload_world(family: Family, level: Level, rng: np.random.Generator, body: str) -> World:
    """``payload``: a payload body fixed to ``body`` at a (seeded) offset, massless until attached
    (``attach``) or carrying its mass from the start (``release``); a box of the same density as water,
    drawn but without collisions."""
    import mujoco

    p = level.params
    jitter = float(p.get("offset_jitter_m", 0.0))
    offset = np.array(p["offset_m"], dtype=float) + rng.uniform(-jitter, jitter, 3)
    mass = float(p["mass_kg"])
    side = (mass / 1000.0) ** (1 / 3)
    world = World(drawn={"offset_m": [round(float(v), 4) for v in offset], "mass_kg": mass})

    def payload(spec: Any) -> None:
        parent = spec.body(body)
        if parent is None:
            raise ValueError(f"payload: body {body!r} is not in the robot model")
        b = parent.add_body(name=PAYLOAD_BODY, pos=offset.tolist())
        b.explicitinertial = True
        b.mass = mass if p["mode"] == "release" else EMPTY_MASS_KG
        i = b.mass * side**2 / 6.0
        b.inertia = [i, i, i]
        b.add_geom(
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[0.5 * side] * 3,
            contype=0,
            conaffinity=0,
            mass=0.0,
            rgba=[0.9, 0.7, 0.1, 1.0],
        )

    world.edits.append(payload)
    return world


def ball_world(family: Family, level: Level, rng: np.random.Generator) -> World:
    """``impact``: a ball (``mass_kg``, ``radius_m``) waiting far off the path until it is thrown; the
    direction it comes from (azimuth, deg, heading frame: 0 from the front, 90 from the left) is drawn."""
    import mujoco

    p, s = level.params, family.settings
    az = _uniform(rng, p["azimuth_deg"])
    r = float(s["radius_m"])
    mass = float(p["mass_kg"])
    world = World(drawn={"azimuth_deg": round(az, 3), "mass_kg": mass, "speed_mps": p["speed_mps"]})

    def ball(spec: Any) -> None:
        b = spec.worldbody.add_body(name=BALL_BODY, pos=[PARK_BALL[0], PARK_BALL[1], r])
        b.add_freejoint(name=BALL_BODY + "_joint")
        b.explicitinertial = True
        b.mass = mass
        i = 0.4 * mass * r * r
        b.inertia = [i, i, i]
        b.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[r, 0, 0], mass=0.0, rgba=[0.2, 0.4, 0.9, 1.0])

    world.edits.append(ball)
    return world


def randomized_world(family: Family, level: Level, rng: np.random.Generator, robot: Any) -> World:
    """``randomized``, the model part: joint friction and armature, link masses, base mass and CoM offset
    (drawn per joint / per link from the level's ranges). The runtime part (gains, torque limits, latency,
    sensor biases) is drawn here too and applied by :mod:`humanoid_bringup.scorecard.events`."""
    p = level.params
    n = robot.num_joints
    drawn: dict[str, Any] = {
        "kp_scale": rng.uniform(*p["kp_scale"], n).round(4).tolist(),
        "kd_scale": rng.uniform(*p["kd_scale"], n).round(4).tolist(),
        "torque_limit_scale": rng.uniform(*p["torque_limit_scale"], n).round(4).tolist(),
        "joint_friction_scale": rng.uniform(*p["joint_friction_scale"], n).round(4).tolist(),
        "armature_scale": rng.uniform(*p["armature_scale"], n).round(4).tolist(),
        "base_mass_add_kg": round(_uniform(rng, p["base_mass_add_kg"]), 4),
        "com_offset_m": rng.uniform(*p["com_offset_m"], 3).round(4).tolist(),
        "latency_s": round(_uniform(rng, p["latency_s"]), 4),
        "gyro_bias_rps": rng.uniform(*p["gyro_bias_rps"], 3).round(5).tolist(),
        "imu_tilt_rad": rng.uniform(*p["imu_tilt_rad"], 2).round(5).tolist(),
        "encoder_bias_rad": rng.uniform(*p["encoder_bias_rad"], n).round(5).tolist(),
    }
    link_scale_range = p["link_mass_scale"]
    base = robot.base_body
    joint_names = list(robot.joint_names)
    rng_link_seed = int(rng.integers(0, 2**31 - 1))  # per-link factors: drawn once the links are known
    drawn["link_mass_seed"] = rng_link_seed

    def model(spec: Any) -> None:
        for k, name in enumerate(joint_names):
            j = spec.joint(name)
            j.frictionloss = float(j.frictionloss) * drawn["joint_friction_scale"][k]
            j.armature = float(j.armature) * drawn["armature_scale"][k]
        # every link of the robot (the bodies under the base, the base included), in the spec's order
        links = [base] + [b.name for b in spec.body(base).find_all("body")]
        scales = np.random.default_rng(rng_link_seed).uniform(*link_scale_range, len(links))
        for name, sc in zip(links, scales, strict=True):
            b = spec.body(name)
            if b.mass > 0:
                b.mass = float(b.mass) * float(sc)
                b.inertia = [float(v) * float(sc) for v in b.inertia]
        b = spec.body(base)
        old = float(b.mass)
        b.mass = max(0.5, old + drawn["base_mass_add_kg"])
        b.inertia = [float(v) * b.mass / old for v in b.inertia]
        b.ipos = [float(b.ipos[i]) + drawn["com_offset_m"][i] for i in range(3)]

    return World([model], drawn)


def world_for(family: Family, level: Level, seed: int, robot: Any) -> World:
    """The trial's world (module docstring); ``robot``: the robot configuration."""
    rng = family.rng(seed, level.key)
    name = family.name
    if name == "terrain":
        return terrain_world(family, level, rng)
    if name == "trip":
        return trip_world(family, level, rng)
    if name == "floor":
        return floor_world(family, level, rng)
    if name == "payload":
        return payload_world(family, level, rng, robot_body(str(family.settings["attach_body"]), robot))
    if name == "impact":
        return ball_world(family, level, rng)
    if name == "randomized":
        return randomized_world(family, level, rng, robot)
    return World()
