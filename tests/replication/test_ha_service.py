"""The master's replication service against a real store and a real ZeroMQ
pair: what a slave receives, and when it is asked to report at once."""

import pytest
import zmq

from duomq.common.config import BrokerConfig
from duomq.format import record as rec
from duomq.proto import codec, pb
from duomq.replication.ha_service import HAService
from duomq.replication.protocol import HaState
from duomq.store import MessageStore


def report(max_offset, acked):
    r = pb.HaReport(broker_id=1, max_offset=max_offset, acked_offset=acked, address="x",
                    epoch=3)
    return pb.Frame(version=1, type=pb.HA_REPORT, payload=r.SerializeToString()).SerializeToString()


def transfers(sock):
    out = []
    while sock.poll(200):
        frames = sock.recv_multipart()
        out.append((codec.decode_request(codec.decode_frame(frames[0])), frames[1:]))
    return out


@pytest.fixture
def store_of(tmp_path):
    """``store_of(**settings)``: a started store on this test's directory,
    closed after the test."""
    opened = []

    def make(**settings) -> MessageStore:
        store = MessageStore(BrokerConfig(data_dir=str(tmp_path), **settings))
        store.start()
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def ten_records_sent(connect, store):
    """A link reporting 0, ten 100-byte records written and sent to it:
    (the service, the link, one record's length)."""
    ha = connect(store, 0)
    one = rec.encode_record(b"T", b"", b"", b"", b"x" * 100, 1)
    store.put_batch("T", 0, bytearray(one * 10), 10)
    ha.pump(1.0, 0, True)
    return ha, next(iter(ha.links.values())), len(one)


@pytest.fixture
def link():
    """A ROUTER as the master's HA port and a DEALER as the slave; ``connect(store,
    acked)`` reports from the slave and returns the master's HAService with the link."""
    ctx = zmq.Context()
    router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    router.setsockopt(zmq.ROUTER_MANDATORY, 1)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    dealer.connect(f"tcp://127.0.0.1:{port}")

    def connect(store, acked: int) -> HAService:
        ha = HAService(store, store.config, router, 3, None)
        dealer.send(report(0, acked))
        assert router.poll(2000)
        identity, data = router.recv_multipart()
        ha.on_message(identity, data, 0.0)
        return ha

    yield connect, dealer
    router.close(0)
    dealer.close(0)
    ctx.term()


def test_ack_now_only_when_the_master_waits_or_the_window_fills(store_of, link):
    connect, dealer = link
    store = store_of(ha_window_bytes=1 << 20)
    ha = connect(store, 0)
    one = rec.encode_record(b"T", b"", b"", b"", b"x" * 1000, 1)
    store.put_batch("T", 0, bytearray(one * 100), 100)
    ha.pump(1.0, 0, False)                         # nothing waits: report on the timer
    (msg, data), = transfers(dealer)
    assert (msg.epoch, msg.offset, msg.ack_now) == (3, 0, False)
    assert len(data[0]) == store.commitlog.max_offset
    store.put_batch("T", 0, bytearray(one), 1)
    ha.pump(1.0, 0, True)                          # a SYNC send waits on this slave
    (msg, _), = transfers(dealer)
    assert msg.ack_now
    store.put_batch("T", 0, bytearray(one * 500), 500)
    ha.pump(1.0, 0, False)                         # more than half the window unacked
    assert [m.ack_now for m, _ in transfers(dealer)][-1]


def test_a_peer_claiming_huge_acks_gets_one_window_and_confirms_nothing(store_of, link):
    connect, dealer = link
    store = store_of(ha_window_bytes=2 << 20, ha_transfer_batch_bytes=256 << 10)
    one = rec.encode_record(b"T", b"", b"", b"", b"x" * 1000, 1)
    for _ in range(20):                                  # 20 MiB of log
        store.put_batch("T", 0, bytearray(one * 1000), 1000)
    ha = connect(store, 1 << 60)                     # "I hold everything, and more"
    for _ in range(50):
        ha.pump(1.0, 0, False)
    (link_,) = ha.links.values()
    assert link_.sent_offset <= 2 << 20              # one window, not the whole log
    assert link_.acked_offset == 0                   # capped at what it was sent (then 0)
    assert ha.replicated_offset() in (None, 0)
    received = sum(len(d[0]) for _m, d in transfers(dealer) if d)
    assert received <= 2 << 20


