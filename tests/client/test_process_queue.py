"""The consume window: the committed offset is the oldest unconsumed message."""

from duomq.client.consumer.process_queue import ProcessQueue
from duomq.common.message import MessageExt, MessageQueue

MQ = MessageQueue("T", "broker-a", 0)


def msgs(*offsets):
    return [MessageExt("T", b"x", "", "", {}, 0, o, 0, 0, 0, "", 0, "broker-a") for o in offsets]


def consume(chunk, n=None):
    chunk.i = len(chunk.messages) if n is None else n


def test_a_stuck_message_holds_the_offset_however_far_the_others_get():
    pq = ProcessQueue(MQ, 100)
    chunks = pq.add(msgs(*range(100, 200)), 200, 10_000, chunk_size=32)
    assert [len(c.messages) for c in chunks] == [32, 32, 32, 4]
    assert pq.inflight == 100 and pq.inflight_bytes == 10_000
    for c in chunks[1:]:
        consume(c)
        pq.finish(c)
    consume(chunks[0], 5)             # the sixth message of the first chunk is stuck
    assert pq.consumed_offset() == 105
    assert pq.span() == 95
    consume(chunks[0])
    pq.finish(chunks[0])
    assert pq.consumed_offset() == 200 and pq.inflight == 0 and pq.inflight_bytes == 0


def test_a_finished_chunk_lets_its_messages_go():
    pq = ProcessQueue(MQ, 0)
    a, b = pq.add(msgs(*range(0, 64)), 64, 6400, chunk_size=32)
    consume(b)
    pq.finish(b)                      # behind an unfinished chunk: stays in the window ...
    assert b.messages == [] and b.finished and b.position() == 64   # ... holding nothing
    assert pq.consumed_offset() == 0 and len(pq._chunks) == 2
    consume(a)
    pq.finish(a)
    assert a.messages == [] and len(pq._chunks) == 0 and pq.consumed_offset() == 64
    assert pq.inflight == 0 and pq.inflight_bytes == 0


def test_filtered_entries_pass_once_the_messages_before_them_are_consumed():
    pq = ProcessQueue(MQ, 0)
    first = pq.add(msgs(0, 7), 50, 2, chunk_size=32)     # 2..6, 8..49 filtered out
    empty = pq.add([], 90, 0, chunk_size=32)              # a stretch with no match
    assert empty[0].finished
    assert pq.consumed_offset() == 0
    consume(first[0], 1)
    assert pq.consumed_offset() == 7
    consume(first[0])
    assert pq.consumed_offset() == 90 and pq.next_pull == 90


def test_an_illegal_offset_moves_on_after_what_was_pulled_before():
    pq = ProcessQueue(MQ, 10)
    c = pq.add(msgs(10, 11), 12, 2, chunk_size=32)[0]
    pq.skip_to(500)
    assert pq.next_pull == 500 and pq.consumed_offset() == 10
    consume(c)
    assert pq.consumed_offset() == 500


def test_orderly_takes_the_first_unfinished_chunk():
    pq = ProcessQueue(MQ, 0)
    a = pq.add(msgs(0, 1), 2, 0, chunk_size=32)[0]
    b = pq.add(msgs(2, 3), 4, 0, chunk_size=32)[0]
    assert pq.first_pending() is a
    consume(a)
    assert pq.first_pending() is b
    consume(b)
    assert pq.first_pending() is None and pq.consumed_offset() == 4


def test_position_reads_the_index_once():
    """A consume thread may move a chunk past its last message while a pull
    callback reads its position: the read must not index with the moved value.
    (The move is made from inside the length check, where a thread switch
    would make it.)"""
    pq = ProcessQueue(MQ, 0)
    chunk = pq.add(msgs(0, 1), 2, 2, 32)[0]

    class Moving(list):
        def __len__(self):
            n = super().__len__()
            chunk.i = n          # the consume thread finished the chunk just now
            return n

    chunk.messages = Moving(chunk.messages)
    chunk.i = 1
    assert chunk.position() in (1, 2)


def test_a_release_finishes_begun_chunks_and_leaves_the_rest_to_the_next_owner():
    pq = ProcessQueue(MQ, 0)
    a, b, c = pq.add(msgs(*range(96)), 96, 960, chunk_size=32)
    assert pq.begin(a) and pq.begin(b)       # two threads in the first two chunks
    consume(a, 10)
    pq.stop_pulling()
    assert not pq.pulling and not pq.dropped
    assert not pq.begin(c)                   # never begun: left for the next owner
    assert pq.add(msgs(96), 97, 10, chunk_size=32) == []   # a late pull answer: thrown away
    assert not pq.settled
    consume(b)
    pq.finish(b)
    pq.leave()
    consume(a)
    pq.finish(a)
    assert not pq.settled                    # a thread is still in chunk a
    pq.leave()
    assert pq.settled
    assert pq.consumed_offset() == 64        # exactly where the next owner starts
    assert pq.left_over() == 32
    pq.drop()
    assert pq.dropped and not pq.pulling


def test_a_chunk_begun_before_the_release_may_be_taken_up_again():
    pq = ProcessQueue(MQ, 0)
    (a,) = pq.add(msgs(*range(8)), 8, 80, chunk_size=32)
    assert pq.begin(a)
    consume(a, 3)                            # a failure: suspended, to be resumed
    pq.leave()
    pq.stop_pulling()
    assert not pq.settled                    # begun and unfinished
    assert pq.begin(a)                       # the resumed attempt is let in
    consume(a)
    pq.finish(a)
    pq.leave()
    assert pq.settled and pq.consumed_offset() == 8
