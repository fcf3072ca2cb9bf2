"""`jobmatch values show global|host NAME|queue QUEUE@HOST` against a live server."""

from __future__ import annotations

from tests.cli.conftest import Jobmatch


def test_values_of_each_level(jobmatch: Jobmatch) -> None:
    jobmatch.api("POST", "/v1/workers", {"name": "w1", "queues": [{"name": "all.q", "slots": 4}]})
    jobmatch.api("PUT", "/v1/values/global", {"complex_values": {"slots": "16"}})
    jobmatch.api(
        "PUT",
        "/v1/values/hosts/w1",
        {"complex_values": {"h_vmem": "8G"}, "load_values": {"arch": "lx-amd64"}},
    )

    shown = jobmatch("values", "show", "global")
    assert shown.code == 0, shown.stderr
    rows = {line.split()[0]: line.split() for line in shown.stdout.splitlines()[2:]}
    assert rows["slots"][:2] == ["slots", "16"]
    assert jobmatch("values", "show", "global", "-o", "json").json() == jobmatch.api(
        "GET", "/v1/values/global"
    )

    host = jobmatch("values", "show", "host", "w1")
    rows = {line.split()[0]: line.split() for line in host.stdout.splitlines()[2:]}
    assert rows["h_vmem"][:3] == ["h_vmem", "8G", "-"]
    assert rows["arch"][:3] == ["arch", "-", "lx-amd64"]
    assert jobmatch("values", "show", "host", "w1", "-o", "json").json() == jobmatch.api(
        "GET", "/v1/values/hosts/w1"
    )

    queue = jobmatch("values", "show", "queue", "all.q@w1", "-o", "json").json()
    assert queue == jobmatch.api("GET", "/v1/values/queues/all.q/w1")
    assert queue["attributes"]["qname"] == "all.q"


def test_a_hosts_report_is_shown_apart_with_what_matching_uses(jobmatch: Jobmatch) -> None:
    """Issue 35: the worker's report (REPORTED) beside the admin's load value (LOAD VALUE);
    MATCHING USES says the admin's arch hides the reported one, and the reported load_avg
    counts where no admin value is."""
    token = jobmatch.api("POST", "/v1/workers", {"name": "w1"})["token"]
    jobmatch.api("PUT", "/v1/values/hosts/w1", {"load_values": {"arch": "lx-amd64"}})
    status, _ = jobmatch.server.request(
        "PUT",
        "/v1/workers/w1/load",
        {"load_values": {"arch": "lx-arm64", "load_avg": "0.500000"}},
        token,
    )
    assert status == 200
    host = jobmatch("values", "show", "host", "w1")
    assert host.code == 0, host.stderr
    lines = host.stdout.splitlines()
    assert lines[0].split() == [
        "ATTRIBUTE",
        "COMPLEX",
        "VALUE",
        "LOAD",
        "VALUE",
        "REPORTED",
        "QUEUE",
        "ATTRIBUTE",
        "CAPACITY",
        "USED",
        "MATCHING",
        "USES",
    ]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert rows["arch"] == ["arch", "-", "lx-amd64", "lx-arm64", "-", "-", "-", "load"]
    assert rows["load_avg"] == ["load_avg", "-", "-", "0.500000", "-", "-", "-", "reported"]


def test_a_name_that_does_not_fit_the_level_is_a_usage_error(jobmatch: Jobmatch) -> None:
    for args, message in (
        (["global", "w1"], "`values show global` takes no name"),
        (["host"], "`values show host` needs a name"),
        (["queue", "w1"], "a queue instance is QUEUE@HOST, not 'w1'"),
    ):
        result = jobmatch("values", "show", *args)
        assert (result.code, result.stderr) == (2, f"error: {message}\n")
    missing = jobmatch("values", "show", "host", "nowhere")
    assert missing.code == 1 and missing.stderr.startswith("error: 404 Not Found: ")
