"""Frame encoding shared by clients and brokers (pure: no sockets).

One ZeroMQ frame holds one serialized ``Frame``; its ``payload`` is the
serialized request or response message named by ``type``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from google.protobuf.message import DecodeError

from duomq.proto import PROTOCOL_VERSION, pb, wire
from duomq.proto.wire import PullAnswer, SendAnswer

if TYPE_CHECKING:
    from duomq.proto._wire import SendView

# Request type -> (request message class, response message class).
MESSAGES = {
    pb.SEND: (pb.SendRequest, pb.SendResponse),
    pb.PULL: (pb.PullRequest, pb.PullResponse),
    pb.PULL_MANY: (pb.PullManyRequest, pb.PullManyResponse),
    pb.QUERY_OFFSET: (pb.QueryOffsetRequest, pb.QueryOffsetResponse),
    pb.COMMIT_OFFSET: (pb.CommitOffsetRequest, pb.CommitOffsetResponse),
    pb.FETCH_OFFSET: (pb.FetchOffsetRequest, pb.FetchOffsetResponse),
    pb.HEARTBEAT: (pb.HeartbeatRequest, pb.HeartbeatResponse),
    pb.BROKER_STATUS: (pb.BrokerStatusRequest, pb.BrokerStatusResponse),
    pb.HA_REPORT: (pb.HaReport, pb.HaTransfer),
    pb.HA_TRANSFER: (pb.HaTransfer, pb.HaReport),
    pb.LOCK_QUEUES: (pb.LockQueuesRequest, pb.LockQueuesResponse),
    pb.UNLOCK_QUEUES: (pb.LockQueuesRequest, pb.LockQueuesResponse),
    pb.SEND_BACK: (pb.SendBackRequest, pb.SendBackResponse),
    pb.GET_MESSAGE: (pb.GetMessageRequest, pb.GetMessageResponse),
    pb.QUERY_BY_KEY: (pb.QueryByKeyRequest, pb.QueryByKeyResponse),
    pb.END_TRANSACTION: (pb.EndTransactionRequest, pb.EndTransactionResponse),
    # a push from the master, never answered as such
    pb.CHECK_TRANSACTION_STATE: (pb.CheckTransactionStateRequest,
                                 pb.CheckTransactionStateRequest),
    pb.LIST_TRANSACTIONS: (pb.ListTransactionsRequest, pb.ListTransactionsResponse),
    pb.DELETE_GROUP: (pb.DeleteGroupRequest, pb.DeleteGroupResponse),
    pb.BROKER_CONFIG: (pb.BrokerConfigRequest, pb.BrokerConfigResponse),
    pb.POP: (pb.PopRequest, pb.PopResponse),
    pb.SHARE_ACK: (pb.ShareAckRequest, pb.ShareAckResponse),
    pb.RECALL: (pb.RecallRequest, pb.RecallResponse),
}


class FrameError(ValueError):
    """A frame that cannot be decoded; carries the status to answer with."""

    def __init__(self, status: int, text: str, request_id: int = 0, type_: int = 0):
        super().__init__(text)
        self.status = status
        self.request_id = request_id
        self.type = type_


# protobuf takes a plain int for an enum field; protoc's stubs only name the enum
def _type(type_: int) -> pb.RequestType:
    return cast(pb.RequestType, type_)


def _status(status: int) -> pb.Status:
    return cast(pb.Status, status)


def encode_request(request_id: int, type_: int, message) -> bytes:
    c = wire.WIRE
    if c is not None:      # the same bytes, without building a Frame (proto/_wire.c)
        return c.frame(PROTOCOL_VERSION, request_id, type_, 0, None, message.SerializeToString())
    return pb.Frame(
        version=PROTOCOL_VERSION, request_id=request_id, type=_type(type_),
        payload=message.SerializeToString(),
    ).SerializeToString()


def encode_response(request_id: int, type_: int, status: int = pb.OK,
                    error: str = "", message=None) -> bytes:
    c = wire.WIRE
    if c is not None:      # the same bytes, without building a Frame (proto/_wire.c)
        return c.frame(PROTOCOL_VERSION, request_id, type_, status, error,
                       None if message is None else message.SerializeToString())
    frame = pb.Frame(version=PROTOCOL_VERSION, request_id=request_id, type=_type(type_),
                     status=_status(status), error=error)
    if message is not None:
        frame.payload = message.SerializeToString()
    return frame.SerializeToString()


def parse_send(data: bytes) -> tuple[int, SendView] | None:
    """``(request_id, SendRequest's fields)`` of a SEND request of this
    protocol version in the common case, read in C (``proto/_wire.c``);
    None for anything else, or without the C codec: ``decode_frame`` and
    ``decode_request`` then read it, or say what is wrong with it."""
    c = wire.WIRE
    return None if c is None else c.parse_send(data, PROTOCOL_VERSION, pb.SEND)


def read_send_answer(data: bytes, request_id: int) -> tuple[int, str, SendAnswer] | None:
    """``(status, error, SendResponse's fields)`` of the answer to SEND
    ``request_id`` in the common case, read in C (``proto/_wire.c``); None
    for anything else, or without the C codec: ``decode_frame`` and
    ``decode_response`` then read it."""
    c = wire.WIRE
    if c is None:
        return None
    got = c.read_send_answer(data, PROTOCOL_VERSION, request_id, pb.SEND)
    return None if got is None else (got[0], got[1], SendAnswer.of(got[2]))


def read_pull_answer(data: bytes) -> tuple[int, int, str, PullAnswer] | None:
    """``(request_id, status, error, PullResponse's fields)`` of an answer to
    a PULL in the common case, read in C (``proto/_wire.c``); None for
    anything else, or without the C codec: ``decode_frame`` and
    ``decode_response`` then read it."""
    c = wire.WIRE
    if c is None:
        return None
    got = c.read_pull_answer(data, PROTOCOL_VERSION, pb.PULL)
    return None if got is None else (got[0], got[1], got[2], PullAnswer.of(got[3]))


def matched(data: bytes, request_id: int, type_: int) -> tuple[int, str, object] | None:
    """``(status, error, message)`` if ``data`` answers request
    ``request_id`` (of ``type_``), else None. A SEND's answer is read in C
    in the common case (``read_send_answer``: its message a ``SendAnswer``)."""
    if type_ == pb.SEND and (got := read_send_answer(data, request_id)) is not None:
        return got
    if type_ == pb.PULL and (pulled := read_pull_answer(data)) is not None:
        return pulled[1:] if pulled[0] == request_id else None
    try:
        frame = decode_frame(data)
    except FrameError:
        return None
    if frame.request_id != request_id:
        return None
    message = decode_response(frame) if frame.type in MESSAGES else None
    return frame.status, frame.error, message


def decode_frame(data: bytes) -> pb.Frame:
    """Parse a Frame; raise FrameError(BAD_REQUEST / UNSUPPORTED_VERSION)."""
    frame = pb.Frame()
    try:
        frame.ParseFromString(data)
    except DecodeError as exc:
        raise FrameError(pb.BAD_REQUEST, f"malformed frame: {exc}") from None
    if frame.version != PROTOCOL_VERSION:
        raise FrameError(pb.UNSUPPORTED_VERSION,
                         f"protocol version {frame.version} is not supported "
                         f"(this side speaks {PROTOCOL_VERSION})",
                         frame.request_id, frame.type)
    return frame


def decode_request(frame: pb.Frame):
    """The request message inside a decoded frame; raise FrameError."""
    classes = MESSAGES.get(frame.type)
    if classes is None:
        raise FrameError(pb.UNKNOWN_REQUEST_TYPE, f"unknown request type {frame.type}",
                         frame.request_id, frame.type)
    message = classes[0]()
    try:
        message.ParseFromString(frame.payload)
    except DecodeError as exc:
        raise FrameError(pb.BAD_REQUEST, f"malformed {classes[0].__name__}: {exc}",
                         frame.request_id, frame.type) from None
    return message


def decode_response(frame: pb.Frame):
    """The response message inside a decoded response frame."""
    message = MESSAGES[frame.type][1]()
    message.ParseFromString(frame.payload)
    return message
