"""``duomq proxy``: a stateless gRPC front speaking RocketMQ 5's
``apache.rocketmq.v2.MessagingService`` (the official clients' protocol) in
front of one duomq cluster, as RocketMQ 5's own proxy does for its brokers.

The wire protocol is the official package's generated code
(``rocketmq.grpc_protocol``, from ``rocketmq-python-client``): nothing of it
is written here. ``convert`` and ``routes`` are pure (protocol messages to
and from duomq's); ``service`` answers the RPCs through duomq's own client
library; ``server`` is the process."""
