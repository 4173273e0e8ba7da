#!/usr/bin/env bash
# Opt-in: PlaCo (Rhoban's planning and control library, C++ with Python bindings) in its own virtual
# environment, so that `humanoid-bench mpc` can time its WalkPatternGenerator side by side with our pattern
# generator. Not part of the default setup.
#
# Why its own environment: placo 0.10.2 pins pin==3.8.0, and the project's environment has a newer pin; the
# benchmark runs PlaCo in this environment's python as a subprocess (humanoid_bringup/evaluation/placo_peer.py,
# which needs only numpy and placo). Wheels only, nothing to compile (about 1 min, 400 MB).
#
# Usage: scripts/install_placo.sh [VENV]        (default .venv-placo, which humanoid-bench mpc looks for)
set -euo pipefail
VENV=${1:-.venv-placo}
PLACO_VERSION=0.10.2
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
test -x "$VENV/bin/python" || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
"$VENV/bin/python" -m pip install -q "placo==$PLACO_VERSION" numpy 2>&1 | grep -v "^WARNING: Location" || true
"$VENV/bin/python" -c "import importlib.metadata as m, placo; print('install_placo: placo', m.version('placo'), 'pin', m.version('pin'), 'in $VENV')"
