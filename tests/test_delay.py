import pytest

from duomq.common import delay as d
from duomq.common.errors import BadRequestError, ConfigError
from duomq.common.message import MessageExt, decode_records
from duomq.common.names import TIMER_TOPIC
from duomq.format import record as rec
from duomq.master import requeue

LEVELS = d.parse_levels(d.DEFAULT_LEVELS)


def test_the_default_levels_are_rocketmqs_18():
    assert len(LEVELS) == 18
    assert LEVELS[:4] == (1000, 5000, 10_000, 30_000) and LEVELS[-1] == 7_200_000


@pytest.mark.parametrize("text", ["", "1s 1s", "5s 1s", "1x", "0s", "1.5s"])
def test_bad_levels_are_refused(text):
    with pytest.raises(ConfigError):
        d.parse_levels(text)


@pytest.mark.parametrize("remaining,level", [
    (-5, 0), (0, 0), (1, 1), (999, 1), (1000, 1), (4999, 1), (5000, 2), (59_999, 4),
    (3_600_000, 17), (10 ** 9, 18)])
def test_a_delivery_time_hops_to_the_longest_level_not_past_it(remaining, level):
    assert d.hop_level(LEVELS, remaining) == level


def test_hops_reach_any_time_within_the_shortest_level():
    for remaining in (1, 700, 4321, 61_000, 7_199_999, 3 * 86_400_000 + 17):
        t, hops = 0, 0
        while (level := d.hop_level(LEVELS, remaining - t)):
            t += LEVELS[level - 1]
            hops += 1
        assert remaining <= t < remaining + 1000 or remaining <= 0
        assert hops < 60


def test_retry_levels_start_at_3_and_stop_at_the_last():
    assert [d.retry_level(LEVELS, n) for n in (0, 1, 15, 16, 40)] == [3, 4, 18, 18, 18]


def stored(topic="T", props=None, body=b"b"):
    raw = rec.encode_record(topic.encode(), b"tag", b"k1 k2", rec.encode_properties(props or {}),
                            body, 123, rec.pack_host("10.0.0.1", 99), physical_offset=4096)
    return decode_records(raw, "broker-a")[0]


def decode(requeued):
    topic, qid, raw = requeued
    return topic, qid, decode_records(raw)[0]


def test_a_message_asking_for_a_delay_goes_to_its_level_queue_and_back():
    topic, qid, m = decode(requeue.schedule(stored(props={"DELAY": "3", "x": "1"}), 2, LEVELS, 0))
    assert (topic, qid) == (d.SCHEDULE_TOPIC, 2)
    assert m.properties == {"DELAY": "3", "x": "1", "REAL_TOPIC": "T", "REAL_QID": "2"}
    m.physical_offset, m.broker_group, m.flags = 0x40, "broker-a", 3 << rec.EPOCH_SHIFT
    topic, qid, back = decode(requeue.due(m, LEVELS, 10_000))
    # the id of its first stored copy (what its producer was given): a timer
    # moved twice across a failover is recognised by it
    assert (topic, qid) == ("T", 2) and back.properties == {
        "x": "1", "ORIGIN_MESSAGE_ID": "broker-a:000000030000000000000040"}
    assert (back.body, back.tags, back.keys, back.born_timestamp_ms, back.born_host) == \
        (b"b", "tag", "k1 k2", 123, "10.0.0.1:99")


def test_a_delivery_time_goes_to_the_timer_topic_and_when_due_to_its_queue():
    m = stored(props={"DELIVER_AT": str(65_000), "x": "1"})
    topic, qid, t = decode(requeue.schedule(m, 3, LEVELS, 0))
    assert (topic, qid) == (TIMER_TOPIC, 0)
    assert t.properties == {"DELIVER_AT": "65000", "x": "1", "REAL_TOPIC": "T", "REAL_QID": "3"}
    t.broker_group, t.physical_offset = "broker-a", 7
    topic, qid, out = decode(requeue.fired(t))
    assert (topic, qid) == ("T", 3) and out.properties == {
        "x": "1", "ORIGIN_MESSAGE_ID": "broker-a:000000000000000000000007"}
    assert (out.body, out.tags, out.keys) == (m.body, m.tags, m.keys)
    # a time past: delivered at once; too far ahead, not a number, negative: refused
    assert decode(requeue.schedule(stored(props={"DELIVER_AT": "5"}), 1, LEVELS, 10))[:2] == ("T", 1)
    for bad, why in (("999999999", "past this broker's timer_max_delay_ms"),
                     ("soon", "epoch milliseconds"), ("-4", "epoch milliseconds")):
        with pytest.raises(BadRequestError, match=why):
            requeue.schedule(stored(props={"DELIVER_AT": bad}), 0, LEVELS, 0, max_delay_ms=86_400_000)
    topic, _q, r = decode(requeue.recall("T", 7, 65_000, 5))
    assert topic == TIMER_TOPIC and r.properties == {"RECALL_OF": "7", "DELIVER_AT": "65000",
                                                     "REAL_TOPIC": "T"} and r.body == b""


