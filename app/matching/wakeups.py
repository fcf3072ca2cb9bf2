"""Wake-ups of long-polling pulls: what an announcement means, and whom it wakes.

A pull that found nothing may wait (``?wait=SECONDS``) until something happens that could
give its worker a job. Writers announce what happened (app/db/notify.py carries it, on
PostgreSQL across processes) as tokens:

* ``c<category id>``: a job of that category waits (a submission, a returned or requeued
  job), or ``c<category id>.<job id>``, naming the job. It concerns only waiters whose
  worker fits the category;
* ``r<worker id>``: that worker's room changed (a finish, return or cancel freed it, the
  scheduler placed a job on it). It concerns only that worker's waiters;
* ``w<worker id>``: that worker changed (its description, metadata or values). It concerns
  only that worker's waiters, and what it fits may have changed;
* ``t<category id>`` or ``t<category id>.<job id>``: a pull took a job of that category
  (the job no longer waits);
* ``*``: anything (global values, the attribute table, tasks; or announcements were lost).
  It concerns every waiter.

:class:`WakeupHub` keeps the waiters of one process and wakes only those an announcement
concerns. Whether a worker fits a category is a question for the misfit cache (SQL), asked
through the ``fits`` function the hub is given, once per category and worker: the answer
only changes with the worker (``w`` forgets that worker's answers, ``r`` does not) or with
everything (``*`` forgets all).

A job is taken by one worker, so a ``c`` does not wake every waiter that fits (with 200
equal workers, 200 pulls would race for one job): a relay per category wakes, in waiting
order, as many as there are announced jobs not yet taken. Those woken
together are a wave: when the wave's last attempt is over and some attempt of it came back
empty-handed, a relay whose jobs are not all taken wakes the next wave; a ``t`` (taken)
counts its job off, if the relay counted it (see ``_count_off``); the relay ends when its
jobs are taken or every fitting waiter has tried once. A new job of the category also
wakes those of the relay's waiters whose attempt already runs, to look again after it:
their attempt may have read before the job was committed. One of them that takes a job
answers without looking again, and its relay hands that news on as an empty-handed
attempt's. A waiter itself sends no statement while it waits.

Why waves, and why the first empty-handed wave waits :data:`HAND_ON_GRACE` before the
next: a woken waiter comes back empty-handed because another pull holds the job (its
``FOR UPDATE SKIP LOCKED`` skipped it, and the taker's ``t`` comes after its commit) or
because the job does not fit its free room now. Handing on at once after each loser made
a herd job (every waiter fits) a cascade of attempts until the taker's ``t`` arrived, in
every process: 58 waiters woken per job at 10,000 workers (issue 37). A job that nobody
took within the grace does not fit the first wave's room: the next waves follow at once.

Why no spare beyond the announced jobs: a relay once woke one more waiter, against the race
a woken waiter may lose to a pull that was not waiting. That pull takes the job, so the
loser's spare had nothing to take either, and the grace above hands a job nobody took to
the next wave. Under ``serve --workers N`` every process's relay wakes its own wave for a
herd job, so N waiters race for it already: with the spare, 4.2 attempts per herd job at
two processes and 10,000 workers, and a submit-to-pull p50 of 24.6 ms; without, 2.2 and
18.1 ms (bench/longpoll.py, issue 37).

A worker holds at most as many waiting pulls as it has free slots, and at least one
(:meth:`WakeupHub.hold`): a newer pull supersedes its oldest, which answers at once, so an
agent that lost track of its pulls, or two agents run under one name, converge instead of
piling up connections. The whole hub holds at most ``max_waiting`` waiters: a pull of a
worker with none waiting is refused beyond it (:meth:`WakeupHub.register`). A worker's
attempts run at most as many at once as it may hold waiting pulls
(:meth:`WakeupHub.attempts_of`), and the process's attempts share one gate
(:class:`AttemptGate`) in which a woken waiter goes before new pulls.

Pure: no SQL, no HTTP. Waiters are woken from any thread (the PostgreSQL listener, the
thread of a committing request on SQLite) through their event loop's
``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
import operator
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field

from app.metrics import (
    LONGPOLL_ANNOUNCEMENTS,
    LONGPOLL_FIT_CHECKS,
    LONGPOLL_QUIET_RENEWALS,
    LONGPOLL_WAITING,
    LONGPOLL_WAKEUPS,
)

log = logging.getLogger(__name__)

EVERYTHING = "*"

#: Which of these workers fit this category (no misfit row at their generation).
FitCheck = Callable[[int, frozenset[int]], set[int]]


#: The prefix of :func:`job_waiting`, and what stands between a token's category and the
#: job it names (``c12.345``), for a statement that announces it itself.
WAITING = "c"
JOB_MARK = "."


def job_waiting(category_id: int, job_id: int | None = None) -> str:
    """The announcement that a job of the category waits: the job when named (a quiet
    renewal then knows when it was taken, see :meth:`WakeupHub.renew_quietly`), or some
    job of it (several at once, or a task its array held back)."""
    unnamed = f"{WAITING}{category_id}"
    return unnamed if job_id is None else f"{unnamed}{JOB_MARK}{job_id}"


def worker_changed(worker_id: int) -> str:
    """The announcement that the worker changed (description, metadata, values)."""
    return f"w{worker_id}"


#: The prefix of :func:`job_taken`, for a statement that announces it itself.
TAKEN = "t"


def job_taken(category_id: int, job_id: int) -> str:
    """The announcement that a pull took the job, of the category."""
    return f"{TAKEN}{category_id}{JOB_MARK}{job_id}"


#: The prefix of :func:`room_changed`, for a statement that announces it itself.
ROOM = "r"


def room_changed(worker_id: int) -> str:
    """The announcement that the worker's room changed (freed, or a job placed on it)."""
    return f"{ROOM}{worker_id}"


