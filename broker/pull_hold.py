"""Long polling (RocketMQ's ``PullRequestHoldService``): a pull that finds
nothing new is held until a message becomes visible in its queue or its
deadline passes. A PULL_MANY that finds nothing in any of its queues is held
under each of them, and taken out of all of them at once when one is ready
(or its deadline passes). Pure bookkeeping; the serving thread owns it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from duomq.proto import pb


@dataclass(slots=True)
class HeldPull:
    identity: bytes
    request_id: int
    request: pb.PullRequest | pb.PullManyRequest
    deadline: float          # monotonic seconds
    since: float = 0.0       # monotonic seconds it was held at (the hold histogram)
    # PULL_MANY: (topic, queue id) -> the offset its pull of that queue asks for
    offsets: dict[tuple[str, int], int] | None = None
    # PULL: (offset, most messages, most bytes, unfiltered), as the handler read
    # them (``processors.staged_fits``)
    fit: tuple[int, int, int, bool] | None = None

    @property
    def type(self) -> int:
        return pb.PULL if self.offsets is None else pb.PULL_MANY

    def offset(self, key: tuple[str, int]) -> int:
        if self.offsets is not None:
            return self.offsets[key]
        assert isinstance(self.request, pb.PullRequest)
        return self.request.queue_offset


MAX_HELD_PER_CLIENT = 10_000   # a client holding more is answered at once (no new message)


class PullRequestHoldService:
    def __init__(self):
        self.held: dict[tuple[str, int], list[HeldPull]] = {}
        self.per_client: dict[bytes, int] = {}     # identity -> pulls held for it

    def __len__(self):
        """Requests held (a PULL_MANY once)."""
        return len({id(p) for v in self.held.values() for p in v})

    def hold(self, topic: str, queue_id: int, pull: HeldPull) -> bool:
        """Hold ``pull``; False (not held) when its client holds too many."""
        if not self._count(pull):
            return False
        self.held.setdefault((topic, queue_id), []).append(pull)
        return True

    def hold_many(self, pull: HeldPull) -> bool:
        """Hold a PULL_MANY under each of its queues (``pull.offsets``); False
        (not held) when its client holds too many."""
        if not self._count(pull):
            return False
        held = self.held
        for key in pull.offsets or ():
            held.setdefault(key, []).append(pull)
        return True

    def _count(self, pull: HeldPull) -> bool:
        n = self.per_client.get(pull.identity, 0)
        if n >= MAX_HELD_PER_CLIENT:
            return False
        self.per_client[pull.identity] = n + 1
        return True

    def _unhold_many(self, pulls: list[HeldPull], but: tuple[str, int] | None) -> list[HeldPull]:
        """Take the PULL_MANYs among ``pulls`` (taken out from under key
        ``but``) out from under their other queues; ``pulls`` without
        repeats."""
        out: list[HeldPull] = []
        seen: set[int] = set()
        held = self.held
        for p in pulls:
            if id(p) in seen:
                continue
            seen.add(id(p))
            out.append(p)
            for key in p.offsets or ():
                if key == but:
                    continue
                rest = held.get(key)
                if rest is None:
                    continue
                rest = [q for q in rest if q is not p]
                if rest:
                    held[key] = rest
                else:
                    del held[key]
        return out

    def _released(self, pulls: list[HeldPull]) -> None:
        counts = self.per_client
        for p in pulls:
            n = counts[p.identity] - 1
            if n:
                counts[p.identity] = n
            else:
                del counts[p.identity]

    def take_ready(self, visible_max, keys=None) -> list[HeldPull]:
        """Remove and return pulls whose queue now has a message at or past
        their offset. ``visible_max(topic, queue_id)`` -> one past the newest
        visible entry. ``keys``: only the pulls held on these ``(topic,
        queue)`` (the queues written to; None: every held pull)."""
        ready: list[HeldPull] = []
        held = self.held
        for key in list(held) if keys is None else [k for k in keys if k in held]:
            pulls = held.get(key)
            if pulls is None:            # a PULL_MANY ready under an earlier key held it alone
                continue
            top = visible_max(*key)
            keep: list[HeldPull] = []
            now: list[HeldPull] = []
            for p in pulls:
                (now if top > p.offset(key) else keep).append(p)
            if keep:
                held[key] = keep
            else:
                del held[key]
            if now:
                ready.extend(self._unhold_many(now, key) if any(p.offsets for p in now)
                             else now)
        self._released(ready)
        return ready

    def take_where(self, key: tuple[str, int],
                   wanted: Callable[[tuple[int, int, int, bool]], bool]) -> list[HeldPull]:
        """Remove and return the PULLs (not PULL_MANYs) held on ``key`` for
        which ``wanted(pull.fit)`` is true, in the order they were held."""
        pulls = self.held.get(key)
        if not pulls:
            return []
        taken: list[HeldPull] = []
        keep: list[HeldPull] = []
        for p in pulls:
            (taken if p.fit is not None and wanted(p.fit) else keep).append(p)
        if keep:
            self.held[key] = keep
        else:
            del self.held[key]
        self._released(taken)
        return taken

    def forget(self, identity: bytes) -> int:
        """Drop every pull held for ``identity`` (a client that went or was
        muted); returns how many."""
        dropped: set[int] = set()          # a PULL_MANY is held under several queues
        for key in list(self.held):
            pulls = self.held[key]
            keep = [p for p in pulls if p.identity != identity]
            dropped.update(id(p) for p in pulls if p.identity == identity)
            if keep:
                self.held[key] = keep
            else:
                del self.held[key]
        self.per_client.pop(identity, None)
        return len(dropped)

    def take_expired(self, now: float) -> list[HeldPull]:
        expired: list[HeldPull] = []
        for key in list(self.held):
            pulls = self.held.get(key)
            if pulls is None:            # a PULL_MANY's last queue, taken out above
                continue
            keep = [p for p in pulls if p.deadline > now]
            if len(keep) != len(pulls):
                gone = [p for p in pulls if p.deadline <= now]
                if keep:
                    self.held[key] = keep
                else:
                    del self.held[key]
                expired.extend(self._unhold_many(gone, key) if any(p.offsets for p in gone)
                               else gone)
        self._released(expired)
        return expired

