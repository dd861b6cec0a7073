"""The broker process (RocketMQ's ``broker/``), in either role: the serving
loop that owns every socket (``server``), the state only that thread writes
(``state``), what handlers and role changes work on (``core``), the one seam
where a request is decoded, handled, timed and answered (``dispatcher``), the
handlers (``processors``) and the news other threads post to the loop
(``news``). Master duties live in ``duomq.master``, following in
``duomq.slave``; the role is decided by ``coordinator.ha_controller``.
"""
