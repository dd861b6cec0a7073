"""Local development and test infrastructure: the ZooKeeper launcher
(``zookeeper``) and the local dev cluster behind ``duomq dev`` (``cluster``)."""
