"""`jobmatch whatif FILE` against a live server, run as people run it: a YAML or JSON
change set, the answer as a table or as the API's JSON, and nothing stored."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Jobmatch, register_workers

CHANGES_YAML = """\
# Drain the Java worker and bring a new one with more slots.
drain_workers: [w1]
add_workers:
  - name: w2
    resources: "language: ?java; java: ?11, ?12"
    slots: 4
add_jobs:
  - resources: "language: java; java: 11"
"""


def test_a_yaml_change_set_as_a_table_and_as_json(jobmatch: Jobmatch, tmp_path: Path) -> None:
    register_workers(jobmatch)
    waiting = jobmatch.api("POST", "/v1/jobs", {"resources": "language: java; java: 12"})
    changes = tmp_path / "changes.yaml"
    changes.write_text(CHANGES_YAML)

    shown = jobmatch("whatif", str(changes))

    assert shown.code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("runnable now: ")
    assert "no longer runnable: none" in lines
    added = [line for line in lines if line.startswith("added jobs (provisional ids): #0 -> ")]
    assert added and added[0].endswith(" waiting")
    pulls = {line.split()[0]: line for line in lines if line.startswith(("w1 ", "w2 "))}
    assert pulls["w2"].split()[1:] == ["job", str(waiting["id"])]
    assert pulls["w1"].split()[1:] == ["-"]
    assert lines[-1] == "nothing was stored"
    assert jobmatch.api("GET", "/v1/workers/w1")["state"] == "active"
    assert [w["name"] for w in jobmatch.api("GET", "/v1/workers")["items"]] == ["n0", "w1"]

    as_json = tmp_path / "changes.json"
    as_json.write_text(json.dumps({"drain_workers": ["w1"], "explain_job": waiting["id"]}))
    answer = jobmatch("whatif", str(as_json), "-o", "json").json()
    assert answer["no_longer_runnable"] == [waiting["id"]]
    assert answer["explain_job"]["lost"] == []
    assert [c["worker"] for c in answer["explain_job"]["after"]] == ["w1"]
    assert answer == jobmatch.api(
        "POST", "/v1/whatif", {"drain_workers": ["w1"], "explain_job": waiting["id"]}
    )


def test_bad_files_and_refused_items_are_one_line(jobmatch: Jobmatch, tmp_path: Path) -> None:
    register_workers(jobmatch)
    missing = jobmatch("whatif", str(tmp_path / "nope.yaml"))
    assert missing.code == 2 and missing.stderr.startswith("error: ")
    assert "Traceback" not in missing.stderr

    not_a_mapping = tmp_path / "list.yaml"
    not_a_mapping.write_text("- w1\n")
    refused = jobmatch("whatif", str(not_a_mapping))
    assert refused.code == 2 and "expected a JSON or YAML object" in refused.stderr

    bad_job = tmp_path / "bad.yaml"
    bad_job.write_text("add_jobs:\n  - resources: 'language: java; java'\n")
    refused = jobmatch("whatif", str(bad_job))
    assert refused.code == 1, refused.stderr
    assert refused.stderr.startswith("error: 422 ")
    assert "add_jobs.0.resources: momotor-tags: " in refused.stderr
    assert "Traceback" not in refused.stderr