def test_a_delivery_time_stored_in_the_schedule_topic_still_rides_the_levels():
    # (records a broker before timers stored there: the schedule service hops them on)
    s = stored(topic=d.SCHEDULE_TOPIC, props={"DELIVER_AT": str(65_000), "REAL_TOPIC": "T",
                                               "REAL_QID": "0", "DELAY": "5"})
    s.broker_group, s.physical_offset = "broker-a", 7
    topic, qid, s2 = decode(requeue.due(s, LEVELS, 60_000))
    assert (topic, qid) == (d.SCHEDULE_TOPIC, 1)                      # 5s left: 5s
    s2.broker_group, s2.physical_offset = "broker-a", 9
    topic, _qid, last = decode(requeue.due(s2, LEVELS, 65_000))
    assert topic == "T" and last.properties["ORIGIN_MESSAGE_ID"] == \
        "broker-a:000000000000000000000007"                             # the first hop's, kept


def test_a_bad_delay_property_is_a_bad_request():
    with pytest.raises(BadRequestError):
        requeue.schedule(stored(props={"DELAY": "soon"}), 0, LEVELS, 0)


def test_send_back_counts_retries_then_dead_letters():
    m = stored()
    topic, qid, r = decode(requeue.send_back(m, "g", LEVELS, 16))
    assert (topic, qid) == (d.SCHEDULE_TOPIC, 2)                      # level 3
    assert r.properties["REAL_TOPIC"] == "%RETRY%g" and r.properties["RECONSUME_TIME"] == "1"
    assert r.properties["RETRY_TOPIC"] == "T" and r.properties["ORIGIN_MESSAGE_ID"] == m.msg_id
    retried = MessageExt(**{**{f: getattr(r, f) for f in r.__dataclass_fields__},
                            "topic": "%RETRY%g", "physical_offset": 9999,
                            "properties": {**r.properties, "RECONSUME_TIME": "16"}})
    topic, qid, dead = decode(requeue.send_back(retried, "g", LEVELS, 16))
    assert (topic, qid) == ("%DLQ%g", 0)
    assert dead.properties["RETRY_TOPIC"] == "T" and dead.properties["ORIGIN_MESSAGE_ID"] == m.msg_id
    assert "REAL_TOPIC" not in dead.properties
    assert decode(requeue.send_back(m, "g", LEVELS, 16, dead_letter=True))[0] == "%DLQ%g"
    assert decode(requeue.send_back(m, "g", LEVELS, 16, delay_level=1))[1] == 0


def test_a_half_message_waits_in_the_half_topic_and_commits_as_sent():
    m = stored(props={"TRAN_MSG": "true", "PGROUP": "pg", "DELAY": "1", "x": "1"})
    topic, qid, half = decode(requeue.schedule(m, 3, LEVELS, 0))
    assert (topic, qid) == ("RMQ_SYS_TRANS_HALF_TOPIC", 0)          # not delayed yet
    assert half.properties["REAL_TOPIC"] == "T" and half.properties["REAL_QID"] == "3"
    half.physical_offset, half.broker_group = 777, "broker-a"
    topic, qid, real = decode(requeue.committed(half, LEVELS, 0))
    assert (topic, qid) == (d.SCHEDULE_TOPIC, 0)                     # its delay, at commit
    assert real.properties == {"PGROUP": "pg", "DELAY": "1", "x": "1", "REAL_TOPIC": "T",
                               "REAL_QID": "3", "TRAN_HALF_ID": "broker-a:000000000000000000000309"}
    plain = stored(props={"TRAN_MSG": "true", "PGROUP": "pg"})
    _, _, half = decode(requeue.schedule(plain, 1, LEVELS, 0))
    assert decode(requeue.committed(half, LEVELS, 0))[:2] == ("T", 1)
    with pytest.raises(BadRequestError, match="producer group"):
        requeue.schedule(stored(props={"TRAN_MSG": "true"}), 0, LEVELS, 0)


