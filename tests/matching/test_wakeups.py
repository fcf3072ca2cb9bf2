"""The wake-up hub (app/matching/wakeups.py), without a database: whom each announcement
wakes, and how often it asks whether a worker fits a category."""

from __future__ import annotations

import asyncio

import pytest

from app.matching import wakeups
from app.matching.wakeups import Announcement, WakeupHub, parse_payload


def test_payloads_parse_into_categories_workers_or_everything() -> None:
    assert parse_payload("c3 w5 c4 r6") == Announcement(
        categories=frozenset({3, 4}),
        workers=frozenset({5}),
        rooms=frozenset({6}),
        unnamed_waiting=frozenset({3, 4}),
    )
    assert parse_payload("*").everything
    # Anything unknown wakes everyone: too many wake-ups cost a pull, too few a job.
    assert parse_payload("c3 x9").everything
    assert parse_payload("cfoo").everything
    for malformed in ("c3.", "c3.x", "w5.1", "r6.2", "c.4", "t3.4.5"):
        assert parse_payload(malformed).everything, malformed


def test_payloads_may_name_the_jobs_waiting_and_taken() -> None:
    assert parse_payload("c3.17 c3.18 t4.9 c5") == Announcement(
        categories=frozenset({3, 5}),
        taken=frozenset({4}),
        waiting_jobs=frozenset({(3, 17), (3, 18)}),
        taken_jobs=frozenset({(4, 9)}),
        unnamed_waiting=frozenset({5}),
    )


class Fits:
    """A fit function that counts its questions; ``fitting`` says who fits what."""

    def __init__(self, fitting: dict[int, set[int]]) -> None:
        self.fitting = fitting
        self.questions: list[tuple[int, frozenset[int]]] = []

    def __call__(self, category_id: int, worker_ids: frozenset[int]) -> set[int]:
        self.questions.append((category_id, worker_ids))
        return self.fitting.get(category_id, set()) & worker_ids


def woken_by(hub: WakeupHub, payload: str, expected: dict[int, bool]) -> dict[int, bool]:
    """Register one waiter per worker of ``expected``, deliver, and say who woke."""

    async def scenario() -> dict[int, bool]:
        loop = asyncio.get_running_loop()
        waiters = {}
        for worker_id in expected:
            waiter = hub.register(loop)
            waiter.expect(worker_id, wants_work=True)
            waiters[worker_id] = waiter
        hub.deliver(payload)
        results = {w: await waiter.wait(0.2) for w, waiter in waiters.items()}
        for waiter in waiters.values():
            hub.unregister(waiter)
        return results

    return asyncio.run(scenario())


def test_a_category_wakes_only_the_workers_that_fit_it_and_is_asked_once() -> None:
    fits = Fits({7: {1}})
    hub = WakeupHub(fits)
    assert woken_by(hub, "c7", {1: True, 2: False}) == {1: True, 2: False}
    assert woken_by(hub, "c7", {1: True, 2: False}) == {1: True, 2: False}
    assert fits.questions == [(7, frozenset({1, 2}))]  # the second time from the cache


def test_news_of_a_worker_wakes_it_and_forgets_its_answers() -> None:
    fits = Fits({7: {1}})
    hub = WakeupHub(fits)
    woken_by(hub, "c7", {1: True, 2: False})
    fits.fitting[7] = {1, 2}  # worker 2 changed: it fits now
    assert woken_by(hub, "w2", {1: False, 2: True}) == {1: False, 2: True}
    assert woken_by(hub, "c7", {1: True, 2: True}) == {1: True, 2: True}
    assert fits.questions[-1] == (7, frozenset({2}))  # only the forgotten answer


def test_news_of_a_workers_room_wakes_it_and_keeps_its_answers() -> None:
    fits = Fits({7: {1}})
    hub = WakeupHub(fits)
    woken_by(hub, "c7", {1: True, 2: False})
    assert woken_by(hub, "r1", {1: True, 2: False}) == {1: True, 2: False}
    woken_by(hub, "c7", {1: True, 2: False})
    assert len(fits.questions) == 1  # a finish changes no fit: nothing asked again


