from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RequestType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REQUEST_TYPE_UNSPECIFIED: _ClassVar[RequestType]
    SEND: _ClassVar[RequestType]
    PULL: _ClassVar[RequestType]
    QUERY_OFFSET: _ClassVar[RequestType]
    COMMIT_OFFSET: _ClassVar[RequestType]
    FETCH_OFFSET: _ClassVar[RequestType]
    HEARTBEAT: _ClassVar[RequestType]
    BROKER_STATUS: _ClassVar[RequestType]
    HA_REPORT: _ClassVar[RequestType]
    HA_TRANSFER: _ClassVar[RequestType]
    LOCK_QUEUES: _ClassVar[RequestType]
    UNLOCK_QUEUES: _ClassVar[RequestType]
    SEND_BACK: _ClassVar[RequestType]
    GET_MESSAGE: _ClassVar[RequestType]
    QUERY_BY_KEY: _ClassVar[RequestType]
    END_TRANSACTION: _ClassVar[RequestType]
    CHECK_TRANSACTION_STATE: _ClassVar[RequestType]
    LIST_TRANSACTIONS: _ClassVar[RequestType]
    PULL_MANY: _ClassVar[RequestType]
    DELETE_GROUP: _ClassVar[RequestType]
    BROKER_CONFIG: _ClassVar[RequestType]
    POP: _ClassVar[RequestType]
    SHARE_ACK: _ClassVar[RequestType]
    RECALL: _ClassVar[RequestType]

class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OK: _ClassVar[Status]
    FLUSH_DISK_TIMEOUT: _ClassVar[Status]
    FLUSH_SLAVE_TIMEOUT: _ClassVar[Status]
    SLAVE_NOT_AVAILABLE: _ClassVar[Status]
    NO_NEW_MESSAGE: _ClassVar[Status]
    OFFSET_ILLEGAL: _ClassVar[Status]
    NO_MATCHED_MESSAGE: _ClassVar[Status]
    BAD_REQUEST: _ClassVar[Status]
    UNSUPPORTED_VERSION: _ClassVar[Status]
    UNKNOWN_REQUEST_TYPE: _ClassVar[Status]
    MESSAGE_TOO_LARGE: _ClassVar[Status]
    TOPIC_NOT_EXIST: _ClassVar[Status]
    INVALID_NAME: _ClassVar[Status]
    NOT_MASTER: _ClassVar[Status]
    SERVICE_NOT_AVAILABLE: _ClassVar[Status]
    SYSTEM_ERROR: _ClassVar[Status]
    REPLICA_LAGGING: _ClassVar[Status]
    AUTHENTICATION_FAILED: _ClassVar[Status]
    NOT_AUTHORIZED: _ClassVar[Status]
    TRANSACTION_NOT_FOUND: _ClassVar[Status]
    TRANSACTION_ENDED: _ClassVar[Status]
    RECEIPT_EXPIRED: _ClassVar[Status]
    QUOTA_EXCEEDED: _ClassVar[Status]
    MESSAGE_CUT: _ClassVar[Status]

