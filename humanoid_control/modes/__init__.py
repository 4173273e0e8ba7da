"""Operating the robot: the mode state machine, the command mux, the joystick and keyboard mappings, the
operation record (pure cores) and the ``mode_manager`` node."""
