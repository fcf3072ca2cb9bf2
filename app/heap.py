"""The long-lived heap of a serving process, set aside from the cyclic garbage collector.

A full collection walks every tracked object. After start-up a worker process holds about
190,000 of them (the models, the compiled statements, FastAPI's routes), none of which will
ever be garbage, and a full collection walked them all: about 90 ms, twice per 600
allocations in bench/allocation.py, landing on whichever request was running. Frozen
objects are skipped; the same run after :func:`settle` took about 10 ms per full
collection (gc.freeze, as the CPython documentation recommends for a process that has
finished its set-up; it also spares copy-on-write pages in forked workers).
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Collect what start-up left as garbage, then freeze everything that is left.

    Call once per process, when it is ready to serve: an object frozen here and later
    left in a reference cycle is never collected, so tests that build many apps do not
    call it."""
    gc.collect()
    gc.freeze()