class OffsetQuery(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OFFSET_QUERY_UNSPECIFIED: _ClassVar[OffsetQuery]
    MIN_OFFSET: _ClassVar[OffsetQuery]
    MAX_OFFSET: _ClassVar[OffsetQuery]
    BY_TIME: _ClassVar[OffsetQuery]

class TransactionAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRANSACTION_ACTION_UNSPECIFIED: _ClassVar[TransactionAction]
    COMMIT: _ClassVar[TransactionAction]
    ROLLBACK: _ClassVar[TransactionAction]

class ShareAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SHARE_ACTION_UNSPECIFIED: _ClassVar[ShareAction]
    ACCEPT: _ClassVar[ShareAction]
    RELEASE: _ClassVar[ShareAction]
    RENEW: _ClassVar[ShareAction]
REQUEST_TYPE_UNSPECIFIED: RequestType
SEND: RequestType
PULL: RequestType
QUERY_OFFSET: RequestType
COMMIT_OFFSET: RequestType
FETCH_OFFSET: RequestType
HEARTBEAT: RequestType
BROKER_STATUS: RequestType
HA_REPORT: RequestType
HA_TRANSFER: RequestType
LOCK_QUEUES: RequestType
UNLOCK_QUEUES: RequestType
SEND_BACK: RequestType
GET_MESSAGE: RequestType
QUERY_BY_KEY: RequestType
END_TRANSACTION: RequestType
CHECK_TRANSACTION_STATE: RequestType
LIST_TRANSACTIONS: RequestType
PULL_MANY: RequestType
DELETE_GROUP: RequestType
BROKER_CONFIG: RequestType
POP: RequestType
SHARE_ACK: RequestType
RECALL: RequestType
OK: Status
FLUSH_DISK_TIMEOUT: Status
FLUSH_SLAVE_TIMEOUT: Status
SLAVE_NOT_AVAILABLE: Status
NO_NEW_MESSAGE: Status
OFFSET_ILLEGAL: Status
NO_MATCHED_MESSAGE: Status
BAD_REQUEST: Status
UNSUPPORTED_VERSION: Status
UNKNOWN_REQUEST_TYPE: Status
MESSAGE_TOO_LARGE: Status
TOPIC_NOT_EXIST: Status
INVALID_NAME: Status
NOT_MASTER: Status
SERVICE_NOT_AVAILABLE: Status
SYSTEM_ERROR: Status
REPLICA_LAGGING: Status
AUTHENTICATION_FAILED: Status
NOT_AUTHORIZED: Status
TRANSACTION_NOT_FOUND: Status
TRANSACTION_ENDED: Status
RECEIPT_EXPIRED: Status
QUOTA_EXCEEDED: Status
MESSAGE_CUT: Status
OFFSET_QUERY_UNSPECIFIED: OffsetQuery
MIN_OFFSET: OffsetQuery
MAX_OFFSET: OffsetQuery
BY_TIME: OffsetQuery
TRANSACTION_ACTION_UNSPECIFIED: TransactionAction
COMMIT: TransactionAction
ROLLBACK: TransactionAction
SHARE_ACTION_UNSPECIFIED: ShareAction
ACCEPT: ShareAction
RELEASE: ShareAction
RENEW: ShareAction

class Frame(_message.Message):
    __slots__ = ("version", "request_id", "type", "status", "error", "payload")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    version: int
    request_id: int
    type: RequestType
    status: Status
    error: str
    payload: bytes
    def __init__(self, version: _Optional[int] = ..., request_id: _Optional[int] = ..., type: _Optional[_Union[RequestType, str]] = ..., status: _Optional[_Union[Status, str]] = ..., error: _Optional[str] = ..., payload: _Optional[bytes] = ...) -> None: ...

class SendRequest(_message.Message):
    __slots__ = ("topic", "queue_id", "count", "records", "producer_group", "scheduled")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    count: int
    records: bytes
    producer_group: str
    scheduled: bool
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., count: _Optional[int] = ..., records: _Optional[bytes] = ..., producer_group: _Optional[str] = ..., scheduled: _Optional[bool] = ...) -> None: ...

class SendResponse(_message.Message):
    __slots__ = ("queue_offset", "physical_offsets", "broker_group", "in_sync_replicas", "degraded", "epoch", "duplicate", "stored_epoch")
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PHYSICAL_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    BROKER_GROUP_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    STORED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    queue_offset: int
    physical_offsets: _containers.RepeatedScalarFieldContainer[int]
    broker_group: str
    in_sync_replicas: int
    degraded: bool
    epoch: int
    duplicate: bool
    stored_epoch: int
    def __init__(self, queue_offset: _Optional[int] = ..., physical_offsets: _Optional[_Iterable[int]] = ..., broker_group: _Optional[str] = ..., in_sync_replicas: _Optional[int] = ..., degraded: _Optional[bool] = ..., epoch: _Optional[int] = ..., duplicate: _Optional[bool] = ..., stored_epoch: _Optional[int] = ...) -> None: ...

