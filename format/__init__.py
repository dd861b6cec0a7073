"""What duomq stores and sends, byte for byte, declared once (pure, no I/O,
no other duomq package): the commit-log record (``record``), read and
written by the producer, the master, the slave and the Spark decoder alike."""
