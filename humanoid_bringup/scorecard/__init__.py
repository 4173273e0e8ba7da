"""The robustness scorecard (issue 41): scenario families, one trial in process (part A: scenarios, trial,
worlds, events, sim, pushes, walks) and its orchestration and reports (runner, store, report, cli)."""