class PullRequest(_message.Message):
    __slots__ = ("consumer_group", "topic", "queue_id", "queue_offset", "max_messages", "max_bytes", "max_wait_ms", "subscription", "max_replica_lag_ms")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    MAX_REPLICA_LAG_MS_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_messages: int
    max_bytes: int
    max_wait_ms: int
    subscription: str
    max_replica_lag_ms: int
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., max_messages: _Optional[int] = ..., max_bytes: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., subscription: _Optional[str] = ..., max_replica_lag_ms: _Optional[int] = ...) -> None: ...

class PullResponse(_message.Message):
    __slots__ = ("count", "records", "next_offset", "min_offset", "max_offset", "suggest_broker_id", "advice_ttl_ms", "replica_lag_ms")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SUGGEST_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADVICE_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    REPLICA_LAG_MS_FIELD_NUMBER: _ClassVar[int]
    count: int
    records: bytes
    next_offset: int
    min_offset: int
    max_offset: int
    suggest_broker_id: int
    advice_ttl_ms: int
    replica_lag_ms: int
    def __init__(self, count: _Optional[int] = ..., records: _Optional[bytes] = ..., next_offset: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., suggest_broker_id: _Optional[int] = ..., advice_ttl_ms: _Optional[int] = ..., replica_lag_ms: _Optional[int] = ...) -> None: ...

class PullManyRequest(_message.Message):
    __slots__ = ("pulls", "max_wait_ms")
    PULLS_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    pulls: _containers.RepeatedCompositeFieldContainer[PullRequest]
    max_wait_ms: int
    def __init__(self, pulls: _Optional[_Iterable[_Union[PullRequest, _Mapping]]] = ..., max_wait_ms: _Optional[int] = ...) -> None: ...

class PullManyEntry(_message.Message):
    __slots__ = ("status", "error", "response")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    status: int
    error: str
    response: PullResponse
    def __init__(self, status: _Optional[int] = ..., error: _Optional[str] = ..., response: _Optional[_Union[PullResponse, _Mapping]] = ...) -> None: ...

class PullManyResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[PullManyEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[PullManyEntry, _Mapping]]] = ...) -> None: ...

class QueryOffsetRequest(_message.Message):
    __slots__ = ("topic", "queue_id", "query", "timestamp_ms", "max_replica_lag_ms", "queue_ids", "consumer_group")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_REPLICA_LAG_MS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_IDS_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    query: OffsetQuery
    timestamp_ms: int
    max_replica_lag_ms: int
    queue_ids: _containers.RepeatedScalarFieldContainer[int]
    consumer_group: str
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., query: _Optional[_Union[OffsetQuery, str]] = ..., timestamp_ms: _Optional[int] = ..., max_replica_lag_ms: _Optional[int] = ..., queue_ids: _Optional[_Iterable[int]] = ..., consumer_group: _Optional[str] = ...) -> None: ...

class QueryOffsetResponse(_message.Message):
    __slots__ = ("offset", "offsets")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    offset: int
    offsets: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, offset: _Optional[int] = ..., offsets: _Optional[_Iterable[int]] = ...) -> None: ...

class QueueOffset(_message.Message):
    __slots__ = ("topic", "queue_id", "offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    offset: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class CommitOffsetRequest(_message.Message):
    __slots__ = ("consumer_group", "offsets")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    offsets: _containers.RepeatedCompositeFieldContainer[QueueOffset]
    def __init__(self, consumer_group: _Optional[str] = ..., offsets: _Optional[_Iterable[_Union[QueueOffset, _Mapping]]] = ...) -> None: ...

class CommitOffsetResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FetchOffsetRequest(_message.Message):
    __slots__ = ("consumer_group", "queues")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    queues: _containers.RepeatedCompositeFieldContainer[QueueOffset]
    def __init__(self, consumer_group: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[QueueOffset, _Mapping]]] = ...) -> None: ...