def test_a_delay_ms_is_a_delivery_time_from_now():
    import time

    from duomq.common.message import Message
    before = int(time.time() * 1000)
    m = Message("T", b"x", delay_ms=37 * 60_000)
    at = m.deliver_at_ms
    assert before + 37 * 60_000 <= at <= int(time.time() * 1000) + 37 * 60_000
    assert m.wire_properties() == {"DELIVER_AT": str(at)} and m.properties == {}
    plain = Message("T", b"x", delay_ms=0)
    assert plain.deliver_at_ms == 0 and plain.wire_properties() == {}


@pytest.mark.parametrize("kw,match", [
    ({"delay_ms": -1}, "delay_ms"), ({"delay_ms": 1.5}, "delay_ms"),
    ({"delay_ms": 1000, "deliver_at_ms": 1}, "not both"),
    ({"deliver_at_ms": -3}, "epoch milliseconds"), ({"deliver_at_ms": 1.5e12}, "epoch milli"),
    ({"delay_ms": True}, "delay_ms"),
    ({"deliver_at_ms": 5, "properties": {"DELIVER_AT": "6"}}, "not both")])
def test_a_bad_delay_ms_or_both_times_is_refused(kw, match):
    from duomq.common.message import Message
    with pytest.raises(ValueError, match=match):
        Message("T", b"x", **kw)


def test_a_batch_of_timers_is_encoded_in_one_loop_to_the_bytes_of_one_by_one():
    from duomq.format import native
    msgs = [stored(props={"DELIVER_AT": str(65_000 + i), "x": "1"}, body=b"b%d" % i)
            for i in range(4)]
    one_by_one = b"".join(requeue.schedule(m, 3, LEVELS, 0)[2] for m in msgs)
    got = requeue.timers_batch(msgs, 3, 0, requeue.MAX_DELAY_MS, 1 << 20)
    assert got == ((one_by_one, [65_000, 65_001, 65_002, 65_003])
                   if native.LOOPS is not None else None)
    # not timers only: placed one by one (a time past, a level, a half, a time too far)
    for props in ({"DELIVER_AT": "0"}, {"DELIVER_AT": "65000", "DELAY": "2"},
                  {"DELIVER_AT": "65000", "TRAN_MSG": "true"}, {}):
        assert requeue.timers_batch(msgs + [stored(props=props)], 3, 10, requeue.MAX_DELAY_MS,
                                    1 << 20) is None
    if native.LOOPS is None:
        return                              # (without C loops every batch goes one by one)
    with pytest.raises(BadRequestError, match="timer_max_delay_ms"):
        requeue.timers_batch(msgs, 3, 0, 1000, 1 << 20)
    assert requeue.timers_batch(msgs, 3, 0, requeue.MAX_DELAY_MS, 40) is None   # too large


@pytest.mark.parametrize("name", ["RECALL_OF", "TIMER_ORIGIN"])
def test_a_message_naming_what_only_the_broker_writes_is_refused(name):
    """A producer's timer carrying RECALL_OF would be indexed as a recall
    of another's timer (cancelling it); TIMER_ORIGIN, as a copy of it."""
    m = stored(props={"DELIVER_AT": "65000", name: "4096"})
    with pytest.raises(BadRequestError, match=f"{name} is the broker's own"):
        requeue.schedule(m, 0, LEVELS, 0)
    from duomq.format import native
    if native.LOOPS is not None:              # (without them: schedule, one by one)
        with pytest.raises(BadRequestError, match=f"{name} is the broker's own"):
            requeue.timers_batch([m], 0, 0, requeue.MAX_DELAY_MS, 1 << 20)
    with pytest.raises(BadRequestError, match=f"{name} is the broker's own"):
        requeue.schedule(stored(props={name: "1"}), 0, LEVELS, 0)     # (no time: the same)