def test_only_slaves_in_the_published_isr_count_and_a_listed_one_is_waited_for(store_of, link):
    store = store_of(replication="SYNC", sync_replicas=1, min_sync_replicas=0)
    ha, link_, one = ten_records_sent(link[0], store)
    link_.acked_offset = ha.last_acked[1] = 4 * one
    ha.isr = frozenset({0})    # ZooKeeper does not list slave 1 yet
    assert ha.in_sync_count() == 0
    assert ha.replicated_offset() == store.commitlog.max_offset     # min 0: alone
    ha.isr = frozenset({0, 1})  # listed: it counts, and holds 4 records
    assert ha.in_sync_count() == 1
    assert ha.replicated_offset() == 4 * one
    link_.state = link_.state.SUSPEND        # silent: out of sync, but still listed
    assert ha.in_sync_count() == 0 and ha.slaves_available()
    assert ha.replicated_offset() == 4 * one
    ha.isr = frozenset({0})    # the controller removed it
    assert ha.replicated_offset() == store.commitlog.max_offset


def test_without_the_lease_every_listed_slave_and_every_set_being_written_counts(store_of, link):
    """A master whose lease lapsed acks what every slave of the in-sync set
    holds; a set the controller is writing counts before it is confirmed
    (ZooKeeper may list slave 1 already though the write's answer was lost:
    an election could pick it). A drill found acked writes lost without this."""
    store = store_of(replication="SYNC")
    ha, link_, one = ten_records_sent(link[0], store)
    link_.acked_offset = 4 * one
    assert ha.isr_held_offset() is None                 # no set published yet
    ha.isr = frozenset({0})
    assert ha.isr_held_offset() == store.commitlog.max_offset   # the master alone
    ha.isr_writing = frozenset({0, 1})                  # being written, not confirmed
    assert ha.isr_held_offset() == 4 * one         # slave 1 is waited for
    ha.isr, ha.isr_writing = frozenset({0, 3}), frozenset()
    assert ha.isr_held_offset() is None                 # a listed slave with no link


def test_a_hand_over_waits_for_a_slave_holding_all_to_be_in_the_published_isr(store_of, link):
    """A slave that caught up but is not yet in the in-sync set ZooKeeper
    holds would not be elected: handing over to it leaves the group
    without a master (seen: a slave restarted just before a switchover)."""
    store = store_of(replication="ASYNC")
    ha, link_, _ = ten_records_sent(link[0], store)
    end = store.commitlog.max_offset
    link_.acked_offset, link_.last_heard = end, 5.0
    ha.isr = frozenset({0})                        # the master alone, as published
    assert not ha.heard_holding(end, 4.0)
    ha.isr = frozenset({0, 1})                     # IsrPublished: the slave listed
    assert ha.heard_holding(end, 4.0)
    assert not ha.heard_holding(end, 6.0)          # its report came before the drain
    link_.acked_offset = end - 1
    assert not ha.heard_holding(end, 4.0)          # it lacks the last byte


def test_a_slave_of_an_older_release_gets_nothing_and_is_named(store_of, link, caplog):
    """A report as releases before epoch-bound links sent it (no epoch
    field): the master opens no link, credits nothing, sends nothing, and
    says why once."""
    connect, dealer = link
    store = store_of(replication="SYNC")
    ha = connect(store, 0)                               # a slave of this release
    store.put_batch("T", 0, bytearray(rec.encode_record(b"T", b"", b"", b"", b"x", 1)), 1)
    old = pb.HaReport(broker_id=2, max_offset=1 << 20, acked_offset=1 << 20, address="old")
    assert not old.epoch and "epoch" not in str(old)
    frame = pb.Frame(version=1, type=pb.HA_REPORT, payload=old.SerializeToString())
    for _ in range(3):
        assert not ha.on_message(b"old-slave", frame.SerializeToString(), 1.0)
    assert b"old-slave" not in ha.links and 2 not in ha.last_acked
    assert [link_.broker_id for link_ in ha.links.values()] == [1]
    named = [r for r in caplog.records if "older release" in r.getMessage()]
    assert len(named) == 1 and "upgrade slaves before masters" in named[0].getMessage()