class FetchOffsetResponse(_message.Message):
    __slots__ = ("offsets",)
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedCompositeFieldContainer[QueueOffset]
    def __init__(self, offsets: _Optional[_Iterable[_Union[QueueOffset, _Mapping]]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("client_id", "producer_groups", "consumer_groups", "leaving")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GROUPS_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUPS_FIELD_NUMBER: _ClassVar[int]
    LEAVING_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    producer_groups: _containers.RepeatedScalarFieldContainer[str]
    consumer_groups: _containers.RepeatedScalarFieldContainer[str]
    leaving: bool
    def __init__(self, client_id: _Optional[str] = ..., producer_groups: _Optional[_Iterable[str]] = ..., consumer_groups: _Optional[_Iterable[str]] = ..., leaving: _Optional[bool] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("broker_group", "broker_id", "role")
    BROKER_GROUP_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    broker_group: str
    broker_id: int
    role: str
    def __init__(self, broker_group: _Optional[str] = ..., broker_id: _Optional[int] = ..., role: _Optional[str] = ...) -> None: ...

class QueueStatus(_message.Message):
    __slots__ = ("topic", "queue_id", "min_offset", "max_offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    min_offset: int
    max_offset: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ...) -> None: ...

class GroupOffsetStatus(_message.Message):
    __slots__ = ("consumer_group", "topic", "queue_id", "offset")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    queue_id: int
    offset: int
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class BrokerStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BrokerStatusResponse(_message.Message):
    __slots__ = ("broker_group", "broker_id", "role", "flush", "min_physical_offset", "max_physical_offset", "flushed_offset", "confirmed_offset", "queues", "group_offsets", "bad_requests", "messages_stored", "clients", "epoch", "master_address", "replicated_offset", "replicas", "flushes", "read_redirects", "ready", "ready_reason", "master_max_offset", "master_silent_s", "in_sync_replicas", "sync_replicas", "min_sync_replicas", "degraded", "isr", "transactions_pending", "transaction_checks", "transactions_discarded", "share_queues", "timers_pending", "timers_fired", "timers_recalled")
    class TimersPendingEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    BROKER_GROUP_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    FLUSH_FIELD_NUMBER: _ClassVar[int]
    MIN_PHYSICAL_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_PHYSICAL_OFFSET_FIELD_NUMBER: _ClassVar[int]
    FLUSHED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    GROUP_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    BAD_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_STORED_FIELD_NUMBER: _ClassVar[int]
    CLIENTS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    REPLICATED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    FLUSHES_FIELD_NUMBER: _ClassVar[int]
    READ_REDIRECTS_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    READY_REASON_FIELD_NUMBER: _ClassVar[int]
    MASTER_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MASTER_SILENT_S_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    SYNC_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    MIN_SYNC_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONS_PENDING_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_CHECKS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONS_DISCARDED_FIELD_NUMBER: _ClassVar[int]
    SHARE_QUEUES_FIELD_NUMBER: _ClassVar[int]
    TIMERS_PENDING_FIELD_NUMBER: _ClassVar[int]
    TIMERS_FIRED_FIELD_NUMBER: _ClassVar[int]
    TIMERS_RECALLED_FIELD_NUMBER: _ClassVar[int]
    broker_group: str
    broker_id: int
    role: str
    flush: str
    min_physical_offset: int
    max_physical_offset: int
    flushed_offset: int
    confirmed_offset: int
    queues: _containers.RepeatedCompositeFieldContainer[QueueStatus]
    group_offsets: _containers.RepeatedCompositeFieldContainer[GroupOffsetStatus]
    bad_requests: int
    messages_stored: int
    clients: int
    epoch: int
    master_address: str
    replicated_offset: int
    replicas: _containers.RepeatedCompositeFieldContainer[ReplicaStatus]
    flushes: int
    read_redirects: int
    ready: bool
    ready_reason: str
    master_max_offset: int
    master_silent_s: float
    in_sync_replicas: int
    sync_replicas: int
    min_sync_replicas: int
    degraded: bool
    isr: _containers.RepeatedScalarFieldContainer[int]
    transactions_pending: int
    transaction_checks: int
    transactions_discarded: int
    share_queues: _containers.RepeatedCompositeFieldContainer[ShareQueueStatus]
    timers_pending: _containers.ScalarMap[str, int]
    timers_fired: int
    timers_recalled: int
    def __init__(self, broker_group: _Optional[str] = ..., broker_id: _Optional[int] = ..., role: _Optional[str] = ..., flush: _Optional[str] = ..., min_physical_offset: _Optional[int] = ..., max_physical_offset: _Optional[int] = ..., flushed_offset: _Optional[int] = ..., confirmed_offset: _Optional[int] = ..., queues: _Optional[_Iterable[_Union[QueueStatus, _Mapping]]] = ..., group_offsets: _Optional[_Iterable[_Union[GroupOffsetStatus, _Mapping]]] = ..., bad_requests: _Optional[int] = ..., messages_stored: _Optional[int] = ..., clients: _Optional[int] = ..., epoch: _Optional[int] = ..., master_address: _Optional[str] = ..., replicated_offset: _Optional[int] = ..., replicas: _Optional[_Iterable[_Union[ReplicaStatus, _Mapping]]] = ..., flushes: _Optional[int] = ..., read_redirects: _Optional[int] = ..., ready: _Optional[bool] = ..., ready_reason: _Optional[str] = ..., master_max_offset: _Optional[int] = ..., master_silent_s: _Optional[float] = ..., in_sync_replicas: _Optional[int] = ..., sync_replicas: _Optional[int] = ..., min_sync_replicas: _Optional[int] = ..., degraded: _Optional[bool] = ..., isr: _Optional[_Iterable[int]] = ..., transactions_pending: _Optional[int] = ..., transaction_checks: _Optional[int] = ..., transactions_discarded: _Optional[int] = ..., share_queues: _Optional[_Iterable[_Union[ShareQueueStatus, _Mapping]]] = ..., timers_pending: _Optional[_Mapping[str, int]] = ..., timers_fired: _Optional[int] = ..., timers_recalled: _Optional[int] = ...) -> None: ...

class ShareQueueStatus(_message.Message):
    __slots__ = ("consumer_group", "topic", "queue_id", "start_offset", "next_offset", "held", "oldest_held_ms", "redelivered")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    OLDEST_HELD_MS_FIELD_NUMBER: _ClassVar[int]
    REDELIVERED_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    queue_id: int
    start_offset: int
    next_offset: int
    held: int
    oldest_held_ms: int
    redelivered: int
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., start_offset: _Optional[int] = ..., next_offset: _Optional[int] = ..., held: _Optional[int] = ..., oldest_held_ms: _Optional[int] = ..., redelivered: _Optional[int] = ...) -> None: ...

class ReplicaStatus(_message.Message):
    __slots__ = ("broker_id", "address", "state", "acked_offset", "lag_bytes")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ACKED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_BYTES_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    address: str
    state: str
    acked_offset: int
    lag_bytes: int
    def __init__(self, broker_id: _Optional[int] = ..., address: _Optional[str] = ..., state: _Optional[str] = ..., acked_offset: _Optional[int] = ..., lag_bytes: _Optional[int] = ...) -> None: ...

class HaReport(_message.Message):
    __slots__ = ("broker_id", "max_offset", "acked_offset", "epoch", "address", "resync")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ACKED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    RESYNC_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    max_offset: int
    acked_offset: int
    epoch: int
    address: str
    resync: bool
    def __init__(self, broker_id: _Optional[int] = ..., max_offset: _Optional[int] = ..., acked_offset: _Optional[int] = ..., epoch: _Optional[int] = ..., address: _Optional[str] = ..., resync: _Optional[bool] = ...) -> None: ...

class HaTransfer(_message.Message):
    __slots__ = ("epoch", "offset", "master_max_offset", "confirmed_offset", "offsets", "ack_now")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MASTER_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    ACK_NOW_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    offset: int
    master_max_offset: int
    confirmed_offset: int
    offsets: _containers.RepeatedCompositeFieldContainer[GroupOffsetStatus]
    ack_now: bool
    def __init__(self, epoch: _Optional[int] = ..., offset: _Optional[int] = ..., master_max_offset: _Optional[int] = ..., confirmed_offset: _Optional[int] = ..., offsets: _Optional[_Iterable[_Union[GroupOffsetStatus, _Mapping]]] = ..., ack_now: _Optional[bool] = ...) -> None: ...

class QueueRef(_message.Message):
    __slots__ = ("topic", "queue_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ...) -> None: ...

class LockQueuesRequest(_message.Message):
    __slots__ = ("consumer_group", "client_id", "queues")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    client_id: str
    queues: _containers.RepeatedCompositeFieldContainer[QueueRef]
    def __init__(self, consumer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[QueueRef, _Mapping]]] = ...) -> None: ...

class LockQueuesResponse(_message.Message):
    __slots__ = ("locked",)
    LOCKED_FIELD_NUMBER: _ClassVar[int]
    locked: _containers.RepeatedCompositeFieldContainer[QueueRef]
    def __init__(self, locked: _Optional[_Iterable[_Union[QueueRef, _Mapping]]] = ...) -> None: ...

class SendBackRequest(_message.Message):
    __slots__ = ("consumer_group", "physical_offset", "delay_level", "max_reconsume_times", "dead_letter")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    PHYSICAL_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DELAY_LEVEL_FIELD_NUMBER: _ClassVar[int]
    MAX_RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    physical_offset: int
    delay_level: int
    max_reconsume_times: int
    dead_letter: bool
    def __init__(self, consumer_group: _Optional[str] = ..., physical_offset: _Optional[int] = ..., delay_level: _Optional[int] = ..., max_reconsume_times: _Optional[int] = ..., dead_letter: _Optional[bool] = ...) -> None: ...

class SendBackResponse(_message.Message):
    __slots__ = ("topic", "physical_offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PHYSICAL_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    physical_offset: int
    def __init__(self, topic: _Optional[str] = ..., physical_offset: _Optional[int] = ...) -> None: ...

class GetMessageRequest(_message.Message):
    __slots__ = ("physical_offset", "consumer_group", "epoch")
    PHYSICAL_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    physical_offset: int
    consumer_group: str
    epoch: int
    def __init__(self, physical_offset: _Optional[int] = ..., consumer_group: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class GetMessageResponse(_message.Message):
    __slots__ = ("record",)
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: bytes
    def __init__(self, record: _Optional[bytes] = ...) -> None: ...

class QueryByKeyRequest(_message.Message):
    __slots__ = ("topic", "key", "begin_timestamp_ms", "end_timestamp_ms", "max_num")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    END_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_FIELD_NUMBER: _ClassVar[int]
    topic: str
    key: str
    begin_timestamp_ms: int
    end_timestamp_ms: int
    max_num: int
    def __init__(self, topic: _Optional[str] = ..., key: _Optional[str] = ..., begin_timestamp_ms: _Optional[int] = ..., end_timestamp_ms: _Optional[int] = ..., max_num: _Optional[int] = ...) -> None: ...

class QueryByKeyResponse(_message.Message):
    __slots__ = ("count", "records")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    count: int
    records: bytes
    def __init__(self, count: _Optional[int] = ..., records: _Optional[bytes] = ...) -> None: ...

class EndTransactionRequest(_message.Message):
    __slots__ = ("producer_group", "half_offset", "action", "from_check", "topic", "half_epoch")
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    HALF_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    FROM_CHECK_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    HALF_EPOCH_FIELD_NUMBER: _ClassVar[int]
    producer_group: str
    half_offset: int
    action: TransactionAction
    from_check: bool
    topic: str
    half_epoch: int
    def __init__(self, producer_group: _Optional[str] = ..., half_offset: _Optional[int] = ..., action: _Optional[_Union[TransactionAction, str]] = ..., from_check: _Optional[bool] = ..., topic: _Optional[str] = ..., half_epoch: _Optional[int] = ...) -> None: ...

class EndTransactionResponse(_message.Message):
    __slots__ = ("already", "topic", "queue_id", "physical_offset", "epoch")
    ALREADY_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    PHYSICAL_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    already: bool
    topic: str
    queue_id: int
    physical_offset: int
    epoch: int
    def __init__(self, already: _Optional[bool] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., physical_offset: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class CheckTransactionStateRequest(_message.Message):
    __slots__ = ("transaction_id", "topic", "record", "checks")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    transaction_id: str
    topic: str
    record: bytes
    checks: int
    def __init__(self, transaction_id: _Optional[str] = ..., topic: _Optional[str] = ..., record: _Optional[bytes] = ..., checks: _Optional[int] = ...) -> None: ...

class ListTransactionsRequest(_message.Message):
    __slots__ = ("producer_group", "max")
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    producer_group: str
    max: int
    def __init__(self, producer_group: _Optional[str] = ..., max: _Optional[int] = ...) -> None: ...

class PendingTransaction(_message.Message):
    __slots__ = ("transaction_id", "producer_group", "topic", "keys", "age_ms", "checks")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    AGE_MS_FIELD_NUMBER: _ClassVar[int]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    transaction_id: str
    producer_group: str
    topic: str
    keys: str
    age_ms: int
    checks: int
    def __init__(self, transaction_id: _Optional[str] = ..., producer_group: _Optional[str] = ..., topic: _Optional[str] = ..., keys: _Optional[str] = ..., age_ms: _Optional[int] = ..., checks: _Optional[int] = ...) -> None: ...

class ListTransactionsResponse(_message.Message):
    __slots__ = ("transactions", "pending")
    TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    transactions: _containers.RepeatedCompositeFieldContainer[PendingTransaction]
    pending: int
    def __init__(self, transactions: _Optional[_Iterable[_Union[PendingTransaction, _Mapping]]] = ..., pending: _Optional[int] = ...) -> None: ...

class DeleteGroupRequest(_message.Message):
    __slots__ = ("consumer_group", "force", "check")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    CHECK_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    force: bool
    check: bool
    def __init__(self, consumer_group: _Optional[str] = ..., force: _Optional[bool] = ..., check: _Optional[bool] = ...) -> None: ...

class DeleteGroupResponse(_message.Message):
    __slots__ = ("queues", "share_readers", "readers")
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    SHARE_READERS_FIELD_NUMBER: _ClassVar[int]
    READERS_FIELD_NUMBER: _ClassVar[int]
    queues: int
    share_readers: int
    readers: str
    def __init__(self, queues: _Optional[int] = ..., share_readers: _Optional[int] = ..., readers: _Optional[str] = ...) -> None: ...

class BrokerConfigRequest(_message.Message):
    __slots__ = ("set",)
    class SetEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SET_FIELD_NUMBER: _ClassVar[int]
    set: _containers.ScalarMap[str, str]
    def __init__(self, set: _Optional[_Mapping[str, str]] = ...) -> None: ...

class BrokerConfigResponse(_message.Message):
    __slots__ = ("values", "runtime", "changed")
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    values: _containers.ScalarMap[str, str]
    runtime: _containers.RepeatedScalarFieldContainer[str]
    changed: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Mapping[str, str]] = ..., runtime: _Optional[_Iterable[str]] = ..., changed: _Optional[_Iterable[str]] = ...) -> None: ...

class PopRequest(_message.Message):
    __slots__ = ("consumer_group", "topic", "max_messages", "invisible_ms", "max_wait_ms", "subscription", "max_deliveries", "from_first", "slave_reads", "client_id")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    INVISIBLE_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    MAX_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    FROM_FIRST_FIELD_NUMBER: _ClassVar[int]
    SLAVE_READS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    max_messages: int
    invisible_ms: int
    max_wait_ms: int
    subscription: str
    max_deliveries: int
    from_first: bool
    slave_reads: bool
    client_id: str
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ..., max_messages: _Optional[int] = ..., invisible_ms: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., subscription: _Optional[str] = ..., max_deliveries: _Optional[int] = ..., from_first: _Optional[bool] = ..., slave_reads: _Optional[bool] = ..., client_id: _Optional[str] = ...) -> None: ...

class SharedRead(_message.Message):
    __slots__ = ("queue_id", "queue_offsets", "delivery_counts")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_COUNTS_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    queue_offsets: _containers.RepeatedScalarFieldContainer[int]
    delivery_counts: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, queue_id: _Optional[int] = ..., queue_offsets: _Optional[_Iterable[int]] = ..., delivery_counts: _Optional[_Iterable[int]] = ...) -> None: ...

