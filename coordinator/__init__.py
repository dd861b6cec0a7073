"""The cluster's layout in ZooKeeper (through kazoo), which brokers, clients
and tools share: the connection (``zk``) and its logins (``zk_login``), the
layout (``paths``), every node's type (``nodes``, ``group_nodes``,
``auth_nodes``) and topic admin (``topics``). A broker's registration and
the HA controller are ``duomq.controller``'s. The clients' view of the cluster (routes, members, group
membership, queue owners, offset resets) is in ``duomq.client.cluster``.

Layout (``paths.ZkPaths``)::

    /duomq/<cluster>/brokers/<group>/members/<broker_id>  ephemeral   address, role, epoch, offsets
    /duomq/<cluster>/brokers/<group>/master               ephemeral   broker id, epoch, address
    /duomq/<cluster>/brokers/<group>/epochs/<n>           persistent  broker id, start offset
    /duomq/<cluster>/brokers/<group>/isr                  persistent  the in-sync set
    /duomq/<cluster>/topics/<topic>                       persistent  queues per broker group, perm, order
    /duomq/<cluster>/routes/<topic>/<group>               ephemeral   the master's address, queues
    /duomq/<cluster>/groups/<group>/members/<client_id>   ephemeral   topic, message model
    /duomq/<cluster>/groups/<group>/owners/<queue>        ephemeral   the client holding it
    /duomq/<cluster>/groups/<group>/resets/<topic>        persistent  an offset reset
    /duomq/<cluster>/auth/config, auth/users/<name>       persistent  a secured cluster's keys, users
"""
