"""A broker's side of the coordination in ZooKeeper: its registration (its
member node and its topics' routes, ``registry``) and the HA controller,
which decides its role: a pure cycle over a frozen view of the group
(``ha_cycle``, with ``election``) run by a thread (``ha_controller``) that
holds the master's lease (``master_lease``) and sends typed orders to the
serving loop (``orders``). Clients never import it (import-linter); the
ZooKeeper layout both sides read is ``duomq.coordinator``'s."""