def test_a_timer_beyond_the_roll_is_indexed_to_be_rolled_and_its_copy_names_its_first():
    from duomq.timer.index import TIMER
    from duomq.timer.indexer import ROLL_MAX_MS, entry_of, entry_time, roll_ms
    assert roll_ms(72) == ROLL_MAX_MS and roll_ms(12) == 6 * 3_600_000 and roll_ms(0) == 1000
    assert entry_time(5000, 0, 10_000) == 5000 and entry_time(50_000, 7, 10_000) == 10_007
    m = stored(topic=TIMER_TOPIC, props={"DELIVER_AT": str(10 ** 6), "REAL_TOPIC": "T",
                                         "REAL_QID": "2"})
    m.broker_group = "broker-a"
    e = entry_of(m, 99, roll=1000)
    assert (e.deliver_at, e.phys, e.kind, e.origin) == (m.store_timestamp_ms + 1000, 4096,
                                                         TIMER, 4096)
    topic, qid, copy = decode(requeue.rolled(m, 4096))
    assert (topic, qid) == (TIMER_TOPIC, 0)
    assert copy.properties["TIMER_ORIGIN"] == "4096"
    assert copy.properties["ORIGIN_MESSAGE_ID"] == m.msg_id and copy.body == m.body
    copy.physical_offset, copy.broker_group, copy.store_timestamp_ms = 9000, "broker-a", 10 ** 6
    assert entry_of(copy, 99, roll=1000).origin == 4096          # what a recall names
    again = decode(requeue.rolled(copy, 4096))[2]
    assert again.properties["ORIGIN_MESSAGE_ID"] == m.msg_id      # the first id, always
    out = decode(requeue.fired(copy))[2]
    assert "TIMER_ORIGIN" not in out.properties and "DELIVER_AT" not in out.properties
    assert out.properties["ORIGIN_MESSAGE_ID"] == m.msg_id


HOST = rec.pack_host("10.0.0.1", 99)


def producer_batch(msgs, born=123, host=HOST):
    return b"".join(rec.encode_record(m.topic.encode(), m.tags.encode(), m.keys.encode(),
                                      rec.encode_properties(m.wire_properties()), bytes(m.body),
                                      born, host) for m in msgs)


def test_a_batch_of_timers_checked_and_rewritten_still_encoded_is_what_decoding_gives():
    """The C loop (master/requeue.timers_records) against the decoding path
    (timers_batch): the same records, delivery times and sizes; every batch
    it is not sure of declined."""
    from duomq.common.message import Message
    from duomq.format import native
    from duomq.timer.indexer import record_sizes
    if native.LOOPS is None:
        pytest.skip("no C loops in this build (DUOMQ_NATIVE=0): the decoding path alone")
    cap, big = requeue.MAX_DELAY_MS, 1 << 20
    msgs = [Message("T", b"body%d" % i, tags="tg" if i % 2 else "", keys=f"k{i}",
                    properties={"x": "1"} if i % 3 else None, deliver_at_ms=65_000 + i)
            for i in range(7)]
    raw = producer_batch(msgs)
    got = requeue.timers_records(raw, 7, "T", 3, 0, cap, big)
    want = requeue.timers_batch(decode_records(raw, "broker-a"), 3, 0, cap, big)
    assert got == (want[0], want[1], record_sizes(want[0]))
    decline = [
        (raw, 6, "T", 0, cap, big),                              # the count
        (raw, 7, "U", 0, cap, big),                              # another topic
        (raw, 7, "T", 65_003, cap, big),                         # one due already
        (raw, 7, "T", 0, 65_004, big),                           # one too far
        (raw, 7, "T", 0, cap, len(raw) // 7),                    # too large once rewritten
        (raw[:-1] + bytes([raw[-1] ^ 1]), 7, "T", 0, cap, big),  # a damaged payload
        (producer_batch(msgs[:3]) + producer_batch(msgs[3:], born=124), 7, "T", 0, cap, big),
    ]
    for args in decline:
        assert requeue.timers_records(args[0], args[1], args[2], 3, args[3], args[4],
                                      args[5]) is None, args[1:]
    for props in ({"DELIVER_AT": "65000", "DELAY": "2"}, {"DELIVER_AT": "65000",
                                                         "TRAN_MSG": "true"},
                  {"DELIVER_AT": "65000", "RECALL_OF": "1"}, {"DELIVER_AT": "6.5e4"},
                  {"DELIVER_AT": "65000", "REAL_TOPIC": "X"}, {"x": "1"},
                  {"DELIVER_AT": "65000", "note": "caf\u00e9"}):
        odd = Message("T", b"odd", properties=props)
        assert requeue.timers_records(producer_batch([msgs[0], odd]), 2, "T", 3, 0, cap,
                                      big) is None, props
    twice = rec.encode_record(b"T", b"", b"", b"DELIVER_AT\x0165000\x02DELIVER_AT\x0165001\x02",
                              b"b", 123, rec.pack_host("10.0.0.1", 99))
    assert requeue.timers_records(twice, 1, "T", 3, 0, cap, big) is None