@dataclass(frozen=True)
class Announcement:
    """A payload's tokens, sorted by what they concern."""

    everything: bool = False
    categories: frozenset[int] = frozenset()
    #: Workers that changed (their fit answers are forgotten).
    workers: frozenset[int] = frozenset()
    #: Workers whose room changed (their fit answers stand).
    rooms: frozenset[int] = frozenset()
    #: Categories of which a pull took a job.
    taken: frozenset[int] = frozenset()
    #: The jobs named as waiting, and as taken: (category, job).
    waiting_jobs: frozenset[tuple[int, int]] = frozenset()
    taken_jobs: frozenset[tuple[int, int]] = frozenset()
    #: Categories of which some job waits, not named.
    unnamed_waiting: frozenset[int] = frozenset()


#: The tokens that may name a job (``c12.345``).
_NAMING = frozenset("ct")


def parse_payload(payload: str) -> Announcement:
    """The tokens of a payload; an unknown or malformed token counts as ``*`` (waking too
    many waiters costs a pull each, waking too few would leave a job waiting)."""
    found: dict[str, set[int]] = {"c": set(), "w": set(), "r": set(), "t": set()}
    named: dict[str, set[tuple[int, int]]] = {"c": set(), "t": set()}
    unnamed: set[int] = set()
    for token in payload.split():
        kind, (number, dot, job) = token[:1], token[1:].partition(JOB_MARK)
        if kind not in found or not number.isdigit():
            return Announcement(everything=True)
        if dot and (kind not in _NAMING or not job.isdigit()):
            return Announcement(everything=True)
        found[kind].add(int(number))
        if dot:
            named[kind].add((int(number), int(job)))
        elif kind == "c":
            unnamed.add(int(number))
    return Announcement(
        categories=frozenset(found["c"]),
        workers=frozenset(found["w"]),
        rooms=frozenset(found["r"]),
        taken=frozenset(found["t"]),
        waiting_jobs=frozenset(named["c"]),
        taken_jobs=frozenset(named["t"]),
        unnamed_waiting=frozenset(unnamed),
    )


@dataclass(eq=False)
class Waiter:
    """One waiting pull. ``worker_id`` is unknown until its first attempt read it (then
    every announcement wakes it), unless an earlier pull of the same name found it
    (``guessed``); ``wants_work`` is False while its worker could take no
    job at all (inactive, or no free slot), so that only news about the worker wakes it."""

    loop: asyncio.AbstractEventLoop
    #: Registration order: relays wake the longest waiting first.
    order: int = 0
    worker_id: int | None = None
    wants_work: bool = True
    #: The worker's name, known at registration (the pull's path): the key by which a
    #: newer pull of the same worker supersedes this one.
    key: str | None = None
    #: A newer pull of the same worker took this one's place: it answers at once.
    superseded: bool = False
    #: ``worker_id`` is the id an earlier pull of the same name found (WakeupHub.register),
    #: not yet confirmed by this pull's attempt.
    guessed: bool = False
    #: The gate and the turn this waiter queues for, while it queues (AttemptGate).
    queued: tuple[AttemptGate, asyncio.Future[None]] | None = None
    #: Categories whose relay woke this waiter and awaits its attempt.
    relays: set[int] = field(default_factory=set)
    #: Of those, the ones announced again while its attempt ran, which asked it to look
    #: again (WakeupHub._relay): if the attempt takes a job, its pull answers and never
    #: looks, and the relay hands that news on (WakeupHub.settled).
    renewed: set[int] = field(default_factory=set)
    #: Its attempt runs: armed (WakeupHub.arm), not yet settled.
    attempting: bool = False
    #: The hub's count of announcements, and the time (time.monotonic()), when its last
    #: attempt started (WakeupHub.arm): what a quiet renewal compares with.
    armed_news: int = 0
    armed_at: float = 0.0
    _event: asyncio.Event = field(default_factory=asyncio.Event)

    #: The hub's index of waiters by worker, told when the worker becomes known.
    _indexed: Callable[[Waiter, int | None], None] | None = None

    def expect(self, worker_id: int, *, wants_work: bool) -> None:
        """Its attempt read the worker (from the event loop). A guessed id that was wrong
        (the name now belongs to another worker) heard the other worker's news during the
        attempt and not this one's: the waiter looks again rather than miss any."""
        before = self.worker_id
        if self.guessed and before != worker_id:
            self._event.set()
        self.guessed = False
        self.worker_id = worker_id
        self.wants_work = wants_work
        if self._indexed is not None and before != worker_id:
            self._indexed(self, before)

    def rearm(self) -> None:
        """Forget earlier wake-ups before an attempt: what happens from now on counts."""
        self._event.clear()

    def wake(self) -> None:
        """Wake the waiter from any thread."""
        self.loop.call_soon_threadsafe(self._woken)

    def _woken(self) -> None:
        """On the loop: the wake-up arrives. A waiter queued for its attempt's turn goes
        before the new pulls (its attempt will read what the news was about)."""
        self._event.set()
        if self.queued is not None:
            gate, turn = self.queued
            gate.promote(turn)

    async def wait(self, timeout: float) -> bool:
        """True when woken within ``timeout`` seconds, False when the time ran out."""
        try:
            async with asyncio.timeout(timeout):
                await self._event.wait()
        except TimeoutError:
            return False
        return True


