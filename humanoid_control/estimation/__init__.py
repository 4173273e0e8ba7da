"""Floating-base state estimation: SO(3) helpers, contact EKF, leg kinematics, contacts, estimator node."""
