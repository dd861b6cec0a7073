"""Retention: which commit-log segments may be deleted (pure).

A segment goes when it is not the active one, its file is older than
``file_reserved_hours`` and, with ``wait_for_consumers``, every consumer group
has consumed past its end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar


class _Span(Protocol):
    @property
    def end(self) -> int: ...


S = TypeVar("S", bound=_Span)


def deletable_prefix(segments: Sequence[S], now_s: float, reserved_s: float,
                     min_consumed_phys: int | None, mtime: Callable[[S], float]) -> int:
    """How many leading segments may be deleted. ``segments`` have ``base`` and
    ``end``; ``mtime(seg)`` gives the file's modification time (s);
    ``min_consumed_phys`` is the lowest commit-log offset some consumer group
    still needs (None: no constraint)."""
    count = 0
    for seg in segments[:-1]:  # never the active segment
        if now_s - mtime(seg) < reserved_s:
            break
        if min_consumed_phys is not None and seg.end > min_consumed_phys:
            break
        count += 1
    return count
