import threading
import time

from duomq.client.consumer.consume_service import ConsumePool


def test_threads_are_started_only_as_the_load_needs_them():
    pool = ConsumePool(8, "t")
    try:
        assert pool.size == 0                         # idle: no thread at all
        done = []
        for i in range(50):                           # quick tasks, one after another
            pool.submit(done.append, i)
            deadline = time.monotonic() + 5
            while len(done) <= i or pool.idle < pool.size:   # done, and its thread idle again
                assert time.monotonic() < deadline
                time.sleep(0.001)
        assert pool.size == 1
        gate = threading.Event()
        started = []
        for i in range(20):                           # 20 blocked tasks: all 8 threads, no more
            pool.submit(lambda i: (started.append(i), gate.wait(5)), i)
        deadline = time.monotonic() + 5
        while len(started) < 8:
            assert time.monotonic() < deadline
            time.sleep(0.001)
        assert pool.size == 8
        gate.set()
        deadline = time.monotonic() + 5
        while len(started) < 20:
            assert time.monotonic() < deadline
            time.sleep(0.001)
    finally:
        pool.shutdown(5)
    assert all(not t.is_alive() for t in pool._threads)


def test_without_threads_a_task_runs_at_once_on_the_submitting_thread(caplog):
    pool = ConsumePool(0, "t")
    ran = []
    pool.submit(lambda i: ran.append((i, threading.current_thread().name)), 1)
    assert ran == [(1, threading.current_thread().name)] and pool.size == 0 and pool.inline

    def boom(_):
        raise RuntimeError("handler bug")
    pool.submit(boom, 2)                       # logged, not raised into the I/O thread
    assert "consume task failed" in caplog.text
    pool.shutdown(1)
    pool.submit(ran.append, 3)                 # closed: nothing more runs
    assert ran == [(1, threading.current_thread().name)]
