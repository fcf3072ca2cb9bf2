"""`jobmatch tokens create|list|revoke` against a live server (issue 25)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.cli.conftest import Jobmatch


def test_create_with_an_expiry_list_with_last_use_and_revoke(jobmatch: Jobmatch) -> None:
    created = jobmatch(
        "tokens",
        "create",
        "submitter",
        "ci",
        "--label",
        "the CI",
        "--expires-in",
        "30d",
        "-o",
        "json",
    ).json()
    expires = datetime.fromisoformat(created["expires_at"])
    assert timedelta(days=29, hours=23) < expires - datetime.now(UTC) <= timedelta(days=30)
    assert created["token"].startswith("jm_")

    # People see the secret once, first, as `token: ...`.
    shown = jobmatch("tokens", "create", "worker", "w1")
    assert shown.code == 0, shown.stderr
    assert shown.stdout.splitlines()[0].split()[0] == "token:"
    assert "expires:   never" in shown.stdout.splitlines()

    # A use of the submitter token is recorded and listed.
    used = Jobmatch(jobmatch.server, token=created["token"])("jobs", "list")
    assert used.code == 0, used.stderr
    listing = jobmatch("tokens", "list", "-o", "json").json()
    assert listing == jobmatch.api("GET", "/v1/tokens")
    ci, w1 = listing["items"]
    assert ci["last_used_at"] is not None and w1["last_used_at"] is None
    table = jobmatch("tokens", "list").stdout.splitlines()
    assert table[0].split() == [
        "ID",
        "ROLE",
        "SUBJECT",
        "LABEL",
        "EXPIRES",
        "LAST",
        "USED",
        "REVOKED",
    ]

    revoked = jobmatch("tokens", "revoke", str(ci["id"]), "-o", "json").json()
    assert revoked["revoked_at"] is not None
    refused = Jobmatch(jobmatch.server, token=created["token"])("jobs", "list")
    assert refused.code != 0 and "unknown or revoked" in refused.stderr


def test_a_bad_lifetime_is_one_line_and_exit_2(jobmatch: Jobmatch) -> None:
    for lifetime in ("30", "soon", "0d", "1y"):
        refused = jobmatch("tokens", "create", "worker", "w1", "--expires-in", lifetime)
        assert refused.code == 2, (lifetime, refused.stderr)
        assert refused.stderr.startswith("error: --expires-in")
        assert "Traceback" not in refused.stderr
    assert jobmatch.api("GET", "/v1/tokens")["items"] == []


def test_revoking_an_unknown_token_is_one_line(jobmatch: Jobmatch) -> None:
    refused = jobmatch("tokens", "revoke", "999")
    assert refused.code == 1 and refused.stderr.startswith("error: 404")
    assert "Traceback" not in refused.stderr
