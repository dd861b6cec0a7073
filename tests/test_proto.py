import filecmp
import pathlib
import subprocess
import sys

import pytest

from duomq.proto import PROTOCOL_VERSION, codec, pb

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_regeneration_gives_the_checked_in_files(tmp_path):
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}",
                    f"--python_out={tmp_path}", f"--pyi_out={tmp_path}",
                    str(ROOT / "proto" / "duomq.proto")], check=True)
    for name in ("duomq_pb2.py", "duomq_pb2.pyi"):
        assert filecmp.cmp(tmp_path / name, ROOT / "proto" / name, shallow=False), name


def test_request_roundtrip():
    data = codec.encode_request(7, pb.PULL, pb.PullRequest(topic="T", queue_offset=5))
    frame = codec.decode_frame(data)
    assert (frame.version, frame.request_id, frame.type) == (PROTOCOL_VERSION, 7, pb.PULL)
    req = codec.decode_request(frame)
    assert req.topic == "T" and req.queue_offset == 5


def test_response_carries_status_and_error():
    frame = codec.decode_frame(codec.encode_response(9, pb.SEND, pb.TOPIC_NOT_EXIST, "nope"))
    assert frame.status == pb.TOPIC_NOT_EXIST and frame.error == "nope"


@pytest.mark.parametrize("data,status", [
    (b"\xff\xff\xff", pb.BAD_REQUEST),
    (pb.Frame(version=99, request_id=1, type=pb.SEND).SerializeToString(), pb.UNSUPPORTED_VERSION),
])
def test_bad_frames(data, status):
    with pytest.raises(codec.FrameError) as e:
        codec.decode_frame(data)
    assert e.value.status == status


def test_unknown_type_and_bad_payload():
    frame = codec.decode_frame(pb.Frame(version=1, request_id=3, type=99).SerializeToString())
    with pytest.raises(codec.FrameError) as e:
        codec.decode_request(frame)
    assert e.value.status == pb.UNKNOWN_REQUEST_TYPE and e.value.request_id == 3
    frame = codec.decode_frame(pb.Frame(version=1, request_id=4, type=pb.SEND,
                                        payload=b"\x0a\xff").SerializeToString())
    with pytest.raises(codec.FrameError) as e:
        codec.decode_request(frame)
    assert e.value.status == pb.BAD_REQUEST


def test_one_table_joins_statuses_and_exceptions_both_ways():
    from duomq.common import errors
    from duomq.format.record import RecordError, RecordTooLargeError
    for status, cls in errors._BY_STATUS.items():
        exc = errors.for_status(status, "why")
        assert type(exc) is cls and errors.answer_for(exc) == (status, str(exc))
    assert errors.answer_for(RecordTooLargeError("big"))[0] == pb.MESSAGE_TOO_LARGE
    assert errors.answer_for(RecordError("bad"))[0] == pb.BAD_REQUEST
    assert errors.answer_for(KeyError("bug"))[0] == pb.SYSTEM_ERROR
    assert errors.for_status(pb.NOT_MASTER, "x").invalid_metadata


def test_one_pull_status_vocabulary():
    from duomq.common.message import PullStatus
    for s in PullStatus:
        assert PullStatus.of_wire(s.wire) is s
    assert PullStatus.of_wire(pb.BAD_REQUEST) is None
