"""CPython's cyclic garbage collector in a long-lived broker: its pauses,
timed, and the start-up heap kept out of its walks.

A full (generation 2) collection walks every object the collector tracks:
in a broker, the whole start-up heap (the modules, kazoo, the protobuf
descriptors, the recovered store's objects). Measured in an ASYNC pair at
2,000 msg/s (issue 41), one such collection paused the master's serving loop
28 ms in 6 s of traffic, and the young generations' 150 us to 3 ms. The
broker freezes that heap once it has started (``gc.freeze``: the objects
move to the permanent generation, which no collection walks; what is made
afterwards is collected as before), after one collection that frees the
start-up's own garbage, which would otherwise stay frozen. ``GcWatch``
times every collection, for ``/metrics``."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily

from duomq.common.metrics import Histogram

GENERATIONS = (0, 1, 2)


class GcWatch:
    """Each collection's pause by generation (``gc.callbacks``: they run on
    the thread that collects, one collection at a time), and how many
    objects ``freeze`` put out of the collector's reach."""

    def __init__(self) -> None:
        self.pauses = {g: Histogram() for g in GENERATIONS}
        self.frozen = 0
        self._started = 0.0

    def install(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def uninstall(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started:
            pause = self.pauses.get(info.get("generation", 2))
            if pause is not None:
                pause.observe(time.perf_counter() - self._started)

    def freeze(self) -> int:
        """Collect once (the start-up's garbage), then freeze what is left;
        returns how many objects are frozen."""
        gc.collect()
        gc.freeze()
        self.frozen = gc.get_freeze_count()
        return self.frozen

    def families(self) -> Iterator:
        h = HistogramMetricFamily(
            "duomq_gc_pause_seconds", "Python garbage collections, each one's pause of every "
            "thread, by generation (2: a full one)", labels=["generation"])
        for g, hist in self.pauses.items():
            h.add_metric([str(g)], hist.buckets(), hist.total)
        yield h
        yield GaugeMetricFamily(
            "duomq_gc_frozen_objects", "Objects of the start-up heap moved out of the garbage "
            "collector's walks (gc.freeze once started; 0: not frozen)", value=self.frozen)
