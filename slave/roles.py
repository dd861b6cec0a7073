"""Following a master and truncating what the group does not share, as plain
functions the serving thread calls with what they need (``broker.server``
applies the results to its state). The decision to do either is the HA
controller's."""

from __future__ import annotations

import logging
from collections.abc import Callable

from duomq.replication.ha_client import HAClient, LinkCurve

log = logging.getLogger(__name__)


def truncate(store, epoch: int, cut: int) -> bool:
    """Cut the log to ``cut`` if it holds more (what the master of ``epoch``
    does not share); True when something was cut."""
    if cut >= store.commitlog.max_offset:
        return False
    removed, records = store.truncate_to(cut)
    log.warning("truncated %d bytes (%d records) past offset %d that the master of epoch %d "
                "does not hold", removed, records, cut, epoch)
    return True


def follow(store, config, epoch: int, master_ha_address: Callable[[], str | None],
           on_progress: Callable[[int], None], offsets,
           curve: LinkCurve | None = None) -> HAClient:
    """Record ``epoch`` on disk and start replicating from its master."""
    store.epoch_file.write(epoch)
    client = HAClient(store, config, master_ha_address, on_progress, offsets, curve)
    client.start()
    return client


def stop_following(client: HAClient | None) -> None:
    if client is not None:
        client.shutdown()

