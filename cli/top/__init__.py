"""``duomq top``: a live terminal view of a cluster, from ZooKeeper's member
nodes and the brokers' ``/metrics``.

  ``snapshot``  I/O: the registered brokers and one scrape of each
  ``view``      pure: two snapshots in, the rows on screen out (rates, top N)
  ``render``    the rows as rich tables
"""
