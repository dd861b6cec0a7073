"""The broker's offsets and counters: one object, written only by the
serving thread (other threads read single fields, which Python reads
whole). The role and its term's state are the parts' (``core.parts``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BrokerState:
    epoch: int = 0                 # the epoch led (master) or followed (slave)
    stepping_down: bool = False    # handed over: not a candidate until it follows someone
    flushed_offset: int = 0        # the commit log is fsynced up to here
    visible_offset: int = 0        # consumers read up to here
    appended: bool = False         # a write since the flush service was last woken
    bad_requests: int = 0
    redirects: int = 0             # pulls answered with advice to read elsewhere