def test_a_transfer_nothing_waits_on_lingers_then_carries_the_sends_after_it(store_of, link):
    """ha_linger_ms: the bytes of sends written a few ms apart leave in one
    transfer once the first has waited ha_linger_ms, with the newest
    confirmed offset; at once when a send waits on the slave or
    LINGER_BYTES are unsent."""
    from duomq.replication.ha_service import LINGER_BYTES
    connect, dealer = link
    store = store_of(ha_linger_ms=20)
    ha = connect(store, 0)
    one = rec.encode_record(b"T", b"", b"", b"", b"x" * 100, 1)
    store.put_batch("T", 0, bytearray(one), 1)
    ha.pump(1.0, 0, False)                     # a new link's first transfer starts it at once
    assert len(transfers(dealer)) == 1 and ha.linger_due is None
    for now in (1.100, 1.105, 1.110, 1.119):
        store.put_batch("T", 0, bytearray(one), 1)
        ha.pump(now, 7, False)
        assert ha.linger_due == pytest.approx(1.120)
    assert transfers(dealer) == []
    ha.pump(1.120, 8, False)
    (msg, data), = transfers(dealer)
    assert (msg.offset, len(data[0]), msg.confirmed_offset) == (len(one), 4 * len(one), 8)
    assert ha.linger_due is None

    store.put_batch("T", 0, bytearray(one), 1)
    ha.pump(2.0, 8, False)
    assert transfers(dealer) == [] and ha.linger_due == pytest.approx(2.020)
    store.put_batch("T", 0, bytearray(one), 1)
    ha.pump(2.001, 8, True)                    # a SYNC send waits on it: both go now
    (msg, data), = transfers(dealer)
    assert msg.ack_now and len(data[0]) == 2 * len(one) and ha.linger_due is None

    big = rec.encode_record(b"T", b"", b"", b"", b"x" * LINGER_BYTES, 1)
    store.put_batch("T", 0, bytearray(big), 1)
    ha.pump(3.0, 8, False)                     # enough to send: no wait
    (msg, data), = transfers(dealer)
    assert len(data[0]) == len(big) and not msg.ack_now and ha.linger_due is None


def test_without_linger_each_write_leaves_at_once(store_of, link):
    connect, dealer = link
    store = store_of(ha_linger_ms=0)
    ha = connect(store, 0)
    one = rec.encode_record(b"T", b"", b"", b"", b"x" * 100, 1)
    for i in range(3):
        store.put_batch("T", 0, bytearray(one), 1)
        ha.pump(1.0 + i / 1000, 0, False)
        (msg, data), = transfers(dealer)
        assert (msg.offset, len(data[0])) == (i * len(one), len(one))
    assert ha.linger_due is None


def test_the_masters_own_stall_is_not_its_slaves_silence(store_of, link):
    """Housekeeping rounds 50 ms apart judge a link by its reports; a gap
    between rounds longer than a heartbeat is the master's (it read nothing
    then): the link stays in sync across it, and is suspended, then dropped,
    only for silence outside it."""
    connect, _dealer = link
    store = store_of(ha_heartbeat_ms=300, ha_housekeeping_ms=2000)
    ha = connect(store, 0)                     # heard at 0.0
    lk = next(iter(ha.links.values()))
    ha.on_message(lk.identity, report(0, 0), 0.0)     # a second report: TRANSFER
    for t in (0.05, 0.1, 0.15):
        ha.housekeeping(t)
    assert ha.in_sync_ids() == [1]
    ha.housekeeping(5.15)                      # stopped for 5 s: longer than the drop bound
    assert ha.in_sync_ids() == [1] and lk.last_heard == pytest.approx(5.0)
    ha.housekeeping(5.2)
    assert ha.in_sync_ids() == [1]
    t = 5.2
    while t < 6.0:                             # then silent, rounds 50 ms apart, for 0.9 s
        t += 0.05
        ha.housekeeping(t)
    assert ha.in_sync_ids() == []              # suspended: three heartbeats of its own silence
    while t < 7.1:
        t += 0.05
        ha.housekeeping(t)
    assert not ha.links                        # dropped: ha_housekeeping_ms of silence


