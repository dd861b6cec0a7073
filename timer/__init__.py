"""Timer messages (RocketMQ 5's timer, RIP-43): a message with a delivery
time is stored at once in the timer topic and delivered to its topic when
due. ``index``: where each pending timer lies in the commit log, found by
when it comes due (a timer log and a wheel of slots on disk, checkpointed;
memory holds only the slots changed since the last checkpoint)."""
