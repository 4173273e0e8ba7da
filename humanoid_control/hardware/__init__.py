"""Hardware backends of the robot driver (selected by its ``hardware`` parameter) and the data they share."""
