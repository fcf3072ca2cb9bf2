"""Issue 25, in process: the JSON log format, the access log's levels and caller, and the
setting that puts /metrics behind a token."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from app.api.app import create_app
from app.api.middleware import access_level
from app.db.engine import Database
from app.logs import configure_logging
from app.settings import Settings
from tests.conftest import ADMIN_TOKEN


@pytest.fixture
def root_logger() -> Iterator[None]:
    """The root logger as it was, after a test configured it."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("alembic").setLevel(logging.NOTSET)


@pytest.mark.usefixtures("root_logger")
def test_json_lines_drop_uvicorn_s_color_message(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO", "json")
    # What uvicorn logs (uvicorn/supervisors/multiprocess.py): the message twice, once
    # with ANSI colour escapes in ``color_message``.
    logging.getLogger("uvicorn.error").info(
        "Started parent process [1]",
        extra={"color_message": "Started parent process [\x1b[36m\x1b[1m1\x1b[0m]"},
    )
    logging.getLogger("app.events").info("job.submitted", extra={"event": "x", "job_id": 7})
    logging.getLogger("alembic.runtime.migration").info("Context impl PostgresqlImpl.")
    written = capsys.readouterr().err
    lines = [json.loads(line) for line in written.splitlines()]
    assert [line["message"] for line in lines] == ["Started parent process [1]", "job.submitted"]
    assert "color_message" not in lines[0] and "\x1b" not in written
    assert lines[1]["job_id"] == 7 and lines[1]["level"] == "INFO"
    assert lines[1]["logger"] == "app.events" and lines[1]["request_id"] == "-"
    assert lines[1]["time"].endswith("Z")


@pytest.mark.usefixtures("root_logger")
def test_text_lines_carry_each_field_as_key_value(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 39: `make run`'s text log said `job.dispatched` without the job or the worker."""
    configure_logging("INFO", "text")
    events = logging.getLogger("app.events")
    events.info(
        "job.dispatched",
        extra={"event": "job.dispatched", "job_id": 12, "worker": "w1", "detail": None},
    )
    events.info(
        "worker.state_changed",
        extra={"event": "worker.state_changed", "worker": "w1", "reason": 'kernel "6.1" up'},
    )
    logging.getLogger("app.access").info(
        "%s %s %s",
        "GET",
        "/v1/jobs",
        200,
        extra={"method": "GET", "path": "/v1/jobs", "status": 200, "role": "admin"},
    )
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("app.x").exception("failed", extra={"job": 3, "ids": [1, 2]})
    lines = capsys.readouterr().err.splitlines()
    # The event's name is the message: not repeated as event=; a None field is left out.
    assert lines[0].endswith("INFO [-] app.events: job.dispatched job_id=12 worker=w1"), lines
    # A value with a space or a quote stays one pair, quoted as JSON.
    assert lines[1].endswith('worker.state_changed worker=w1 reason="kernel \\"6.1\\" up"')
    # What the message already says (method, path, status) is not said twice.
    assert lines[2].endswith("app.access: GET /v1/jobs 200 role=admin"), lines
    # The fields stay on the record's line; the traceback follows it.
    assert lines[3].endswith("ERROR [-] app.x: failed job=3 ids=[1,2]"), lines
    assert lines[4] == "Traceback (most recent call last):"


def test_probes_and_idle_pulls_are_debug() -> None:
    assert access_level("/healthz", 200) == logging.DEBUG
    assert access_level("/readyz", 503) == logging.DEBUG
    assert access_level("/v1/workers/w/pull", 204) == logging.DEBUG
    assert access_level("/v1/workers/w/pull", 200) == logging.INFO
    assert access_level("/v1/jobs", 204) == logging.INFO


def test_access_log_names_the_caller_and_echoes_the_request_id(
    client: TestClient, admin_headers: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="app.access")
    response = client.get("/v1/workers", headers={**admin_headers, "X-Request-ID": "abc-1"})
    assert response.headers["x-request-id"] == "abc-1"
    (record,) = [r for r in caplog.records if r.name == "app.access"]
    assert (record.role, record.subject, record.route) == ("admin", "admin", "/v1/workers")  # type: ignore[attr-defined]


@pytest.mark.parametrize("required", [False, True])
def test_metrics_token_setting(database_url: str, database: Database, required: bool) -> None:
    settings = Settings(
        database_url=database_url,
        admin_token=SecretStr(ADMIN_TOKEN),
        log_format="text",
        log_level="WARNING",
        metrics_require_token=required,
    )
    with TestClient(create_app(settings, database=database)) as client:
        anonymous = client.get("/metrics")
        assert anonymous.status_code == (401 if required else 200)
        if required:
            assert anonymous.headers["content-type"] == "application/problem+json"
        signed = client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert signed.status_code == 200 and "jobmatch_jobs" in signed.text
        documented = client.get("/openapi.json").json()["paths"]["/metrics"]["get"]
        assert ("401" in documented["responses"]) is required