def test_a_streaming_slave_that_dials_again_is_in_sync_on_its_first_report(store_of, link):
    """A slave whose link was cut (or whose master stopped past its watch)
    dials again: its new connection replaces the old link and counts as in
    sync from its first report (what it holds, as it says), so no send in
    between is answered SLAVE_NOT_AVAILABLE; it streams from that report's
    offset. A slave new to this master still starts in HANDSHAKE."""
    connect, _dealer = link
    store = store_of()
    ha, old, one = ten_records_sent(connect, store)
    ha.on_message(old.identity, report(10 * one, 10 * one), 1.0)
    assert old.state is HaState.TRANSFER and ha.in_sync_ids() == [1]
    ha.on_message(b"redialled", report(4 * one, 4 * one), 2.0)
    assert list(ha.links) == [b"redialled"]
    new = ha.links[b"redialled"]
    assert new.state is HaState.TRANSFER and ha.slaves_available()
    assert (new.sent_offset, new.acked_offset) == (4 * one, 4 * one)   # resent from there
    stranger = pb.HaReport(broker_id=2, max_offset=0, acked_offset=0, address="y", epoch=3)
    ha.on_message(b"another", pb.Frame(version=1, type=pb.HA_REPORT,
                                       payload=stranger.SerializeToString()).SerializeToString(),
                  3.0)
    assert ha.links[b"another"].state is HaState.HANDSHAKE


def test_a_slave_is_listed_in_sync_only_holding_what_consumers_may_read(store_of, link):
    """A master the group is alone in shows what it stores; a slave that
    ZooKeeper would list while it lacks some of that could be elected and
    take back what consumers read. So an unlisted slave counts as in sync
    only once it holds the visible offset; a listed one stays while it is
    within the gap (sync_replicas 1 of two slaves: one may trail)."""
    store = store_of(replication="SYNC")
    ha, link_, one = ten_records_sent(link[0], store)
    end = store.commitlog.max_offset
    link_.state = HaState.TRANSFER
    link_.acked_offset = 6 * one
    ha.isr = frozenset({0})                        # the master alone
    assert ha.in_sync_ids() == [1]                 # a candidate, by its link
    assert ha.in_sync_ids(visible=end) == []       # not listed before it holds it all
    assert ha.in_sync_ids(visible=6 * one) == [1]
    ha.isr_writing = frozenset({0, 1})             # being listed: it stays counted
    assert ha.in_sync_ids(visible=end) == [1]
    ha.isr, ha.isr_writing = frozenset({0, 1}), frozenset()
    assert ha.in_sync_ids(visible=end) == [1]      # listed: judged by the gap alone
    link_.acked_offset = end
    ha.isr = frozenset({0})
    assert ha.in_sync_ids(visible=end) == [1]


def test_a_sync_master_alone_in_the_isr_without_its_lease_acks_no_send(store_of, link):
    """The in-sync set lists the master alone (a slave not listed yet, or
    dropped) and its lease lapsed (ZooKeeper slow): no election can pick
    another broker, but SYNC replication still asks a slave for a send, so
    none is acked (isr_held_offset's whole log had acked them alone under
    load); a rewrite of acked data needs no slave there."""
    from duomq.master.ack_waiters import NEVER, AckWaiters
    from duomq.master.parts import MasterParts
    store = store_of(replication="SYNC")
    ha, link_, one = ten_records_sent(link[0], store)
    ha.isr = frozenset({0})
    m = object.__new__(MasterParts)
    m.ha, m.config, m.sync_flush, m.sync_replication = ha, store.config, False, True
    m.ack_waiters, m.lease_until = AckWaiters(), 0.0     # its lease lapsed
    end = store.commitlog.max_offset
    assert ha.isr_held_offset() == end                       # nobody else could be elected
    assert m.conditions(end, -1, leased=False) == (NEVER, -1)  # but no slave holds it
    assert m.conditions(end, end, leased=False) == (NEVER, end)
    assert m.wait_for_ack(end, b"p", 1, None)                 # a send waits
    assert not m.wait_for_ack(end, b"p", 2, None, rewrite=True)   # a rewrite not
