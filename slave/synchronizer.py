"""A slave copies the master's consumer offsets (RocketMQ's SlaveSynchronize),
so consumers that read from it, or from it after a failover, start where the
group is. It never writes them back: offsets are committed to the master only."""

from __future__ import annotations

import logging
from typing import Callable

from duomq.client.remoting import RemotingClient
from duomq.common.service import ServiceThread
from duomq.master.offsets import ConsumerOffsetManager
from duomq.proto import pb

log = logging.getLogger(__name__)


class SlaveSynchronizer(ServiceThread):
    name = "slave-synchronizer"

    def __init__(self, offsets: ConsumerOffsetManager, master_address: Callable[[], str | None],
                 interval_ms: int):
        super().__init__()
        self.offsets = offsets
        self.master_address = master_address
        self.interval_s = interval_ms / 1000
        self.synced = 0

    def run(self):
        remoting = RemotingClient("slave-sync-io")
        try:
            while not self.stopped:
                address = self.master_address()
                if address:
                    try:
                        self.sync_once(remoting, address)
                    except Exception as exc:
                        log.debug("offset sync from %s failed: %s", address, exc)
                self.wait_for_running(self.interval_s)
        finally:
            remoting.close()

    def sync_once(self, remoting: RemotingClient, address: str) -> None:
        status, error, resp = remoting.call(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 5)
        if status != pb.OK or resp.role != "MASTER":
            return
        self.offsets.replace_all({(o.consumer_group, o.topic, o.queue_id): o.offset
                                  for o in resp.group_offsets})
        self.offsets.persist()
        self.synced += 1
