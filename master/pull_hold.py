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


class PullRequestHoldService:
    def __init__(self):
        self.held: dict[tuple[str, int], list[HeldPull]] = {}

    def __len__(self):
        return sum(len(v) for v in self.held.values())

    def hold(self, topic: str, queue_id: int, pull: HeldPull) -> None:
        self.held.setdefault((topic, queue_id), []).append(pull)

    def take_ready(self, visible_max) -> list[HeldPull]:
        """Remove and return pulls whose queue now has a message at or past
        their offset. ``visible_max(topic, queue_id)`` -> one past the newest
        visible entry."""
        ready: list[HeldPull] = []
        for key in list(self.held):
            pulls = self.held[key]
            top = visible_max(*key)
            keep: list[HeldPull] = []
            for p in pulls:
                (ready if top > p.request.queue_offset else keep).append(p)
            if keep:
                self.held[key] = keep
            else:
                del self.held[key]
        return ready

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
        return expired

