"""Small rclpy helpers shared by the node adapters (Humble, Jazzy and Kilted compatible)."""

from __future__ import annotations

import faulthandler
import math
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.node import Node


def make_executor() -> Any:
    """A SingleThreadedExecutor; ``HUMANOID_EXECUTOR=events`` selects ``rclpy.experimental.EventsExecutor``.

    EventsExecutor has lower latency, but on Kilted (rclpy 9.1) it neither returns when the context is shut
    down from another thread nor reacts to SIGINT afterwards, so it is opt-in.
    """

    try:
        if os.environ.get("HUMANOID_EXECUTOR", "single") != "events":
            raise ImportError
        from rclpy.experimental import EventsExecutor

        return EventsExecutor()
    except (ImportError, AttributeError):
        from rclpy.executors import SingleThreadedExecutor

        return SingleThreadedExecutor()


def quiet_publisher_events() -> Any:
    """``event_callbacks`` for ``create_publisher`` that register none of rclpy's default QoS-event handlers.

    rclpy gives every publisher two default handlers (incompatible QoS, incompatible type). Each is a
    waitable that the SingleThreadedExecutor puts into a freshly built wait set at every wake-up, in Python:
    at 500 Hz in lockstep they cost a measurable share of each node's CPU (docs/architecture.md, "Lockstep
    cost"). ``rclpy.event_handler`` is ``rclpy.qos_event`` on Humble.
    """
    try:
        from rclpy.event_handler import PublisherEventCallbacks
    except ImportError:  # Humble
        from rclpy.qos_event import PublisherEventCallbacks  # type: ignore[no-redef]

    return PublisherEventCallbacks(use_default_callbacks=False)


def quiet_subscription_events() -> Any:
    """``event_callbacks`` for ``create_subscription`` without rclpy's default QoS-event handlers (see
    :func:`quiet_publisher_events`)."""
    try:
        from rclpy.event_handler import SubscriptionEventCallbacks
    except ImportError:  # Humble
        from rclpy.qos_event import SubscriptionEventCallbacks  # type: ignore[no-redef]

    return SubscriptionEventCallbacks(use_default_callbacks=False)


