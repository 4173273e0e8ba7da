"""Browser console (``humanoid-console``): a live 3D view of the robot and an operator panel served by viser.

Pure parts: :mod:`.drive` (hold-to-drive, deadman, limits), :mod:`.access` (binding and token checks),
:mod:`.status` (the status panel's model), :mod:`.convert` (camera image, point cloud, height-map mesh); the
viser page: :mod:`.scene`; the token proxy: :mod:`.gate`; the rclpy adapter: :mod:`.console_node`.
"""
