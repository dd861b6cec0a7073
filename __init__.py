"""duomq: a RocketMQ-style replicated message broker in Python.

Components (one subpackage each): ``store`` (commit log, consume queues,
checkpoint, recovery), ``flush`` (group commit and periodic flush), ``master``
(the broker process: send, pull, long polling, offsets), ``slave`` and
``replication`` (high availability), ``coordinator`` (ZooKeeper), ``client``
(producers and consumers), ``proto`` (the wire schema), ``cli`` and ``dev``.
"""

__version__ = "0.1.0"
