"""Long polling of share groups (RocketMQ 5's POP long polling), beside
the pull's (``pull_hold``): a POP that finds nothing is held until a queue
of its topic is written to, messages of its group come due again, or its
deadline passes (``share.handlers.serve_held`` looks). Pure bookkeeping; the
serving thread owns it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from duomq.proto import pb


@dataclass
class HeldPop:
    identity: bytes
    request_id: int
    request: pb.PopRequest
    deadline: float                 # monotonic s: answered empty then
    owner: str = ""                 # who asked (``requests.client_key``)


class PopHoldService:
    def __init__(self) -> None:
        # the POPs held, in order (read only; the serving turn asks whether
        # any is held on every send, without a Python call: ``if hold.held``)
        self.held: list[HeldPop] = []

    def __len__(self) -> int:
        return len(self.held)

    def __iter__(self) -> Iterator[HeldPop]:
        return iter(self.held)

    def hold(self, pop: HeldPop) -> None:
        self.held.append(pop)

    def keep_only(self, pops: list[HeldPop]) -> None:
        """Hold ``pops`` alone from now on (a look answered the others)."""
        self.held = pops

    def held_by(self, prefix: str) -> int:
        """POPs held for owners whose key starts with ``prefix`` (a user's: its quota)."""
        return sum(1 for h in self.held if h.owner.startswith(prefix))

    def forget(self, identity: bytes) -> int:
        """Drop the POPs a connection holds (a muted client); how many."""
        n = len(self.held)
        self.held = [h for h in self.held if h.identity != identity]
        return n - len(self.held)
