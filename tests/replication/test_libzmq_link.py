"""A slave's libzmq link (auth = true: CURVE) survives what killed one: its
reader stalls with the pipe full, ZMTP heartbeats time out, ZeroMQ dials
again, the reader resumes. With a receive high-water mark, libzmq 4.3 aborts
the process there (``Assertion failed: _input_stopped``, libzmq#3937): the
control shows the scenario reaches that bug, the link's own options do not.
Real libzmq in a child process, since the failure is an abort."""

import json
import subprocess
import sys
import textwrap

import zmq

from duomq.replication.ha_client import libzmq_link_options

SCENARIO = textwrap.dedent("""
    import json, sys, time, zmq
    options = {int(k): v for k, v in json.loads(sys.argv[1]).items()}
    ctx = zmq.Context()
    master = ctx.socket(zmq.ROUTER)
    port = master.bind_to_random_port("tcp://127.0.0.1")
    master.setsockopt(zmq.SNDTIMEO, 0)
    link = ctx.socket(zmq.DEALER)
    for option, value in options.items():
        link.setsockopt(option, value)
    link.connect(f"tcp://127.0.0.1:{port}")
    link.send(b"report")
    peer, _ = master.recv_multipart()
    got = 0
    for _ in range(6):
        for _ in range(2000):                 # more than any pipe holds: input stops
            try:
                master.send_multipart([peer, b"x" * 1000], copy=False)
            except zmq.Again:
                break
        time.sleep(0.25)                      # the reader stalls past the heartbeat timeout
        while link.poll(20):
            link.recv()
            got += 1
        link.send(b"report")                  # the link dialled again names itself anew
        if master.poll(1000):
            peer, _ = master.recv_multipart()
    print("survived", got, flush=True)
""")


def run(options: dict[int, int]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCENARIO, json.dumps(options)],
                          capture_output=True, text=True, timeout=60)


def test_the_links_options_survive_a_stalled_reader_whose_heartbeats_time_out():
    options = libzmq_link_options(40)              # heartbeats every 20 ms, timeout 80 ms
    assert options[zmq.HEARTBEAT_TIMEOUT] < 250    # the stall outlasts it
    for _ in range(3):
        p = run(options)
        assert p.returncode == 0 and "survived" in p.stdout, p.stderr[-2000:]


def test_the_same_stall_with_a_receive_high_water_mark_aborts_libzmq():
    """If this fails, this libzmq no longer has the bug: the scenario no
    longer proves the test above, and RCVHWM = 0 is no longer needed."""
    options = {**libzmq_link_options(40), zmq.RCVHWM: 64}
    results = []
    for _ in range(3):
        results.append(p := run(options))
        if p.returncode != 0 and "_input_stopped" in p.stderr:
            return
    raise AssertionError(f"libzmq {zmq.zmq_version()} survived every stall with RCVHWM 64: "
                         + "; ".join(p.stdout.strip() or p.stderr[-200:] for p in results))
