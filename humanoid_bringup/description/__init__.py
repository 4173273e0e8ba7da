"""The robot description: the node serving /robot_description and the URDF command-line tool."""
