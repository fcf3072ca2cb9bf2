"""Issue 40's cluster for the console's Demand page, built through the HTTP API of any
server (Starlette's TestClient or a live one): a java-12 worker, a busy java-11 worker, two
8-core nodes, waiting jobs for java 11 (three), java 12, java 17 and a 3-node shape, and
the templates java17-box and node-8core that demand suggests one of each of."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.support.http_api import answer_of as _ok

#: One request: method, path, JSON body, bearer token (None: the admin's); the answer's
#: status and JSON body.
Send = Callable[[str, str, Any, str | None], tuple[int, Any]]

JAVA17_BOX = {"resources": "language: ?java; java: ?17", "slots": 4, "cost": 1.0}
NODE_8CORE = {"inventory": "node/[core=8]", "slots": 8, "cost": 3.0}


@dataclass(frozen=True)
class DemandCluster:
    """The categories of the waiting jobs, by what they ask for."""

    java11: int
    java12: int
    java17: int
    three_nodes: int


def load_demand_cluster(send: Send, *, templates: bool = True) -> DemandCluster:
    if templates:
        _ok(send("PUT", "/v1/templates/java17-box", JAVA17_BOX, None), 201)
        _ok(send("PUT", "/v1/templates/node-8core", NODE_8CORE, None), 201)
    for name, version in (("j12", "12"), ("j11", "11")):
        worker = {"name": name, "resources": f"language: ?java; java: ?{version}"}
        _ok(send("POST", "/v1/workers", worker, None), 201)
    for node in ("n1", "n2"):
        _ok(
            send(
                "POST",
                "/v1/workers",
                {"name": node, "inventory": "node/[core=8]", "slots": 8},
                None,
            ),
            201,
        )

    def job(resources: str = "", **extra: Any) -> dict[str, Any]:
        body: dict[str, Any] = _ok(
            send("POST", "/v1/jobs", {"resources": resources, **extra}, None), 201
        )
        return body

    busy = job("language: java; java: 11")
    token = _ok(send("POST", "/v1/tokens", {"role": "worker", "subject": "j11"}, None), 201)
    pulled = _ok(send("POST", "/v1/workers/j11/pull", None, token["token"]), 200)
    assert pulled["id"] == busy["id"]
    java11 = [job("language: java; java: 11") for _ in range(3)]
    return DemandCluster(
        java11=java11[0]["category_id"],
        java12=job("language: java; java: 12")["category_id"],
        java17=job("language: java; java: 17")["category_id"],
        three_nodes=job(shape="node=3/slot/core=8")["category_id"],
    )
