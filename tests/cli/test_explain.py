"""`jobmatch jobs explain` for people, from the API's JSON: today's answer and one with the
fields issue 21 adds (each worker's state, can_run_now and reason; a waiting job's summary
in the style of HTCondor's `condor_q -better-analyze`), without a server."""

from __future__ import annotations

import pytest

from app.cli.explain import print_explanation

#: GET /v1/jobs/{id}/explain as the API answered before issue 21.
PLAIN = {
    "job": 7,
    "workers": [
        {"worker": "w1", "eligible": True, "misfit_reason": None, "clauses": []},
        {
            "worker": "n0",
            "eligible": False,
            "misfit_reason": "job-requires-tag",
            "clauses": [
                {
                    "reason": "job-requires-tag",
                    "message": "the job requires tag 'java' in group 'language'",
                    "group": "language",
                    "tag": "java",
                }
            ],
        },
    ],
    "scheduling_info": ["cannot run in queue instance all.q@n0 because of h_vmem"],
    "allocation": None,
}

#: The same with the fields of ExplanationOut after issue 21 (WorkerExplanationOut.state,
#: can_run_now, reason; ExplainSummaryOut; AllocationExplanationOut.note).
RICHER = {
    "job": 7,
    "workers": [
        {
            "worker": "w1",
            "state": "active",
            "eligible": True,
            "can_run_now": False,
            "reason": "slots",
            "misfit_reason": None,
            "clauses": [{"reason": "slots", "message": "no free slot", "group": None, "tag": None}],
        },
        {
            "worker": "w2",
            "state": "active",
            "eligible": True,
            "can_run_now": True,
            "reason": None,
            "misfit_reason": None,
            "clauses": [],
        },
        PLAIN["workers"][1]
        | {"state": "draining", "can_run_now": False, "reason": "job-requires-tag"},
    ],
    "scheduling_info": [],
    "allocation": {
        "placeable": False,
        "candidate_workers": 0,
        "shortfalls": [],
        "note": "none fit",
    },
    "summary": {
        "workers": 3,
        "eligible": 2,
        "can_run_now": 1,
        "fit_but_busy": 1,
        "first_failures": {"slots": 1, "job-requires-tag": 1},
        "suggestion": "wait for a slot on w1",
    },
}


def rows_of(output: str) -> dict[str, list[str]]:
    return {
        line.split()[0]: line.split()
        for line in output.splitlines()
        if line.startswith(("w1 ", "w2 ", "n0 "))
    }


def test_todays_answer(capsys: pytest.CaptureFixture[str]) -> None:
    print_explanation(PLAIN, wide=False)
    output = capsys.readouterr().out
    assert output.splitlines()[0] == "job 7:"
    assert output.splitlines()[1].split() == ["WORKER", "ELIGIBLE", "REASON", "WHY"]
    rows = rows_of(output)
    assert rows["w1"] == ["w1", "yes", "-", "fits"]
    assert rows["n0"][:3] == ["n0", "no", "job-requires-tag"]
    assert "scheduling info:\n  cannot run in queue instance all.q@n0 because of h_vmem" in output


def test_the_richer_answer_shows_state_can_run_now_and_the_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_explanation(RICHER, wide=False)
    output = capsys.readouterr().out
    header = output.splitlines()[1]
    assert " ".join(header.split()) == "WORKER STATE ELIGIBLE CAN RUN NOW REASON WHY"
    rows = rows_of(output)
    assert rows["w1"] == ["w1", "active", "yes", "no", "slots", "no", "free", "slot"]
    assert rows["w2"] == ["w2", "active", "yes", "yes", "-", "can", "run", "it", "now"]
    assert rows["n0"][:5] == ["n0", "draining", "no", "no", "job-requires-tag"]
    assert "summary: 3 workers, 2 eligible, 1 can run now, 1 fit but busy" in output
    assert "  first failing clause: job-requires-tag 1, slots 1" in output
    assert "  suggestion: wait for a slot on w1" in output
    assert "allocation: cannot be placed now (0 candidate workers)\n  none fit" in output
