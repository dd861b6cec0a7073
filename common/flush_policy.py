"""When a periodic flush syncs (pure): the ASYNC_FLUSH commit log and the
consume queues at a checkpoint follow the same rule as RocketMQ's flush
services: only with ``least_pages`` of unflushed data, and everything every
``thorough_interval_ms`` however little."""

from __future__ import annotations

PAGE = 4096


def thorough_due(now_ms: float, last_thorough_ms: float, thorough_interval_ms: int) -> bool:
    return now_ms - last_thorough_ms >= thorough_interval_ms


def worth_flushing(dirty_bytes: int, least_pages: int, thorough: bool) -> bool:
    return dirty_bytes > 0 and (thorough or dirty_bytes >= least_pages * PAGE)


def should_flush(dirty_bytes: int, least_pages: int, now_ms: float, last_thorough_ms: float,
                 thorough_interval_ms: int) -> tuple[bool, bool]:
    """(flush now, thorough): the ASYNC_FLUSH decision."""
    thorough = thorough_due(now_ms, last_thorough_ms, thorough_interval_ms)
    return worth_flushing(dirty_bytes, least_pages, thorough), thorough
