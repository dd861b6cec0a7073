"""ZMTP 3.1, the wire protocol of ZeroMQ's TCP transport (rfc.zeromq.org
spec 37), NULL mechanism: the framing a process speaks itself to serve or
reach ZeroMQ peers over its own sockets, with no ZeroMQ I/O thread between
the wire and the thread that handles a message (issue 41: on the 2-core
machine each I/O-thread hop costs about 35 us at the median, and a message
from a producer through a relay to a consumer crosses six of them:
``bench/latency_floor.py``). Pure logic: the greeting, the commands, the
frames and an incremental reader; the sockets are the caller's.

A connection starts with each side's 64-byte greeting (signature, version
3.x, mechanism ``NULL``), then each side's READY command (its socket type
and, optionally, its identity), then messages: frames whose flag byte says
MORE (another frame of this message follows), LONG (an 8-byte size instead
of 1) and COMMAND (PING, PONG, READY, ERROR).
"""

from __future__ import annotations

import itertools
import os
import struct
import time
from collections import deque
from collections.abc import Callable
from types import ModuleType

GREETING_SIZE = 64
MORE, LONG, COMMAND = 1, 2, 4
MAX_IDENTITY = 255
_SIZE = struct.Struct(">Q")
_PROP = struct.Struct(">I")
_MECHANISM = b"NULL" + bytes(16)
EOF = "the peer closed the connection"


class ZmtpError(Exception):
    """The peer broke the protocol: the connection is closed."""


def greeting(as_server: bool) -> bytes:
    """This side's greeting: ZMTP 3.1, NULL mechanism."""
    return (b"\xff" + bytes(8) + b"\x7f\x03\x01" + _MECHANISM
            + (b"\x01" if as_server else b"\x00") + bytes(31))


def check_greeting(data: bytes | bytearray | memoryview) -> None:
    """Raises ZmtpError unless ``data`` (64 bytes) is a ZMTP 3.x greeting
    for the NULL mechanism."""
    if data[0] != 0xFF or data[9] != 0x7F:
        raise ZmtpError("not a ZMTP peer (bad signature)")
    if data[10] < 3:
        raise ZmtpError(f"ZMTP {data[10]}.x peer: only 3.x is spoken")
    mechanism = bytes(data[12:32]).rstrip(b"\x00")
    if mechanism != b"NULL":
        raise ZmtpError(f"mechanism {mechanism.decode(errors='replace')!r}: only NULL is "
                        f"spoken here (a secured client needs a secured broker)")


def frame_head(size: int, flags: int = 0) -> bytes:
    """The flag byte and size of a frame of ``size`` bytes."""
    if size < 256:
        return bytes((flags, size))
    return bytes((flags | LONG,)) + _SIZE.pack(size)


def command(name: bytes, body: bytes = b"") -> bytes:
    """A whole command frame."""
    data = bytes((len(name),)) + name + body
    return frame_head(len(data), COMMAND) + data


def ready(socket_type: bytes, identity: bytes = b"") -> bytes:
    """The READY command: the socket type, and the identity a DEALER asks
    its ROUTER to address it by (none: the ROUTER makes one up)."""
    props = b"\x0bSocket-Type" + _PROP.pack(len(socket_type)) + socket_type
    if identity:
        props += b"\x08Identity" + _PROP.pack(len(identity)) + identity
    return command(b"READY", props)


def parse_command(body: bytes) -> tuple[bytes, bytes]:
    """(name, the rest) of a command frame's body."""
    if not body or len(body) < 1 + body[0]:
        raise ZmtpError("a command frame too short for its name")
    return bytes(body[1:1 + body[0]]), bytes(body[1 + body[0]:])


def parse_properties(data: bytes) -> dict[str, bytes]:
    """A READY command's properties (names are case-insensitive: lowered)."""
    props, i = {}, 0
    while i < len(data):
        n = data[i]
        if i + 1 + n + 4 > len(data):
            raise ZmtpError("a READY property runs past its command")
        name = data[i + 1:i + 1 + n].decode("ascii", errors="replace").lower()
        (size,) = _PROP.unpack_from(data, i + 1 + n)
        start = i + 1 + n + 4
        if start + size > len(data):
            raise ZmtpError(f"READY property {name!r} runs past its command")
        props[name] = bytes(data[start:start + size])
        i = start + size
    return props


