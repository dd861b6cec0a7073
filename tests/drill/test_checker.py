"""The drill's checker (pure): Jepsen's total-queue figures, RTO, split brain."""

from duomq.drill.checker import Op, Round, check, order_violations, rto, split_brain
from duomq.drill.report import summary


def op(body, outcome, started, ended=None, worker=0, seq=0, epoch=1, group="broker-a"):
    return Op(body, worker, seq, started, started + 0.01 if ended is None else ended, outcome,
              "", group, epoch)


def test_total_queue_figures():
    ops = [op(b"a", "ok", 0), op(b"b", "ok", 1), op(b"c", "degraded", 2), op(b"d", "stored", 3),
           op(b"e", "unknown", 4), op(b"f", "failed", 5), op(b"g", "unknown", 6)]
    back = [(0, b"a"), (0, b"c"), (0, b"c"), (0, b"d"), (0, b"e"), (1, b"zzz")]
    r = check("kill-master", ops, back, [Round(0, "kill", 0.5)], durable=True)
    assert (r.attempted, r.acked, r.acked_degraded, r.stored_not_durable) == (7, 2, 1, 1)
    assert (r.failed, r.unknown) == (1, 2)
    assert r.lost == 1 and r.lost_bodies == ["b"]          # acked, never read back
    assert r.unexpected == 1 and r.duplicated == 1
    assert r.recovered == 1                                 # "e": unknown, yet stored
    assert not r.guarantees_held and "lost" in r.verdict and "never sent" in r.verdict


def test_async_loss_is_reported_not_failed():
    r = check("kill-master", [op(b"a", "ok", 0), op(b"b", "ok", 2)], [(0, b"b")],
              [Round(0, "kill", 1.0)], durable=False)
    assert r.lost == 1 and r.guarantees_held and "ASYNC" in r.notes["async"]


def test_rto_is_the_longest_outage_after_the_fault():
    ops = [op(b"a", "ok", 9.9, 10.5),                      # acked just after the fault
           op(b"b", "ok", 10.5, 11.0),                     # a master acking on its lease
           op(b"c", "unknown", 11.0, 14.0), op(b"d", "stored", 14.0, 16.0),
           op(b"e", "ok", 16.0, 17.0), op(b"f", "ok", 17.0, 17.1)]
    assert rto(ops, 10.0, None) == 6.0                     # 11.0 -> 17.0
    assert rto(ops, 10.0, 10.7) == 0.5
    assert rto(ops, 18.0, None) is None                    # nothing acked after it


def test_split_brain_is_the_overlap_of_two_epochs_acking():
    ops = [op(b"a", "ok", 0, 1.0, epoch=1), op(b"b", "ok", 0, 5.0, epoch=1),
           op(b"c", "ok", 0, 4.0, epoch=2), op(b"d", "ok", 0, 8.0, epoch=2)]
    assert split_brain(ops) == 1.0
    clean = [op(b"a", "ok", 0, 1.0, epoch=1), op(b"c", "ok", 0, 4.0, epoch=2)]
    assert split_brain(clean) == 0.0


def test_order_violations_ignore_duplicates():
    ops = [op(b"%d" % i, "ok", i, worker=0, seq=i) for i in range(4)]
    in_order = [(0, b"0"), (0, b"1"), (0, b"1"), (0, b"2"), (0, b"3")]
    assert order_violations(ops, in_order) == 0
    assert order_violations(ops, [(0, b"0"), (0, b"2"), (0, b"1"), (0, b"3")]) == 1


def test_a_round_without_any_ack_after_it_fails_the_run():
    r = check("kill-master", [op(b"a", "ok", 0)], [(0, b"a")], [Round(0, "kill", 5.0)],
              durable=True)
    assert r.rto_s == [None] and not r.guarantees_held


def test_a_copy_on_another_queue_is_a_duplicate_and_fails_idempotent_producers():
    """Counted across the whole cluster: the same body on two queues (of two
    groups) is one extra copy, as Jepsen counts; idempotent producers promise none."""
    ops = [op(b"a", "ok", 0), op(b"b", "ok", 1)]
    back = [(0, b"a"), (3, b"a"), (1, b"b")]             # queue 0 of one group, 3 of another
    r = check("random", ops, back, [Round(0, "x", 0.5)], durable=True)
    assert r.duplicated == 1 and not r.guarantees_held and "idempotent" in r.verdict
    r = check("random", ops, back, [Round(0, "x", 0.5)], durable=True, idempotent=False)
    assert r.duplicated == 1 and r.guarantees_held


