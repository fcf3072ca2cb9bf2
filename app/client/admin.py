"""The admin's client: everything a submitter can do, plus tokens, workers, the Grid Engine
complex, tasks, leases and the scheduler."""

from __future__ import annotations

from typing import Any

from app.client import operations as ops
from app.client.models import (
    AccessList,
    AccessListPage,
    Attribute,
    Demand,
    Expired,
    GroupStanding,
    HostGroup,
    HostGroupPage,
    IssuedToken,
    Job,
    ParallelEnvironment,
    Project,
    ProjectPage,
    QueueConf,
    QueueInstanceConf,
    QuotaSet,
    QuotaSetPage,
    RegisteredWorker,
    Role,
    SchedulerConf,
    ScheduleRun,
    Shares,
    Standing,
    Task,
    Token,
    TokenPage,
    ValuesChanged,
    WhatIf,
    Worker,
    WorkerMetadata,
    WorkerTemplate,
    WorkerTemplatePage,
)
from app.client.operations import covers
from app.client.parsing import without_none
from app.client.requests import (
    AttributeSpec,
    PeSpec,
    QueueInstancePatch,
    TaskSpec,
    TemplateSpec,
    ValuesSpec,
    WhatIfSpec,
    WorkerPatch,
    WorkerSpec,
)
from app.client.submitter import SubmitterClient
from app.wire.demand_scale import DemandScale


