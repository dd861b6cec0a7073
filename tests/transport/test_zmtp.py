"""ZMTP 3.1 framing (transport.zmtp): what is written reads back at every
split of the stream, and what breaks the protocol is refused before it is
buffered. Every case runs twice: with the C twin (transport/_zmtp.c) and with
the Python reference. Interplay with libzmq itself:
tests/transport/test_router.py."""

import random
import socket
from collections import deque

import pytest

from duomq.transport import zmtp

pytestmark = pytest.mark.usefixtures("zmtp_both_ways")


def test_greetings_are_checked():
    for as_server in (True, False):
        g = zmtp.greeting(as_server)
        assert len(g) == zmtp.GREETING_SIZE
        zmtp.check_greeting(g)
    good = bytearray(zmtp.greeting(False))
    for at, value, says in ((0, 0x00, "signature"), (9, 0x00, "signature"), (10, 2, "ZMTP 2"),
                            (12, ord("C"), "mechanism")):
        bad = bytearray(good)
        bad[at] = value
        if at == 12:
            bad[12:17] = b"CURVE"
        with pytest.raises(zmtp.ZmtpError, match=says):
            zmtp.check_greeting(bytes(bad))


def test_a_greeting_is_taken_whole_then_checked_and_frames_follow_it():
    reader = zmtp.reader()
    stream = zmtp.greeting(True) + zmtp.ready(b"ROUTER")
    reader.feed(stream[:63])
    assert reader.greeting() is False          # one byte short: nothing taken
    reader.feed(stream[63:])
    assert reader.greeting() is True
    flags, body = reader.frame()
    assert flags & zmtp.COMMAND and zmtp.parse_command(body)[0] == b"READY"
    bad = zmtp.reader()
    bad.feed(b"GET / HTTP/1.1\r\n" + bytes(64))
    with pytest.raises(zmtp.ZmtpError, match="signature"):
        bad.greeting()


def test_frame_heads_switch_to_long_sizes_past_255():
    assert zmtp.frame_head(255) == bytes((0, 255))
    assert zmtp.frame_head(256, zmtp.MORE) == bytes((zmtp.MORE | zmtp.LONG,)) + \
        (256).to_bytes(8, "big")


def test_ready_properties_read_back_and_truncation_is_refused():
    frame = zmtp.ready(b"DEALER", b"me")
    reader = zmtp.reader()
    reader.feed(frame)
    flags, body = reader.frame()
    assert flags & zmtp.COMMAND
    name, rest = zmtp.parse_command(body)
    assert name == b"READY"
    assert zmtp.parse_properties(rest) == {"socket-type": b"DEALER", "identity": b"me"}
    for cut in range(1, len(rest)):
        if cut == 1 + 11 + 4 + 6:         # the whole Socket-Type property ends here
            continue
        with pytest.raises(zmtp.ZmtpError):
            zmtp.parse_properties(rest[:cut])
    with pytest.raises(zmtp.ZmtpError):
        zmtp.parse_command(b"\x09READ")


def _stream(rng: random.Random) -> tuple[bytes, list[tuple[int, bytes]]]:
    frames, data = [], b""
    for _ in range(60):
        if rng.random() < 0.1:
            data += zmtp.command(b"PING", b"\x00\x0a" + rng.randbytes(rng.randrange(4)))
            frames.append(None)
            continue
        parts = [rng.randbytes(rng.choice((0, 1, 255, 256, 1023, 1024, 70_000,
                                           rng.randrange(3000))))
                 for _ in range(rng.randrange(1, 4))]
        data += b"".join(zmtp.message(parts))
        frames += [(zmtp.MORE if i < len(parts) - 1 else 0, p) for i, p in enumerate(parts)]
    return data, frames


@pytest.mark.parametrize("seed", range(6))
def test_a_stream_reads_back_whatever_pieces_it_arrives_in(seed):
    rng = random.Random(seed)
    data, want = _stream(rng)
    reader = zmtp.reader(max_frame=1 << 20)
    got, i = [], 0
    while i < len(data):
        n = rng.choice((1, 2, 7, 9, 100, 4096, 65536))
        reader.feed(data[i:i + n])
        i += n
        while (f := reader.frame()) is not None:
            got.append(None if f[0] & zmtp.COMMAND else (f[0] & ~zmtp.LONG, f[1]))
    assert got == want and reader.pending() == 0


