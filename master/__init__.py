"""The broker process in its master role (RocketMQ's ``broker/``): a ZeroMQ
ROUTER serving sends (batches), pulls with long polling, offset queries,
consumer-offset commit and fetch, heartbeats and status.

``broker.Broker`` runs the serving loop; the pieces it uses are small
modules: ``offsets`` (consumer offsets, persisted), ``pull_hold`` (long
polling), ``ack_waiters`` (sends waiting for their flush), ``processors``
(one handler per request type).
"""
