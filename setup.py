"""Setup for the humanoid_stack ament_python package (also installable with pip)."""

from __future__ import annotations

import os
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "humanoid_stack"


def _tree(folder: str) -> list[tuple[str, list[str]]]:
    """data_files entries that install ``folder`` recursively under share/<package>/."""
    entries: list[tuple[str, list[str]]] = []
    for root, _dirs, files in os.walk(folder):
        paths = [os.path.join(root, f) for f in files if not f.endswith(".pyc")]
        if paths:
            entries.append((os.path.join("share", PACKAGE, root), paths))
    return entries


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(
        include=["humanoid_control*", "humanoid_policy*", "humanoid_perception*", "humanoid_bringup*"]
    ),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.yaml")),
        *_tree("config"),
        *_tree("urdf"),
    ],
    install_requires=["setuptools", "numpy", "pyyaml"],
    # optional: MIT-mode CAN actuators (hardware:=can_mit); the code imports python-can only when a bus opens
    extras_require={"hardware": ["python-can>=4.0"]},
    zip_safe=True,
    maintainer="humanoid_stack maintainers",
    maintainer_email="maintainers@humanoid-stack.dev",
    description="ROS 2 software stack for humanoid robots",
    license="Apache-2.0",
    python_requires=">=3.10",
    entry_points={
        "console_scripts": [
            # ROS 2 nodes (ros2 run humanoid_stack <name>)
            "robot_driver = humanoid_control.driver.robot_driver_node:main",
            "robot_description = humanoid_bringup.description.robot_description_node:main",
            "tf_publisher = humanoid_bringup.description.tf_publisher_node:main",
            "console = humanoid_bringup.console.console_node:main",
            "joint_hold_controller = humanoid_control.controllers.controller_node:joint_hold_main",
            "controller_node = humanoid_control.controllers.controller_node:main",
            "policy_runner = humanoid_policy.policy_runner_node:main",
            "state_estimator = humanoid_control.estimation.state_estimator_node:main",
            "wbc_controller = humanoid_control.wbc.wbc_node:main",
            "walking_controller = humanoid_control.walking.walking_node:main",
            "mode_manager = humanoid_control.modes.mode_manager_node:main",
            "camera_node = humanoid_perception.camera_node:main",
            "perception_node = humanoid_perception.perception_node:main",
            "autonomy_node = humanoid_perception.autonomy.autonomy_node:main",
            "g1_emulator = humanoid_control.hardware.g1_emulator:main",
            # command-line tools
            "humanoid-launch = humanoid_bringup.launcher.cli:main",
            "humanoid-bench = humanoid_bringup.evaluation.bench:main",
            "humanoid-demo = humanoid_bringup.demo:main",
            "humanoid-urdf = humanoid_bringup.description.urdf_tool:main",
            "humanoid-eval = humanoid_bringup.evaluation.evaluate:main",
            "humanoid-graph = humanoid_bringup.node_graph:main",
            "humanoid-policy = humanoid_policy.check:main",
            "humanoid-robot = humanoid_control.model.robot_check:main",
            "humanoid-teleop = humanoid_bringup.teleop:main",
            "humanoid-console = humanoid_bringup.console.console_node:main",
            "humanoid-record = humanoid_bringup.recording.recorder_node:main",
            "humanoid-replay = humanoid_bringup.recording.replay_node:main",
            "humanoid-report = humanoid_bringup.recording.report:main",
        ],
        # controllers found by name (humanoid_control/controllers/registry.py): Controller subclasses, hosted
        # by the generic node adapter, the driver's loop and the in-process runner (policy, wbc_stand and
        # mpc_walk still have a node of their own as their ROS face: their `node` attribute)
        "humanoid_stack.controllers": [
            "joint_hold = humanoid_control.controllers.joint_hold:JointHoldController",
            "policy = humanoid_policy.controller:PolicyController",
            "wbc_stand = humanoid_control.wbc.wbc_stand:WbcStandController",
            "mpc_walk = humanoid_control.walking.mpc_walk:MpcWalkController",
            "supervised = humanoid_policy.supervised:SupervisedController",
        ],
    },
)