def ping(context: bytes = b"") -> bytes:
    """A PING (TTL 0: the peer sets no deadline of its own on this side)."""
    return command(b"PING", b"\x00\x00" + context[:16])


def pong(ping_body: bytes) -> bytes:
    """The PONG answering a PING's body (2-byte TTL, then its context)."""
    return command(b"PONG", ping_body[2:18])


def py_message(frames: list[bytes]) -> list[bytes]:
    """A message's frames as the buffers to write (heads and bodies apart,
    so a large body is not copied). ``message`` is this or its C twin."""
    out: list[bytes] = []
    last = len(frames) - 1
    for i, frame in enumerate(frames):
        head = frame_head(len(frame), MORE if i < last else 0)
        if len(frame) < 1024:
            out.append(head + frame)
        else:
            out.append(head)
            out.append(frame)
    return out


IOV_MAX = 512                # buffers handed to one sendmsg (Linux allows 1024)


def gather(out: deque[list], most: int = 64) -> list:
    """The buffers of the first ``most`` messages waiting in ``out`` (each
    a list of buffers), at most IOV_MAX of them, for one sendmsg. One message
    waiting (the common case): its own list, not a copy; the caller counts
    what it offers before ``consume`` shortens that list."""
    if len(out) == 1 and len(out[0]) <= IOV_MAX:
        return out[0]
    bufs = [b for msg in itertools.islice(out, 0, most) for b in msg]
    return bufs if len(bufs) <= IOV_MAX else bufs[:IOV_MAX]


def consume(out: deque[list], n: int) -> None:
    """Take ``n`` written bytes off the front of ``out``: whole messages go,
    a message written in part keeps what is left of it."""
    while n and out:
        msg = out[0]
        while msg and n:
            size = len(msg[0])
            if size <= n:
                n -= size
                msg.pop(0)
            else:
                msg[0] = memoryview(msg[0])[n:]
                n = 0
        if not msg:
            out.popleft()


def py_write_out(fd: int, out: deque[list]) -> bool:
    """Write the messages waiting in ``out`` (each a list of buffers) to
    the non-blocking ``fd`` until the kernel takes no more: True when all
    left, False when some wait for room. OSError for a connection that
    failed. ``write_out`` is this or its C twin."""
    while out:
        bufs = gather(out)
        offered = sum(map(len, bufs))
        try:
            n = os.writev(fd, bufs)
        except (BlockingIOError, InterruptedError):
            return False
        consume(out, n)
        if n < offered:                   # the kernel took less than offered: full
            return False
    return True


