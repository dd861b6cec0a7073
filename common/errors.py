"""One exception root for duomq, with behaviour flags (aiokafka's KafkaError).

Expected outcomes of a send (``FLUSH_DISK_TIMEOUT`` and friends) are values,
not exceptions: see ``duomq.client.SendStatus``. Exceptions are for requests
that stored nothing. One table joins statuses and exceptions, both ways: a
broker's handler raises and the dispatcher answers ``answer_for(exc)``; a
client turns an answer back into the same class with ``for_status``.
"""

from __future__ import annotations

from duomq.format.record import RecordError, RecordTooLargeError
from duomq.proto import pb


class DuomqError(Exception):
    """Root of every duomq error.

    ``retriable``: the same request may succeed later or on another broker
    group (a timeout, a broker that is not master any more).
    ``invalid_metadata``: the client's view of routes is stale; refresh it.
    """

    retriable = False
    invalid_metadata = False
    status = pb.SYSTEM_ERROR


class ConfigError(DuomqError, ValueError):
    """A configuration that contradicts itself or the brokers it talks to."""


class InvalidNameError(DuomqError, ValueError):
    status = pb.INVALID_NAME


class BadRequestError(DuomqError):
    status = pb.BAD_REQUEST


class UnsupportedVersionError(DuomqError):
    status = pb.UNSUPPORTED_VERSION


class UnknownRequestTypeError(DuomqError):
    status = pb.UNKNOWN_REQUEST_TYPE


class MessageTooLargeError(DuomqError):
    status = pb.MESSAGE_TOO_LARGE


class TopicNotExistError(DuomqError):
    status = pb.TOPIC_NOT_EXIST
    invalid_metadata = True


class NotMasterError(DuomqError):
    status = pb.NOT_MASTER
    retriable = True
    invalid_metadata = True


class ServiceNotAvailableError(DuomqError):
    """The broker refused the request and stored nothing (a master whose
    lease lapsed or that is handing over, a full disk): the route may be
    stale, and the retry waits its turn (``client.backoff``)."""
    status = pb.SERVICE_NOT_AVAILABLE
    retriable = True
    invalid_metadata = True


class ZooKeeperUnavailableError(ServiceNotAvailableError):
    """ZooKeeper did not answer a client's read (a lost connection, an
    expired session, a timeout) while the call needed it: nothing was done
    by this call. Retriable: kazoo reconnects, and the call may be made
    again (a client's ZooKeeper errors never reach the caller as kazoo's)."""


class ZooKeeperRefusedError(DuomqError):
    """ZooKeeper refused a client's read or write (its ACL, a node it
    expected): nothing was done. Not retriable as it is."""


class StoreFullError(ServiceNotAvailableError, OSError):
    """The broker's disk has no room for the write (ENOSPC, EDQUOT): nothing
    was stored. RocketMQ answers a full disk the same way (the store is not
    writable); a producer retries on another group. Still an ``OSError``
    with the original ``errno``. ``str()`` is the answer's text."""

    def __init__(self, code: int, text: str):
        super().__init__(code, text)
        self.text = text

    def __str__(self) -> str:
        return self.text


class BrokerSystemError(DuomqError):
    status = pb.SYSTEM_ERROR
    retriable = True


class OffsetIllegalError(DuomqError):
    status = pb.OFFSET_ILLEGAL


class RequestTimeoutError(DuomqError, TimeoutError):
    """No answer from the broker within the request's timeout."""

    retriable = True
    status = pb.SERVICE_NOT_AVAILABLE


class BrokerUnreachableError(RequestTimeoutError):
    """No connection to the broker could be used (it is down or restarting),
    or the connection died while the request waited for its answer.
    ``sent``: False when the request never left this client (nothing can
    have been stored); True when its outcome is unknown."""

    invalid_metadata = True
    sent = True


class NotConnectedError(BrokerUnreachableError):
    """No connection to the broker took the request: it never left this
    client, so nothing was stored."""

    sent = False


class BrokerGoneError(BrokerUnreachableError):
    """The route says the broker no longer leads the group the request went
    to (its route vanished, or a new epoch names another master): the request
    failed at once instead of waiting for its timeout. Its outcome is unknown."""


class NoRouteError(DuomqError):
    """No broker group currently serves the topic (none alive, or none hosts it)."""

    retriable = True
    invalid_metadata = True
    status = pb.TOPIC_NOT_EXIST


class UnusableRouteError(NoRouteError):
    """The topic's only routes are nodes that cannot be read (damaged, or a
    queue count past the bound): retrying does not help until they are
    fixed, so a send fails at once."""

    retriable = False


