# Two commands do everything on a fresh machine (Python 3.11, pip, apt):
#   make demo   - headless simulation demo, results in results/demo/
#   make test   - the whole test suite (CI runs this through .ci/run)
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-done

.PHONY: setup demo test test-fast bench lint tsid placo clean

setup: $(STAMP)

$(STAMP): requirements.txt setup.py package.xml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { $(PYTHON) -m pip install --user -q virtualenv && $(PYTHON) -m virtualenv $(VENV); }
	$(PY) -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
	$(PY) -m pip install -q -r requirements.txt 2>&1 | grep -v "^WARNING: Location" || true
	@# pretrained policies: holosoma-inference's ONNX files only (its runtime dependencies are not needed)
	$(PY) -m pip install -q --no-deps "holosoma-inference==0.1.3" 2>&1 | grep -v "^WARNING: Location" || true
	@# the browser console's test drives Debian's chromium (headless, software WebGL) through Playwright
	@# Unitree G1 low level (hardware:=unitree_g1): the robot speaks CycloneDDS 0.10.x, which 11.x does not
	@# interoperate with; cyclonedds==0.10.2 has no cp311 wheel, so it is built (seconds) against Debian's
	@# cyclonedds-dev 0.10.2, found through CYCLONEDDS_HOME = a folder of links to /usr/include, /usr/bin, /usr/lib/<arch>
	@SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); PKGS=""; \
		test -f /usr/include/dds/dds.h || PKGS="$$PKGS cyclonedds-dev"; \
		command -v gcc >/dev/null || PKGS="$$PKGS gcc libc6-dev"; \
		command -v chromium >/dev/null || PKGS="$$PKGS chromium"; \
		$(PY) -c "import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" \
			|| PKGS="$$PKGS python3-dev"; \
		if [ -n "$$PKGS" ]; then $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$PKGS >/dev/null; fi
	@ARCH=$$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu); mkdir -p $(VENV)/cyclonedds-home && \
		ln -sfn /usr/include $(VENV)/cyclonedds-home/include && ln -sfn /usr/bin $(VENV)/cyclonedds-home/bin && \
		ln -sfn /usr/lib/$$ARCH $(VENV)/cyclonedds-home/lib
	$(PY) -c "import importlib.metadata as m, sys; sys.exit(m.version('cyclonedds') != '0.10.2')" 2>/dev/null || \
		CYCLONEDDS_HOME=$(abspath $(VENV))/cyclonedds-home $(PY) -m pip install -q --no-binary cyclonedds "cyclonedds==0.10.2" 2>&1 | grep -v "^WARNING: Location" || true
	@# the Unitree SDK (unitree-sdk2py-dimos) without its pins: it needs cyclonedds and numpy only at run time (its
	@# opencv-python pin would clash with opencv-python-headless; cv2 is used only by its camera examples)
	$(PY) -m pip install -q --no-deps "unitree-sdk2py-dimos==1.0.3" 2>&1 | grep -v "^WARNING: Location" || true
	$(PY) -m pip install -q --no-deps -e . 2>&1 | grep -v "^WARNING: Location" || true
	@# tf2_msgs for /tf and /tf_static: not among the ROS 2 wheels, so built from interfaces/tf2_msgs into the venv
	@# where `import tf2_msgs.msg` fails (about 30 s); a failed build warns once and setup goes on without /tf
	bash scripts/build_tf2_msgs.sh $(VENV)
	$(PY) -c "import rclpy, mujoco, pinocchio, osqp, onnxruntime, cv2, humanoid_control, humanoid_policy, unitree_sdk2py.core.channel, unitree_sdk2py.utils.crc, viser, yourdfpy, playwright; from humanoid_policy.manifest import load_policy; load_policy('holosoma/g1_ppo')" \
		|| { echo "setup: the Python environment is incomplete"; exit 1; }
	@# headless rendering needs an OpenGL library (EGL, else OSMesa)
	@ldconfig -p | grep -qE "libEGL.so.1|libOSMesa.so" || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq libegl1 libgl1 libosmesa6 >/dev/null; }
	touch $(STAMP)

demo: setup
	$(VENV)/bin/humanoid-demo --out results/demo

test: setup
	$(PY) -m pytest -q --durations=15 test

test-fast: setup
	$(PY) -m pytest -q -m "not slow" test

bench: setup
	$(VENV)/bin/humanoid-bench driver

# opt-in peer for humanoid-bench wbc (not part of setup): TSID built against the venv's pinocchio
tsid: setup
	scripts/install_tsid.sh $(VENV)

# opt-in peer for humanoid-bench mpc (not part of setup): PlaCo 0.10.2 in its own venv (it pins pin 3.8.0)
placo: setup
	scripts/install_placo.sh .venv-placo

lint: setup
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) .venv-placo results build install log .pytest_cache
