#!/usr/bin/env bash
# Opt-in: install TSID (task-space inverse dynamics, C++ with Python bindings) into the project's venv, so
# that `humanoid-bench wbc` can time it side by side with our controller. Not part of the default setup.
#
# Why a script: `libtsid` has no wheel on PyPI (pip compiles it, ~7 min on 2 cores), and the prebuilt
# `tsid` binding crashes against pin 4.1 (MemoryError in RobotWrapper), so the binding is rebuilt against the
# installed pin/eigenpy. Both wheels are built once in a separate build venv and cached; later runs only
# install them.
#
# Usage: scripts/install_tsid.sh [VENV]        (default .venv; cache: $HUMANOID_PEER_CACHE or ~/.cache)
set -euo pipefail
VENV=${1:-.venv}
TSID_VERSION=1.10.0
CACHE=${HUMANOID_PEER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/humanoid-stack/peers}
WHEELS=$CACHE/wheels
BUILD=$CACHE/build-venv
PY=${PYTHON:-$VENV/bin/python}
mkdir -p "$WHEELS"

pin_version=$("$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('pin'))")
eigenpy_version=$("$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('eigenpy'))")
boost_version=$("$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('cmeel-boost'))")

have() { compgen -G "$WHEELS/$1" >/dev/null; }
if ! have "libtsid-$TSID_VERSION-*.whl" || ! have "tsid-$TSID_VERSION-*.whl"; then
  echo "install_tsid: building libtsid and tsid $TSID_VERSION against pin $pin_version (about 12 min)"
  if ! command -v c++ >/dev/null; then  # the build compiles C++ (cmake and ninja come from pip)
    SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq g++ >/dev/null
  fi
  test -x "$BUILD/bin/python" || "$PY" -m venv "$BUILD"
  "$BUILD/bin/pip" install -q --upgrade pip
  "$BUILD/bin/pip" install -q "cmeel[build]" jrl-cmakemodules cmeel-eigen "eigenpy==$eigenpy_version" \
    "pin==$pin_version" eiquadprog "cmeel-boost==$boost_version" scipy numpy cmeel-urdfdom-headers
  have "libtsid-$TSID_VERSION-*.whl" || "$BUILD/bin/pip" wheel -q --no-deps -w "$WHEELS" "libtsid==$TSID_VERSION"
  "$BUILD/bin/pip" install -q --no-deps "$WHEELS"/libtsid-$TSID_VERSION-*.whl
  "$BUILD/bin/pip" wheel -q --no-build-isolation --no-deps --no-binary tsid -w "$WHEELS" "tsid==$TSID_VERSION"
fi
"$VENV/bin/pip" install -q "$WHEELS"/libtsid-$TSID_VERSION-*.whl "pin==$pin_version" "eigenpy==$eigenpy_version"
"$VENV/bin/pip" install -q --no-deps --force-reinstall "$WHEELS"/tsid-$TSID_VERSION-*.whl
"$VENV/bin/python" -c "import tsid; print('install_tsid: tsid', tsid.__file__)"
