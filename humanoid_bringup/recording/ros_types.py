"""rclpy side of recording and replay: message classes by type name, and QoS profiles between rclpy and the
rosbags representation written to a bag's metadata (Humble, Jazzy and Kilted)."""

from __future__ import annotations

import importlib
from typing import Any

from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

from humanoid_bringup.recording.bag_writer import TopicTypeError

__all__ = ["import_message", "qos_from_rclpy", "qos_to_rclpy"]

_INFINITE_NS = 0x7FFFFFFF * 10**9 + 0xFFFFFFFF  # rmw's "infinite" duration


def import_message(msgtype: str) -> Any:
    """The generated Python class of ``pkg/msg/Name``; ``TopicTypeError`` if it is not installed here (rclpy
    cannot subscribe to or publish a type without it)."""
    parts = msgtype.split("/")
    if len(parts) != 3 or parts[1] != "msg":
        raise TopicTypeError(f"type {msgtype!r} is not a message type (pkg/msg/Name)")
    try:
        return getattr(importlib.import_module(f"{parts[0]}.msg"), parts[2])
    except (ImportError, AttributeError) as exc:
        raise TopicTypeError(f"type {msgtype}: no Python message class installed here ({exc})") from None


def _time(duration: Any) -> QosTime:
    ns = int(getattr(duration, "nanoseconds", 0))
    if ns <= 0:
        return QosTime(0, 0)
    if ns >= _INFINITE_NS:
        return QosTime(0x7FFFFFFF, 0xFFFFFFFF)
    return QosTime(ns // 10**9, ns % 10**9)


def _member(enum: Any, value: Any, default: Any) -> Any:
    return enum.__members__.get(getattr(value, "name", ""), default)


def qos_from_rclpy(profile: Any) -> Qos:
    """rosbags ``Qos`` of an rclpy ``QoSProfile`` (a publisher's, from ``get_publishers_info_by_topic``)."""
    return Qos(
        _member(QosHistory, profile.history, QosHistory.UNKNOWN),
        int(profile.depth),
        _member(QosReliability, profile.reliability, QosReliability.UNKNOWN),
        _member(QosDurability, profile.durability, QosDurability.UNKNOWN),
        _time(profile.deadline),
        _time(profile.lifespan),
        _member(QosLiveliness, profile.liveliness, QosLiveliness.UNKNOWN),
        _time(profile.liveliness_lease_duration),
        bool(profile.avoid_ros_namespace_conventions),
    )


def qos_to_rclpy(qos: Qos, min_depth: int = 1) -> Any:
    """rclpy ``QoSProfile`` with the reliability, durability and depth (at least ``min_depth``; keep-last)
    of ``qos``; deadline, lifespan and liveliness stay at their defaults (what a subscription or a replay
    publisher needs to match the recorded publishers)."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    reliable = qos.reliability == QosReliability.RELIABLE
    latched = qos.durability == QosDurability.TRANSIENT_LOCAL
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=max(int(qos.depth), min_depth),
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
    )
