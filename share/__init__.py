"""Share consumption (RocketMQ 5's POP, Kafka's share groups), in one folder:
the POP and SHARE_ACK handlers (``handlers``), the POPs held until messages
come (``pop_hold``, beside the pull's hold service), a master's share groups
(``service``) and their state, replayed from the share log and followed by
slaves (``book``). Handlers sit over the holds and the service, which sit
over the book; nothing but the handlers imports the broker."""