#: Categories whose fit answers the hub keeps; the oldest are forgotten past it (asked
#: again when announced again), so that a long-running process's memory stays bounded.
MAX_CACHED_CATEGORIES = 4096

#: Waiting pulls' attempts that may run at once in a process: well under the thread pool's
#: 40 threads (anyio's default), which the other requests need too. A process whose
#: database pool keeps fewer connections lets fewer run (app/api/longpoll.py).
MAX_CONCURRENT_ATTEMPTS = 16

#: A waiter's registration order, the relays' sort key.
_ORDER = operator.attrgetter("order")

#: Workers whose limit of waiting pulls and id the hub remembers (the least recently waiting
#: are forgotten: they may hold one, and their first attempt wakes for any news, until
#: their next attempt says more).
MAX_REMEMBERED_LIMITS = 65_536

#: Seconds a relay whose first wave came back empty-handed waits for the takers' ``t``
#: before it wakes the next wave (module docstring).
HAND_ON_GRACE = 0.05


#: The longest a worker's renewed pull answers from its last attempt without one of its
#: own (see WakeupHub.renew_quietly), from that attempt's start.
MAX_QUIET_SECONDS = 300.0


@dataclass(frozen=True)
class Quiet:
    """What a worker's last attempt found when it found nothing: its worker, the hub's
    count of announcements and the time when the attempt started, whether the worker
    could take work then, and the attempt's answer (the caller's, kept as it was)."""

    worker_id: int
    news: int
    started: float
    wants_work: bool
    answer: object


