"""Subscription expressions: ``*`` (every message) or tags joined by ``||``
(``TagA || TagB``), as RocketMQ writes them. The broker filters a queue by
the tags' hash codes, which the consume queue holds, without reading the
commit log; the client checks the tag itself, since two tags can share a
code."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from duomq.common.errors import BadRequestError
from duomq.format.record import tag_hash

ALL = "*"
MAX_EXPRESSION = 4096


@dataclass(frozen=True)
class Subscription:
    expression: str
    tags: frozenset[str]          # empty: every message
    codes: frozenset[int]         # the consume queue's code of each tag

    @property
    def everything(self) -> bool:
        return not self.tags

    def matches(self, tags: str | None) -> bool:
        return not self.tags or (tags or "") in self.tags


@functools.lru_cache(maxsize=1024)
def parse(expression: str | None) -> Subscription:
    """``*``, empty or None: everything; else ``Tag || Tag ...``. Raises
    BadRequestError naming what is wrong."""
    text = (expression or "").strip()
    if text in ("", ALL):
        return Subscription(ALL, frozenset(), frozenset())
    if len(text) > MAX_EXPRESSION:
        raise BadRequestError(f"subscription expression is {len(text)} characters; at most "
                              f"{MAX_EXPRESSION}")
    tags = [t.strip() for t in text.split("||")]
    for t in tags:
        if not t:
            raise BadRequestError(f"subscription {text!r}: an empty tag (write `TagA || TagB`, "
                                  f"or `*` for every message)")
        if t == ALL or "|" in t:
            raise BadRequestError(f"subscription {text!r}: {t!r} is not a tag (`*` stands "
                                  f"alone; tags are joined by `||`)")
    tag_set = frozenset(tags)
    return Subscription(" || ".join(sorted(tag_set)), tag_set,
                        frozenset(tag_hash(t.encode()) for t in tag_set))