class ReplicaLagError(DuomqError):
    """A slave is further behind its master than the reader's
    ``max_replica_lag_ms``: nothing was read. ``lag_ms`` says how far (-1:
    it has not caught up since it began following)."""

    status = pb.REPLICA_LAGGING
    retriable = True

    def __init__(self, text: str, lag_ms: int | None = None):
        super().__init__(text)
        self.lag_ms = lag_ms


class AuthenticationError(DuomqError):
    """A secured cluster (``auth = true``) did not accept this client's
    credentials: none were given, the key is no registered user's, or the
    user was removed or given a new key. ``at_handshake``: the broker's ZAP
    refused the key when connecting, which a starting broker that could not
    read its users from ZooKeeper in time also does, and one of an earlier
    release did while it started (unlike a request's AUTHENTICATION_FAILED,
    from a broker that knows its users)."""

    status = pb.AUTHENTICATION_FAILED

    def __init__(self, text: str = "", at_handshake: bool = False):
        super().__init__(text)
        self.at_handshake = at_handshake


class AuthorizationError(DuomqError):
    """The user's policy lacks a permission the request needs (named in the
    text): nothing was done. Not retriable."""

    status = pb.NOT_AUTHORIZED


class TransactionNotFoundError(DuomqError):
    """No transaction of that id on its broker group (a wrong id, or a
    broker group that lost it with an ASYNC master): nothing changed."""

    status = pb.TRANSACTION_NOT_FOUND


class TransactionEndedError(DuomqError):
    """The transaction had ended the other way (or so long ago that its end
    is no longer remembered): nothing changed. Not retriable."""

    status = pb.TRANSACTION_ENDED


class ReceiptExpiredError(DuomqError):
    """A share ack whose receipt no longer holds its message: its invisible
    time ended, or it was released or acked already. The message is not
    lost: it is (or was) delivered again. Not retriable."""

    status = pb.RECEIPT_EXPIRED


class QuotaExceededError(DuomqError):
    """The user's quota named in the text (its consumer groups, share
    groups, held pops) is used up on that broker: nothing was done. Not
    retriable as it is: the user stops using some, or an admin raises it
    (``duomq auth user update NAME --quota KIND=N``)."""

    status = pb.QUOTA_EXCEEDED


class MessageCutError(DuomqError):
    """A message id whose message is no longer stored: the master that
    acked it (under ASYNC replication, or a lagging promotion) was replaced
    by one that did not hold it, and the offset now holds a message that
    master stored. The text names both epochs. Not retriable."""

    status = pb.MESSAGE_CUT


class ClientClosedError(DuomqError):
    """The client was shut down while the request was pending."""


_BY_STATUS: dict[int, type[DuomqError]] = {cls.status: cls for cls in (
    InvalidNameError, BadRequestError, UnsupportedVersionError, UnknownRequestTypeError,
    MessageTooLargeError, TopicNotExistError, NotMasterError, ServiceNotAvailableError,
    BrokerSystemError, OffsetIllegalError, ReplicaLagError, AuthenticationError,
    AuthorizationError, TransactionNotFoundError, TransactionEndedError, ReceiptExpiredError,
    QuotaExceededError, MessageCutError,
)}


# what the request did wrong: counted in a broker's bad_requests
REJECTED = frozenset({pb.BAD_REQUEST, pb.INVALID_NAME, pb.MESSAGE_TOO_LARGE, pb.TOPIC_NOT_EXIST,
                      pb.UNSUPPORTED_VERSION, pb.UNKNOWN_REQUEST_TYPE})


def for_status(status: int, text: str) -> DuomqError:
    """The exception for a broker's error status (kazoo's code table)."""
    cls = _BY_STATUS.get(status, BrokerSystemError)
    return cls(f"{pb.Status.Name(status) if status in pb.Status.values() else status}: {text}")


def answer_for(exc: BaseException) -> tuple[int, str]:
    """(status, text) a broker answers for an exception its handler raised:
    the class's status (the table above, read the other way), a malformed
    record as BAD_REQUEST or MESSAGE_TOO_LARGE, anything else SYSTEM_ERROR."""
    if isinstance(exc, DuomqError):
        return exc.status, str(exc)
    if isinstance(exc, RecordTooLargeError):
        return pb.MESSAGE_TOO_LARGE, str(exc)
    if isinstance(exc, RecordError):
        return pb.BAD_REQUEST, f"malformed batch: {exc}"
    return pb.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"