def test_each_round_reports_its_longest_gap_without_an_ack():
    ops = [op(b"a", "ok", 0.0), op(b"b", "ok", 1.0), op(b"c", "failed", 1.5),
           op(b"d", "ok", 4.0), op(b"e", "ok", 4.5), op(b"f", "ok", 9.0)]
    back = [(0, x.body) for x in ops if x.outcome == "ok"]
    r = check("pause-master", ops, back, [Round(0, "p", 0.5), Round(1, "p", 4.2)],
              durable=True)
    # round 0: [0.5, 4.2]: acks at 1.01 and 4.01 -> the gap 1.01..4.01; round 1: 4.51..9.01
    assert [pr["longest_gap_s"] for pr in r.per_round] == [3.0, 4.5]
    assert r.longest_gap_s == 4.5


def test_an_acked_record_a_broker_cut_from_its_log_is_flagged(tmp_path, caplog):
    """The log line a broker writes when it cuts (slave/parts.truncate) is
    what the drill reads back: an acked send of an older epoch stored past
    the cut is flagged, and under SYNC fails the guarantees."""
    import logging

    from duomq.common.config import BrokerConfig
    from duomq.drill.checker import Truncation, truncations_in
    from duomq.format import record as rec
    from duomq.slave.parts import truncate
    from duomq.store import MessageStore
    store = MessageStore(BrokerConfig(data_dir=str(tmp_path)))
    store.start()
    one = rec.encode_record(b"T", b"", b"", b"", b"x" * 100, 1)
    store.put_batch("T", 0, bytearray(one * 3), 3)
    with caplog.at_level(logging.WARNING):
        assert truncate(store, 5, len(one))
    store.close()
    (cut,) = truncations_in(caplog.text, "broker-a/1", "broker-a")
    assert cut == Truncation("broker-a/1", "broker-a", len(one), 5)
    acked = [Op(b"kept", 0, 0, 0.0, 0.1, "ok", "", "broker-a", 4, 0, 0),
             Op(b"cut", 0, 1, 0.2, 0.3, "ok", "", "broker-a", 4, 0, len(one)),
             Op(b"new", 0, 2, 0.4, 0.5, "ok", "", "broker-a", 5, 0, len(one))]
    back = [(0, b"kept"), (0, b"cut"), (0, b"new")]
    r = check("kill-master", acked, back, [Round(0, "k", 0.0)], durable=True, cuts=[cut])
    assert r.truncated_acked == 1 and not r.guarantees_held and "cut from a broker" in r.verdict
    r = check("kill-master", acked, back, [Round(0, "k", 0.0)], durable=True, cuts=[])
    assert r.truncated_acked == 0 and r.guarantees_held


def test_an_acked_message_unreadable_while_the_fault_held_is_lost_though_read_back_later():
    """A drill that reads only after the heal sees an acked message that
    the new master held but did not show: it counts as lost (SYNC), named,
    and a body not acked that the read under the fault missed is not."""
    ops = [op(b"a", "ok", 0), op(b"b", "ok", 1), op(b"c", "stored", 2), op(b"d", "ok", 3)]
    back = [(0, b"a"), (0, b"b"), (0, b"c"), (0, b"d")]      # all there after the heal
    r = check("kill-master", ops, back, [Round(0, "kill", 1.5)], durable=True,
              unreadable={b"b", b"c"})
    assert r.lost == 1 and r.unreadable_under_fault == 1 and r.lost_bodies == ["b"]
    assert not r.guarantees_held and "1 of them unreadable while a fault was in place" in r.verdict
    async_ = check("kill-master", ops, back, [Round(0, "kill", 1.5)], durable=False,
                   unreadable={b"b"})
    assert async_.lost == 1 and async_.guarantees_held
    clean = check("kill-master", ops, back, [Round(0, "kill", 1.5)], durable=True, unreadable=set())
    assert clean.lost == 0 and clean.guarantees_held


