"""Demand (issue 40): how long ``GET /v1/demand`` takes without and with worker templates,
beside one what-if of the same change, on a big cluster.

``python bench/demand.py {sqlite,postgresql} [--workers N] [--categories N] [--jobs N]
[--templates N] [--repeat N] [--profile]`` builds, in a scratch database, a cluster with
bench/_data.py (Momotor tags of a teaching and CI cluster; the first worker of each
machine profile registered for real, the others copies of its rows; each category made
by the real submission path, its other jobs bulk-inserted), then:

* ``--templates`` worker templates (``PUT /v1/templates``' service), each offering tags
  that no registered worker offers, and a tenth of the categories asking for those tags
  (they wait: a template could run them; "never" today), a few of them for a template
  deleted afterwards (no template could run them);
* most workers busy: their queue instances' used slots set to their slots, as the running
  jobs that a pull reads would leave them (``--busy`` of them; the others stay idle), so
  that the categories wait for capacity, or are ready, as in a loaded farm.

It times, through the HTTP API in process (Starlette's TestClient, the route, its schema
and serialisation included), each as the median of ``--repeat`` runs (the what-if:
``--whatif-repeat``):

* ``GET /v1/demand`` (one page of 50 categories, totals over all of them);
* ``GET /v1/demand?templates=*`` (every template simulated in a savepoint, the mix);
* ``POST /v1/whatif`` adding the suggested workers (the same change, for scale).

Targets from the issue (at 10,000 workers, 100,000 waiting jobs, 500 categories and 5
templates on PostgreSQL): without templates under 100 ms, with templates under 2 s; they
are printed as ratios. Every figure has the load average beside it (the machine is
shared). ``--profile`` prints cProfile's top functions of the demand service, without and
with templates. Not a test, it never gates CI. The issue's size::

    python bench/demand.py postgresql --workers 10000 --jobs 100000 --categories 500
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import func, select, update

from app.api.app import create_app
from app.db import migrate
from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import Job, JobState, QueueInstance
from app.matching.demand import templates as template_store
from app.matching.demand.report import demand as demand_report
from app.matching.demand.templates import Template
from app.matching.submission import JobSpec, submit_job
from app.settings import Settings
from bench._data import SUBMITTER, CategoryInfo, Dataset, build_categories, build_workers, grow_jobs
from bench._measure import count, load_average, positive_int, scratch_database
from bench.dispatch import analyze

SEED = 4040
ADMIN_TOKEN = "bench-demand-admin-token"
#: The issue's targets, in seconds.
TARGET_WITHOUT = 0.100
TARGET_WITH = 2.0
#: A template that a few "never" categories were submitted for, deleted before measuring.
GONE = "gone-box"


def template_body(index: int, categories: int) -> dict[str, Any]:
    """Template ``index``: a 4-slot box offering the languages and the ``future`` tags of
    its own categories (no registered worker offers any ``future`` tag)."""
    offered = ", ".join(f"?t{index}v{n}" for n in range(categories))
    return {"resources": f"language: ?java, ?python; future: {offered}", "slots": 4}


def add_never_categories(
    database: Database, rng: random.Random, count: int, templates: int, data: Dataset
) -> int:
    """``count`` categories that no registered worker fits: most for one of the templates
    (they wait for its workers), one in ten for :data:`GONE`, deleted afterwards (no
    template runs them). Each gets a small share of the jobs. Returns how many no template
    runs."""
    per_template = max(1, count // max(templates, 1))
    gone = max(1, count // 10)
    with database.transaction() as session:
        for index in range(templates):
            body = template_body(index, per_template)
            cost = rng.choice([1.0, 1.5, 2.0, 3.0])
            template_store.put_template(session, Template(f"box-{index}", body, cost, None))
        template_store.put_template(session, Template(GONE, template_body(99, gone), 1.0, None))
    wanted = [(f"t{i % templates}v{i // templates}", True) for i in range(count - gone)]
    wanted += [(f"t99v{n}", False) for n in range(gone)]
    with database.transaction() as session:
        for tag, _runnable in wanted:
            resources = f"language: {rng.choice(['java', 'python'])}; future: {tag}"
            job = submit_job(session, JobSpec(resources=resources), submitter=SUBMITTER)
            assert job.state is JobState.WAITING, (resources, job.failure_reason)
            data.categories.append(CategoryInfo(job.category_id, resources, 1, 0.1 / count, 1))
            data.waiting += 1
    with database.transaction() as session:
        template_store.delete_template(session, GONE)
    return gone


def make_busy(database: Database, rng: random.Random, share: float) -> int:
    """Fill the slots of ``share`` of the queue instances; how many were filled."""
    with database.transaction() as session:
        ids = list(session.scalars(select(QueueInstance.id).order_by(QueueInstance.id)))
        busy = rng.sample(ids, round(len(ids) * share))
        for start in range(0, len(busy), 5000):
            session.execute(
                update(QueueInstance)
                .where(QueueInstance.id.in_(busy[start : start + 5000]))
                .values(used_slots=QueueInstance.slots)
            )
    return len(busy)


def timed(repeat: int, call: Callable[[], Any]) -> tuple[float, str, Any]:
    """The median seconds of ``repeat`` calls, the load after them, the last answer."""
    samples, answer = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        answer = call()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), load_average(), answer


def ok(response: Any) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def whatif_body(client: TestClient, headers: dict[str, str], mix: list[dict[str, Any]]) -> Any:
    """POST /v1/whatif's body adding the mix's workers, each a worker of its template."""
    workers = []
    for item in mix:
        template = ok(client.get(f"/v1/templates/{item['template']}", headers=headers))
        for n in range(item["workers"]):
            workers.append(
                {
                    "name": f"new-{item['template']}-{n}",
                    "resources": template["resources"],
                    "slots": template["slots"],
                }
            )
    return {"add_workers": workers}


def profile(database: Database, settings: Settings, *, templates: bool) -> None:
    """cProfile of the demand service itself (``GET /v1/demand``'s, in this thread: the
    TestClient runs the app in another one, which a profile of the request would not
    see), rolled back; the top functions by cumulative and by own time."""
    with database.transaction() as session:
        chosen = template_store.list_templates(session) if templates else None
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.enable()
        demand_report(
            session, settings.allocation_policy, utcnow(), templates=chosen, limit=50, offset=0
        )
        profiler.disable()
        print(f"  {time.perf_counter() - started:.2f} s under the profiler; {load_average()}")
        session.rollback()
    for order, lines in (("cumulative", 40), ("tottime", 15)):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(lines)
        print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("backend", choices=["sqlite", "postgresql"])
    parser.add_argument("--workers", type=positive_int, default=500)
    parser.add_argument("--categories", type=positive_int, default=50)
    parser.add_argument("--jobs", type=positive_int, default=5000)
    parser.add_argument("--templates", type=positive_int, default=5)
    parser.add_argument("--busy", type=float, default=0.98, help="share of busy queue instances")
    parser.add_argument("--repeat", type=positive_int, default=3)
    parser.add_argument(
        "--whatif-repeat",
        type=count,
        default=1,
        help="what-ifs timed (0: none; at 10,000 workers one registers every suggested worker)",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile one demand with templates")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = parser.parse_args()
    rng = random.Random(SEED)
    never = max(1, args.categories // 10)
    with scratch_database(args.backend, keep=args.keep) as url:
        migrate.upgrade(url)
        database = Database(url)
        data = Dataset()
        started = time.perf_counter()
        build_workers(database, rng, args.workers, data, register_all=False)
        build_categories(database, rng, args.categories - never, data)
        unrunnable = add_never_categories(database, rng, never, args.templates, data)
        # The never categories' shares (0.1 in all) come on top of the others' (1.0).
        grow_jobs(database, rng, round(args.jobs / 1.1), data)
        busy = make_busy(database, rng, args.busy)
        analyze(database)
        with database.transaction(write=False) as session:
            waiting = session.scalar(
                select(func.count(Job.id)).where(Job.state == JobState.WAITING)
            )
        print(
            f"demand on {args.backend}: {len(data.workers)} workers ({busy} busy queue "
            f"instances), {len(data.categories)} categories with {waiting} waiting jobs, "
            f"{args.templates} templates; {never} categories no worker fits, {unrunnable} "
            f"of them no template either; built in {time.perf_counter() - started:.0f} s"
        )
        database.dispose()
        settings = Settings(
            database_url=url,
            admin_token=SecretStr(ADMIN_TOKEN),
            log_level="WARNING",
            # No sweep: the bench's workers never speak, and a sweep would mark them all
            # unknown (changing the answers) while it measures.
            lease_sweep_seconds=0.0,
            # The what-if of the mix adds as many workers as it suggests.
            whatif_max_workers=1_000_000,
        )
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        with TestClient(create_app(settings)) as client:
            plain, plain_load, today = timed(
                args.repeat, lambda: ok(client.get("/v1/demand", headers=headers))
            )
            suggested, suggested_load, planned = timed(
                args.repeat, lambda: ok(client.get("/v1/demand?templates=*", headers=headers))
            )
            mix = planned["suggestion"]["mix"]
            print(f"  answers: jobs {today['jobs']}, categories {today['category_counts']}")
            print(
                "  mix: "
                + (", ".join(f"{m['workers']} x {m['template']}" for m in mix) or "nothing")
                + f"; starts {planned['suggestion']['starts']} jobs; "
                f"{sum(u['jobs'] for u in planned['suggestion']['unrunnable'])} jobs no "
                "template runs"
            )
            print(
                f"  GET /v1/demand               {plain * 1000:9.1f} ms (median of "
                f"{args.repeat}); target {TARGET_WITHOUT * 1000:.0f} ms, ratio "
                f"{plain / TARGET_WITHOUT:.2f}; {plain_load}"
            )
            print(
                f"  GET /v1/demand?templates=*  {suggested * 1000:9.1f} ms; target "
                f"{TARGET_WITH * 1000:.0f} ms, ratio {suggested / TARGET_WITH:.2f}; "
                f"{suggested_load}",
                flush=True,
            )
            if args.profile:
                profiled = Database(url)
                for templates in (False, True):
                    print(f"cProfile of the demand service, templates: {templates}")
                    profile(profiled, settings, templates=templates)
                profiled.dispose()
            if not args.whatif_repeat:
                return
            body = whatif_body(client, headers, mix)
            whatif, whatif_load, answer = timed(
                args.whatif_repeat,
                lambda: ok(client.post("/v1/whatif", json=body, headers=headers)),
            )
            print(
                f"  POST /v1/whatif (add the {len(body['add_workers'])} suggested workers) "
                f"{whatif * 1000:9.1f} ms (median of {args.whatif_repeat}): "
                f"{len(answer['runnable_now'])} jobs runnable now; {whatif_load}"
            )


if __name__ == "__main__":
    main()