class AdminClient(SubmitterClient):
    """What the admin token may do: a superset of :class:`SubmitterClient`."""

    # -- tokens ----------------------------------------------------------------------------

    @covers(ops.ISSUE_TOKEN)
    def issue_token(
        self,
        role: Role | str,
        subject: str,
        *,
        label: str | None = None,
        expires_in_seconds: int | None = None,
        expires_at: str | None = None,
    ) -> IssuedToken:
        """Issue a worker or submitter token; its secret is in the answer, and only there.
        It stops working ``expires_in_seconds`` after it is issued, or at ``expires_at``
        (ISO 8601 with a time zone); without either, never."""
        body = {
            "role": str(role),
            "subject": subject,
            "label": label,
            "expires_in_seconds": expires_in_seconds,
            "expires_at": expires_at,
        }
        return self._call(IssuedToken, ops.ISSUE_TOKEN, body=without_none(body))

    @covers(ops.LIST_TOKENS)
    def list_tokens(self, *, limit: int | None = None, offset: int | None = None) -> TokenPage:
        return self._page(TokenPage, ops.LIST_TOKENS, limit, offset)

    @covers(ops.REVOKE_TOKEN)
    def revoke_token(self, token_id: int) -> Token:
        return self._call(Token, ops.REVOKE_TOKEN, path={"token_id": token_id})

    # -- workers ---------------------------------------------------------------------------

    @covers(ops.REGISTER_WORKER)
    def register_worker(self, worker: WorkerSpec, *, replace: bool = False) -> RegisteredWorker:
        """Register a worker; its token is in the answer. A name that exists is refused
        (:class:`~app.client.errors.Conflict`, naming the worker) unless ``replace``, which
        replaces the whole worker of that name: ``token_kept`` then says it goes on with the
        token it has (``token`` None), or ``token`` holds a new one (its tokens had all been
        revoked or had expired)."""
        query = {"replace": "true"} if replace else None
        return self._call(RegisteredWorker, ops.REGISTER_WORKER, body=worker, query=query)

    @covers(ops.UPDATE_WORKER)
    def update_worker(self, name: str, patch: WorkerPatch) -> Worker:
        """Change only the fields the patch gives: drain (``state=DRAINING`` with a
        ``reason``), disable, resume, resize. The rest of the worker stays as it is."""
        return self._call(Worker, ops.UPDATE_WORKER, path={"name": name}, body=patch)

    @covers(ops.DELETE_WORKER)
    def delete_worker(self, name: str, *, requeue: bool = False) -> None:
        """Remove a worker. One that runs jobs is refused (Conflict) unless ``requeue``,
        which returns its jobs to the queue first."""
        query = {"requeue": "true"} if requeue else None
        self._send(ops.DELETE_WORKER, path={"name": name}, query=query)

    @covers(ops.SET_STATIC_METADATA)
    def set_static_metadata(self, worker: str, metadata: dict[str, Any]) -> WorkerMetadata:
        """Set the admin's (static) part of a worker's debusine metadata."""
        return self._call(
            WorkerMetadata,
            ops.SET_STATIC_METADATA,
            path={"name": worker},
            body={"metadata": metadata},
        )

    # -- jobs and the scheduler ------------------------------------------------------------

    @covers(ops.ALLOCATE_JOB)
    def allocate_job(self, job_id: int) -> Job:
        """Place one waiting job on workers now (Grid Engine style allocation)."""
        return self._call(Job, ops.ALLOCATE_JOB, path={"job_id": job_id})

    @covers(ops.RUN_SCHEDULE)
    def run_schedule(self) -> ScheduleRun:
        """Run one scheduler pass over the waiting jobs."""
        return self._call(ScheduleRun, ops.RUN_SCHEDULE)

    @covers(ops.EXPIRE_LEASES)
    def expire_leases(self) -> Expired:
        """Requeue now the jobs of workers whose lease has run out."""
        return self._call(Expired, ops.EXPIRE_LEASES)

    # -- tasks -----------------------------------------------------------------------------

    @covers(ops.REGISTER_TASK)
    def register_task(self, task: TaskSpec) -> Task:
        """Register or update a debusine task type."""
        return self._call(Task, ops.REGISTER_TASK, body=task)

    # -- the Grid Engine complex -----------------------------------------------------------

    @covers(ops.CREATE_ATTRIBUTE)
    def create_attribute(self, attribute: AttributeSpec) -> Attribute:
        return self._call(Attribute, ops.CREATE_ATTRIBUTE, body=attribute)

    @covers(ops.CHANGE_ATTRIBUTE)
    def change_attribute(self, attribute: AttributeSpec) -> Attribute:
        return self._call(
            Attribute, ops.CHANGE_ATTRIBUTE, path={"name": attribute.name}, body=attribute
        )

    @covers(ops.DELETE_ATTRIBUTE)
    def delete_attribute(self, name: str) -> None:
        self._send(ops.DELETE_ATTRIBUTE, path={"name": name})

    @covers(ops.SET_GLOBAL_VALUES)
    def set_global_values(self, values: ValuesSpec) -> ValuesChanged:
        """The cluster-wide complex values (Grid Engine's global host)."""
        return self._call(ValuesChanged, ops.SET_GLOBAL_VALUES, body=values)

    @covers(ops.SET_HOST_VALUES)
    def set_host_values(self, host: str, values: ValuesSpec) -> ValuesChanged:
        """A host's complex_values and load_values (sge_host_conf(5)); each kind given
        replaces the administrator's values of that kind, never the worker's report."""
        return self._call(ValuesChanged, ops.SET_HOST_VALUES, path={"host": host}, body=values)

    @covers(ops.SET_QUEUE_VALUES)
    def set_queue_values(self, queue: str, host: str, values: ValuesSpec) -> ValuesChanged:
        """A queue instance's complex values (queue_conf(5))."""
        return self._call(
            ValuesChanged, ops.SET_QUEUE_VALUES, path={"queue": queue, "host": host}, body=values
        )

    @covers(ops.PUT_PE)
    def put_pe(self, name: str, pe: PeSpec) -> ParallelEnvironment:
        """Create or replace a parallel environment (sge_pe(5))."""
        return self._call(ParallelEnvironment, ops.PUT_PE, path={"name": name}, body=pe)

    @covers(ops.DELETE_PE)
    def delete_pe(self, name: str) -> None:
        self._send(ops.DELETE_PE, path={"name": name})

    # -- resource quota sets ---------------------------------------------------------------

    @covers(ops.CREATE_QUOTA_SET)
    def create_quota_set(self, text: str) -> QuotaSet:
        """Add a resource quota set from its ``qconf -arqs`` text."""
        return self._call(QuotaSet, ops.CREATE_QUOTA_SET, body={"text": text})

    @covers(ops.LIST_QUOTA_SETS)
    def list_quota_sets(
        self, *, limit: int | None = None, offset: int | None = None
    ) -> QuotaSetPage:
        """The resource quota sets with their rules and usage, a page at a time."""
        return self._page(QuotaSetPage, ops.LIST_QUOTA_SETS, limit, offset)

    @covers(ops.GET_QUOTA_SET)
    def get_quota_set(self, name: str) -> QuotaSet:
        return self._call(QuotaSet, ops.GET_QUOTA_SET, path={"name": name})

    @covers(ops.REPLACE_QUOTA_SET)
    def replace_quota_set(self, name: str, text: str) -> QuotaSet:
        """Replace a set's definition (``qconf -mrqs``); the text names the same set."""
        return self._call(QuotaSet, ops.REPLACE_QUOTA_SET, path={"name": name}, body={"text": text})

    @covers(ops.DELETE_QUOTA_SET)
    def delete_quota_set(self, name: str) -> None:
        self._send(ops.DELETE_QUOTA_SET, path={"name": name})

    # -- fair share ------------------------------------------------------------------------

    @covers(ops.LIST_SHARES)
    def list_shares(self) -> Shares:
        """Every submitter's weight, share and decayed usage, furthest below its share
        first (docs/ordering.md)."""
        return self._call(Shares, ops.LIST_SHARES)

    @covers(ops.SET_SHARE_WEIGHT)
    def set_share_weight(
        self, submitter: str, weight: float, group: str | None = None, no_group: bool = False
    ) -> Standing:
        """Give a submitter a weight; its share is its weight over every submitter's.
        ``group`` puts it in that group, ``no_group`` in none; without either it stays
        in the group it is in."""
        body: dict[str, Any] = {"weight": weight}
        if group is not None or no_group:
            body["group"] = None if no_group else group
        return self._call(Standing, ops.SET_SHARE_WEIGHT, path={"submitter": submitter}, body=body)

    @covers(ops.SET_GROUP_WEIGHT)
    def set_group_weight(self, name: str, weight: float) -> GroupStanding:
        """Give a group of submitters a weight (the group is made if new); its share is
        its weight over every group's."""
        return self._call(
            GroupStanding, ops.SET_GROUP_WEIGHT, path={"name": name}, body={"weight": weight}
        )

    # -- host groups, user access lists, projects --------------------------------------

    @covers(ops.CREATE_HOST_GROUP)
    def create_host_group(self, name: str, members: list[str]) -> HostGroup:
        """Add a host group (``qconf -ahgrp``): ``name`` with its ``@``, hosts and
        ``@sub`` groups as members."""
        body = {"name": name, "members": members}
        return self._call(HostGroup, ops.CREATE_HOST_GROUP, body=body)

    @covers(ops.LIST_HOST_GROUPS)
    def list_host_groups(
        self, *, limit: int | None = None, offset: int | None = None
    ) -> HostGroupPage:
        return self._page(HostGroupPage, ops.LIST_HOST_GROUPS, limit, offset)

    @covers(ops.GET_HOST_GROUP)
    def get_host_group(self, name: str) -> HostGroup:
        return self._call(HostGroup, ops.GET_HOST_GROUP, path={"name": name})

    @covers(ops.REPLACE_HOST_GROUP)
    def replace_host_group(self, name: str, members: list[str]) -> HostGroup:
        """The group's new hostlist (``qconf -mhgrp``)."""
        return self._call(
            HostGroup, ops.REPLACE_HOST_GROUP, path={"name": name}, body={"members": members}
        )

    @covers(ops.DELETE_HOST_GROUP)
    def delete_host_group(self, name: str) -> None:
        self._send(ops.DELETE_HOST_GROUP, path={"name": name})

    @covers(ops.CREATE_ACCESS_LIST)
    def create_access_list(self, name: str, members: list[str]) -> AccessList:
        """Add a user access list (``qconf -au``)."""
        body = {"name": name, "members": members}
        return self._call(AccessList, ops.CREATE_ACCESS_LIST, body=body)

    @covers(ops.LIST_ACCESS_LISTS)
    def list_access_lists(
        self, *, limit: int | None = None, offset: int | None = None
    ) -> AccessListPage:
        return self._page(AccessListPage, ops.LIST_ACCESS_LISTS, limit, offset)

    @covers(ops.GET_ACCESS_LIST)
    def get_access_list(self, name: str) -> AccessList:
        return self._call(AccessList, ops.GET_ACCESS_LIST, path={"name": name})

    @covers(ops.REPLACE_ACCESS_LIST)
    def replace_access_list(self, name: str, members: list[str]) -> AccessList:
        return self._call(
            AccessList, ops.REPLACE_ACCESS_LIST, path={"name": name}, body={"members": members}
        )

    @covers(ops.DELETE_ACCESS_LIST)
    def delete_access_list(self, name: str) -> None:
        self._send(ops.DELETE_ACCESS_LIST, path={"name": name})

    @covers(ops.CREATE_PROJECT)
    def create_project(self, name: str) -> Project:
        """Add a project (``qconf -aprj``) jobs may name with ``project``."""
        return self._call(Project, ops.CREATE_PROJECT, body={"name": name})

    @covers(ops.LIST_PROJECTS)
    def list_projects(self, *, limit: int | None = None, offset: int | None = None) -> ProjectPage:
        return self._page(ProjectPage, ops.LIST_PROJECTS, limit, offset)

    @covers(ops.GET_PROJECT)
    def get_project(self, name: str) -> Project:
        return self._call(Project, ops.GET_PROJECT, path={"name": name})

    @covers(ops.DELETE_PROJECT)
    def delete_project(self, name: str) -> None:
        self._send(ops.DELETE_PROJECT, path={"name": name})

    # -- cluster queues --------------------------------------------------------------------

    @covers(ops.GET_QUEUE)
    def get_queue(self, name: str) -> QueueConf:
        return self._call(QueueConf, ops.GET_QUEUE, path={"name": name})

    @covers(ops.CONFIGURE_QUEUE)
    def configure_queue(
        self, name: str, load_thresholds: str | None = None, *, seq_no: int | None = None
    ) -> QueueConf:
        """Set the queue's ``load_thresholds`` (``NONE`` for none), e.g.
        ``np_load_avg=1.75``: an instance whose host exceeds one takes no new job; and its
        ``seq_no``. A value left at None stays."""
        body = without_none({"load_thresholds": load_thresholds, "seq_no": seq_no})
        return self._call(QueueConf, ops.CONFIGURE_QUEUE, path={"name": name}, body=body)

    @covers(ops.GET_QUEUE_INSTANCE)
    def get_queue_instance(self, name: str, host: str) -> QueueInstanceConf:
        return self._call(
            QueueInstanceConf, ops.GET_QUEUE_INSTANCE, path={"name": name, "host": host}
        )

    @covers(ops.UPDATE_QUEUE_INSTANCE)
    def update_queue_instance(
        self, name: str, host: str, patch: QueueInstancePatch
    ) -> QueueInstanceConf:
        """Disable or suspend the instance ``name@host`` (``qmod -d``/``-s``; False
        resumes it) or set its own seq_no and load_thresholds."""
        return self._call(
            QueueInstanceConf,
            ops.UPDATE_QUEUE_INSTANCE,
            path={"name": name, "host": host},
            body=patch,
        )

    # -- scheduler configuration -----------------------------------------------------------

    @covers(ops.GET_SCHEDULER)
    def get_scheduler(self) -> SchedulerConf:
        return self._call(SchedulerConf, ops.GET_SCHEDULER)

    @covers(ops.CONFIGURE_SCHEDULER)
    def configure_scheduler(
        self, queue_sort_method: str, load_formula: str = "np_load_avg"
    ) -> SchedulerConf:
        """Set sched_conf(5)'s ``queue_sort_method`` (``load`` or ``seqno``) and
        ``load_formula``."""
        body = {"queue_sort_method": queue_sort_method, "load_formula": load_formula}
        return self._call(SchedulerConf, ops.CONFIGURE_SCHEDULER, body=body)

    @covers(ops.RESET_SCHEDULER)
    def reset_scheduler(self) -> SchedulerConf:
        """Remove the configuration: queue instances sort by seq_no, then creation."""
        return self._call(SchedulerConf, ops.RESET_SCHEDULER)

    # -- what-if ---------------------------------------------------------------------------

    @covers(ops.WHAT_IF)
    def what_if(self, changes: WhatIfSpec | dict[str, Any]) -> WhatIf:
        """What the change set would change (which waiting jobs become runnable or stop
        being so, per category, the candidates of ``explain_job``, each changed worker's
        first pull), computed by the server in a transaction it rolls back: nothing is
        stored. ``changes`` may be the body itself, as a JSON object read from a file."""
        return self._call(WhatIf, ops.WHAT_IF, body=changes)

    # -- demand: worker templates and what the waiting jobs need ---------------------------

    @covers(ops.PUT_TEMPLATE)
    def put_template(self, name: str, template: TemplateSpec | dict[str, Any]) -> WorkerTemplate:
        """Register or replace the worker template ``name`` (a kind of worker an
        autoscaler can create); refused (ApiError, 422) as a worker registration would be."""
        return self._call(WorkerTemplate, ops.PUT_TEMPLATE, path={"name": name}, body=template)

    @covers(ops.LIST_TEMPLATES)
    def list_templates(
        self, *, limit: int | None = None, offset: int | None = None
    ) -> WorkerTemplatePage:
        """The worker templates by name, a page at a time."""
        return self._page(WorkerTemplatePage, ops.LIST_TEMPLATES, limit, offset)

    @covers(ops.GET_TEMPLATE)
    def get_template(self, name: str) -> WorkerTemplate:
        return self._call(WorkerTemplate, ops.GET_TEMPLATE, path={"name": name})

    @covers(ops.DELETE_TEMPLATE)
    def delete_template(self, name: str) -> None:
        self._send(ops.DELETE_TEMPLATE, path={"name": name})

    @covers(ops.GET_DEMAND)
    def demand(
        self,
        templates: list[str] | None = None,
        *,
        every_template: bool = False,
        limit: int | None = None,
        offset: int | None = None,
    ) -> Demand:
        """What the waiting jobs need, per category: why they wait (never, capacity,
        policy, ready) and what would start them; with ``templates`` (or
        ``every_template``) which new workers of them would start what (simulated by the
        server in a transaction it rolls back)."""
        names = "*" if every_template else ",".join(templates) if templates else None
        return self._page(Demand, ops.GET_DEMAND, limit, offset, templates=names)

    @covers(ops.GET_DEMAND_SCALE)
    def demand_scale(
        self, templates: list[str] | None = None, *, every_template: bool = False
    ) -> DemandScale:
        """The demand figures as plain numbers (what KEDA's metrics-api scaler reads):
        without ``templates`` the server's cached ones over every template (see
        ``age_seconds``), with them (or ``every_template``) computed now."""
        names = "*" if every_template else ",".join(templates) if templates else None
        return self._call(DemandScale, ops.GET_DEMAND_SCALE, query={"templates": names})
