"""``python -m duomq`` is the ``duomq`` command."""

from duomq.cli.main import main

raise SystemExit(main())