class PopResponse(_message.Message):
    __slots__ = ("count", "records", "delivery_counts", "deadline_ms", "dead_lettered", "slave_reads", "read_from_broker_id", "receipt_key")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_COUNTS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    SLAVE_READS_FIELD_NUMBER: _ClassVar[int]
    READ_FROM_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_KEY_FIELD_NUMBER: _ClassVar[int]
    count: int
    records: bytes
    delivery_counts: _containers.RepeatedScalarFieldContainer[int]
    deadline_ms: int
    dead_lettered: int
    slave_reads: _containers.RepeatedCompositeFieldContainer[SharedRead]
    read_from_broker_id: int
    receipt_key: int
    def __init__(self, count: _Optional[int] = ..., records: _Optional[bytes] = ..., delivery_counts: _Optional[_Iterable[int]] = ..., deadline_ms: _Optional[int] = ..., dead_lettered: _Optional[int] = ..., slave_reads: _Optional[_Iterable[_Union[SharedRead, _Mapping]]] = ..., read_from_broker_id: _Optional[int] = ..., receipt_key: _Optional[int] = ...) -> None: ...

class Receipt(_message.Message):
    __slots__ = ("queue_id", "queue_offset", "delivery_count", "key")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_COUNT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    queue_offset: int
    delivery_count: int
    key: int
    def __init__(self, queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., delivery_count: _Optional[int] = ..., key: _Optional[int] = ...) -> None: ...

