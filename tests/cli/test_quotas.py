"""`jobmatch quotas list|show|add|replace|delete` against a live server (qconf -srqsl,
-srqs, -Arqs, -Mrqs, -drqs of Grid Engine 6.2, qconf(1))."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Jobmatch

PER_USER = "name per_user\nenabled TRUE\nlimit users {*} to slots=1\n"


def test_add_show_replace_list_delete(jobmatch: Jobmatch, tmp_path: Path) -> None:
    source = tmp_path / "per_user.rqs"
    source.write_text(PER_USER)
    added = jobmatch("quotas", "add", str(source))
    assert added.code == 0, added.stderr
    assert "   limit        users {*} to slots=1" in added.stdout.splitlines()
    # A running job's slot shows in the usage table under its owner's key.
    jobmatch.api("POST", "/v1/workers", {"name": "w1", "queues": [{"name": "all.q", "slots": 2}]})
    jobmatch.api("POST", "/v1/jobs", {"hard": "h_rt=60"})
    assert jobmatch.api("POST", "/v1/schedule")["dispatched"] == 1
    shown = jobmatch("quotas", "show", "per_user")
    assert shown.code == 0, shown.stderr
    usage = [line.split() for line in shown.stdout.splitlines() if "per_user/1" in line]
    assert usage == [["per_user/1", "admin/////", "slots", "1.0", "1"]]
    assert jobmatch("quotas", "show", "per_user", "-o", "json").json() == jobmatch.api(
        "GET", "/v1/quotas/per_user"
    )
    source.write_text(PER_USER.replace("slots=1", "slots=2"))
    replaced = jobmatch("quotas", "replace", "per_user", str(source))
    assert replaced.code == 0, replaced.stderr
    listed = jobmatch("quotas", "list")
    assert listed.stdout.splitlines()[2].split()[:3] == ["per_user", "yes", "1"]
    deleted = jobmatch("quotas", "delete", "per_user")
    assert (deleted.code, deleted.stdout) == (0, "deleted resource quota set per_user\n")


def test_a_bad_set_is_one_line_and_exit_1(jobmatch: Jobmatch, tmp_path: Path) -> None:
    source = tmp_path / "bad.rqs"
    source.write_text("name bad\nlimit users {a to slots=1\n")
    refused = jobmatch("quotas", "add", str(source))
    assert refused.code == 1
    assert refused.stderr.startswith("error: 422")
    assert "unclosed '{'" in refused.stderr and "Traceback" not in refused.stderr
    missing = jobmatch("quotas", "add", str(tmp_path / "nowhere.rqs"))
    assert missing.code == 2 and missing.stderr.startswith("error: cannot read")
    binary = tmp_path / "binary.rqs"
    binary.write_bytes(b"name b\xd0\x00\n")
    undecodable = jobmatch("quotas", "add", str(binary))
    assert (undecodable.code, undecodable.stderr) == (
        2,
        f"error: cannot read {binary}: not UTF-8 text\n",
    )
