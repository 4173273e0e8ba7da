"""The robot description: the node serving /robot_description, the URDF tool and the TF publisher."""
