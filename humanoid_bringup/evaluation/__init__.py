"""Evaluations, benchmarks, rendering: they launch the stack, drive it through a probe node, score it."""
