"""Long polling (RocketMQ's ``PullRequestHoldService``): a pull that finds
nothing new is held until a message becomes visible in its queue or its
deadline passes. Pure bookkeeping; the serving thread owns it."""

from __future__ import annotations

from dataclasses import dataclass

from duomq.proto import pb


@dataclass(slots=True)
class HeldPull:
    identity: bytes
    request_id: int
    request: pb.PullRequest
    deadline: float          # monotonic seconds
    since: float = 0.0       # monotonic seconds it was held at (the hold histogram)


MAX_HELD_PER_CLIENT = 10_000   # a client holding more is answered at once (no new message)


class PullRequestHoldService:
    def __init__(self):
        self.held: dict[tuple[str, int], list[HeldPull]] = {}
        self.per_client: dict[bytes, int] = {}     # identity -> pulls held for it

    def __len__(self):
        return sum(len(v) for v in self.held.values())

    def hold(self, topic: str, queue_id: int, pull: HeldPull) -> bool:
        """Hold ``pull``; False (not held) when its client holds too many."""
        n = self.per_client.get(pull.identity, 0)
        if n >= MAX_HELD_PER_CLIENT:
            return False
        self.per_client[pull.identity] = n + 1
        self.held.setdefault((topic, queue_id), []).append(pull)
        return True

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
            pulls = held[key]
            top = visible_max(*key)
            keep: list[HeldPull] = []
            for p in pulls:
                (ready if top > p.request.queue_offset else keep).append(p)
            if keep:
                self.held[key] = keep
            else:
                del self.held[key]
        self._released(ready)
        return ready

    def forget(self, identity: bytes) -> int:
        """Drop every pull held for ``identity`` (a client that went or was
        muted); returns how many."""
        dropped = 0
        for key in list(self.held):
            pulls = self.held[key]
            keep = [p for p in pulls if p.identity != identity]
            dropped += len(pulls) - len(keep)
            if keep:
                self.held[key] = keep
            else:
                del self.held[key]
        self.per_client.pop(identity, None)
        return dropped

    def take_expired(self, now: float) -> list[HeldPull]:
        expired: list[HeldPull] = []
        for key in list(self.held):
            pulls = self.held[key]
            keep = [p for p in pulls if p.deadline > now]
            if len(keep) != len(pulls):
                expired.extend(p for p in pulls if p.deadline <= now)
                if keep:
                    self.held[key] = keep
                else:
                    del self.held[key]
        self._released(expired)
        return expired

