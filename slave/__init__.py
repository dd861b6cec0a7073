"""The slave role: what only a slave does, held by ``parts.SlaveParts`` (the
serving thread swaps it in on a ``Follow`` order and out on promotion).
``replication.ha_client``: the thread that follows the master of an epoch,
applying its log byte for byte (consume queues rebuilt by the store's
reput, consumer offsets taken from the master's stream); ``parts``: truncation of what the
group does not share, reads capped at the master's confirmed offset,
REPLICA_LAGGING past a reader's bound, readers sent back to the master once
they catch up. Writes and offset commits are answered NOT_MASTER (with the
master's address) by the broker's handlers."""
