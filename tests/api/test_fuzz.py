"""API fuzzing (issues 8, 21 and 25): schemathesis generates requests from our OpenAPI
document and runs them in process with every one of its checks; no response may be a 5xx or
contradict the document (its status codes, content types, headers and body schemas), invalid
data must be refused and valid data accepted.

Schemathesis' pytest plugin does not run under pytest 9, so each operation's Hypothesis
strategy is drawn from directly; the checks are schemathesis' own (call_and_validate).
Each operation gets 25 valid requests and 10 invalid ones (schemathesis' negative mode),
sent with the admin token, or with a worker's own token for the routes only a worker may
call (with its name in the path half of the time, so that those routes run past the role
check).

Valid requests run on both databases, because PostgreSQL refuses values (NUL in text,
64-bit numbers) that SQLite stores. Invalid ones run on SQLite only: validation refuses
them before any SQL runs, so a second database would double the time and find nothing
new. On a 2-core machine under a load average of 9, the valid requests took 39 s per
database and 25 invalid ones per operation 214 s, hence 10.

The session runs in a process of its own (tests/api/fuzz_session.py says why: the memory
schemathesis keeps per operation).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from schemathesis import GenerationMode

from app.db.engine import Database


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_api_fuzz(
    backend: str, database_url: str, database: Database, mode: GenerationMode
) -> None:
    if mode is GenerationMode.NEGATIVE and backend != "sqlite":
        pytest.skip("invalid requests are refused before any SQL runs: SQLite covers them")
    # `database` empties the tables; the session fills them through its own app.
    session = subprocess.run(
        [sys.executable, "-m", "tests.api.fuzz_session", database_url, mode.value],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    print(session.stdout)
    assert session.returncode == 0, (session.stdout + session.stderr)[-20000:]
    assert f"{mode.value} examples" in session.stdout