def test_a_frame_past_the_bound_is_refused_from_its_head():
    reader = zmtp.reader(max_frame=1000)
    reader.feed(zmtp.frame_head(1001))               # the body never needs to come
    with pytest.raises(zmtp.ZmtpError, match="1001 bytes"):
        reader.frame()
    ok = zmtp.reader(max_frame=1000)
    ok.feed(zmtp.frame_head(1000) + bytes(1000))
    assert ok.frame() == (zmtp.LONG, bytes(1000))


def test_reserved_flag_bits_are_refused():
    reader = zmtp.reader()
    reader.feed(b"\x08\x01x")
    with pytest.raises(zmtp.ZmtpError, match="reserved"):
        reader.frame()


def test_pong_carries_the_ping_context():
    reader = zmtp.reader()
    reader.feed(zmtp.pong(b"\x00\x10ctx"))
    assert zmtp.parse_command(reader.frame()[1]) == (b"PONG", b"ctx")


@pytest.mark.parametrize("seed", range(4))
def test_writes_taken_in_any_pieces_leave_exactly_the_rest(seed):
    """What a partial sendmsg took comes off the queue, and a message cut
    in the middle resumes where it was cut: the bytes written in pieces
    are the messages, in order."""
    from collections import deque
    rng = random.Random(seed)
    msgs = [zmtp.message([rng.randbytes(rng.choice((0, 5, 300, 5000)))
                          for _ in range(rng.randrange(1, 3))]) for _ in range(40)]
    want = b"".join(b"".join(m) for m in msgs)
    out, wrote = deque(list(m) for m in msgs), b""
    while out:
        bufs = zmtp.gather(out, most=rng.randrange(1, 6))
        offered = b"".join(bytes(b) for b in bufs)
        n = rng.randrange(0, len(offered) + 1)
        wrote += offered[:n]
        zmtp.consume(out, n)
    assert wrote == want


def test_gather_hands_one_waiting_message_its_own_list_and_never_more_than_iov_max():
    from collections import deque
    one = [b"a", b"bc"]
    out = deque([one])
    assert zmtp.gather(out) is one                        # no copy for the common case
    big = [bytes([i % 256]) for i in range(zmtp.IOV_MAX + 7)]
    out = deque([big])
    bufs = zmtp.gather(out)
    assert bufs is not big and bufs == big[:zmtp.IOV_MAX]
    out = deque([[b"x"] * 300, [b"y"] * 300])             # two messages past the bound
    assert zmtp.gather(out) == [b"x"] * 300 + [b"y"] * (zmtp.IOV_MAX - 300)
    # written in pieces, the big message still comes out whole and in order
    out, wrote = deque([list(big)]), b""
    while out:
        bufs = zmtp.gather(out)
        offered = sum(map(len, bufs))
        n = max(1, offered // 2)
        wrote += b"".join(bytes(b) for b in bufs)[:n]
        zmtp.consume(out, n)
    assert wrote == b"".join(big)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mode", ["router", "whole", "last"])
def test_messages_come_whole_in_any_pieces_and_stop_at_commands_and_at_the_mark(seed, mode):
    """``messages`` gives a ROUTER's [identity, *frames], a whole message's
    frames, or its last frame; a command stops it (handed back with the
    messages before it already out); it never fills ``out`` past ``most``
    and what it leaves unparsed is parsed by the next call."""
    rng = random.Random(seed)
    data, frames = _stream(rng)
    want, parts, commands = [], [], 0
    for f in frames:
        if f is None:
            commands += 1
            continue
        parts.append(f[1])
        if not f[0] & zmtp.MORE:
            want.append([b"id", *parts] if mode == "router" else
                        parts if mode == "whole" else parts[-1])
            parts = []
    reader = zmtp.reader(max_frame=1 << 20)
    prefix, whole = (b"id", False) if mode == "router" else (None, mode == "whole")
    got, seen, i = [], 0, 0
    while i < len(data) or reader.pending():
        n = rng.choice((1, 3, 100, 4096, 65536))
        reader.feed(data[i:i + n])
        i += n
        out: deque = deque()
        most = rng.choice((1, 2, 1000))
        while True:
            cmd = reader.messages(out, prefix, whole, most)
            assert len(out) <= most
            if cmd is not None:
                assert cmd[0] & zmtp.COMMAND and zmtp.parse_command(cmd[1])[0] == b"PING"
                seen += 1
                continue
            if len(out) < most:
                break
            got += out
            out.clear()
        got += out
    assert got == want and seen == commands and reader.pending() == 0


def test_messages_refuse_what_frame_refuses():
    reader = zmtp.reader(max_frame=10)
    reader.feed(zmtp.frame_head(11))
    with pytest.raises(zmtp.ZmtpError, match="11 bytes"):
        reader.messages(deque(), b"id", False, 10)
    bad = zmtp.reader()
    bad.feed(b"\x01\x01a\x80\x00")
    out: deque = deque()
    with pytest.raises(zmtp.ZmtpError, match="reserved"):
        bad.messages(out, None, True, 10)
    assert not out and bad.parts == [b"a"]


def _pair(sndbuf: int = 0) -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    for s in (a, b):
        s.setblocking(False)
    if sndbuf:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, sndbuf)
    return a, b


