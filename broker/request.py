"""A request as the dispatcher decoded it, and the answer to it: values
that the handlers (``requests``), the dispatcher and its answer book
(``answers``) share."""

from __future__ import annotations

from typing import Any, NamedTuple


class Request(NamedTuple):
    identity: bytes           # the client's ROUTER identity
    request_id: int
    type: int
    message: Any              # the decoded protobuf request
    user: str | None = None   # the authenticated user (None: no auth, or the broker key)


Answer = tuple[int, str, Any]      # (status, error, the response message)
