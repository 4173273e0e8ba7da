"""Robot model: the robot configuration, MuJoCo and pinocchio models, the served URDF, joint order."""
