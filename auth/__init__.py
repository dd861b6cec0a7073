"""A secured cluster (``auth = true``): users and their policies in
ZooKeeper, ZAP for the brokers' CURVE sockets, and the check of each
request.

  ``acl``     pure: permissions, policies, what a request needs
  ``user``    pure: a user as its node holds it (key, policy, quotas)
  ``users``   the users in ZooKeeper: an admin's writes, a broker's live view
  ``credentials``  the key files of ``auth_dir`` and a user's credentials file
  ``zap``     who may connect to a broker's client and replication ports
  ``guard``   who sent a request, and whether they may
  ``zk_acls``   pure: the ACL each ZooKeeper node of the cluster carries
  ``zk_keeper`` the sweeps that keep them so (brokers, ``duomq auth``)
"""
