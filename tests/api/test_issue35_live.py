"""Issue 35's acceptance, against a live `jobmatch serve` as a user meets it: in the
README's cluster (two ``node/[core=8]`` workers, one of 2 slots without an inventory), a
``node=3/slot/core=8`` job is runnable and busy nowhere; a ``slot/[core=4;gpu=1]`` job is
never pulled by a worker that declares no GPU; a worker's load report leaves the ``arch``
and ``h_vmem`` an admin set; registering a name again never answers without a usable
token. (Liveness and the schema gate have live tests of their own:
tests/api/test_liveness_live.py, tests/api/test_schema_gate.py.)"""

from __future__ import annotations

from typing import Any

from tests.live_server import LiveServer


def _register(server: LiveServer, body: dict[str, Any]) -> str:
    status, answer = server.request("POST", "/v1/workers", body)
    assert status == 201, answer
    token: str = answer["token"]
    return token


def _submit(server: LiveServer, body: dict[str, Any]) -> dict[str, Any]:
    status, job = server.request("POST", "/v1/jobs", body)
    assert status == 201, job
    return dict(job)


def test_what_explain_says_is_what_happens_on_a_live_server(shared_server: LiveServer) -> None:
    server = shared_server
    _register(server, {"name": "i0", "slots": 8, "inventory": "node/[core=8]"})
    _register(server, {"name": "i1", "slots": 8, "inventory": "node/[core=8]"})
    w1 = _register(server, {"name": "w1", "slots": 2})

    three = _submit(server, {"shape": "node=3/slot/core=8"})
    assert three["state"] == "waiting"
    status, explained = server.request("GET", f"/v1/jobs/{three['id']}/explain")
    assert status == 200, explained
    for worker in explained["workers"]:
        assert worker["can_run_now"] is False and worker["answer"] == "never", worker
        assert worker["reason"] == "needs-several-nodes", worker
    assert explained["summary"]["fit_but_busy"] == 0
    assert explained["summary"]["never"] == explained["summary"]["workers"] == 3

    # No worker declares a GPU: refused at submission, and w1 (no inventory) pulls nothing.
    gpu = _submit(server, {"shape": "slot/[core=4;gpu=1]"})
    assert (gpu["state"], gpu["failure_reason"]) == ("failed", "No suitable worker found")
    assert server.request("POST", "/v1/workers/w1/pull", token=w1)[0] == 204

    # An admin's arch and h_vmem survive the worker's own load report.
    status, _ = server.request(
        "PUT",
        "/v1/values/hosts/w1",
        {"load_values": {"arch": "lx-amd64"}, "complex_values": {"h_vmem": "8G"}},
    )
    assert status == 200
    status, _ = server.request(
        "PUT", "/v1/workers/w1/load", {"load_values": {"load_avg": "0.1", "num_proc": "2"}}, w1
    )
    assert status == 200
    status, values = server.request("GET", "/v1/values/hosts/w1")
    assert status == 200, values
    assert values["load_values"] == {"arch": "lx-amd64"}
    assert values["complex_values"] == {"h_vmem": "8G"}
    arch_job = _submit(server, {"resources": "", "hard": "arch=lx*,h_vmem=2G"})
    status, pulled = server.request("POST", "/v1/workers/w1/pull", token=w1)
    assert status == 200 and pulled["id"] == arch_job["id"], pulled

    # Registering w1 again: refused, naming it; replaced on request, its token kept.
    status, refused = server.request("POST", "/v1/workers", {"name": "w1", "slots": 2})
    assert status == 409 and refused["worker"] == "w1", refused
    status, replaced = server.request(
        "POST", "/v1/workers?replace=true", {"name": "w1", "slots": 2}
    )
    assert status == 200 and replaced["token"] is None and replaced["token_kept"], replaced
    assert server.request("POST", "/v1/workers/w1/heartbeat", token=w1)[0] == 200