class FrameReader:
    """Frames out of a byte stream fed in pieces of any size. ``max_frame``
    bounds one frame's body (ZeroMQ's MAXMSGSIZE: a larger one is refused
    before it is read); -1: no bound."""

    __slots__ = ("buf", "pos", "max_frame", "parts")

    def __init__(self, max_frame: int = -1):
        self.buf = bytearray()
        self.pos = 0
        self.max_frame = max_frame
        self.parts: list[bytes] = []       # frames of a message not yet whole (``messages``)

    def feed(self, data: bytes | memoryview) -> None:
        if self.pos and self.pos == len(self.buf):
            self.buf.clear()
            self.pos = 0
        elif self.pos > 65536:
            del self.buf[:self.pos]
            self.pos = 0
        self.buf += data

    def fill(self, fd: int, view: memoryview) -> str | None:
        """One read of the non-blocking ``fd`` into ``view`` (a buffer the
        caller reads into again and again), fed here: None, or why the
        connection ended (``EOF`` when the peer closed it)."""
        return self.fill_until(fd, view, 0)

    def fill_until(self, fd: int, view: memoryview, until_ns: int) -> str | None:
        """``fill``, reading again while ``fd`` has nothing until
        ``time.perf_counter_ns()`` reaches ``until_ns`` (a busy poll's reads
        in one call; 0: one read): the same answers, None also when the time
        ran out with nothing read (``pending`` says which)."""
        while True:
            try:
                n = os.readv(fd, [view])
            except (BlockingIOError, InterruptedError):
                if time.perf_counter_ns() >= until_ns:
                    return None
                continue
            except OSError as exc:
                return str(exc)
            if not n:
                return EOF
            self.feed(view[:n])                   # (copied: the buffer is the next read's)
            return None

    def take(self, n: int) -> bytes | None:
        """The next ``n`` raw bytes (the greeting), or None until fed."""
        if len(self.buf) - self.pos < n:
            return None
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def greeting(self) -> bool:
        """Take the peer's greeting and check it: True once it was read (a
        bad one raises ZmtpError), False until all of it is fed."""
        got = self.take(GREETING_SIZE)
        if got is None:
            return False
        check_greeting(got)
        return True

    def frame(self) -> tuple[int, bytes] | None:
        """The next whole frame as (flags, body), or None until fed more."""
        buf, pos = self.buf, self.pos
        have = len(buf) - pos
        if have < 2:
            return None
        flags = buf[pos]
        if flags & ~(MORE | LONG | COMMAND):
            raise ZmtpError(f"frame flags {flags:#04x}: reserved bits set")
        if flags & LONG:
            if have < 9:
                return None
            (size,) = _SIZE.unpack_from(buf, pos + 1)
            start = pos + 9
        else:
            size = buf[pos + 1]
            start = pos + 2
        if 0 <= self.max_frame < size:
            raise ZmtpError(f"a frame of {size} bytes: more than the {self.max_frame} allowed")
        end = start + size
        if end > len(buf):
            return None
        self.pos = end
        with memoryview(buf) as view:          # one copy (a slice of buf would be two)
            return flags, bytes(view[start:end])

    def pending(self) -> int:
        """Bytes fed and not yet taken."""
        return len(self.buf) - self.pos

    def messages(self, out: deque, prefix: bytes | None, whole: bool,
                 most: int) -> tuple[int, bytes] | None:
        """Whole data messages appended to ``out`` while it holds fewer than
        ``most``: ``[prefix, *frames]`` when ``prefix`` is not None (a
        ROUTER's), else the list of frames (``whole``) or the last frame
        alone (an answer is one frame). A message's earlier frames wait in
        ``parts`` between calls. Returns the first command frame met, as
        (flags, body) for the caller to act on, or None when no whole frame
        is left (or ``out`` is full)."""
        while len(out) < most and (got := self.frame()) is not None:
            flags, body = got
            if flags & COMMAND:
                return got
            self.parts.append(body)
            if flags & MORE:
                continue
            if prefix is not None:
                out.append([prefix, *self.parts])
            elif whole:
                out.append(self.parts)
            else:
                out.append(body)
            self.parts = []
        return None


def _load() -> ModuleType | None:
    """The C twin (``transport/_zmtp.c``), unless DUOMQ_NATIVE=0 or not built."""
    if os.environ.get("DUOMQ_NATIVE", "1") == "0":
        return None
    try:
        from duomq.transport import _zmtp
    except ImportError:
        return None
    _zmtp.init(ZmtpError, EOF)
    return _zmtp


NATIVE = _load()
if NATIVE is not None:
    class NativeFrameReader(NATIVE.Reader):   # type: ignore[name-defined]
        """FrameReader in C: the same methods and errors."""

        __slots__ = ()
        greeting = FrameReader.greeting


def use(native: bool) -> None:
    """Frames read and written by the C twin (``native``, when built) or by
    this module's Python, the reference: ``reader``, ``message`` and
    ``write_out`` name the ones in use (callers look them up at each use,
    so a test switches both ways)."""
    global reader, message, write_out
    if native and NATIVE is not None:
        reader, message, write_out = NativeFrameReader, NATIVE.message, NATIVE.write_out
    else:
        reader, message, write_out = FrameReader, py_message, py_write_out


reader: Callable[..., FrameReader]
message: Callable[[list[bytes]], list[bytes]]
write_out: Callable[[int, deque[list]], bool]
use(True)
