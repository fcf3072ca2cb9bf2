"""The heap of a serving process: what the cyclic garbage collector walks, and when.

Both measures here are against the pauses a collection puts on whichever request is
running, which grow with the objects the collection walks.

**The start-up heap is set aside** (:func:`settle`). A full collection walks every tracked
object. After start-up a worker process holds about 190,000 of them (the models, the
compiled statements, FastAPI's routes), none of which will ever be garbage, and a full
collection walked them all: about 90 ms, twice per 600 allocations in bench/allocation.py,
landing on whichever request was running. Frozen objects are skipped; the same run after
settling took about 10 ms per full collection (gc.freeze, as the CPython documentation
recommends for a process that has finished its set-up; it also spares copy-on-write pages
in forked workers).

**What lives a second is set aside too** (:class:`SettledHeap`). A waiting pull's request,
protocol and chains of coroutines (about 110 tracked objects) live for its wait and are
freed by reference counting when the worker renews, and the renewal's own objects take
their place. CPython's generations count allocations less deallocations, so this turnover
kept the young count low while the young lists filled with every renewal's objects: with
5,000 pulls waiting per process (bench/longpoll.py, 10,000 workers, two processes,
PostgreSQL) a young collection of the middle generation walked 400,000-740,000 objects
(310-700 ms), and a full collection, every 6-10 s, 640-810 ms. A targeted job's
submit-to-pull p99 was 291-389 ms.

So a serving process, once a second, collects what is not set aside (what the last second
made and kept: a few thousand objects; young garbage in a cycle is collected there, as
before) and freezes what survived. No collection then walks an object older than a second,
and the young counts keep CPython's thresholds. What was frozen and later left in a cycle
is collected by a full collection of the whole heap (thawed, collected, frozen again),
which comes only when the process's resident memory has doubled since the last one (by at
least GROWTH_FLOOR_BYTES) or MAX_INTERVAL_SECONDS after it: the one pause that grows with
the waiting pulls, bounded by memory rather than by a count of survivors.
"""

from __future__ import annotations

import gc
import logging
import os
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: How often a serving process collects what the last while made and freezes the rest.
TICK_SECONDS = 1.0
#: A full collection once the resident memory grew by this share of what it was after
#: the last one (doubled: Go's collector lets its heap double by default, GOGC=100)...
GROWTH_SHARE = 1.0
#: ...and by at least this much (a small process would otherwise collect at every few MB).
GROWTH_FLOOR_BYTES = 32 * 1024 * 1024
#: A full collection at least this often, whatever the memory does: garbage that holds
#: something other than memory (a file, a socket) is not kept longer than this.
MAX_INTERVAL_SECONDS = 3600.0


def settle() -> None:
    """Collect what start-up left as garbage, then freeze everything that is left.

    Call once per process, when it is ready to serve: an object frozen here and later
    left in a reference cycle is only collected by a full collection of the thawed heap
    (:class:`SettledHeap`), so tests that build many apps do not call it."""
    gc.collect()
    gc.freeze()


def collect_in_full() -> None:
    """Thaw the heap, collect all of it, and set aside what is left: the frozen objects'
    cycles are garbage too, once their last outside reference went."""
    gc.unfreeze()
    settle()


def resident_bytes() -> int:
    """This process's resident memory now (Linux's /proc), else its peak (getrusage)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # Kilobytes on Linux and the BSDs, bytes on macOS.
        return peak if os.uname().sysname == "Darwin" else peak * 1024


@dataclass
class FullCollections:
    """When this process collects its whole heap: on memory growth or after a long while.

    ``due`` is the rule alone (no clock, no memory read of its own), so that a test can
    hold it; ``check`` applies it to the process."""

    resident: Callable[[], int] = resident_bytes
    clock: Callable[[], float] = time.monotonic
    collect: Callable[[], object] = collect_in_full
    #: The resident memory and the time after the last full collection.
    baseline: int = 0
    since: float = 0.0

    def due(self, resident: int, now: float) -> bool:
        """Whether a full collection is due, memory being ``resident`` at ``now``."""
        grown = resident - self.baseline
        if grown >= max(GROWTH_FLOOR_BYTES, GROWTH_SHARE * self.baseline):
            return True
        return now - self.since >= MAX_INTERVAL_SECONDS

    def rebase(self) -> None:
        """Start counting growth and time from now."""
        self.baseline = self.resident()
        self.since = self.clock()

    def check(self) -> bool:
        """Run a full collection if one is due; whether it ran."""
        if not self.due(self.resident(), self.clock()):
            return False
        started = time.perf_counter()
        self.collect()
        before = self.baseline
        self.rebase()
        log.debug(
            "full collection in %.0f ms (resident %d MB, was %d MB after the last)",
            (time.perf_counter() - started) * 1000,
            self.baseline >> 20,
            before >> 20,
        )
        return True


class SettledHeap:
    """A serving process's collections after start-up, from a daemon thread: every
    ``tick`` seconds, collect what is not frozen and freeze what survived; and a full
    collection when ``rule`` says so.

    The collector runs any finalizer in the thread that collects, as it did before (a
    young collection runs in whichever thread allocates)."""

    def __init__(
        self,
        rule: FullCollections | None = None,
        tick: float = TICK_SECONDS,
        settle_young: Callable[[], None] = settle,
    ) -> None:
        self.rule = rule or FullCollections()
        self.tick = tick
        self.settle_young = settle_young
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.rule.rebase()
        self._thread = threading.Thread(target=self._watch, name="jobmatch-heap", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop (for tests: a serving process keeps it until it ends)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()

    def _watch(self) -> None:
        while not self._stopped.wait(self.tick):
            if not self.rule.check():
                self.settle_young()


def keep_settled() -> SettledHeap:
    """Keep this process's heap settled from now on (call once, after :func:`settle`, in a
    process that serves)."""
    heap = SettledHeap()
    heap.start()
    return heap