class AttemptGate:
    """At most ``limit`` waiting pulls' attempts at once in a process, and when more want a
    turn, a woken waiter's attempt goes before new pulls' first attempts.

    Why the order: a woken waiter was told that a job it fits waits, so its attempt is the
    one a submission waits on; a new pull's first attempt (a farm's deadlines ending, a
    worker starting) almost always finds nothing on an idle farm. With 10,000 waiting
    workers and a 60-s wait, about 170 deadlines end every second, and in one queue a
    targeted job's waiter waited behind them (submit-to-pull p99 1.4 s, issue 37).
    Within each kind, first come first served. Used from one event loop only."""

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._woken: deque[asyncio.Future[None]] = deque()
        self._new: deque[asyncio.Future[None]] = deque()

    @asynccontextmanager
    async def turn(self, *, woken: bool, waiter: Waiter | None = None) -> AsyncIterator[None]:
        """Hold one of the gate's turns for the block (``woken``: the attempt follows a
        wake-up). A ``waiter`` woken while it queues goes before the new pulls."""
        await self._acquire(woken, waiter)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, woken: bool, waiter: Waiter | None) -> None:
        # A free turn means nobody waits for one: a release hands its turn to a waiting
        # attempt before it frees it.
        if self._free > 0:
            self._free -= 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        (self._woken if woken else self._new).append(turn)
        if waiter is not None:
            waiter.queued = (self, turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                # Granted, then cancelled before it could run: hand the turn on.
                self._release()
            raise
        finally:
            if waiter is not None:
                waiter.queued = None

    def promote(self, turn: asyncio.Future[None]) -> None:
        """A new pull's queued turn becomes a woken one's: news concerns its worker (a
        job for it waits behind a farm's deadline pulls otherwise)."""
        try:
            self._new.remove(turn)
        except ValueError:  # granted already, or queued as woken
            return
        self._woken.append(turn)

    def _release(self) -> None:
        for queue in (self._woken, self._new):
            while queue:
                turn = queue.popleft()
                if not turn.done():  # a cancelled waiter's future is done
                    turn.set_result(None)
                    return
        self._free += 1


#: Up to this many fitting workers, a relay's queue is their waiters, sorted; past it, the
#: queue is drawn from all the hub's waiters in waiting order, skipping those that do not
#: fit (a few for a herd job's category, where nearly every waiter fits).
_SORTED_QUEUE_MAX = 64


@dataclass(frozen=True)
class _Fitting:
    """The waiters an announced category concerns: those of ``waiters`` (in waiting order)
    whose worker is one of ``workers`` and that want work and are not ``concerned`` (woken
    by the announcement anyway), looked at only as a relay draws them."""

    workers: set[int]
    waiters: list[Waiter]
    concerned: set[Waiter]

    def queue(self, running: frozenset[Waiter]) -> _Queue:
        """The relay's queue: these waiters, less those whose attempt already runs."""
        return _Queue(
            w
            for w in self.waiters
            if w.worker_id in self.workers
            and w.wants_work
            and w not in self.concerned
            and w not in running
        )


class _Queue:
    """A relay's fitting waiters not woken yet, in waiting order, drawn one at a time as
    the relay hands on.

    A herd job's category fits every waiter. Building and sorting all of them at each
    announcement, to wake one, was a pass over every waiter of the process in Python per
    job, under the hub's lock (5,000 per process at 10,000 workers; issue 37). Drawn
    lazily from the hub's waiters, it costs the waiters the relay looks at."""

    __slots__ = ("_head", "_waiters")

    def __init__(self, waiters: Iterable[Waiter]) -> None:
        self._waiters = iter(waiters)
        #: The next waiter, once looked at (at most one).
        self._head: list[Waiter] = []

    def __bool__(self) -> bool:
        if not self._head:
            following = next(self._waiters, None)
            if following is None:
                return False
            self._head.append(following)
        return True

    def pop(self) -> Waiter:
        """The next waiter (the queue is not empty: ``bool(queue)`` said so)."""
        if not self:
            raise IndexError("the relay's queue is empty")
        return self._head.pop()


@dataclass
class _Relay:
    """One category's wake-ups: announced jobs not yet taken (how many, and those of them
    named), the fitting waiters not yet woken (in waiting order), and the woken ones
    whose attempt is not over."""

    jobs: int = 0
    named: set[int] = field(default_factory=set)
    queue: _Queue = field(default_factory=lambda: _Queue(()))
    running: set[Waiter] = field(default_factory=set)
    #: An empty-handed wave waited HAND_ON_GRACE since the last announced job.
    graced: bool = False
    #: Some attempt of the running wave came back without the relay's job.
    empty_handed: bool = False


#: Announced jobs per category that the hub remembers as not taken yet; past it the oldest
#: are forgotten and count as announced at their time and never taken.
MAX_OPEN_JOBS = 256


@dataclass
class _Openings:
    """A category's announced jobs not known to be taken (job id -> the news count of its
    announcement, in that order), and the news count of its last announcement that named
    no job (or of a job forgotten past :data:`MAX_OPEN_JOBS`): what a quiet renewal asks
    when the category had news since its worker's attempt (WakeupHub._nothing_since)."""

    jobs: OrderedDict[int, int] = field(default_factory=OrderedDict)
    unnamed: int = 0

    def opened(self, job_id: int, news: int) -> None:
        self.jobs[job_id] = news
        self.jobs.move_to_end(job_id)
        while len(self.jobs) > MAX_OPEN_JOBS:
            _job, when = self.jobs.popitem(last=False)
            self.unnamed = max(self.unnamed, when)

    def newest(self) -> int:
        """The news count of the newest announcement whose job may still wait."""
        return max(self.unnamed, next(reversed(self.jobs.values()), 0))


@dataclass
class HubCounts:
    """What the hub did, for /metrics and the tests: announcements received, waiters
    woken, and fit questions sent to the database (one statement each)."""

    announcements: int = 0
    wakeups: int = 0
    fit_checks: int = 0
    #: Renewed pulls that stood on their worker's last attempt (renew_quietly).
    quiet_renewals: int = 0


def _jobs_of(jobs: frozenset[tuple[int, int]], category_id: int) -> set[int]:
    """The ids among (category, job) pairs that are of the category."""
    return {job for category, job in jobs if category == category_id}


def _count_off(relay: _Relay, taken: set[int]) -> None:
    """Under the lock: a pull took these jobs of the relay's category (none named: one
    job, as a process of an earlier version announces it). A named job the relay counted
    is counted off; one it did not count is counted off the jobs announced without a
    name, if any (it may be one of them), and otherwise left: it waited before the relay
    began, and counting it off would leave one of the relay's jobs without a wake-up."""
    unnamed = relay.jobs - len(relay.named)
    if not taken:
        if unnamed <= 0 and relay.named:
            relay.named.pop()
        relay.jobs = max(0, relay.jobs - 1)
        return
    counted = taken & relay.named
    relay.named -= counted
    off = len(counted) + min(max(unnamed, 0), len(taken - counted))
    relay.jobs = max(0, relay.jobs - off)


class WaitingFull(Exception):
    """The process already holds as many waiting pulls as it may (``max_waiting``), and
    the pull's worker holds none that it could supersede."""


class WakeupHub:
    """The waiters of one process, woken by announcements (module docstring)."""

    def __init__(
        self,
        fits: FitCheck,
        max_waiting: int | None = None,
        max_attempts: int = MAX_CONCURRENT_ATTEMPTS,
    ) -> None:
        self._fits = fits
        self._lock = threading.Lock()
        #: Every waiter, in registration order, which is waiting order (a relay draws its
        #: queue from it: see _Queue).
        self._waiters: dict[Waiter, None] = {}
        #: The most waiters at once (None: no bound).
        self.max_waiting = max_waiting
        #: The most attempts of waiting pulls at once (see any_attempt).
        self.max_attempts = max(1, max_attempts)
        #: Each worker's waiters not superseded, oldest first (by the worker's name).
        self._keyed: dict[str, list[Waiter]] = {}
        #: The waiting pulls each worker may hold, as its last attempt found (see hold);
        #: a worker not in it may hold one.
        self._limits: OrderedDict[str, int] = OrderedDict()
        #: Each worker name's id, as its last attempt found (see arm).
        self._ids: OrderedDict[str, int] = OrderedDict()
        #: Each waiting worker's gate of attempts (see attempts_of), and all workers' one.
        self._gates: dict[str, asyncio.Semaphore] = {}
        self._all_attempts: tuple[asyncio.AbstractEventLoop, AttemptGate] | None = None
        #: The waiters by their worker's id, and those whose worker is not known yet: an
        #: announcement about a few workers finds their waiters without a pass over all.
        self._by_worker: dict[int, set[Waiter]] = {}
        self._unknown: set[Waiter] = set()
        #: category -> worker -> fits; valid until the worker (or everything) changes.
        self._fit_cache: dict[int, dict[int, bool]] = {}
        #: category -> the workers whose cached answer is "fits" (kept with the cache):
        #: a category's fitting waiters are found from it, not by a pass over all.
        self._fit_yes: dict[int, set[int]] = {}
        #: Bumped when a worker's answers are forgotten, so that an answer computed
        #: meanwhile is not cached over the news.
        self._epochs: dict[int, int] = {}
        self._epoch_all = 0
        self._relays: dict[int, _Relay] = {}
        #: The waiters whose attempt runs (armed, not settled): at most the gate's turns,
        #: and the few pulls not gated (WakeupHub.any_attempt).
        self._attempting: set[Waiter] = set()
        #: Announcements delivered, and which of them last concerned everything, each
        #: worker (its room or itself) and each category (a job waits): what a quiet
        #: renewal asks about (see renew_quietly). The least recently announced workers
        #: and categories are forgotten past MAX_REMEMBERED_LIMITS, raising a floor that
        #: then stands for each of them (a forgotten one counts as just announced).
        self._news = 0
        self._news_of_all = 0
        self._news_of_worker: OrderedDict[int, int] = OrderedDict()
        self._news_of_category: OrderedDict[int, int] = OrderedDict()
        self._news_floor = 0
        #: Per category (those of _news_of_category), its announced jobs not taken yet.
        self._openings: dict[int, _Openings] = {}
        #: Each worker's last empty attempt (by its name), for its next pull.
        self._quiet: OrderedDict[str, Quiet] = OrderedDict()
        #: Seconds a renewal may answer from the last attempt (0: never; see
        #: renew_quietly); app/api/longpoll.py bounds it by the worker timeout.
        self.max_quiet = MAX_QUIET_SECONDS
        self._registered = 0
        self.closed = False
        #: Seconds after which a waiter looks again by itself; None while announcements
        #: reach the hub (a process that cannot listen sets it: app/api/longpoll.py).
        self.poll_seconds: float | None = None
        self.counts = HubCounts()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def waiting_for(self, worker_id: int) -> int:
        """Waiters indexed under the worker: past their first attempt, or known by their
        worker's name from an earlier pull (see :meth:`register`)."""
        with self._lock:
            return len(self._by_worker.get(worker_id, ()))

    def _index(self, waiter: Waiter, before: int | None) -> None:
        """The waiter's worker became known (or changed): move it in the index."""
        with self._lock:
            if waiter not in self._waiters:
                return
            if before is None:
                self._unknown.discard(waiter)
            else:
                self._unindex(waiter, before)
            if waiter.worker_id is not None:
                self._by_worker.setdefault(waiter.worker_id, set()).add(waiter)
                if waiter.key is not None:
                    self._remember(self._ids, waiter.key, waiter.worker_id)

    @staticmethod
    def _remember(found: OrderedDict[str, int], key: str, value: int) -> None:
        """Under the lock: what a worker's attempt found, kept for its next pulls; the
        least recently waiting workers are forgotten past MAX_REMEMBERED_LIMITS."""
        found[key] = value
        found.move_to_end(key)
        while len(found) > MAX_REMEMBERED_LIMITS:
            found.popitem(last=False)

    def _unindex(self, waiter: Waiter, worker_id: int) -> None:
        """Under the lock: the waiter leaves its worker's entry of the index."""
        entry = self._by_worker.get(worker_id)
        if entry is not None:
            entry.discard(waiter)
            if not entry:
                del self._by_worker[worker_id]

    def register(self, loop: asyncio.AbstractEventLoop, key: str | None = None) -> Waiter:
        """A new waiter, of the worker named ``key`` when given. The worker's oldest
        waiters beyond its limit (see :meth:`hold`) are superseded at once, before their
        first attempt if they have not made it: a burst of pulls from one worker costs
        one attempt, not one each. Raises WaitingFull when the hub holds ``max_waiting``
        waiters and none of them is the worker's (a pull of a worker already waiting
        takes the place of its oldest: the count stays)."""
        with self._lock:
            full = self.max_waiting is not None and len(self._waiters) >= self.max_waiting
            if full and (key is None or not self._keyed.get(key)):
                raise WaitingFull(
                    f"this server process already holds {len(self._waiters)} waiting pulls, "
                    f"as many as it may (JOBMATCH_MAX_WAITING_PULLS: {self.max_waiting})"
                )
            self._registered += 1
            waiter = Waiter(loop, order=self._registered, key=key, _indexed=self._index)
            self._waiters[waiter] = None
            known = self._ids.get(key) if key is not None else None
            if known is not None:
                # Known by its name (see arm): news about it reaches it from now on, also
                # while it queues for its first attempt's turn, which the news hastens.
                waiter.guessed = True
                waiter.worker_id = known
                self._by_worker.setdefault(known, set()).add(waiter)
            superseded = self._supersede(waiter) if key is not None else []
        LONGPOLL_WAITING.inc()
        self._wake(superseded)
        return waiter

    def arm(self, waiter: Waiter) -> None:
        """The waiter's attempt starts now: news from now on may be after what it reads,
        and wakes it to look again. News that came before the attempt started does not,
        since the attempt reads what it was about (an announcement is sent after its
        commit).

        Until an attempt has read its worker, the waiter cannot be told apart, and any
        news from its attempt's start on wakes it; before that (a farm's first attempts
        queue for their turn: some 170 deadlines end each second at 10,000 workers),
        none does. A worker that pulled before in this process is known by its name
        from its registration (:meth:`register`): its id is taken as the last attempt
        found it, so that only news about that worker, or about a category it fits,
        wakes it, and such news moves its queued turn before the new pulls'
        (:meth:`AttemptGate.promote`). Every announcement waking every first attempt in
        flight made the deadline pulls (up to the gate's 16 per process) attempt again
        after each submission, finish and take: 15.6 waiters woken per job meant for
        one worker at 10,000 workers (issue 37). A wrong guess is caught when the
        attempt reads the worker (:meth:`Waiter.expect`)."""
        waiter.rearm()
        with self._lock:
            waiter.armed_news = self._news
            waiter.armed_at = time.monotonic()
            if waiter in self._waiters:
                waiter.attempting = True
                self._attempting.add(waiter)
                if waiter.worker_id is None:
                    self._unknown.add(waiter)

    def hold(self, waiter: Waiter, limit: int) -> None:
        """The waiter's attempt found nothing and it is about to wait: its worker may hold
        ``limit`` waiters (its free slots, at least one), remembered for its next pulls;
        the oldest beyond that are superseded and woken, to answer at once."""
        if waiter.key is None:
            return
        with self._lock:
            self._remember(self._limits, waiter.key, max(1, limit))
            superseded = self._supersede(waiter)
        self._wake(superseded)

    def _supersede(self, waiter: Waiter) -> list[Waiter]:
        """Under the lock: the waiter joins its worker's waiters (newest last); those
        beyond the worker's limit, oldest first, are marked superseded and returned."""
        assert waiter.key is not None
        keyed = self._keyed.setdefault(waiter.key, [])
        if waiter not in keyed and not waiter.superseded:
            keyed.append(waiter)
        superseded = []
        while len(keyed) > self._limits.get(waiter.key, 1):
            oldest = keyed.pop(0)
            oldest.superseded = True
            superseded.append(oldest)
        return superseded

    def any_attempt(
        self, *, woken: bool = False, waiter: Waiter | None = None
    ) -> AbstractAsyncContextManager[None]:
        """A turn at the gate of every waiting pull's attempts together: at most
        ``max_attempts`` hold a thread of the pool at once, so that the other
        requests always find one, and a woken waiter goes first (:class:`AttemptGate`).
        Without the bound, a farm's waits ending together (2,000 deadlines within seconds)
        took every thread, each waiting on SQLite's write lock, while the transaction that
        held the lock waited for a thread to commit in: nothing moved until the lock waits
        gave up. Used from the event loop only."""
        loop = asyncio.get_running_loop()
        if self._all_attempts is None or self._all_attempts[0] is not loop:
            # One per event loop: an app served again (tests) runs on another loop.
            self._all_attempts = (loop, AttemptGate(self.max_attempts))
        return self._all_attempts[1].turn(woken=woken, waiter=waiter)

    def attempts_of(self, key: str) -> asyncio.Semaphore:
        """The gate of the worker's attempts: as many run at once as it may hold waiting
        pulls, so that one worker's burst of pulls never holds more of the thread pool
        (and of the database) than that. Used from the event loop only."""
        with self._lock:
            gate = self._gates.get(key)
            if gate is None:
                gate = self._gates[key] = asyncio.Semaphore(self._limits.get(key, 1))
            return gate

    def unregister(self, waiter: Waiter) -> None:
        """The waiter's pull answers. Relays that woke it and still wait for its attempt
        hand on to the next waiter (it answered without one: superseded, its client gone,
        the server stopping)."""
        with self._lock:
            present = waiter in self._waiters
            self._waiters.pop(waiter, None)
            self._unknown.discard(waiter)
            self._attempting.discard(waiter)
            if waiter.worker_id is not None:
                self._unindex(waiter, waiter.worker_id)
            if present and waiter.key is not None:
                keyed = self._keyed.get(waiter.key)
                if keyed is not None and waiter in keyed:
                    keyed.remove(waiter)
                if not keyed:
                    self._keyed.pop(waiter.key, None)
                    gate = self._gates.get(waiter.key)
                    if gate is not None and not gate.locked():
                        del self._gates[waiter.key]
        if present:
            LONGPOLL_WAITING.dec()
        if waiter.relays:
            self.settled(waiter, None)

    def settled(self, waiter: Waiter, took_category: int | None) -> None:
        """A waiter's attempt is over: it took a job of ``took_category``, or nothing. A
        relay that woke it and has no other attempt running (its wave is over) wakes the
        next wave when some attempt of the wave came back empty-handed: after
        HAND_ON_GRACE the first time since the last announced job, at once after that
        (module docstring). A wave that took a job hands on only for its empty-handed
        attempts, never for its takes: their ``t`` may have been counted already or not,
        so the relay cannot tell whether a job is left, and waking a wave for each take
        would wake waiters for jobs already taken. Except a take whose attempt was asked
        to look again (its category announced while it ran): its pull answers with the
        job and never looks, so that news is handed on as an empty hand's; waking one
        waiter too many then costs an attempt, missing the job cost a pull's deadline
        (tests/matching/test_wakeups.py)."""
        with self._lock:
            waiter.attempting = False
            self._attempting.discard(waiter)
            woken: list[Waiter] = []
            for category_id in waiter.relays:
                relay = self._relays.get(category_id)
                if relay is None:
                    continue
                relay.running.discard(waiter)
                # A take answers the pull: news it was asked to look again for (it may
                # have read before that job's commit) goes on as an empty hand's would.
                if category_id != took_category or category_id in waiter.renewed:
                    relay.empty_handed = True
                if relay.running or not relay.empty_handed:
                    continue
                relay.empty_handed = False
                if relay.graced:
                    woken += self._hand_on(category_id, relay)
                else:
                    relay.graced = True
                    waiter.loop.call_later(HAND_ON_GRACE, self._grace_over, category_id)
            waiter.relays.clear()
            waiter.renewed.clear()
        self._wake(woken)

    def _grace_over(self, category_id: int) -> None:
        """An empty-handed wave's grace is over: the jobs no ``t`` counted off meanwhile
        go to the next wave."""
        with self._lock:
            relay = self._relays.get(category_id)
            woken = self._hand_on(category_id, relay) if relay and not relay.running else []
        self._wake(woken)

    def close(self) -> None:
        """Shutting down: every waiter returns now, and no pull waits from now on."""
        with self._lock:
            self.closed = True
            waiters = list(self._waiters)
        self._wake(waiters)

    def deliver(self, payload: str) -> None:
        """Wake the waiters an announcement concerns (from any thread)."""
        announcement = parse_payload(payload)
        with self._lock:
            self.counts.announcements += 1
            LONGPOLL_ANNOUNCEMENTS.inc()
            self._count_news(announcement)
            if announcement.everything:
                self._fit_cache.clear()
                self._fit_yes.clear()
                self._epoch_all += 1
                woken = list(self._waiters)
            else:
                # Through the index: a finish or a taken job costs its few waiters, not a
                # pass over every waiter of a farm. A waiter whose worker is not known
                # yet is woken by any news.
                self._forget_workers(announcement.workers)
                concerned = set(self._unknown)
                for worker_id in announcement.workers | announcement.rooms:
                    concerned |= self._by_worker.get(worker_id, set())
                woken = list(concerned)
            for category_id in announcement.taken:
                relay = self._relays.get(category_id)
                if relay is not None:
                    _count_off(relay, _jobs_of(announcement.taken_jobs, category_id))
                    if relay.jobs == 0 and not relay.running:
                        del self._relays[category_id]
        if not announcement.everything:
            for category_id in sorted(announcement.categories):
                fitting = self._fitting(category_id, concerned)
                named = _jobs_of(announcement.waiting_jobs, category_id)
                unnamed = category_id in announcement.unnamed_waiting
                with self._lock:
                    woken += self._relay(category_id, fitting, named, unnamed)
        self._wake(woken)

    def _relay(
        self, category_id: int, fitting: _Fitting, named: set[int], unnamed: bool
    ) -> list[Waiter]:
        """Under the lock: jobs of the category wait (``named``, and some not named when
        ``unnamed``); the relay's queue becomes the fitting waiters it has not woken, and
        it wakes as many as it now may."""
        relay = self._relays.setdefault(category_id, _Relay())
        new = named - relay.named
        relay.named |= new
        relay.jobs += len(new) + unnamed
        relay.graced = False
        relay.queue = fitting.queue(frozenset(relay.running))
        # A waiter the relay woke whose attempt already runs may have read before this
        # job's commit: it looks again once its attempt is over (WakeupHub.arm). Left
        # out of the queue as running, it was woken by nobody, and when its wave came
        # back empty-handed the relay had no one left to hand the job on to: a job
        # submitted while a worker's other pull was taking the one before it waited
        # out that pull's whole deadline (tests/api/test_longpoll.py, CI of stop 48).
        again = [w for w in self._attempting if category_id in w.relays]
        for waiter in again:
            waiter.renewed.add(category_id)
        return again + self._hand_on(category_id, relay)

    def _hand_on(self, category_id: int, relay: _Relay) -> list[Waiter]:
        """Under the lock: wake waiters of the queue until as many run as the relay has
        jobs; forget the relay once nothing is left to try."""
        woken: list[Waiter] = []
        while relay.jobs > 0 and relay.queue and len(relay.running) < relay.jobs:
            waiter = relay.queue.pop()
            if waiter in self._waiters and waiter.wants_work:
                relay.running.add(waiter)
                waiter.relays.add(category_id)
                woken.append(waiter)
        if not relay.running and (not relay.queue or relay.jobs == 0):
            del self._relays[category_id]
        return woken

    def _forget_workers(self, worker_ids: Iterable[int]) -> None:
        """Under the lock: forget the workers' fit answers (the caller wakes their
        waiters)."""
        ids = set(worker_ids)
        if not ids:
            return
        for worker_id in ids:
            self._epochs[worker_id] = self._epochs.get(worker_id, 0) + 1
        for answers in self._fit_cache.values():
            for worker_id in ids:
                answers.pop(worker_id, None)
        for fitting in self._fit_yes.values():
            fitting -= ids

    def _fitting(self, category_id: int, concerned: set[Waiter]) -> _Fitting:
        """The waiters that want work, are not ``concerned`` (woken anyway) and whose
        worker fits the category: cached answers first, the workers not asked yet asked of
        the database in one question (outside the lock)."""
        with self._lock:
            if category_id not in self._fit_cache and len(self._fit_cache) >= MAX_CACHED_CATEGORIES:
                oldest = next(iter(self._fit_cache))
                del self._fit_cache[oldest]
                self._fit_yes.pop(oldest, None)
            answers = self._fit_cache.setdefault(category_id, {})
            unknown = frozenset(self._by_worker.keys() - answers.keys())
            epochs = {worker_id: self._epochs.get(worker_id, 0) for worker_id in unknown}
            epoch_all = self._epoch_all
            if unknown:
                self.counts.fit_checks += 1
                LONGPOLL_FIT_CHECKS.inc()
        fresh: set[int] | None = None
        if unknown:
            try:
                fresh = self._fits(category_id, unknown)
            except Exception:  # the database is away: waking costs a pull, not a job
                log.exception("fit check of category %s failed; waking its waiters", category_id)
        with self._lock:
            answers = self._fit_cache.setdefault(category_id, {})
            yes = self._fit_yes.setdefault(category_id, set())
            if fresh is not None and epoch_all == self._epoch_all:
                for worker_id in unknown:
                    if self._epochs.get(worker_id, 0) == epochs[worker_id]:
                        fits = worker_id in fresh
                        answers[worker_id] = fits
                        if fits:
                            yes.add(worker_id)
            fitting = yes & self._by_worker.keys()
            # Answers not kept (the worker changed meanwhile, the database was away) still
            # count for this announcement: a failed question wakes rather than forgets.
            fitting |= {
                worker_id
                for worker_id in unknown
                if worker_id not in answers and (fresh is None or worker_id in fresh)
            }
            if len(fitting) <= _SORTED_QUEUE_MAX:
                waiters = sorted(
                    (w for worker_id in fitting for w in self._by_worker.get(worker_id, ())),
                    key=_ORDER,
                )
            else:
                waiters = list(self._waiters)  # in waiting order (a copy, made in C)
            return _Fitting(fitting, waiters, concerned)

    def _count_news(self, announcement: Announcement) -> None:
        """Under the lock: one more announcement, noted against what it concerns."""
        self._news += 1
        if announcement.everything:
            self._news_of_all = self._news
            return
        for worker_id in announcement.workers | announcement.rooms:
            self._note_news(self._news_of_worker, worker_id)
        for category_id in announcement.categories:
            for forgotten in self._note_news(self._news_of_category, category_id):
                self._openings.pop(forgotten, None)
        for category_id, job_id in announcement.waiting_jobs:
            self._openings.setdefault(category_id, _Openings()).opened(job_id, self._news)
        for category_id in announcement.unnamed_waiting:
            self._openings.setdefault(category_id, _Openings()).unnamed = self._news
        for category_id, job_id in announcement.taken_jobs:
            openings = self._openings.get(category_id)
            if openings is not None:
                openings.jobs.pop(job_id, None)

    def _note_news(self, news: OrderedDict[int, int], key: int) -> list[int]:
        """Under the lock: ``key`` had news now; the keys forgotten to make room."""
        news[key] = self._news
        news.move_to_end(key)
        forgotten = []
        while len(news) > MAX_REMEMBERED_LIMITS:
            oldest, when = news.popitem(last=False)
            forgotten.append(oldest)
            self._news_floor = max(self._news_floor, when)
        return forgotten

    def remember_quiet(
        self, waiter: Waiter, answer: object, *, worker_id: int, wants_work: bool
    ) -> None:
        """The waiter's attempt found nothing (``answer``) for the worker ``worker_id``:
        kept for the worker's next pull, with the news count and the time at which the
        attempt started."""
        if waiter.key is None:
            return
        quiet = Quiet(worker_id, waiter.armed_news, waiter.armed_at, wants_work, answer)
        with self._lock:
            self._quiet[waiter.key] = quiet
            self._quiet.move_to_end(waiter.key)
            while len(self._quiet) > MAX_REMEMBERED_LIMITS:
                self._quiet.popitem(last=False)

    def forget_quiet(self, key: str | None) -> None:
        """The worker's attempt took work: its next pull looks for itself."""
        if key is not None:
            with self._lock:
                self._quiet.pop(key, None)

    def renew_quietly(
        self, waiter: Waiter, still_good: Callable[[object, float], bool] | None = None
    ) -> Quiet | None:
        """The worker's last empty attempt (its answer and when it started), when the
        waiter (a new pull of the same worker) may stand on it instead of an attempt of
        its own; None when it must look.

        A farm's idle workers renew their waits all the time (10,000 workers waiting 60 s
        send 170 pulls a second), and each renewal's attempt, a transaction that finds
        nothing, was most of the server's work (issue 37). Nothing can have changed for
        the worker since its last attempt started when no announcement since then
        concerned everything, the worker or (when it could take work) a job that still
        waits, of a category it fits or that the hub has no answer about (a job named
        when announced, and named again when a pull took it, no longer counts; one not
        named counts until the next attempt): then the attempt would find what the last
        one found. The waiter then stands as that attempt's did, indexed under its
        worker: news from now on wakes it as any waiter. Not for longer than
        :attr:`max_quiet` seconds since that attempt, so that what no announcement tells
        (a ``can_run_on`` plug-in's answer, a job held by another rule) is asked again
        that often, and the worker's ``last_seen``, which an attempt stamps, stays within
        its timeout; never while the hub polls (it hears no announcement).
        ``still_good(answer, seconds since its attempt started)`` may refuse the answer
        for what the caller knows (a metadata refresh fallen due)."""
        if waiter.key is None or self.max_quiet <= 0 or self.poll_seconds is not None:
            return None
        with self._lock:
            quiet = self._quiet.get(waiter.key)
            if (
                quiet is None
                or waiter not in self._waiters
                or waiter.worker_id != quiet.worker_id
                or time.monotonic() - quiet.started > self.max_quiet
                or not self._nothing_since(quiet)
                or (
                    still_good is not None
                    and not still_good(quiet.answer, time.monotonic() - quiet.started)
                )
            ):
                return None
            waiter.rearm()
            waiter.guessed = False
            waiter.wants_work = quiet.wants_work
            self.counts.quiet_renewals += 1
        LONGPOLL_QUIET_RENEWALS.inc()
        return quiet

    def _nothing_since(self, quiet: Quiet) -> bool:
        """Under the lock: no announcement since the attempt started concerns its worker."""
        since = quiet.news
        if self._news_of_all > since or self._news_floor > since:
            return False
        if self._news_of_worker.get(quiet.worker_id, 0) > since:
            return False
        if not quiet.wants_work:
            return True
        for category_id, news in reversed(self._news_of_category.items()):
            if news <= since:
                break
            answers = self._fit_cache.get(category_id)
            if answers is not None and answers.get(quiet.worker_id) is False:
                continue
            # Jobs announced since the attempt and all taken since leave the worker what
            # the attempt found: a herd job, announced to every worker and taken at once,
            # does not make every worker's next renewal look.
            openings = self._openings.get(category_id)
            if openings is None or openings.newest() > since:
                return False
        return True

    def _wake(self, waiters: list[Waiter]) -> None:
        self.counts.wakeups += len(waiters)
        LONGPOLL_WAKEUPS.inc(len(waiters))
        for waiter in waiters:
            waiter.wake()
