"""Long polling of share groups (RocketMQ 5's POP long polling), beside
the pull's (``pull_hold``): a POP that finds nothing is held until a queue
of its topic is written to, messages of its group come due again, or its
deadline passes (``broker.share.serve_held`` looks). Pure bookkeeping; the
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
        self._held: list[HeldPop] = []

    def __bool__(self) -> bool:
        return bool(self._held)

    def __len__(self) -> int:
        return len(self._held)

    def __iter__(self) -> Iterator[HeldPop]:
        return iter(self._held)

    def hold(self, pop: HeldPop) -> None:
        self._held.append(pop)

    def keep_only(self, pops: list[HeldPop]) -> None:
        """Hold ``pops`` alone from now on (a look answered the others)."""
        self._held = pops

    def held_by(self, prefix: str) -> int:
        """POPs held for owners whose key starts with ``prefix`` (a user's: its quota)."""
        return sum(1 for h in self._held if h.owner.startswith(prefix))

    def forget(self, identity: bytes) -> int:
        """Drop the POPs a connection holds (a muted client); how many."""
        n = len(self._held)
        self._held = [h for h in self._held if h.identity != identity]
        return n - len(self._held)
