"""Robot driver: the safety core, the real-time loop node, loop statistics, the joint-hold controller."""