def test_an_id_that_names_two_messages_fails_the_run_durable_or_not():
    """An ASYNC loss is allowed; an id naming two messages never is: two
    acked sends given one id, or an acked send's id read back on another
    body (the earlier ids, the offset alone, did after a cut). An id read
    back on its own body, or a send without an answer, is no conflict."""
    def sent(body, msg_id, outcome="ok", t=0):
        return Op(body, 0, 0, t, t + 0.01, outcome, "", "broker-a", 1, 0, 10, msg_id)
    ops = [sent(b"lost", "broker-a:1:10", t=0), sent(b"next", "broker-a:2:10", t=2),
           sent(b"x", "", "unknown", t=3)]
    back = [(0, b"next")]
    rounds = [Round(0, "kill", 1.0)]
    ok = check("kill-master", ops, back, rounds, durable=False,
               read_ids={"broker-a:2:10": b"next"})
    assert ok.id_conflicts == 0 and ok.guarantees_held and ok.lost == 1
    reused = check("kill-master", ops, back, rounds, durable=False,
                   read_ids={"broker-a:1:10": b"next", "broker-a:2:10": b"next"})
    assert reused.id_conflicts == 1 and not reused.guarantees_held
    assert "named two messages" in reused.verdict
    twice = [*ops, sent(b"other", "broker-a:2:10", t=4)]
    assert check("kill-master", twice, [*back, (0, b"other")], rounds,
                 durable=False).id_conflicts == 1


def test_an_exception_that_is_not_a_duomq_error_fails_the_run():
    ops = [op(b"a", "ok", 0), op(b"b", "ok", 2),
           Op(b"c", 0, 2, 3, 3.1, "unknown", "SessionExpiredError", foreign=True),
           Op(b"d", 0, 3, 4, 4.1, "unknown", "RequestTimeoutError")]
    r = check("zk-outage", ops, [(0, b"a"), (0, b"b")], [Round(0, "outage", 1.0)], durable=True)
    assert r.foreign_errors == {"SessionExpiredError": 1}
    assert not r.guarantees_held and "SessionExpiredError" in r.verdict


def test_a_timer_or_a_commit_written_twice_is_counted_not_failed():
    """A delayed message moved again, or a transaction committed again, by
    the next master (the record of the first not replicated yet) is a
    duplicate its consumer recognises: counted in duplicated_rewrites; a
    plain one fails the run."""
    def sent(body, kind):
        return Op(body, 0, 0, 2, 2.01, "ok", "", "broker-a", 1, kind=kind)
    ops = [sent(b"t", "delayed"), sent(b"x", "transactional"), sent(b"p", "plain")]
    rounds = [Round(0, "kill", 1.0)]
    timer = check("kill-master", ops, [(0, b"t"), (0, b"t"), (0, b"x"), (1, b"x"), (0, b"p")],
                  rounds, durable=True)
    assert (timer.duplicated, timer.duplicated_rewrites) == (2, 2) and timer.guarantees_held
    plain = check("kill-master", ops, [(0, b"t"), (0, b"x"), (0, b"p"), (1, b"p")], rounds,
                  durable=True)
    assert plain.duplicated == 1 and not plain.guarantees_held


def test_timers_lost_and_fired_twice_are_counted_apart():
    import dataclasses
    ops = [op(b"p", "ok", 0.1),
           dataclasses.replace(op(b"t1", "ok", 0.2), kind="timer", due=1.0),
           dataclasses.replace(op(b"t2", "ok", 0.3), kind="timer", due=2.0),
           dataclasses.replace(op(b"d1", "ok", 0.4), kind="delayed", due=1.4),
           dataclasses.replace(op(b"t3", "failed", 0.5), kind="timer", due=2.0)]
    back = [(0, b"p"), (0, b"t1"), (0, b"t1"), (0, b"t1"), (1, b"d1")]
    r = check("kill-master", ops, back, [Round(0, "kill", 0.05)], durable=True)
    assert (r.timers_acked, r.timers_lost, r.timers_fired_twice) == (3, 1, 2)
    assert r.notes["fired_twice_by_kind"] == {"timer": 2}
    assert r.lost == 1 and r.duplicated == r.duplicated_rewrites == 2
    assert "timers acked/lost/fired twice    3 / 1 / 2" in summary(r)
