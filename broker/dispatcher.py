"""The one seam every client request passes: decoded, handled, timed and
answered here (Kafka's ``KafkaApis``), so a concern that applies to every
request (metrics, authorization) is added in one place and the handlers stay
unaware of it. A request that cannot be decoded, or whose handler raises,
is answered with the status its error carries (``errors.answer_for``); the
broker goes on serving. Answers leave through the dispatcher's answer book
(``answers``), which the code that answers held requests uses too."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from duomq.auth.guard import Guard, user_name
from duomq.broker.core import BrokerCore
from duomq.broker.metrics import STORED
from duomq.broker.outbox import Outbox
from duomq.broker.requests import Answer, Handler, Request
from duomq.common.errors import REJECTED, DuomqError, QuotaExceededError, answer_for
from duomq.format.record import RecordError
from duomq.proto import codec, pb

log = logging.getLogger(__name__)


class Dispatcher:
    def __init__(self, core: BrokerCore, outbox: Outbox, handlers: dict[int, Handler],
                 before_answer: Callable[[Request, Answer], bool] | None = None,
                 guard: Guard | None = None):
        self.core = core
        self.outbox = outbox
        self.answers = core.answers
        self.handlers = handlers
        # the loop's hook, run before a handler's answer leaves; True: the
        # answer leaves at the end of the loop's turn instead
        self.before_answer = before_answer
        self.guard = guard                   # auth = true: who may make which request

    def dispatch(self, parts: list[bytes], who: str | None = None) -> None:
        """Serve one ROUTER message (``who``: its connection's User-Id, when
        the broker is secured)."""
        identity = parts[0]
        answers = self.answers
        answers.serving()                       # what the requests before it left, first
        if not self.outbox.accepts(identity):   # muted: it does not read its answers
            return None
        if len(parts) != 2:
            self.core.state.bad_requests += 1
            answers.reply(identity, 0, 0, pb.BAD_REQUEST,
                          f"expected one frame per request, got {len(parts) - 1}", None)
            return None
        send = codec.parse_send(parts[1])      # the common case, read in C
        if send is not None:
            request = Request(identity, send[0], pb.SEND, send[1],
                              None if who is None else user_name(who))
        else:
            try:
                request = self.decode(identity, parts[1], who)
            except codec.FrameError as exc:
                self.core.state.bad_requests += 1
                answers.reply(identity, exc.request_id, exc.type, exc.status, str(exc), None)
                return None
        guard = self.guard
        if guard is not None:
            # the connection counted first: a refused request is served too
            refused = self._admit(request) or guard.check(who, request)
            if refused is not None:
                answers.reply(identity, request.request_id, request.type, *refused, None)
                return None
        answer = handle(self.core, self.handlers[request.type], request)
        if answer is not None:
            if answer[0] in REJECTED:
                self.core.state.bad_requests += 1
                answers.answer(request, answer)
            elif self.before_answer is not None and self.before_answer(request, answer):
                answers.at_turn_end(request, answer)
            else:
                answers.answer(request, answer)
        if request.type == pb.SEND and (answer is None or answer[0] in STORED):
            self.core.metrics.stored(request.message)   # acked now or when durable; counted
        return None                                     # once the answer is on its way

    def _admit(self, request: Request) -> tuple[int, str] | None:
        """The user's connection counted (``auth.quotas``: connections), or
        the refusal when its quota of them is used up."""
        try:
            self.core.admit(request.user, "connections", request.identity.hex())
        except QuotaExceededError as exc:
            return answer_for(exc)
        return None

    def decode(self, identity: bytes, data: bytes, who: str | None) -> Request:
        """A request read with protobuf; raises FrameError."""
        frame = codec.decode_frame(data)
        if frame.type not in self.handlers:
            raise codec.FrameError(pb.UNKNOWN_REQUEST_TYPE,
                                   f"request type {frame.type} is not served on this socket",
                                   frame.request_id, frame.type)
        return Request(identity, frame.request_id, frame.type, codec.decode_request(frame),
                       user_name(who))


def handle(core: BrokerCore, handler: Handler, request: Request) -> Answer | None:
    """A handler's answer, or the status of what it raised (a request, or a
    held one answered now)."""
    t0 = time.perf_counter()
    try:
        return handler(core, request)
    except (DuomqError, RecordError) as exc:
        return (*answer_for(exc), None)
    except Exception as exc:  # a bug must not take the broker down
        log.exception("request %d (type %d) failed", request.request_id, request.type)
        return (*answer_for(exc), None)
    finally:
        # requests handled and time spent, by type: the metrics' histogram
        core.metrics.requests[request.type].observe(time.perf_counter() - t0)
