"""The ``duomq`` command: one entry point, a module per command family."""
