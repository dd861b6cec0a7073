"""ZooKeeper through kazoo: the layout of brokers, topics, routes and consumer
groups, broker registration, route and membership watches, and topic admin.

Layout (``paths.ZkPaths``)::

    /duomq/<cluster>/brokers/<group>/members/<broker_id>  ephemeral   address, role, epoch, timeouts
    /duomq/<cluster>/brokers/<group>/master               ephemeral   broker id, epoch, address
    /duomq/<cluster>/brokers/<group>/epochs/<n>           persistent  broker id, start offset
    /duomq/<cluster>/topics/<topic>                       persistent  queues per broker group, perm, order
    /duomq/<cluster>/routes/<topic>/<group>               ephemeral   the master's address, queues
    /duomq/<cluster>/groups/<group>/members/<client_id>   ephemeral   subscriptions, message model
"""
