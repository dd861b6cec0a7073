"""Pieces every component shares: configuration, errors, names, messages and
the background-thread base. Pure Python, no I/O beyond threads."""
