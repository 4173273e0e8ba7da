"""The robot driver's loop thread: its start (``_loop``: waiting for subscribers, the real-time settings) and
its ticks (``_run_loop``): read the backend, hand the state out (published, or to the in-loop controller,
``_step_in_loop``), wait for the tick's command (realtime: briefly; lockstep: for it and for every peer's
acknowledgement), update the core, write the command, step the physics, then the publications of the tick
(published now, or left for the slack: :mod:`humanoid_control.driver.driver_slack`), the diagnostics when
due, the overrun accounting and the sleep to the next deadline. Also the latency bookkeeping from a state
going out to the command answering it (``_mark_state``, ``_mark_applied``).

:class:`DriverLoopMixin` is a base of :class:`~humanoid_control.driver.robot_driver_node.RobotDriverNode`,
which starts the thread. The loop shares the core, the backend and ``lock`` (``command_arrived`` is its
condition) with the executor thread's callbacks (:mod:`humanoid_control.driver.driver_callbacks`).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import rclpy

from humanoid_control.driver.driver_core import CommandError, DriverMode
from humanoid_control.driver.in_loop import InLoopController, InLoopState
from humanoid_control.hardware.mujoco_sim import tilt_from_quat
from humanoid_control.loop.realtime import SlackCollector, apply_to_loop_thread, sleep_until

#: specific force of a resting IMU (m/s^2): the in-loop estimator's input where a backend measures none
_GRAVITY_SPECIFIC_FORCE = np.array([0.0, 0.0, 9.81])
#: while the robot is down, ``~/down`` is published again when its base tilt changed by more than this (rad)
DOWN_TILT_STEP = math.radians(5.0)


class DriverLoopMixin:
    """The loop thread of :class:`~humanoid_control.driver.robot_driver_node.RobotDriverNode` (``self`` is the
    driver node)."""

    backend_state = None
    exit_code = 0

    def _loop(self) -> None:
        try:
            self._run_loop()
        except Exception as exc:
            if not rclpy.ok(context=self.context):
                # SIGINT shut the context down while a tick was publishing ("publisher's context is
                # invalid"): a normal shutdown, not a failure of the loop
                return
            self.exit_code = 1
            self.get_logger().fatal(f"real-time loop died: {exc!r}")
            self.context.try_shutdown()
        finally:
            if self.spin_gate is not None:
                self.spin_gate.open()  # the loop is over: callbacks whenever they come

    def _wait_for_subscribers(self) -> None:
        """Lockstep: hold simulated time at 0 until the expected observers/controllers are connected."""
        deadline = time.monotonic() + 30.0
        while self._running and rclpy.ok(context=self.context):
            count = self.count_subscribers("/joint_states")
            if count >= self.wait_for_subscribers:
                self.get_logger().info(f"{count} /joint_states subscribers: starting")
                return
            if time.monotonic() > deadline:
                self.get_logger().warning(
                    f"only {count} of {self.wait_for_subscribers} /joint_states subscribers "
                    "after 30 s: starting"
                )
                return
            time.sleep(0.01)

    def _await_declared_peers(self) -> bool:
        """Lockstep: hold simulated time at 0 until every declared peer (``lockstep_peers``) has joined. False
        (the run stopped with an error naming them) when one has not within ``lockstep_startup_timeout_s``."""
        start = time.monotonic()
        last_note = start
        while self._running and rclpy.ok(context=self.context):
            with self.command_arrived:
                missing = [n for n in self.declared_peers if n not in self.peers.acked]
                if not missing:
                    break
                self.command_arrived.wait(0.05)
            now = time.monotonic()
            if now - start > self.peer_startup_timeout:
                self._stop_run(
                    f"lockstep: declared peers {missing} did not join within lockstep_startup_timeout_s = "
                    f"{self.peer_startup_timeout:g} s"
                )
                return False
            if now - last_note > 10.0:
                last_note = now
                self.get_logger().info(f"lockstep: simulated time held at 0 until {missing} join")
        else:
            return False
        names = " ".join(self.declared_peers)
        self.get_logger().info(f"lockstep: every declared peer joined ({names}): starting")
        return True

    def _stop_run(self, why: str) -> None:
        """End the run with an error (exit code 1; a launch with ``on_exit: shutdown`` stops the graph)."""
        self.exit_code = 1
        self.get_logger().fatal(f"{why}: stopping (a run without them would not be a function of its inputs)")
        self._publish_lockstep()
        self._running = False
        self.context.try_shutdown()

    def _apply_realtime(self) -> SlackCollector | None:
        """Loop thread, at its start: the real-time settings (warnings where the system refuses)."""
        self.rt_applied = apply_to_loop_thread(self.rt_settings)
        for why in self.rt_applied.warnings:
            self.get_logger().warning(f"real-time setting refused: {why}")
        a = self.rt_applied
        if a.thread_priority or a.process_priority or a.cpu_affinity or a.lock_memory:
            self.get_logger().info(
                f"loop thread: SCHED_FIFO {a.thread_priority or 'off'}, other threads "
                f"{a.process_priority or 'unchanged'}, CPUs {list(a.cpu_affinity) or 'any'}, memory "
                f"{'locked' if a.lock_memory else 'not locked'}"
            )
        if not a.gc_in_slack:
            return None
        return SlackCollector(min_slack_s=min(self.rt_settings.gc_min_slack_s, 0.4 * self.period))

    def _run_loop(self) -> None:
        realtime = self.clock_mode == "realtime"
        if not realtime and self.wait_for_subscribers > 0:
            self._wait_for_subscribers()
        if not realtime and self.declared_peers and not self._await_declared_peers():
            return
        collector = self._apply_realtime()
        in_loop = self.in_loop
        tooling = in_loop is not None and realtime  # the tooling streams go out in the loop's slack
        # realtime, a simulator: its physics steps on a thread of its own from the command write on, beside
        # the tick's remaining work (estimator update, slack publications); the next read waits for it
        physics_beside = realtime and self.physics_thread and hasattr(self.backend, "start_advance")
        last_diag = 0.0
        if realtime:
            # the first diagnostics cost 8-10 ms (first use of their messages and publishers): before the
            # first deadline, not in a tick (measured: an overrun at the start of every realtime run)
            self._publish_all_diagnostics()
            last_diag = time.perf_counter()
        next_deadline = time.perf_counter()
        last_second = math.floor(self.backend_time() + 1e-9)  # lockstep: of simulated time (s)
        last_roll = time.perf_counter()
        gate = self.spin_gate
        # the gate closes this long before a deadline: a callback started in the window has at least this
        gate_margin = max(3e-4, 0.15 * self.period)
        while self._running and rclpy.ok(context=self.context):
            if self.paused:
                if gate is not None:
                    gate.open()
                with self.command_arrived:
                    while self.paused and self._running and rclpy.ok(context=self.context):
                        self.command_arrived.wait(0.05)
                next_deadline = time.perf_counter()
                continue
            if realtime:
                if gate is not None:
                    gate.open_until(next_deadline - gate_margin)
                lateness = sleep_until(next_deadline, self.spin_margin)
                if gate is not None:
                    gate.close()
                tick_start = time.perf_counter()
                self.stats.record_wake(lateness, tick_start)
            else:
                tick_start = time.perf_counter()
                self.stats.record_wake(0.0, tick_start)
            if self._respawn_requested:
                with self.lock:
                    self._respawn()
            state = self.backend.read()
            self.backend_state = state
            self._check_backend()
            publish = self.core.tick % self.publish_every == 0
            # an external controller (and a lockstep peer) needs the state now; with the controller in the
            # loop, realtime publishes it in the loop's slack after the tick's work (tooling, off the critical
            # path), and lockstep after the controller's step (its mirrored command goes out before the state)
            deferred = publish and tooling
            if in_loop is None:
                if publish:
                    self._publish_state(state)
                self._mark_state(state.stamp)
            else:
                self._mark_state(state.stamp)
                self._step_in_loop(in_loop, state)
                self._take_in_loop_logs(in_loop, tooling)
                if publish and not deferred:
                    in_loop.in_loop_mirror()
                    self._publish_state(state)
            with self.command_arrived:
                # realtime: give a streaming controller a short, deadline-bounded chance to answer this tick.
                # Waiting on the condition also hands the GIL to the executor thread, which takes the
                # commands; a loop running behind schedule would otherwise starve it while it counts ticks
                # towards the watchdog (measured: watchdog trips with a controller answering every tick).
                if (
                    realtime
                    and in_loop is None
                    and self.realtime_command_wait > 0
                    and self._controller_streaming()
                ):
                    limit = min(
                        tick_start + self.realtime_command_wait,
                        next_deadline + self.period - 0.5 * self.period,
                    )
                    while self.latest_command_stamp < state.stamp - 1e-9 and self._controller_streaming():
                        remaining = limit - time.perf_counter()
                        if remaining <= 0:
                            self.realtime_commands_late += 1
                            break
                        self.command_arrived.wait(remaining)
                # lockstep: while a controller streams commands (accepted or not), it sets the pace
                waited = not realtime and self._controller_streaming()
                if waited:
                    deadline = time.perf_counter() + self.lockstep_timeout
                    while self.latest_command_stamp < state.stamp - 1e-9 and self._controller_streaming():
                        remaining = deadline - time.perf_counter()
                        if remaining <= 0:
                            break
                        self.command_arrived.wait(remaining)
                # lockstep: every peer acknowledges the tick (its outputs for it are published) before time
                # moves
                dropped: list[str] = []
                never_came: list[str] = []
                if not realtime and publish and self.peers.acked:
                    # a declared peer's first acknowledgement may take long (a first camera render, a first
                    # inference on a loaded machine): it gets the start-up timeout, and missing it stops the
                    # run instead of dropping the peer (a run without it is not a function of its inputs)
                    first = self.peers.first_ack_pending(self.declared_peers)
                    wait_s = self.peer_startup_timeout if first else self.peer_timeout
                    deadline = time.perf_counter() + wait_s
                    while missing := self.peers.missing(state.stamp):
                        if not (self._running and rclpy.ok(context=self.context)):
                            break  # shutting down: nobody to wait for
                        remaining = deadline - time.perf_counter()
                        if remaining <= 0:
                            never_came = self.peers.first_ack_pending([n for n in missing if n in first])
                            if not never_came:
                                self.peers.drop(missing)
                                dropped = missing
                            break
                        self.command_arrived.wait(min(remaining, 0.05))
                # counted only when the tick goes ahead without its command: a controller that is a peer
                # acknowledges after commanding, so a slow answer is waited for above and not counted
                if waited and self.latest_command_stamp < state.stamp - 1e-9 and self._controller_streaming():
                    self.lockstep_timeouts += 1
                command = self.core.update(state.q, state.dq, tilt_from_quat(state.imu_quat))
                self._mark_applied()
                mode, reason = self.core.mode, self.core.mode_reason
                down, tilt = self.core.down, self.core.tilt
                switches = self._finished_switches(state.stamp)
                push, self._pending_push = self._pending_push, None
                if push is not None:
                    self.backend.push(push)  # type: ignore[attr-defined]
            if never_came:
                self._stop_run(
                    f"lockstep: declared peers {never_came} did not acknowledge their first tick (t = "
                    f"{state.stamp:.3f} s) within lockstep_startup_timeout_s = "
                    f"{self.peer_startup_timeout:g} s"
                )
                return
            if dropped:
                self.get_logger().error(
                    f"lockstep: peers {dropped} did not acknowledge t = {state.stamp:.3f} s within "
                    f"{self.peer_timeout:g} s: dropped (the run is no longer reproducible)"
                )
                self._publish_lockstep()
            self.backend.write(command)
            # the push, if any, went to the backend above; the step from here on sees only this tick's inputs
            if physics_beside:
                self.backend.start_advance(self.period)  # type: ignore[attr-defined]
            if self.in_loop_estimator is not None:
                self._estimator_correct()  # the tick's kinematic update, off the state -> command path
                if publish and not deferred:
                    self._publish_estimate()  # /odom of this tick (realtime: in the slack, below)
            if deferred:
                if self._tooling_pending is not None:
                    self.tooling_superseded += 1
                self._tooling_pending = (state, 0)
            if tooling:  # realtime, a controller in the loop: in the slack (a JSON message and a log line)
                self._switches_pending.extend(switches)
            else:
                for rec in switches:
                    self._publish_switch(rec)
            if push is not None:
                self._publish_push(push.force, state.stamp)
                self._push_end_tick = self.core.tick + round(push.duration / self.period) - 1
            if not physics_beside:
                self.backend.advance(self.period)
            end = self._push_end_tick
            if end is not None and self.core.tick >= end and not getattr(self.backend, "push_active", False):
                self._push_end_tick = None
                self._publish_push((0.0, 0.0, 0.0), self.backend_time())
            self.stats.record_sim_time(self.backend_time())
            if mode != self._last_mode:
                self._publish_mode(mode, reason, defer_log=tooling)
            # the robot went down or is up again, or while down its tilt changed by 5 deg (the operator sees
            # how it lies, not the tilt it crossed the limit at): a small latched message
            if down != self._last_down or (down and abs(tilt - self._down_tilt) > DOWN_TILT_STEP):
                self._last_down, self._down_tilt = down, tilt
                self._publish_down(down, tilt, state.stamp)
            now = time.perf_counter()
            if now - last_roll >= 1.0:
                self.stats.roll()
                last_roll = now
            # diagnostics at 1 Hz: of wall time in realtime; in lockstep on every whole second of simulated
            # time (the same ticks in every run, whatever the machine's speed), before that tick's state
            if realtime:
                diag_due = now - last_diag >= 1.0
            else:
                second = math.floor(self.backend_time() + 1e-9)
                diag_due, last_second = second != last_second, second
            if diag_due or mode != self._last_mode:
                if tooling:
                    # in the slack (below), like the tooling streams; a mode change too (the mode topic went
                    # out above): publishing the three nodes' diagnostics in the tick cost up to 2.3 ms
                    if not self._diag_pending:  # (else the last second's are still going out)
                        self._diag_pending = [0, 1, 2]
                else:
                    self._publish_all_diagnostics()
                last_diag = now
            self._last_mode = mode
            if self.sim_duration > 0 and self.backend_time() >= self.sim_duration:
                while self._switches_pending:
                    self._publish_switch(self._switches_pending.pop(0))
                while self._logs_pending:
                    self._log_info(self._logs_pending.pop(0))
                self._publish_all_diagnostics()
                self.get_logger().info(f"sim_duration_s reached ({self.sim_duration} s): stopping")
                self.context.try_shutdown()
                return
            if realtime:
                next_deadline += self.period
                # the simulator's state after this step is the next tick's: its ground truth, if it publishes
                truth_due = tooling and self.core.tick % self.publish_every == 0
                pending = (
                    self._tooling_pending is not None
                    or self._diag_pending
                    or self._switches_pending
                    or self._logs_pending
                )
                if pending or truth_due:
                    self._publish_in_slack(next_deadline, truth_due)
                done = time.perf_counter()
                if done > next_deadline:
                    self.stats.record_overrun()
                    if done > next_deadline + self.period:  # far behind: skip missed ticks, don't burst
                        next_deadline = done
                if collector is not None:
                    collector.maybe_collect(next_deadline)
            elif collector is not None:
                collector.maybe_collect(math.inf)

    def _step_in_loop(self, controller: InLoopController, state: Any) -> None:
        """Loop thread: the in-loop controller answers this tick's state; its command goes to the core as a
        ``/joint_commands`` message would (lockstep needs no wait: the answer is there)."""
        t0 = time.perf_counter()
        estimate = None
        try:
            if self.in_loop_estimator is not None:  # the estimator's node first, as /odom before the WBC
                estimate = self.in_loop_estimator.in_loop_predict(
                    state.stamp,
                    state.gyro,
                    state.accel if state.accel is not None else _GRAVITY_SPECIFIC_FORCE,
                    state.imu_quat,
                    state.q,
                    state.tau if state.tau is not None else np.zeros_like(state.q),
                    state.dq,
                )
        except Exception as exc:  # no estimate this tick: the WBC refuses the stale one it has
            self.get_logger().error(f"in-loop estimator failed: {exc!r}", throttle_duration_sec=1.0)
        view = InLoopState(
            stamp=state.stamp,
            q=state.q,
            dq=state.dq,
            imu_quat=state.imu_quat,
            gyro=state.gyro,
            driver_mode=self.core.mode.value,
            accel=state.accel,
            tau=state.tau,
            estimate=estimate,
        )
        try:
            command = controller.in_loop_step(view)
        except CommandError as exc:
            command = None
            with self.lock:
                self.core.refuse(str(exc))
            self.get_logger().warning(f"refused the in-loop command: {exc}", throttle_duration_sec=1.0)
        except Exception as exc:  # a failing controller must not take the loop (and its safety) down
            command = None
            with self.lock:
                if self.core.mode != DriverMode.DAMPING:
                    self.core.fault(f"in-loop controller failed: {exc!r}")
                    self.get_logger().error(f"in-loop controller failed: {exc!r}; damping")
        self.stats.record_controller(time.perf_counter() - t0)
        if command is None:
            return
        with self.command_arrived:
            self.core.submit(command)
            self.latest_command_stamp = max(self.latest_command_stamp, command.stamp)
            self.last_seen_command_tick = self.core.tick

    def _estimator_correct(self) -> None:
        """Loop thread, the command written: the in-loop estimator's leg-kinematics update of this tick."""
        try:
            self.in_loop_estimator.in_loop_correct()
        except Exception as exc:  # the next prediction goes on from the prior; the WBC refuses an aging one
            self.get_logger().error(f"in-loop estimator failed: {exc!r}", throttle_duration_sec=1.0)

    def _mark_state(self, stamp: float) -> None:
        """Loop thread: the state of ``stamp`` went out (published, or handed to the in-loop controller)."""
        key = round(stamp * 1e9)
        self._state_out[key] = time.perf_counter()
        self._state_keys.append(key)
        if len(self._state_keys) > 256:
            self._state_out.pop(self._state_keys.popleft(), None)

    def _mark_applied(self) -> None:
        """Loop thread, lock held, after the core's update: a command answering a state not yet answered was
        applied now; its latency from that state going out is recorded (``state_to_command_us_*``)."""
        cmd = self.core.last_command
        if cmd is None or self.core.mode != DriverMode.ACTIVE:
            return
        key = round(cmd.stamp * 1e9)
        if key <= self._last_applied_key:
            return
        self._last_applied_key = key
        sent = self._state_out.get(key)
        if sent is not None:
            self.state_to_command.add((time.perf_counter() - sent) * 1e6)

    def _finished_switches(self, stamp: float) -> list[Any]:
        """Loop thread, lock held: stamp a switch made this tick; the switches whose blend ended."""
        recs = self.core.switches
        if recs and recs[-1].tick == self.core.tick - 1 and math.isnan(recs[-1].t):
            recs[-1].t = stamp
        done = [r for r in recs if r.done and not r.published]
        for r in done:
            r.published = True
        return done

    def _controller_streaming(self) -> bool:
        """A command was seen within the last ``watchdog_ticks`` ticks (call with the lock held)."""
        return self.core.tick - self.last_seen_command_tick <= self.settings.watchdog_ticks