def test_everything_wakes_everyone_and_forgets_every_answer() -> None:
    fits = Fits({7: set()})
    hub = WakeupHub(fits)
    woken_by(hub, "c7", {1: False})
    assert woken_by(hub, "*", {1: True, 2: True}) == {1: True, 2: True}
    woken_by(hub, "c7", {1: False})
    assert len(fits.questions) == 2


def test_a_worker_that_could_take_no_job_sleeps_through_new_jobs() -> None:
    hub = WakeupHub(Fits({7: {1}}))

    async def scenario() -> tuple[bool, bool]:
        waiter = hub.register(asyncio.get_running_loop())
        waiter.expect(1, wants_work=False)
        hub.deliver("c7")
        by_job = await waiter.wait(0.2)
        hub.deliver("w1")
        by_news = await waiter.wait(0.2)
        return by_job, by_news

    assert asyncio.run(scenario()) == (False, True)


def test_a_failed_fit_question_wakes_the_candidates() -> None:
    def broken(category_id: int, worker_ids: frozenset[int]) -> set[int]:
        raise ConnectionError("the database is away")

    hub = WakeupHub(broken)
    assert woken_by(hub, "c7", {1: True}) == {1: True}


def test_a_waiter_whose_worker_is_unknown_yet_wakes_for_anything() -> None:
    """Once its attempt has started (armed): news from then on may be after what the
    attempt reads. Before that (queued for its turn) news does not wake it: the attempt
    reads what the news was about (issue 37)."""
    fits = Fits({})
    hub = WakeupHub(fits)

    async def scenario() -> tuple[bool, bool]:
        waiter = hub.register(asyncio.get_running_loop())
        hub.deliver("c9")
        before_its_attempt = await waiter.wait(0.1)
        hub.arm(waiter)
        hub.deliver("c9")
        return before_its_attempt, await waiter.wait(0.2)

    assert asyncio.run(scenario()) == (False, True)
    assert fits.questions == []


def test_a_worker_that_pulled_before_is_known_by_name_in_its_next_first_attempt() -> None:
    """A farm's deadline pulls come back under the same names: their first attempts are
    woken by news about their own worker or a category it fits, not by every
    announcement (issue 37: each submission, finish and take made every first attempt in
    flight attempt again)."""
    hub = WakeupHub(Fits({7: {1}}))

    async def scenario() -> dict[str, bool]:
        loop = asyncio.get_running_loop()
        earlier = hub.register(loop, key="node-1")
        hub.arm(earlier)
        earlier.expect(1, wants_work=True)
        hub.unregister(earlier)  # its deadline passed: the worker pulls again

        seen = {}
        again = hub.register(loop, key="node-1")
        hub.arm(again)  # its first attempt: worker 1 by its name
        for payload in ("r2", "w2", "c8", "t7"):  # another worker, a category it does not fit
            hub.deliver(payload)
        seen["news about others"] = await again.wait(0.1)
        hub.deliver("r1")
        seen["its own room"] = await again.wait(0.2)
        again.rearm()
        hub.deliver("c7")
        seen["a category it fits"] = await again.wait(0.2)
        again.rearm()
        again.expect(1, wants_work=True)  # the guess was right: nothing to look at again
        seen["confirmed"] = await again.wait(0.05)
        hub.unregister(again)

        stranger = hub.register(loop, key="node-9")  # never pulled here: not told apart
        hub.arm(stranger)
        hub.deliver("r2")
        seen["unknown name"] = await stranger.wait(0.2)
        hub.unregister(stranger)
        return seen

    assert asyncio.run(scenario()) == {
        "news about others": False,
        "its own room": True,
        "a category it fits": True,
        "confirmed": False,
        "unknown name": True,
    }


def test_a_wrong_guess_of_the_workers_id_makes_the_waiter_look_again() -> None:
    """The name was deleted and registered again (a new id) while the pull's attempt ran:
    news about the new worker went unheard, so the waiter looks again at once."""
    hub = WakeupHub(Fits({}))

    async def scenario() -> tuple[bool, int, int]:
        loop = asyncio.get_running_loop()
        earlier = hub.register(loop, key="node-1")
        hub.arm(earlier)
        earlier.expect(1, wants_work=True)
        hub.unregister(earlier)
        again = hub.register(loop, key="node-1")
        hub.arm(again)
        hub.deliver("r5")  # the new worker's news, heard by nobody
        again.expect(5, wants_work=True)
        looks_again = await again.wait(0.2)
        return looks_again, hub.waiting_for(5), hub.waiting_for(1)

    assert asyncio.run(scenario()) == (True, 1, 0)


