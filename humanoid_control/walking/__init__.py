"""Model-based walking core (no ROS): footsteps, contact schedule, ZMP preview on OSQP, DCM step adjustment.

- :mod:`.geometry`: ground-plane poses and sole polygons;
- :mod:`.footsteps`: footsteps from a velocity command or a goal pose, within the kinematic limits;
- :mod:`.schedule`: contact phases, support polygons and the ZMP reference of a footstep plan;
- :mod:`.swing`: swing-foot trajectories (lift, soft touchdown);
- :mod:`.lipm`: the linear inverted pendulum;
- :mod:`.pattern_generator`: ZMP preview control as a QP on OSQP (CoM references);
- :mod:`.step_adjustment`: where and when to step from the measured DCM (push recovery);
- :mod:`.generator`: all of it as per-tick references for a whole-body controller.

Robot facts come from the ``walking`` section of the robot configuration
(:class:`~humanoid_control.model.robot_config.WalkingSpec`). See docs/walking.md.
"""
