"""The master role: what only a master does, held for one term (an epoch) by
``parts.MasterParts``, which the serving thread makes on a ``Promote`` order
and drops on demotion: the replication links to its slaves
(``replication.ha_service``), ``ack_waiters (sends waiting for their flush and replication), ``schedule``
and ``requeue`` (delayed, retried and dead-lettered messages),
``transactions`` and ``tx_book``, ``queue_locks`` (orderly consumption) and
``group_topics`` (consumer groups' retry and dead-letter topics)."""
