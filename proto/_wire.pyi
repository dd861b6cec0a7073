# proto/_wire.c
from collections.abc import Sequence

class SendView:
    topic: str
    queue_id: int
    count: int
    records: bytes
    producer_group: str
    scheduled: bool

def parse_send(frame: bytes | bytearray | memoryview, version: int, send_type: int,
               /) -> tuple[int, SendView] | None: ...
def frame(version: int, request_id: int, type: int, status: int, error: str | None,
          payload: bytes | None, /) -> bytes: ...
def send_response(queue_offset: int, physical_offsets: Sequence[int], broker_group: str,
                  in_sync_replicas: int, degraded: bool, epoch: int, duplicate: bool,
                  /) -> bytes: ...
def read_send_answer(frame: bytes | bytearray | memoryview, version: int, request_id: int,
                     send_type: int, /) -> tuple[int, str, tuple[int, list[int], str, int,
                                                                  bool, int, bool]] | None: ...
def pull_response(count: int, records: bytes | bytearray | memoryview, next_offset: int,
                  min_offset: int, max_offset: int, suggest_broker_id: int | None,
                  advice_ttl_ms: int, replica_lag_ms: int | None, /) -> bytes: ...
def read_pull_answer(frame: bytes | bytearray | memoryview, version: int, pull_type: int,
                     /) -> tuple[int, int, str, tuple[int, bytes, int, int, int, int | None, int,
                                                       int | None]] | None: ...
def send_request(topic: str, queue_id: int, count: int, records: bytes | bytearray | memoryview,
                 producer_group: str, scheduled: bool, /) -> bytes: ...
