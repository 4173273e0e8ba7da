"""Recording and replay of runs as rosbag2 folders with MCAP storage (docs/recording.md).

- :mod:`.bag_writer`: the pure writer core (topic table, rosbags writer, flush once a second, errors);
- :mod:`.recovery`: reading a killed recording and rebuilding its summary and ``metadata.yaml``;
- :mod:`.recorder_node`: ``humanoid-record`` (the node, launch argument ``record:=<dir>``, and ``--recover``);
- :mod:`.ros_types`: message classes by type name, QoS between rclpy and the bag's metadata;
- :mod:`.replay` / :mod:`.replay_node`: ``humanoid-replay`` (its pacing core and its node);
- :mod:`.report` and ``report_*``: ``humanoid-report`` (a recorded run as a static page).
"""