class ShareAckRequest(_message.Message):
    __slots__ = ("consumer_group", "topic", "action", "receipts", "ms", "client_id")
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    MS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    topic: str
    action: ShareAction
    receipts: _containers.RepeatedCompositeFieldContainer[Receipt]
    ms: int
    client_id: str
    def __init__(self, consumer_group: _Optional[str] = ..., topic: _Optional[str] = ..., action: _Optional[_Union[ShareAction, str]] = ..., receipts: _Optional[_Iterable[_Union[Receipt, _Mapping]]] = ..., ms: _Optional[int] = ..., client_id: _Optional[str] = ...) -> None: ...

class ShareAckResponse(_message.Message):
    __slots__ = ("statuses", "errors", "deadline_ms")
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    statuses: _containers.RepeatedScalarFieldContainer[int]
    errors: _containers.RepeatedScalarFieldContainer[str]
    deadline_ms: int
    def __init__(self, statuses: _Optional[_Iterable[int]] = ..., errors: _Optional[_Iterable[str]] = ..., deadline_ms: _Optional[int] = ...) -> None: ...

class RecallRequest(_message.Message):
    __slots__ = ("topic", "handle")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    handle: str
    def __init__(self, topic: _Optional[str] = ..., handle: _Optional[str] = ...) -> None: ...

class RecallResponse(_message.Message):
    __slots__ = ("msg_id", "deliver_at_ms")
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    DELIVER_AT_MS_FIELD_NUMBER: _ClassVar[int]
    msg_id: str
    deliver_at_ms: int
    def __init__(self, msg_id: _Optional[str] = ..., deliver_at_ms: _Optional[int] = ...) -> None: ...
