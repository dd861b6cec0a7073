"""The clients' view of the cluster in ZooKeeper, kept by watches: topic
routes (``routes``), every broker group's members (``members``: where
reads go, slaves included), consumer-group membership (``membership``),
queue owners (``queue_owners``: fenced hand-offs), and offset resets
published by an operator (``offset_reset``); ``watches`` keeps the data of
a parent's children current; ``made_nodes`` gives the nodes a client makes
in a secured cluster their ACL. The brokers' own coordination (election,
controller, registry) is in ``duomq.coordinator``, which clients never
import (an import-linter contract)."""
