"""A what-if announces nothing to waiting pulls (app/matching/announce.py ``withheld``):
its submissions, registrations and pulls were rolled back, so no waiter should wake;
announcements the transaction made before it are kept."""

from __future__ import annotations

import pytest

from app.db import notify
from app.db.engine import Database
from app.matching import announce, submission
from app.matching.requests import JobSpec
from app.matching.whatif.changes import ChangeSet
from app.matching.whatif.run import what_if
from app.matching.workers import WorkerSpec, upsert_worker

pytestmark = pytest.mark.db


def test_the_whatif_s_announcements_are_dropped_and_earlier_ones_kept(
    database: Database,
) -> None:
    with database.transaction() as session:
        upsert_worker(session, WorkerSpec("w1", "language: ?java", slots=2))
        submission.submit_job(session, JobSpec("language: java"), submitter="t")
    changes = ChangeSet(
        add_workers=(WorkerSpec("w2", "language: ?java"),),
        change_workers=(),
        add_jobs=(JobSpec("language: java"),),
    )
    with database.transaction() as session:
        answer = what_if(session, changes, "first", by="t")
        assert answer.first_pulls and answer.first_pulls[0].job is not None
        assert not session.info.get(notify.PENDING_KEY)
        announce.everything_changed(session)
        what_if(session, changes, "first", by="t")
        assert session.info[notify.PENDING_KEY] == {notify.EVERYTHING}
        session.info.pop(notify.PENDING_KEY)
