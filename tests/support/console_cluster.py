"""A small cluster for the web console's tests: the demo's four workers and nine jobs
(app/matching/demo.py, submitted by "demo"), two jobs of the submitter "alice" (one of them
pulled, so a worker runs it and the history holds a dispatch), and one of "bob"."""

from __future__ import annotations

from dataclasses import dataclass

from app.db.engine import Database
from app.db.models import Role
from app.db.tokens import issue_token
from app.matching import submission
from app.matching.demo import load_demo
from app.matching.dispatch.pull import pull_for
from app.matching.submission import JobSpec


@dataclass(frozen=True)
class ConsoleCluster:
    alice_token: str
    bob_token: str
    worker_token: str
    #: alice's job that docs-worker runs, and the one that waits.
    alice_running: int
    alice_waiting: int
    bob_job: int


def load_console_cluster(database: Database) -> ConsoleCluster:
    with database.transaction() as session:
        load_demo(session)
        # Priority 9: ahead of every demo job docs-worker could take.
        running = submission.submit_job(
            session, JobSpec("language: python; python: 3.7", priority=9), submitter="alice"
        )
        waiting = submission.submit_job(session, JobSpec("arch: ~x86"), submitter="alice")
        bob = submission.submit_job(session, JobSpec("language: java; java: 12"), submitter="bob")
        pulled, _puller = pull_for(session, "docs-worker")
        assert pulled is not None and pulled.id == running.id, pulled
        _row, alice = issue_token(session, role=Role.SUBMITTER, subject="alice")
        _row, bob_token = issue_token(session, role=Role.SUBMITTER, subject="bob")
        _row, worker = issue_token(session, role=Role.WORKER, subject="java-box")
        return ConsoleCluster(alice, bob_token, worker, running.id, waiting.id, bob.id)
