"""A small runner for ROS 2 YAML launch files (``launch_yaml`` frontend) without ``launch``/``launch_ros``.

``ros2 launch`` needs the ``launch``, ``launch_ros`` and ``launch_yaml`` Python packages, which a pip-only
ROS 2 install (rclpy wheels in a virtual environment) does not have.  This package interprets the subset of
the YAML launch syntax that this project uses, so the *same* ``*.launch.yaml`` file works with
``ros2 launch humanoid_stack sim.launch.yaml`` on a full ROS 2 install and with
``humanoid-launch humanoid_stack sim.launch.yaml`` everywhere else.

Supported actions: ``arg``, ``let``, ``node``, ``executable``, ``group``, ``set_env``, ``set_parameter``
and ``push_ros_namespace``/``push-ros-namespace``.  Supported substitutions: ``var``, ``env``,
``find-pkg-share``, ``find-pkg-prefix``, ``eval``, ``command``, ``dirname``, ``filename`` and ``anon``.
See ``docs/launch.md`` for the details and the few deliberate differences from ``ros2 launch``.

Modules, in the order a launch goes through them:

- ``cli``: the ``humanoid-launch`` command line (``python -m humanoid_bringup.launcher`` is the same);
- ``interpreter``: actions and conditions; ``load_launch_description`` walks the file into a ``LaunchPlan``
  (pure apart from writing the generated parameter files), ``declared_arguments`` lists its arguments;
- ``substitutions``: the ``$(...)`` template parser and the substitutions' evaluation;
- ``parameters``: node parameter values, typed as ``launch_ros`` types them;
- ``packages``: package share/prefix, launch file and node executable lookup;
- ``plan``: what a launch file resolves to (``LaunchPlan``, ``ProcessSpec``, ``ArgumentSpec``) and
  ``LaunchError``;
- ``supervisor``: ``run`` starts and supervises the processes of a plan.
"""