def test_fill_reads_what_the_socket_has_and_says_when_the_peer_closed():
    a, b = _pair()
    view = memoryview(bytearray(7))
    try:
        reader = zmtp.reader()
        assert reader.fill(b.fileno(), view) is None and reader.pending() == 0   # nothing yet
        a.sendall(b"".join(zmtp.message([b"hello", b"world"])))
        while reader.pending() < 14:          # read through a buffer smaller than the data
            assert reader.fill(b.fileno(), view) is None
        assert reader.messages(deque(), None, True, 5) is None
        a.close()
        assert reader.fill(b.fileno(), view) == zmtp.EOF
    finally:
        a.close()
        b.close()
    assert "Bad file descriptor" in reader.fill(b.fileno(), view)


def test_fill_until_reads_again_until_data_comes_or_its_time_runs_out():
    """A spin's reads in one call: it returns as soon as bytes arrive (not
    at its deadline), at its deadline with nothing read, and at once with
    the end of the connection; what it read is parsed as fill's is. And
    other threads run meanwhile (the writer below is one)."""
    import threading
    import time
    a, b = _pair()
    view = memoryview(bytearray(64))
    try:
        reader = zmtp.reader()
        t0 = time.perf_counter_ns()
        assert reader.fill_until(b.fileno(), view, t0 + 30_000_000) is None
        waited = time.perf_counter_ns() - t0
        assert reader.pending() == 0 and 30_000_000 <= waited < 2_000_000_000
        data = b"".join(zmtp.message([b"late"]))
        writer = threading.Timer(0.05, a.sendall, (data,))
        writer.start()
        t0 = time.perf_counter_ns()
        assert reader.fill_until(b.fileno(), view, t0 + 20_000_000_000) is None
        took = time.perf_counter_ns() - t0
        writer.join()
        assert reader.pending() == len(data) and 40_000_000 <= took < 5_000_000_000
        got: deque = deque()
        assert reader.messages(got, None, False, 5) is None and list(got) == [b"late"]
        assert reader.fill_until(b.fileno(), view, 0) is None and reader.pending() == 0
        a.close()
        t0 = time.perf_counter_ns()
        assert reader.fill_until(b.fileno(), view, t0 + 20_000_000_000) == zmtp.EOF
        assert time.perf_counter_ns() - t0 < 5_000_000_000
    finally:
        a.close()
        b.close()
    assert "Bad file descriptor" in reader.fill_until(b.fileno(), view, 0)


@pytest.mark.parametrize("seed", range(3))
def test_write_out_leaves_every_byte_in_order_through_a_full_socket(seed):
    """Messages of every size through a socket whose buffer fills: False
    while some wait (what waits is what was not taken), True once all left;
    the peer reads exactly the messages, in order."""
    rng = random.Random(seed)
    a, b = _pair(sndbuf=4096)
    try:
        msgs = [zmtp.message([rng.randbytes(rng.choice((0, 5, 300, 1023, 1024, 20_000)))
                              for _ in range(rng.randrange(1, 4))]) for _ in range(300)]
        want = b"".join(b"".join(bytes(p) for p in m) for m in msgs)
        out: deque = deque(msgs)
        got, fulls = bytearray(), 0
        while True:
            done = zmtp.write_out(a.fileno(), out)
            if done:
                assert not out
                break
            fulls += 1
            assert out
            try:
                got += b.recv(rng.choice((1, 5000, 1 << 20)))
            except BlockingIOError:
                pass
        while len(got) < len(want):
            got += b.recv(1 << 20)
        assert bytes(got) == want and fulls > 0
        assert zmtp.write_out(a.fileno(), deque()) is True
        b.close()
        with pytest.raises(OSError):           # the peer is gone: EPIPE (no SIGPIPE)
            for _ in range(3):
                zmtp.write_out(a.fileno(), deque([zmtp.message([bytes(100)])]))
    finally:
        a.close()
        b.close()
