"""Role changes of a broker process, made on its serving thread when the HA
controller (``coordinator.ha_controller``) says so: become master at an
epoch, follow a master after truncating what the group does not share, stop
being master at once (fenced), and drain for a planned handover. ``Broker``
inherits these; they work on its state."""

from __future__ import annotations

import logging

from duomq.coordinator.registry import MASTER, SLAVE
from duomq.master.schedule import ScheduleService
from duomq.proto import pb
from duomq.replication.ha_client import HAClient
from duomq.replication.ha_service import HAService

log = logging.getLogger("duomq.master.broker")


class RoleChanges:
    def _promote(self, epoch: int) -> None:
        """Become master at ``epoch``: stop following, own the log, stream to slaves."""
        self._stop_following()
        self.store.dispatch()
        self.flushed_offset = self.store.commitlog.flush()
        self.store.epoch_file.write(epoch)
        self.registry.epoch = epoch
        self.role = MASTER
        self.draining = False
        self.queue_locks.clear()       # holders take their queues again on renewal
        # delayed messages resume from the progress the old master replicated
        self.schedule = ScheduleService(self.store, self.offsets, self.delay_levels,
                                        self.config.group)
        self.replicated_offset = -1
        self.ha = HAService(self.store, self.config, self.ha_router, lambda: self.registry.epoch,
                            lambda: self.visible_offset, self.offsets,
                            lambda: self.draining or (self.sync_replication
                                                      and len(self.ack_waiters) > 0))
        self.registry.publish_routes()
        self.registry.update_info()
        log.info("serving as MASTER of %s at epoch %d from offset %d", self.config.group, epoch,
                 self.store.commitlog.max_offset)

    def _demote(self, why: str) -> None:
        """Stop acking writes now; follow whoever is master next (an ``F`` event)."""
        if self.role != MASTER:
            return
        self.role = SLAVE
        self.ha = None
        self.schedule = None
        self.draining = False
        for w in self.ack_waiters.drain():
            self._reply(w.identity, w.request_id, pb.SEND, pb.FLUSH_SLAVE_TIMEOUT,
                        f"the master stepped down ({why}) before this send was confirmed; it is "
                        f"stored here but may be lost", w.response)
        self.registry.remove_routes()
        log.warning("serving as SLAVE: %s", why)

    def _follow(self, epoch: int, cut: int) -> None:
        """Follow the master of ``epoch``: truncate what the group does not share, then replicate."""
        if self.role == MASTER:
            self._demote(f"broker of epoch {epoch} is master")
        self._stop_following()
        end = self.store.commitlog.max_offset
        if cut < end:
            removed, records = self.store.truncate_to(cut)
            log.warning("truncated %d bytes (%d records) past offset %d that the master of "
                        "epoch %d does not hold", removed, records, cut, epoch)
            self.visible_offset = min(self.visible_offset, cut)
            self.flushed_offset = min(self.flushed_offset, cut)
        self.store.epoch_file.write(epoch)
        self.registry.epoch = epoch
        self.registry.stepping_down = False
        self.master_confirmed = min(self.master_confirmed, self.store.commitlog.max_offset)
        cfg = self.config
        self.ha_client = HAClient(self.store, cfg, self.registry.master_ha_address,
                                  self._slave_progress, self.offsets)
        self.ha_client.start()
        self.registry.update_info()

    def _slave_progress(self, confirmed: int) -> None:
        """The replication thread's news after each transfer. The serving thread
        reads the offsets on every loop, so it is woken only when a pull waits
        on them: a wake-up per transfer cost the slave a thread switch per
        send. (This thread sets the offset, then looks for held pulls; the
        serving thread holds a pull, then reads the offset: one of the two
        always sees the other.)"""
        self.master_confirmed = confirmed
        if self.pull_hold.held:
            self.notifier.wake()

    def _stop_following(self) -> None:
        if self.ha_client is not None:
            self.ha_client.shutdown()
        self.ha_client = None

    def _drain_for_handover(self) -> None:
        """Planned switchover: refuse new writes; hand over once a slave holds all."""
        if self.role != MASTER:
            return
        if not self.draining:
            log.info("switchover requested: draining writes")
            self.draining = True
        end = self.store.commitlog.max_offset
        caught_up = any(link["acked_offset"] >= end for link in self.ha.status()
                        if link["state"] == "TRANSFER")
        if caught_up and not len(self.ack_waiters):
            self._demote("handed over by a planned switchover")
            self.controller.hand_over()
