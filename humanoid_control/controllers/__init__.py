"""Controllers as plugins (ros2_control's controller interface, in Python, without rclpy in the cores).

- :mod:`.interface`: what a controller is (configure, activate from the measured state, ``update(state, t)``
  -> command, deactivate, what it reports) and what the loop hands it each tick;
- :mod:`.registry`: controllers found by name through the entry-point group ``humanoid_stack.controllers``;
- :mod:`.host`: the lifecycle and rate of one controller, the same in the driver's loop, in a node of its own
  and in the in-process runner;
- :mod:`.joint_hold`: the simplest controller (the default pose);
- :mod:`.controller_node`: the one ROS 2 node adapter that hosts any registered controller.
"""
