"""The lease is the term's (issue 69: it moved from BrokerState into
MasterParts): the interleaving the old layout allowed, a Lease order that
reaches a slave (a renewal racing its demotion), must not become the lease
of its next term; a term starts with the lease its Promote carries, and a
demotion answers what the term owed. Real parts: a store on disk, a ZeroMQ
ROUTER as the replication port."""

import time

import pytest
import zmq

from duomq.broker import role_switch
from duomq.broker.core import BrokerCore
from duomq.common.config import BrokerConfig
from duomq.common.role import Role
from duomq.controller.orders import Demote, Lease, Promote


@pytest.fixture
def seat(tmp_path):
    ctx = zmq.Context()
    core = BrokerCore(BrokerConfig(data_dir=str(tmp_path / "store"), segment_size_bytes=1 << 20,
                                   max_message_bytes=64 << 10))
    core.store.start()
    core.offsets.load()
    core.ha_router = ctx.socket(zmq.ROUTER)          # what a Seat holds beside the core
    core.ha_router.setsockopt(zmq.LINGER, 0)
    core.zk = core.security = core.registry = None
    core.published = 0

    def publish():
        core.published += 1
    core.publish = publish
    core.publish_queues = lambda wanted: None
    core.slave_progress = lambda confirmed: None
    yield core
    core.parts.stop("test over")
    core.ha_router.close(0)
    core.store.close()
    ctx.term()


def test_a_lease_told_to_a_slave_is_not_its_next_terms(seat):
    now = time.monotonic()
    role_switch.carry_out(seat, Lease(now + 3600))       # a slave: nothing to ack under it
    assert seat.role is Role.SLAVE and not seat.parts.lease_valid(now)
    role_switch.carry_out(seat, Promote(1, None, 0.0))    # a claim whose lease already ran out
    assert seat.role is Role.MASTER and not seat.parts.lease_valid(time.monotonic())
    assert not seat.writable()                           # no in-sync set published either
    role_switch.carry_out(seat, Lease(time.monotonic() + 60))
    assert seat.writable()
    role_switch.carry_out(seat, Demote("a later epoch was claimed"))
    assert seat.role is Role.SLAVE and not seat.writable()
    role_switch.carry_out(seat, Lease(time.monotonic() + 3600))   # renewal racing the demotion
    role_switch.carry_out(seat, Promote(2, None, 0.0))
    assert seat.role is Role.MASTER and not seat.writable(), "the old term's lease carried over"
    role_switch.carry_out(seat, Demote("again"))
    role_switch.carry_out(seat, Promote(3, None, time.monotonic() + 60))
    assert seat.writable() and seat.state.epoch == 3


def test_a_lease_of_zero_fences_the_term_at_once(seat):
    role_switch.carry_out(seat, Promote(1, None, time.monotonic() + 60))
    assert seat.writable()
    role_switch.carry_out(seat, Lease(0.0))              # the session suspended
    assert not seat.writable() and "lease has lapsed" in seat.not_writable_reason()
