"""The real-time loop's machinery, without rclpy: the deadline thread's settings (SCHED_FIFO priority, CPU
affinity, locked memory, garbage collection in the slack), the slack gate for ROS callbacks, loop statistics.

Below the driver node and beside the hardware backends: the driver imports it, the backends do not.
"""