class QuietNode(Node):
    """An rclpy ``Node`` whose publishers (``/parameter_events`` included) and subscriptions carry none of
    rclpy's default QoS-event handlers (:func:`quiet_publisher_events`). The stack's nodes derive from it; an
    ``event_callbacks`` argument still wins.

    An incompatible QoS pair is still reported by the other side (rclpy and rclcpp log it for the user's own
    publishers and subscriptions, rviz2 and ros2 topic too); between two of the stack's nodes the QoS are
    chosen to match, and lockstep readiness (every subscription matched) fails loudly otherwise.
    """

    def create_publisher(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("event_callbacks", quiet_publisher_events())
        return super().create_publisher(*args, **kwargs)

    def create_subscription(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("event_callbacks", quiet_subscription_events())
        return super().create_subscription(*args, **kwargs)


def time_parts(seconds: float) -> tuple[int, int]:
    """``(sec, nanosec)`` of ``seconds`` rounded to the nearest nanosecond, ``0 <= nanosec < 10**9``.

    Simulated time accumulates its steps in floating point: 15000 steps of 2 ms make 29.99999999999425 s.
    That is 30 s 0 ns (the fraction rounds up to a whole second, carried into ``sec``), not 29 s 999999999 ns.
    """
    sec = math.floor(seconds)
    nanosec = round((seconds - sec) * 1e9)  # the fraction is exact: seconds - floor(seconds)
    if nanosec >= 1_000_000_000:
        sec, nanosec = sec + 1, nanosec - 1_000_000_000
    return int(sec), int(nanosec)


def helper_node(context: Any, name: str) -> Node:
    """A second node in a process (blocking service calls, a reader on a thread of its own), named ``name``.

    The name is given by a node-local remap, which rcl applies before the process-wide ``-r __node:=X`` (what
    ``ros2 launch`` gives the process's node): without it the helper would be renamed ``X`` too, and the
    graph would hold two nodes of that name. It runs on wall time: the launch's ``use_sim_time`` would make
    it follow ``/clock`` at the driver's rate for nothing. No parameter services.
    """
    from rclpy.parameter import Parameter

    return Node(
        name,
        context=context,
        parameter_overrides=[Parameter("use_sim_time", Parameter.Type.BOOL, False)],
        start_parameter_services=False,
        cli_args=["--ros-args", "-r", f"__node:={name}"],
    )


def to_time_msg(seconds: float) -> Any:
    """``builtin_interfaces/Time`` from seconds, rounded to the nearest nanosecond (:func:`time_parts`)."""
    from builtin_interfaces.msg import Time

    sec, nanosec = time_parts(seconds)
    return Time(sec=sec, nanosec=nanosec)


def from_time_msg(stamp: Any) -> float:
    """Seconds from a ``builtin_interfaces/Time``."""
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


def declare(
    node: Any,
    name: str,
    default: Any,
    description: str,
    low: float | None = None,
    high: float | None = None,
    read_only: bool = False,
) -> Any:
    """Declare a parameter with a descriptor and return its value.

    Numbers get a range, so bad values are refused. ``default`` must be a value, and a list must not be empty:
    its type is inferred from it (an empty list would give a byte array). For a parameter that means "unset"
    use :func:`declare_double_array` (or an empty string), never a parameter without a value: ``ros2 param
    dump`` and rqt_reconfigure ask for all parameters at once, and rclpy answers that request with nothing
    when one of them has no value.
    """
    if default is None or (isinstance(default, list | tuple) and not default):
        raise ValueError(f"parameter {name}: declare() needs a default value with a type, got {default!r}")
    desc = ParameterDescriptor(description=description, read_only=read_only)
    if low is not None and high is not None:
        if isinstance(default, bool):
            pass
        elif isinstance(default, int):
            desc.integer_range = [IntegerRange(from_value=int(low), to_value=int(high), step=1)]
        elif isinstance(default, float):
            desc.floating_point_range = [
                FloatingPointRange(from_value=float(low), to_value=float(high), step=0.0)
            ]
    if isinstance(default, float):
        _coerce_integer_override(node, name)
    return node.declare_parameter(name, default, desc).value


def declare_double_array(node: Any, name: str, description: str) -> list[float]:
    """Declare a ``double[]`` parameter whose default is the empty array, and return its value.

    rclpy infers a byte array from a plain ``[]`` default, and a parameter declared with only its type has
    no value (``PARAMETER_NOT_SET``): rclpy then answers a ``get_parameters`` request that names it, such
    as the one of ``ros2 param dump`` or rqt_reconfigure for all parameters, with nothing. So the parameter
    is declared with its type and, unless an override (``--params-file``, ``-p``) gave it a value, set to
    ``[]`` as a ``DOUBLE_ARRAY`` at once; its type stays ``double[]`` for later ``set_parameters`` calls.
    """
    from rclpy.parameter import Parameter

    desc = ParameterDescriptor(description=description)
    param = node.declare_parameter(name, Parameter.Type.DOUBLE_ARRAY, desc)
    if param.type_ == Parameter.Type.NOT_SET:
        # a set, not a declared value: it runs the node's on-set callbacks registered so far (declare first),
        # and rclpy would refuse it for a read-only parameter (hence no read_only here)
        result = node.set_parameters([Parameter(name, Parameter.Type.DOUBLE_ARRAY, [])])[0]
        if not result.successful:
            raise ValueError(f"parameter {name}: could not give it its empty default: {result.reason}")
        return []
    return [float(v) for v in param.value]


def _coerce_integer_override(node: Any, name: str) -> None:
    """Accept ``name:=6`` for a float parameter (launch files and CLIs often omit the ``.0``)."""
    from rclpy.parameter import Parameter

    overrides = getattr(node, "_parameter_overrides", None)
    if not isinstance(overrides, dict) or name not in overrides:
        return
    value = overrides[name]
    if value.type_ == Parameter.Type.INTEGER:
        overrides[name] = Parameter(name, Parameter.Type.DOUBLE, float(value.value))


def spin_in_windows(executor: Any, gate: Any) -> None:
    """``executor.spin()``, each callback started only while ``gate`` is open
    (:class:`~humanoid_control.loop.realtime.SlackGate`: a real-time loop's slack).

    Built on the executor's public ``wait_for_ready_callbacks``: wait for a window, then for work (the GIL
    released in ``rcl_wait``), and run the ready callback if a window is open, else at the next one (its
    message is taken when it runs, so nothing is lost). Returns when the context shuts down.
    """
    import rclpy
    from rclpy.executors import ShutdownException, TimeoutException

    try:
        from rclpy.executors import ConditionReachedException
    except ImportError:  # older rclpy
        ConditionReachedException = TimeoutException

    def await_window() -> bool:
        """Wait (GIL released) until the gate is open; False once the context is shut down."""
        while rclpy.ok():
            if gate.window(0.1) is not None:
                return True
        return False

    while await_window():
        try:
            # no timeout: a wait that timed out would run Python at the window's end, next to the loop's
            # deadline, every tick; this way only work that arrives does (rcl_wait's wake-up processing), and
            # the context's shutdown wakes it
            handler, _entity, _node = executor.wait_for_ready_callbacks()
        except (TimeoutException, ConditionReachedException):
            continue
        except ShutdownException:
            return
        if not await_window():  # ready after its window closed: run it at the next one (or a starved one)
            return
        handler()
        exception = handler.exception()
        if exception is not None:
            raise exception
        handler.result()


def context_ok(node: Any) -> bool:
    """The node's context is still valid (publishing, logging to ``/rosout`` and service calls work)."""
    try:
        return bool(node.context.ok())
    except Exception:  # a node whose handle is gone
        return False


def run_node(factory: Callable[[], Any], args: list[str] | None = None, program: str = "node") -> int:
    """Init rclpy, build the node, spin it until SIGINT / SIGTERM / shutdown, clean up. Returns an exit code.

    SIGINT and SIGTERM stop the spin with the context still valid
    (:class:`~humanoid_control.ros.shutdown.GracefulStop`): the node's ``close()`` can still publish and log,
    then the nodes are destroyed and the context shut down; exit code 0. A second signal during the clean-up
    is ignored. A configuration or parameter error while building the node (``ValueError``, including
    ``ConfigError``) is printed as ``<program>: error: ...`` and gives exit code 2.
    """
    import rclpy
    from rclpy.executors import ExternalShutdownException

    from humanoid_control.ros.shutdown import GracefulStop, StopRequested, init_without_signal_handlers

    # a crash in native code (SIGSEGV, SIGABRT, ...) prints every thread's Python stack on stderr: the
    # launcher's log then says where a node died, not only that it did
    if not faulthandler.is_enabled():
        faulthandler.enable()

    # the opt-in EventsExecutor spins a node with a guard condition not at all, and does not return when the
    # context is shut down from another thread: it keeps rclpy's own signal handling (and its limits)
    events = os.environ.get("HUMANOID_EXECUTOR", "single") == "events"
    stop = None if events else GracefulStop()
    if stop is None:
        rclpy.init(args=sys.argv if args is None else args)
    else:
        init_without_signal_handlers(sys.argv if args is None else args)
    node = None
    code = 0
    try:
        try:
            node = factory()
        except ValueError as exc:
            print(f"{program}: error: {exc}", flush=True)
            raise SystemExit(2) from None
        if stop is not None:
            stop.attach(node)
        executor = make_executor()
        # nodes the node created in its process (a controller called from the driver's loop, with its node
        # as the ROS interface) go first: their callbacks are served before the node's own in a wait set
        for extra in getattr(node, "extra_nodes", ()):
            executor.add_node(extra)
        executor.add_node(node)
        gate = getattr(node, "spin_gate", None)  # a real-time loop's SlackGate: callbacks in its slack
        if stop is not None and stop.requested:
            raise StopRequested("a signal came while the node was being built")
        if gate is None:
            executor.spin()
        else:
            spin_in_windows(executor, gate)
    except (StopRequested, KeyboardInterrupt, ExternalShutdownException):
        pass
    except RuntimeError:
        if rclpy.ok():
            raise
        # the context was shut down (by the node itself) while a callback was taking a message
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        if stop is None:  # rclpy's handlers: a second SIGINT must not interrupt the clean-up
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_IGN)
        if node is not None:
            code = code or int(getattr(node, "exit_code", 0))
            close = getattr(node, "close", None)
            if close is not None:
                close()
            for extra in getattr(node, "extra_nodes", ()):
                extra_close = getattr(extra, "close", None)
                if extra_close is not None:
                    extra_close()
                extra.destroy_node()
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
        if stop is not None:
            stop.close()
    return code
