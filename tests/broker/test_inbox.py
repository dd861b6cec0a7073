"""The serving thread's inbox (broker.inbox): every note posted from any
thread is taken, each post wakes a poll on its eventfd, a take leaves no
wake-up behind it, and a post after close writes nowhere (not even to a
file that took the closed descriptor's number)."""

import os
import select
import threading

from duomq.broker.inbox import Flushed, Inbox


def readable(inbox: Inbox, timeout_ms: int = 0) -> bool:
    p = select.poll()
    p.register(inbox.fileno(), select.POLLIN)
    return bool(p.poll(timeout_ms))


def test_notes_from_many_threads_are_all_taken_in_each_threads_order_and_wake_the_poll():
    inbox = Inbox()
    try:
        assert not readable(inbox) and inbox.take() == []
        threads = [threading.Thread(target=lambda t=t: [inbox.post((t, i)) for i in range(500)])
                   for t in range(4)]
        for th in threads:
            th.start()
        got: list = []
        while len(got) < 2000:
            assert readable(inbox, 5000), "a posted note did not wake the poll"
            got += inbox.take()
        for th in threads:
            th.join()
        got += inbox.take()
        for t in range(4):
            assert [i for (tt, i) in got if tt == t] == list(range(500))
        assert not readable(inbox)                  # nothing left to wake for
        inbox.flushed(7)
        assert readable(inbox) and inbox.take() == [Flushed(7)]
        inbox.wake()                                # a wake-up without a note
        assert readable(inbox) and inbox.take() == [] and not readable(inbox)
    finally:
        inbox.close()


def test_a_busy_poll_sees_a_note_before_it_is_taken():
    inbox = Inbox()
    try:
        assert inbox.get(0) == 0
        inbox.post("x")
        assert inbox.get(0) == 1
        inbox.take()
        assert inbox.get(0) == 0
    finally:
        inbox.close()


def test_a_post_after_close_writes_to_no_file():
    inbox = Inbox()
    fd = inbox.fileno()
    inbox.close()
    other = os.eventfd(0, os.EFD_NONBLOCK)     # the lowest free number: the closed one's
    try:
        assert other == fd
        inbox.post("late")                         # no error, and no write
        inbox.wake()
        inbox.close()                              # twice: nothing more
        try:
            os.eventfd_read(other)
            raise AssertionError("a post after close wrote to another file")
        except BlockingIOError:
            pass
    finally:
        os.close(other)
