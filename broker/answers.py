"""When each answer leaves, in one place (the serving thread): the
dispatcher's answer book. Handlers return their answers to the dispatcher;
everything else that answers (held pulls and pops woken, sends acked once
durable or refused at a deadline, what a demoted master owed) answers
through this book, and so does the dispatcher.

An answer leaves now (``answer``, ``reply``; ``answer_held``/``reply_held``
for a held request, which the book counts: ``woken``), or at the end of the
loop's turn (``at_turn_end``: a send whose ack woke a consumer, see
``visibility``). What a send left for after its ack is owed here:
its second half (``owe``: the store's ``SecondHalf``, and what reads it:
``owe_call``) and, for an ASYNC send, the visible offsets it moved
(``owe_offsets``). Both are paid before
the next request is served (``serving``) and before the turn goes on
(``settle``), so a pull or a retry sent after the ack finds the message.
``end_turn`` sends what waited for the turn's end."""

from __future__ import annotations

import time
from collections.abc import Callable

from duomq.broker.metrics import BrokerMetrics
from duomq.broker.outbox import Outbox
from duomq.broker.request import Answer, Request
from duomq.proto import codec, pb
from duomq.store.reads import Fresh
from duomq.store.writes import SecondHalf


def _unbound() -> bool:
    raise RuntimeError("the answer book's offsets are not bound (AnswerBook.bind)")


class AnswerBook:
    def __init__(self, metrics: BrokerMetrics):
        self.metrics = metrics
        self.outbox: Outbox | None = None        # the client port's (``bind``)
        # recompute the visible offsets, answering what they release; True
        # when the result stays current until something is written
        # (``visibility.update_visible``; a slave's move on another thread)
        self._recompute: Callable[[], bool] = _unbound
        self.woken = 0                # held requests answered so far (a counter)
        self._late: list[tuple[Request, Answer]] = []    # to leave at the turn's end
        self._rest: SecondHalf | None = None     # a send's second half, owed
        self._offsets_owed = False    # an ASYNC send was acked before its offsets moved
        self._calls: list[Callable[[], object]] = []   # owed after the second half
        # the visible offsets were computed after the last request served (an
        # ASYNC send's, paid) and stay so until something is written or the
        # turn ends (``visibility.update_unless_current``)
        self.current = False

    def bind(self, outbox: Outbox, recompute: Callable[[], bool]) -> None:
        self.outbox, self._recompute = outbox, recompute

    # ------------------------------------------------------------ answers
    def answer(self, request: Request, answer: Answer) -> None:
        """A handler's answer, now."""
        if request.type == pb.PULL:
            self.metrics.pulled(request.message, answer[0], answer[2])
        elif request.type == pb.PULL_MANY and answer[2] is not None:
            for pull, entry in zip(request.message.pulls, answer[2].entries, strict=True):
                self.metrics.pulled(pull, entry.status, entry.response)
        self.reply(request.identity, request.request_id, request.type, *answer)

    def answer_held(self, request: Request, answer: Answer) -> None:
        """A held request's answer, now (it wakes a consumer)."""
        self.woken += 1
        self.answer(request, answer)

    def reply_held(self, identity: bytes, request_id: int, type_: int, status: int,
                   error: str, message) -> None:
        self.woken += 1
        self.reply(identity, request_id, type_, status, error, message)

    def reply(self, identity: bytes, request_id: int, type_: int, status: int, error: str,
              message) -> None:
        """An answer, now."""
        if type_ == pb.SEND:
            self.metrics.send_answered(status)
        assert self.outbox is not None, "the answer book has no outbox (AnswerBook.bind)"
        self.outbox.send(identity, codec.encode_response(request_id, type_, status, error, message),
                         time.monotonic())

    def at_turn_end(self, request: Request, answer: Answer) -> None:
        """An answer that leaves at the end of the loop's turn, after the
        turn's other work, in the order given (``visibility``: an ack that
        woke a consumer)."""
        self._late.append((request, answer))

    def end_turn(self) -> None:
        """Send what waited for the turn's end (the loop, last in a turn); the
        next turn's news may move what the offsets read (``current``)."""
        self.current = False
        if self._late:
            late, self._late = self._late, []
            for request, answer in late:
                self.answer(request, answer)

    # ------------------------------------------------------------ debts
    def owe(self, rest: SecondHalf | None) -> None:
        """A send's second half, written after its ack (``put_batch(later=True)``)."""
        if rest is not None:
            self._rest = rest

    def owe_call(self, fn: Callable[[], object]) -> None:
        """Work a send left for after its ack that reads what its second
        half writes (the timer index of a batch of timers): run with it."""
        self._calls.append(fn)

    def owe_offsets(self) -> None:
        """An ASYNC send's visible offsets, computed after its ack."""
        self._offsets_owed = True

    def staged(self) -> tuple[Fresh, int] | None:
        """The batch whose second half is owed, as ``Fresh`` will describe it,
        and its first record's commit-log offset (None: nothing is owed)."""
        rest = self._rest
        return None if rest is None or rest.done else (rest.fresh, rest.first_offset)

    def serving(self) -> None:
        """A request is about to be served: what the ones before it left, paid."""
        self.settle()
        self.current = False

    def settle(self) -> None:
        """Pay what the sends answered so far left for after their acks."""
        rest = self._rest
        if rest is not None:
            self._rest = None
            rest.finish()
        if self._calls:
            self._run_calls()
        if self._offsets_owed:
            self.pay()

    def _run_calls(self) -> None:
        calls, self._calls = self._calls, []
        for fn in calls:
            fn()

    def pay(self) -> None:
        """The second half written and the visible offsets an ASYNC send moved
        computed now (answering the pulls they release)."""
        self._offsets_owed = False
        rest = self._rest
        if rest is not None:
            self._rest = None
            rest.finish()
        if self._calls:
            self._run_calls()
        self.current = self._recompute()

    @property
    def offsets_owed(self) -> bool:
        return self._offsets_owed