def test_a_relay_wakes_one_waiter_per_job_in_waves() -> None:
    """Five equal workers, one job: one pull, not five (no spare: module docstring). A
    ``t`` stops the relay; a new job starts it again, longest waiting first; two jobs
    wake two."""
    hub = WakeupHub(Fits({7: {1, 2, 3, 4, 5}}))

    async def scenario() -> list[list[int]]:
        waiters = _known_waiters(hub, (1, 2, 3, 4, 5))

        rounds = []
        hub.deliver("c7")
        rounds.append(await _woken(waiters))
        hub.settled(waiters[0], 7)  # worker 1 took the job
        hub.deliver("t7")
        rounds.append(await _woken(waiters, wakeups.HAND_ON_GRACE * 2))
        hub.deliver("c7 c8")  # a new job: the relay starts again, longest waiting first
        rounds.append(await _woken(waiters))
        hub.settled(waiters[0], 7)
        hub.deliver("t7")
        hub.deliver("c7")  # two jobs, announced one after the other
        hub.deliver("c7")
        rounds.append(await _woken(waiters))
        return rounds

    assert asyncio.run(scenario()) == [[1], [], [1], [1, 2]]


def test_an_empty_handed_wave_waits_for_the_takers_t_then_hands_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 37: a herd job (every waiter fits) taken in another process left this
    process's wave empty-handed before the taker's ``t`` came; handing on at once woke
    waiter after waiter until it came. The next wave now waits HAND_ON_GRACE: a ``t``
    within it ends the relay; without one (the job does not fit the wave's free room)
    the next wave is woken, and the waves after it at once. (A grace of a second, so that
    "not yet" holds on a busy machine.)"""
    monkeypatch.setattr(wakeups, "HAND_ON_GRACE", 1.0)
    hub = WakeupHub(Fits({7: {1, 2, 3, 4, 5, 6}}))

    async def scenario() -> list[list[int]]:
        waiters = _known_waiters(hub, (1, 2, 3, 4, 5, 6))

        rounds = []
        hub.deliver("c7")  # taken elsewhere
        rounds.append(await _woken(waiters))
        hub.settled(waiters[0], None)
        hub.deliver("t7")  # within the grace
        rounds.append(await _woken(waiters, 1.5))

        hub.deliver("c7")  # a job that fits nobody's room in the first waves
        rounds.append(await _woken(waiters))
        hub.settled(waiters[0], None)
        rounds.append(await _woken(waiters, 0))  # within the grace: nobody yet
        await waiters[1].wait(5.0)
        rounds.append(await _woken(waiters, 0))
        hub.settled(waiters[1], None)
        rounds.append(await _woken(waiters, 0))  # graced once: the next wave at once
        return rounds

    assert asyncio.run(scenario()) == [[1], [], [1], [], [2], [3]]


def test_a_wave_that_took_one_of_two_jobs_hands_the_other_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two jobs, a wave of two: one takes (its ``t`` counted before its attempt is over),
    one comes back empty-handed. The job left goes to the next wave: a take never counts
    twice, once by its ``t`` and once by its attempt."""
    monkeypatch.setattr(wakeups, "HAND_ON_GRACE", 0.01)
    hub = WakeupHub(Fits({7: {1, 2, 3, 4, 5, 6}}))

    async def scenario() -> list[list[int]]:
        waiters = _known_waiters(hub, (1, 2, 3, 4, 5, 6))
        hub.deliver("c7")
        hub.deliver("c7")
        rounds = [await _woken(waiters)]
        hub.deliver("t7")
        hub.settled(waiters[0], 7)
        hub.settled(waiters[1], None)
        await waiters[2].wait(5.0)
        rounds.append(await _woken(waiters, 0))
        return rounds

    assert asyncio.run(scenario()) == [[1, 2], [3]]


def test_a_relay_counts_off_only_the_named_jobs_it_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pull that the relay did not wake took job 99, which waited before the relay
    began: its ``t7.99`` counted off one of the relay's jobs, and the job left waited for
    the next news. Named, the take of a
    job the relay never counted leaves its count; two jobs named in one announcement
    count two."""
    monkeypatch.setattr(wakeups, "HAND_ON_GRACE", 0.01)
    hub = WakeupHub(Fits({7: {1, 2, 3, 4, 5, 6}}))

    async def scenario() -> list[list[int]]:
        waiters = _known_waiters(hub, (1, 2, 3, 4, 5, 6))
        hub.deliver("c7.1")
        rounds = [await _woken(waiters)]  # one job, one waiter
        hub.deliver("t7.99")  # an older job, taken elsewhere: job 1 still waits
        hub.settled(waiters[0], None)
        await waiters[1].wait(5.0)
        rounds.append(await _woken(waiters, 0))  # so the next wave looks for it
        hub.deliver("t7.1")  # now it is taken: the relay ends with this wave
        hub.settled(waiters[1], None)
        rounds.append(await _woken(waiters, 0.1))
        hub.deliver("c7.2 c7.3")  # two jobs in one announcement
        rounds.append(await _woken(waiters))
        return rounds

    assert asyncio.run(scenario()) == [[1], [2], [], [1, 2]]


@pytest.mark.parametrize("sorted_up_to", [0, 1000], ids=["drawn-lazily", "sorted"])
def test_a_relay_wakes_the_same_waves_whether_its_queue_is_sorted_or_drawn(
    monkeypatch: pytest.MonkeyPatch, sorted_up_to: int
) -> None:
    """Issue 37: a herd job's relay no longer sorts every fitting waiter of the process to
    wake one; past _SORTED_QUEUE_MAX fitting workers it draws its queue from the hub's
    waiters in waiting order. Either way the waves are the same: the longest waiting
    fitting waiters first, those that do not fit or are woken anyway skipped."""
    monkeypatch.setattr(wakeups, "HAND_ON_GRACE", 0.01)
    monkeypatch.setattr(wakeups, "_SORTED_QUEUE_MAX", sorted_up_to)
    workers = tuple(range(1, 101))
    hub = WakeupHub(Fits({7: {w for w in workers if w % 3 != 0}}))  # every third misfits

    async def scenario() -> list[list[int]]:
        waiters = _known_waiters(hub, workers)
        hub.deliver("c7.1 c7.2 c7.3 r2")  # worker 2 is woken by its own news
        rounds = [sorted(await _woken(waiters))]
        for waiter in waiters:
            if waiter.worker_id in (1, 2, 4, 5):
                hub.settled(waiter, None)  # all came back empty-handed
        await waiters[6].wait(5.0)
        rounds.append(await _woken(waiters, 0))
        return rounds

    assert asyncio.run(scenario()) == [[1, 2, 4, 5], [7, 8, 10]]


def _known_waiters(hub: WakeupHub, worker_ids: tuple[int, ...]) -> list[wakeups.Waiter]:
    """One waiter per worker, past its first attempt (its worker known, wanting work), in
    waiting order. Called on the running loop."""
    waiters = []
    for worker_id in worker_ids:
        waiter = hub.register(asyncio.get_running_loop())
        waiter.expect(worker_id, wants_work=True)
        waiters.append(waiter)
    return waiters


async def _woken(waiters: list[wakeups.Waiter], after: float = 0.05) -> list[int]:
    """The workers whose waiters were woken within ``after`` seconds, and by what was
    scheduled before (rearmed for the next round)."""
    await asyncio.sleep(after)
    await asyncio.sleep(0)  # a wake-up is a callback: the one scheduled last runs now
    found = []
    for waiter in waiters:
        if await waiter.wait(0):
            assert waiter.worker_id is not None
            found.append(waiter.worker_id)
            waiter.rearm()
    return found


def test_the_oldest_categories_answers_are_forgotten_past_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(wakeups, "MAX_CACHED_CATEGORIES", 2)
    fits = Fits({})
    hub = WakeupHub(fits)
    for payload in ("c1", "c2", "c3", "c2", "c1"):
        woken_by(hub, payload, {1: False})
    # c1 was forgotten when c3 came, so it is asked again; c2 was kept.
    assert [category for category, _ in fits.questions] == [1, 2, 3, 1]


class _Attempts:
    """Attempts at one gate of a single turn: each records its name when it runs, and the
    one named ``holder`` keeps its turn until ``release`` is set."""

    def __init__(self) -> None:
        self.gate = wakeups.AttemptGate(1)
        self.ran: list[str] = []
        self.release = asyncio.Event()

    async def attempt(self, name: str, woken: bool) -> None:
        async with self.gate.turn(woken=woken):
            self.ran.append(name)
            if name == "holder":
                await self.release.wait()


def test_the_attempt_gate_lets_a_woken_waiter_pass_new_pulls() -> None:
    """Issue 37: with the gate's turns taken, a woken waiter's attempt runs before the new
    pulls' first attempts that queued before it; each kind keeps its own order."""

    async def scenario() -> list[str]:
        attempts = _Attempts()
        attempt, ran, release = attempts.attempt, attempts.ran, attempts.release
        holder = asyncio.create_task(attempt("holder", False))
        await asyncio.sleep(0)
        queued = [
            asyncio.create_task(attempt("new-1", False)),
            asyncio.create_task(attempt("new-2", False)),
            asyncio.create_task(attempt("woken-1", True)),
            asyncio.create_task(attempt("woken-2", True)),
        ]
        await asyncio.sleep(0)
        assert ran == ["holder"]
        release.set()
        await asyncio.gather(holder, *queued)
        return ran

    assert asyncio.run(scenario()) == ["holder", "woken-1", "woken-2", "new-1", "new-2"]


def test_news_about_a_known_worker_moves_its_queued_first_attempt_ahead() -> None:
    """Issue 37: a job for one worker waited behind a farm's deadline pulls queued at the
    gate (39.6 s once, on a loaded host) while that worker's pull queued among them for
    its first attempt. News about a worker known by its name now moves its queued turn
    before the new pulls'."""
    hub = WakeupHub(Fits({}), max_attempts=1)

    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        for key, worker_id in (("a", 1), ("b", 2)):  # both pulled before
            earlier = hub.register(loop, key=key)
            hub.arm(earlier)
            earlier.expect(worker_id, wants_work=True)
            hub.unregister(earlier)
        ran: list[str] = []
        release = asyncio.Event()

        async def holder() -> None:
            async with hub.any_attempt():
                ran.append("holder")
                await release.wait()

        async def first_attempt(key: str) -> None:
            waiter = hub.register(loop, key=key)
            async with hub.any_attempt(waiter=waiter):
                ran.append(key)
            hub.unregister(waiter)

        tasks = [asyncio.create_task(holder())]
        await asyncio.sleep(0)
        tasks += [asyncio.create_task(first_attempt(key)) for key in ("a", "b")]
        await asyncio.sleep(0)
        hub.deliver("r2")  # worker b's room changed: a job may be for it
        await asyncio.sleep(0.05)
        release.set()
        await asyncio.gather(*tasks)
        return ran

    assert asyncio.run(scenario()) == ["holder", "b", "a"]


def test_a_cancelled_attempt_gives_its_turn_on() -> None:
    """An attempt cancelled while it queues (its client went away) takes no turn, and one
    cancelled just after it was granted its turn hands it on: the gate never leaks."""

    async def scenario() -> list[str]:
        attempts = _Attempts()
        attempt, ran, release = attempts.attempt, attempts.ran, attempts.release
        holder = asyncio.create_task(attempt("holder", False))
        await asyncio.sleep(0)
        gone = asyncio.create_task(attempt("gone", True))
        granted_then_gone = asyncio.create_task(attempt("granted-then-gone", True))
        last = asyncio.create_task(attempt("last", False))
        await asyncio.sleep(0)
        gone.cancel()
        release.set()
        # The holder's release grants the next woken turn; cancel it before it runs.
        await asyncio.sleep(0)
        granted_then_gone.cancel()
        await asyncio.gather(holder, last, gone, granted_then_gone, return_exceptions=True)
        # Every turn is back: four attempts more all run.
        await asyncio.gather(*(attempt(f"after-{i}", False) for i in range(4)))
        return ran

    ran = asyncio.run(scenario())
    assert ran[:2] == ["holder", "last"] and "gone" not in ran
    assert "granted-then-gone" not in ran
    assert ran[-4:] == [f"after-{i}" for i in range(4)]


def test_a_job_announced_during_a_woken_attempt_makes_it_look_again() -> None:
    """CI of stop 48 (tests/api/test_longpoll.py, two free slots): one job woke both of a
    worker's waiting pulls; a second job was committed while their attempts ran. One took
    the first job; the other's attempt had read before the second job's commit and came
    back empty-handed. Both were the relay's running wave, so the second job's ``c`` woke
    neither, the wave handed on to nobody, and the job waited out the pull's deadline. An
    attempt that runs when its relay's category is announced again now looks again."""
    hub = WakeupHub(Fits({7: {1, 2}}))

    async def scenario() -> list[list[int]]:
        waiters = _known_waiters(hub, (1, 2))
        hub.deliver("c7")
        hub.deliver("c7")
        rounds = [await _woken(waiters)]
        for waiter in waiters:
            hub.arm(waiter)  # both attempts start
        hub.deliver("c7")  # a third job, committed while they run
        hub.settled(waiters[0], 7)
        hub.unregister(waiters[0])  # its pull answers with the job
        hub.settled(waiters[1], None)
        rounds.append(await _woken(waiters[1:]))
        # A job announced after an attempt is over wakes through the queue, as before.
        hub.deliver("c7")
        rounds.append(await _woken(waiters[1:]))
        return rounds

    assert asyncio.run(scenario()) == [[1, 2], [2], [2]]


def test_a_job_announced_while_a_woken_attempt_takes_the_one_before_reaches_the_next_waiter() -> (
    None
):
    """A local run of tests/api/test_longpoll.py (two waiting pulls of a worker with two
    slots, two jobs submitted one after the other) once answered a pull 204 at its
    deadline. The first job's ``c`` woke the first waiter, whose attempt took it; that
    take's ``t`` arrived before the attempt settled, and then the second job's ``c``:
    the relay counted one job with one attempt running, so it woke nobody and asked the
    running attempt to look again. That attempt answered with the first job and never
    looked. A waiter asked to look again that takes a job now hands the news on as an
    empty-handed one does (after the grace)."""
    hub = WakeupHub(Fits({7: {1, 2}}))

    async def scenario() -> list[list[int]]:
        waiters = _known_waiters(hub, (1, 2))
        hub.deliver("c7.10")
        rounds = [await _woken(waiters)]
        hub.arm(waiters[0])  # its attempt starts, and takes job 10
        hub.deliver("t7.10")  # the take's commit, heard before the attempt settles
        hub.deliver("c7.11")  # the second job, committed meanwhile
        hub.settled(waiters[0], 7)
        hub.unregister(waiters[0])  # its pull answers with job 10
        rounds.append(await _woken(waiters[1:], after=3 * wakeups.HAND_ON_GRACE))
        return rounds

    assert asyncio.run(scenario()) == [[1], [2]]


def _renewal(
    hub: WakeupHub, news: tuple[str, ...], *, wants_work: bool = True, waiting: bool = False
) -> bool:
    """Worker 1 (``node-1``) waited and its attempt found nothing; ``news`` came after that
    attempt started, between its pulls (``waiting``: while it still waited, so that the
    hub asked whether it fits each category announced); does its next pull stand on that
    attempt (no attempt of its own)?"""

    async def scenario() -> bool:
        loop = asyncio.get_running_loop()
        earlier = hub.register(loop, key="node-1")
        hub.arm(earlier)
        earlier.expect(1, wants_work=wants_work)
        hub.remember_quiet(earlier, "nothing", worker_id=1, wants_work=wants_work)
        if not waiting:
            hub.unregister(earlier)  # its deadline passed
        for payload in news:
            hub.deliver(payload)
        hub.unregister(earlier)
        again = hub.register(loop, key="node-1")
        quiet = hub.renew_quietly(again)
        hub.unregister(again)
        assert quiet is None or (quiet.answer == "nothing" and quiet.worker_id == 1)
        return quiet is not None

    return asyncio.run(scenario())


def test_a_renewal_stands_on_the_last_attempt_when_no_news_concerns_its_worker() -> None:
    """Issue 37: a farm's idle workers renew their waits all the time, and each renewal's
    attempt found what the last one found. The renewal sends no statement unless an
    announcement since the last attempt started concerns its worker: everything, its
    room, itself, or a category it fits or the hub cannot tell."""
    fits = Fits({7: {1}, 8: {2}})
    hub = WakeupHub(fits)
    # The hub learns who fits 7 and 8 (worker 1 waits meanwhile).
    assert woken_by(hub, "c7 c8", {1: True}) == {1: True}
    assert _renewal(hub, ())
    assert _renewal(hub, ("r2", "w2", "t7", "c8"))  # others' news; 8 does not fit worker 1
    assert not _renewal(hub, ("c7",))  # a job of a category it fits
    assert not _renewal(hub, ("c9",))  # a category the hub has no answer about
    assert _renewal(hub, ("c10",), waiting=True)  # asked while it waited: it does not fit
    assert fits.questions[-1] == (10, frozenset({1}))
    assert not _renewal(hub, ("r1",))  # its room changed
    assert not _renewal(hub, ("w1",))  # it changed
    assert not _renewal(hub, ("*",))
    # A worker that could take no work (no free slot) hears of its own changes only.
    assert _renewal(hub, ("c7", "c9"), wants_work=False)
    assert not _renewal(hub, ("r1",), wants_work=False)
    assert hub.counts.quiet_renewals == 4


def test_a_renewal_stands_on_its_attempt_when_the_jobs_announced_since_were_taken() -> None:
    """Issue 37: a herd job (every worker fits it) was announced to every waiting worker
    and taken at once; the workers' next renewals, one each in the next minute, all
    looked for it. Named when announced and when taken, a job taken since the attempt
    concerns its worker no more; a job not named (a bulk submission, tasks an array held
    back) or not taken still does."""
    hub = WakeupHub(Fits({7: {1}}))
    assert woken_by(hub, "c7", {1: True}) == {1: True}
    assert _renewal(hub, ("c7.40", "t7.40"))  # announced and taken since
    assert _renewal(hub, ("c7.41 c7.42", "t7.42 t7.41"))
    assert not _renewal(hub, ("c7.43",))  # still waits
    assert not _renewal(hub, ("c7.44", "c7.45", "t7.44"))  # one of two taken
    assert not _renewal(hub, ("c7", "t7.46"))  # some job, not named: it may still wait
    assert not _renewal(hub, ("c7.48", "t7"))  # which job an unnamed take took is unknown
    # Whether worker 1 fits category 9 the hub cannot tell, and need not: its job is gone.
    assert _renewal(hub, ("c9.47", "t9.47"))
    # The waiting job 43 was announced before the next attempts: it no longer counts
    # for them (they found it, or could not take it), and its take changes nothing.
    assert _renewal(hub, ("t7.43",))


def test_announced_jobs_forgotten_count_as_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub remembers MAX_OPEN_JOBS announced jobs per category; a job it forgot might
    still wait, so a renewal after its announcement looks."""
    monkeypatch.setattr(wakeups, "MAX_OPEN_JOBS", 2)
    hub = WakeupHub(Fits({7: {1}}))
    assert woken_by(hub, "c7", {1: True}) == {1: True}
    assert _renewal(hub, ("c7.1 c7.2", "t7.1 t7.2"))
    assert not _renewal(hub, ("c7.3 c7.4 c7.5", "t7.4 t7.5"))  # 3 forgotten, not taken


def test_a_renewal_looks_again_after_max_quiet_and_while_the_hub_polls() -> None:
    """What no announcement tells (a plug-in's answer, a worker's last_seen) is looked at
    again at least every ``max_quiet`` seconds; a hub that hears nothing (behind a pooler)
    never stands on an old attempt."""
    hub = WakeupHub(Fits({}))
    assert _renewal(hub, ())
    hub.max_quiet = 0.0
    assert not _renewal(hub, ())
    hub.max_quiet = 300.0
    hub.poll_seconds = 1.0
    assert not _renewal(hub, ())
    hub.poll_seconds = None
    hub.forget_quiet("node-1")

    async def forgotten() -> bool:
        waiter = hub.register(asyncio.get_running_loop(), key="node-1")
        quiet = hub.renew_quietly(waiter)
        hub.unregister(waiter)
        return quiet is None

    assert asyncio.run(forgotten())


def test_forgotten_news_counts_as_news(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub remembers the news of the last MAX_REMEMBERED_LIMITS workers and
    categories; what it forgot counts as announced."""
    monkeypatch.setattr(wakeups, "MAX_REMEMBERED_LIMITS", 2)
    hub = WakeupHub(Fits({}))
    assert not _renewal(hub, ("r5", "r6", "r7"))  # r5 forgotten: it might have been r1
