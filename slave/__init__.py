"""The slave role. A broker process plays master or slave and switches
without a restart, as ``coordinator.ha_controller`` orders; ``roles`` holds
following (with truncation of what the group does not share). As a slave a
broker applies the replicated log (``replication.ha_client``: byte-identical
chunks, consume queues rebuilt by ``store.MessageStore.dispatch``, consumer
offsets taken from the master's stream), serves read-only pulls capped at the
master's confirmed offset, sends readers back to the master when they catch
up (``master.read_advice``), and answers writes and offset commits with
NOT_MASTER and the master's address."""
