"""debusine task scheduling (debusine issue #8), rule by rule, in SQL on both databases."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.db.engine import Database
from app.db.models import CategoryMisfit, JobState, Worker
from app.matching import submission, workers
from app.matching.debusine import metadata as worker_metadata
from app.matching.debusine import registry as tasks
from app.matching.debusine.registry import TaskSpec
from app.matching.dispatch import pull as dispatch
from app.matching.errors import InvalidFieldError
from app.matching.locks import worker_by_name
from app.matching.submission import NO_SUITABLE_WORKER, JobSpec
from app.matching.workers import WorkerSpec
from app.task_plugins import load_plugin
from tests.support.task_plugins import install_plugins

PICKY = """
CALLS = []


class Plugin:
    @staticmethod
    def can_run_on(metadata):
        CALLS.append(metadata.get("name:me"))
        return metadata.get("picky:ok") is True
"""


@pytest.fixture
def picky_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    install_plugins(tmp_path / "site", {"picky": PICKY})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    load_plugin.cache_clear()
    yield load_plugin("picky")
    load_plugin.cache_clear()
    for name in [m for m in sys.modules if m.startswith("jobmatch_test_plugins_")]:
        del sys.modules[name]


def _task(database: Database, name: str, **kw: Any) -> None:
    with database.transaction() as session:
        tasks.upsert_task(session, TaskSpec(name=name, **kw))


def _worker(database: Database, name: str, slots: int = 4) -> None:
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name=name, slots=slots))


def _report(database: Database, name: str, report: dict[str, Any]) -> None:
    with database.transaction() as session:
        worker_metadata.report_dynamic_metadata(session, name, report)


def _static(database: Database, name: str, static: dict[str, Any]) -> None:
    with database.transaction() as session:
        worker_metadata.set_static_metadata(session, name, static)


def _submit(database: Database, task: str | None, priority: int = 0) -> tuple[int, JobState, str]:
    with database.transaction() as session:
        job = submission.submit_job(session, JobSpec(task=task, priority=priority), submitter="t")
        return job.id, job.state, job.failure_reason or ""


def _pull(database: Database, worker: str) -> int | None:
    with database.transaction() as session:
        job = dispatch.pull(session, worker)
        return job.id if job else None


def _generation(database: Database, name: str) -> int:
    with database.transaction() as session:
        return worker_by_name(session, name).generation


def test_unknown_task_is_rejected_at_submission(database: Database) -> None:
    """The server knows every task type (debusine issue #8); a job naming another is a 422."""
    _task(database, "sbuild")
    with database.transaction() as session, pytest.raises(InvalidFieldError) as caught:
        submission.submit_job(session, JobSpec(task="sbuid"), submitter="t")
    assert caught.value.field == "task"
    assert "did you mean 'sbuild'" in caught.value.message


def test_no_suitable_worker_fails_at_once_otherwise_waiting(database: Database) -> None:
    """debusine issue #8: "If none are suitable, the task is immediately marked as failed with the
    message 'No suitable worker found'. Otherwise it keeps the task in the queue"."""
    _task(database, "sbuild", requirements={"ge": ["system:cpu_count", 4]})
    _worker(database, "small")
    _report(database, "small", {"system": {"cpu_count": 2}, "sbuild": {}})
    _id, state, reason = _submit(database, "sbuild")
    assert (state, reason) == (JobState.FAILED, NO_SUITABLE_WORKER)
    _worker(database, "big")
    _report(database, "big", {"system": {"cpu_count": 8}, "sbuild": {}})
    _id, state, reason = _submit(database, "sbuild")
    assert (state, reason) == (JobState.WAITING, "")


def test_static_metadata_overrides_dynamic_in_sql(database: Database) -> None:
    """debusine issue #8: static data set by the admin takes precedence over the dynamic
    metadata."""
    _task(database, "sbuild", requirements={"eq": ["system:architecture", "arm64"]})
    _worker(database, "w")
    _report(database, "w", {"system": {"architecture": "amd64"}, "sbuild": {}})
    assert _submit(database, "sbuild")[1] is JobState.FAILED
    _static(database, "w", {"system:architecture": "arm64"})
    job_id, state, _ = _submit(database, "sbuild")
    assert state is JobState.WAITING
    assert _pull(database, "w") == job_id
    # The worker's own report cannot undo the admin's pin.
    _report(database, "w", {"system": {"architecture": "amd64"}, "sbuild": {}})
    assert _submit(database, "sbuild")[1] is JobState.WAITING


def test_denylist_keeps_a_task_off_a_worker(database: Database) -> None:
    """debusine issue #8: "tasks_denylist: any task named in that list will not be allowed
    to run"."""
    _task(database, "sbuild")
    _task(database, "lintian")
    _worker(database, "w")
    _report(database, "w", {"sbuild": {}, "lintian": {}})
    _static(database, "w", {"tasks_denylist": ["lintian"]})
    _lintian, state, reason = _submit(database, "lintian")
    assert (state, reason) == (JobState.FAILED, NO_SUITABLE_WORKER)
    sbuild, _, _ = _submit(database, "sbuild")
    assert _pull(database, "w") == sbuild


def test_allowlist_is_the_whole_list_and_beats_the_denylist(database: Database) -> None:
    """debusine issue #8: "If tasks_allowlist is present, then that's the list of tasks to use";
    debusine's test: a task in both lists is allowed (debusine 0.12's scheduler tests)."""
    for name in ("sbuild", "lintian", "piuparts"):
        _task(database, name)
    _worker(database, "w")
    _worker(database, "other")
    _report(database, "w", {"sbuild": {}, "lintian": {}, "piuparts": {}})
    _static(database, "w", {"tasks_allowlist": ["sbuild"], "tasks_denylist": ["sbuild"]})
    _static(database, "other", {"tasks_allowlist": []})  # an empty allowlist allows nothing
    assert _submit(database, "sbuild")[1] is JobState.WAITING
    assert _submit(database, "lintian")[1] is JobState.FAILED
    assert _submit(database, "piuparts")[1] is JobState.FAILED


def test_version_mismatch_until_the_worker_reports_again(database: Database) -> None:
    """debusine issue #8: a version field "used to ensure compatibility between the data returned by
    the worker and the code running on the scheduler"."""
    _task(database, "sbuild", version=2)
    _worker(database, "w")
    _report(database, "w", {"sbuild": {"version": 1}})
    assert _submit(database, "sbuild")[1] is JobState.FAILED
    _report(database, "w", {"sbuild": {"version": 2}})
    waiting, state, _ = _submit(database, "sbuild")
    assert state is JobState.WAITING
    # The server's code moves on: the waiting job's category is re-evaluated at once.
    _task(database, "sbuild", version=3)
    assert _pull(database, "w") is None
    _report(database, "w", {"sbuild": {"version": 3}})
    assert _pull(database, "w") == waiting


def test_a_worker_that_never_reported_a_task_cannot_run_it(database: Database) -> None:
    _task(database, "sbuild")
    _worker(database, "w")
    assert _submit(database, "sbuild")[1] is JobState.FAILED
    with database.transaction() as session:
        reasons = set(session.scalars(select(CategoryMisfit.reason)))
    assert reasons == {"task-version"}


def test_jobs_without_a_task_ignore_task_rules(database: Database) -> None:
    """Allow/deny lists and versions govern task jobs only; plain jobs match as before."""
    _worker(database, "w")
    _static(database, "w", {"tasks_allowlist": []})
    job_id, state, _ = _submit(database, None)
    assert state is JobState.WAITING
    assert _pull(database, "w") == job_id


def test_pull_oldest_after_priority_that_this_worker_may_and_can_run(database: Database) -> None:
    """debusine issue #8: filter by the allow/deny lists, "sorts them by descending age, and
    it picks the first one where task.can_run_on(worker) is True" (after priority, as debusine)."""
    _task(database, "sbuild", requirements={"contains": ["sbuild:chroots", "trixie"]})
    _task(database, "lintian")
    _worker(database, "builder")
    _worker(database, "checker")
    _report(database, "builder", {"sbuild": {"chroots": ["trixie"]}, "lintian": {}})
    _report(database, "checker", {"sbuild": {"chroots": ["bookworm"]}, "lintian": {}})
    _static(database, "builder", {"tasks_denylist": ["lintian"]})
    old_sbuild = _submit(database, "sbuild")[0]
    lint = _submit(database, "lintian")[0]
    urgent_sbuild = _submit(database, "sbuild", priority=5)[0]
    new_sbuild = _submit(database, "sbuild")[0]
    assert _pull(database, "checker") == lint  # the sbuild jobs need a trixie chroot
    assert _pull(database, "checker") is None
    assert [_pull(database, "builder") for _ in range(4)] == [
        urgent_sbuild,
        old_sbuild,
        new_sbuild,
        None,
    ]


def test_relevant_reports_bump_the_generation_identical_ones_only_stamp_time(
    database: Database,
) -> None:
    _worker(database, "w")
    _report(database, "w", {"sbuild": {"chroots": ["sid"]}})
    first = _generation(database, "w")
    with database.transaction() as session:
        before = worker_by_name(session, "w").metadata_reported_at
    _report(database, "w", {"sbuild": {"chroots": ["sid"], "version": 1}})
    assert _generation(database, "w") == first
    with database.transaction() as session:
        assert worker_by_name(session, "w").metadata_reported_at > before  # type: ignore[operator]
    _report(database, "w", {"sbuild": {"chroots": ["sid"], "version": 2}})
    assert _generation(database, "w") == first + 1
    _static(database, "w", {"tasks_denylist": ["x"]})
    assert _generation(database, "w") == first + 2


def test_refresh_is_due_when_never_reported_or_older_than_the_limit(database: Database) -> None:
    """debusine issue #8: the server stores the latest dynamic metadata with a timestamp and asks
    for a refresh every 24 hours; a worker that never reported is asked at once."""
    _worker(database, "w")
    with database.transaction() as session:
        worker = worker_by_name(session, "w")
        assert worker_metadata.refresh_due(worker, 86_400)
    _report(database, "w", {"sbuild": {}})
    with database.transaction() as session:
        worker = worker_by_name(session, "w")
        reported = worker.metadata_reported_at
        assert reported is not None
        view = worker_metadata.read_metadata(session, worker)
        assert view.namespaces_reported_at == {"sbuild": reported}
        assert not worker_metadata.refresh_due(worker, 86_400)
        later = reported + timedelta(hours=24, seconds=1)
        assert worker_metadata.refresh_due(worker, 86_400, now=later)
        assert not worker_metadata.refresh_due(worker, 2 * 86_400, now=later)


def test_plugin_runs_only_on_sql_survivors_and_a_refusal_skips_to_the_next_head(
    database: Database, picky_plugin: Any
) -> None:
    """can_run_on is Python, so it runs only where SQL found the worker suitable; when it
    refuses the head job, the pull moves on to the next category's head."""
    _task(database, "picky", plugin="picky", requirements={"exists": "name:me"})
    _task(database, "plain")
    for name in ("nometa", "refused", "accepted"):
        _worker(database, name)
    _report(database, "refused", {"name": {"me": "refused"}, "picky": {}, "plain": {}})
    _report(database, "accepted", {"name": {"me": "accepted"}, "picky": {"ok": True}, "plain": {}})
    module = sys.modules[picky_plugin.__module__]
    module.CALLS.clear()
    picky_job, state, _ = _submit(database, "picky", priority=10)
    assert state is JobState.WAITING
    # "nometa" was ruled out in SQL (no name:me, no picky namespace): never asked.
    assert "nometa" not in module.CALLS and None not in module.CALLS
    plain_job = _submit(database, "plain")[0]
    module.CALLS.clear()
    assert _pull(database, "refused") == plain_job
    assert module.CALLS == ["refused"]  # asked once for the task, not per waiting job
    assert _pull(database, "accepted") == picky_job


def test_plugin_refusing_every_survivor_fails_the_submission(
    database: Database, picky_plugin: Any
) -> None:
    _task(database, "picky", plugin="picky")
    _worker(database, "w")
    _report(database, "w", {"picky": {"ok": False}})
    assert _submit(database, "picky")[1:] == (JobState.FAILED, NO_SUITABLE_WORKER)


def test_registering_a_task_with_a_missing_plugin_is_refused(database: Database) -> None:
    with database.transaction() as session, pytest.raises(InvalidFieldError) as caught:
        tasks.upsert_task(session, TaskSpec(name="x", plugin="not-installed"))
    assert caught.value.field == "plugin"


def test_metadata_rows_are_typed_for_sql(database: Database) -> None:
    _worker(database, "w")
    _report(database, "w", {"system": {"cpu_count": 4, "kvm": True, "arch": "amd64"}})
    _static(database, "w", {"system:arch": "arm64"})
    with database.transaction() as session:
        worker = session.scalar(select(Worker).where(Worker.name == "w"))
        assert worker is not None
        view = worker_metadata.read_metadata(session, worker)
        assert view.effective == {
            "system:version": 1,
            "system:cpu_count": 4,
            "system:kvm": True,
            "system:arch": "arm64",
        }
        assert view.versions == {"system": 1}
