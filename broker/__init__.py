"""The broker process (RocketMQ's ``broker/``), in either role: the serving
loop that owns every socket (``server``), the role switch that carries out
the HA controller's orders (``role_switch``), what consumers see and the
answers waiting on it (``visibility``), the state only that thread writes
(``state``), the snapshot it publishes for other threads (``snapshot``), the
inbox they post to (``inbox``), what handlers work on (``core``), the one seam
where a request is decoded, authorized, handled, timed and answered
(``dispatcher``) and its answer book, through which every answer leaves
(``answers``), the handlers (``processors``, ``writes``) and the services
both roles use (``pull_hold``, ``health``, ``metrics``). A role's own duties
are reached only through its parts (``duomq.master.parts``,
``duomq.slave.parts``), by the calls both answer (``role_parts``), and
only ``role_switch`` makes them; the role is decided by
``controller.ha_controller``.
"""
