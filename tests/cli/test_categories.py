"""`jobmatch categories list|show` against a live server: the fit of a category over the
workers, with the reason codes of v_category_fit."""

from __future__ import annotations

from tests.cli.conftest import Jobmatch, register_workers


def test_list_and_show_a_categorys_fit(jobmatch: Jobmatch) -> None:
    register_workers(jobmatch)
    waiting = jobmatch.api("POST", "/v1/jobs", {"resources": "language: java; java: 12"})
    category = waiting["category_id"]

    listed = jobmatch("categories", "list")
    assert listed.code == 0, listed.stderr
    header, _rule, row = listed.stdout.splitlines()
    assert header.split() == ["ID", "WAITING", "RUNNING", "FITTING", "WORKERS", "REQUEST"]
    assert row.split() == [str(category), "1", "0", "1", "resources=java:12;language:java"]
    assert jobmatch("categories", "list", "-o", "json").json() == jobmatch.api(
        "GET", "/v1/categories"
    )

    shown = jobmatch("categories", "show", str(category))
    assert shown.code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert f"category:        {category}" in lines and "waiting:         1" in lines
    rows = {line.split()[0]: line.split() for line in lines if line.startswith(("w1 ", "n0 "))}
    assert rows["w1"][:4] == ["w1", "active", "yes", "-"]
    assert rows["n0"][:4] == ["n0", "active", "no", "job-requires-tag"]
    assert "workers that do not fit, by reason: job-requires-tag 1" in lines
    assert jobmatch("categories", "show", str(category), "-o", "json").json() == jobmatch.api(
        "GET", f"/v1/categories/{category}"
    )


def test_an_unknown_category_is_refused(jobmatch: Jobmatch) -> None:
    missing = jobmatch("categories", "show", "999999")
    assert missing.code == 1 and missing.stderr.startswith("error: 404 Not Found: ")
