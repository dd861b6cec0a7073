"""Log replication over ZeroMQ (next release, the HA issue): the slave-driven
DEALER to ROUTER stream of ``(epoch, offset, bytes)`` chunks (RocketMQ's
HAService / HAConnection / HAClient). Empty until then."""
