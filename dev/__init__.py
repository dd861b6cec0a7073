"""The local dev cluster (``duomq dev``), the ZooKeeper launcher it and the
tests share, and failover drills' load and audit."""
