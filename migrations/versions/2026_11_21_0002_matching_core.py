"""matching core: workers, queues, categories with cached misfits, jobs, allocations, views

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Views for people who inspect matches in SQL; plain SQL that both databases accept.
VIEWS = [
    """
    CREATE VIEW v_waiting_jobs AS
    SELECT j.id AS job_id, j.priority, j.submitted_at, j.slots, j.category_id,
           c.resources AS category_resources, c.key AS category_key
    FROM jobs j JOIN categories c ON c.id = j.category_id
    WHERE j.state = 'waiting'
    """,
    """
    CREATE VIEW v_category_fit AS
    SELECT c.id AS category_id, w.id AS worker_id, w.name AS worker_name,
           CASE WHEN m.worker_id IS NULL THEN 1 ELSE 0 END AS fits,
           m.reason AS reason
    FROM categories c
    CROSS JOIN workers w
    LEFT JOIN category_misfits m
      ON m.category_id = c.id AND m.worker_id = w.id AND m.generation = w.generation
    """,
    """
    CREATE VIEW v_queue_instance_free AS
    SELECT qi.id AS queue_instance_id, w.name AS worker_name, q.name AS queue_name,
           qi.slots, qi.used_slots, qi.slots - qi.used_slots AS free_slots,
           (SELECT COALESCE(SUM(a.slots), 0) FROM allocations a
             WHERE a.queue_instance_id = qi.id AND a.released_at IS NULL) AS allocated_slots
    FROM queue_instances qi
    JOIN workers w ON w.id = qi.worker_id
    JOIN queues q ON q.id = qi.queue_id
    """,
]
VIEW_NAMES = ["v_queue_instance_free", "v_category_fit", "v_waiting_jobs"]


def upgrade() -> None:
    op.create_table(
        "categories",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("resources", sa.Text(), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_categories")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_categories_key_hash")),
    )
    op.create_table(
        "queues",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("seq_no", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queues")),
        sa.UniqueConstraint("name", name=op.f("uq_queues_name")),
    )
    op.create_table(
        "workers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=True),
        sa.Column(
            "state",
            sa.Enum(
                "active", "draining", "offline", name="worker_state", native_enum=False, length=16
            ),
            nullable=False,
        ),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("resources", sa.Text(), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
        sa.UniqueConstraint("name", name=op.f("uq_workers_name")),
        sa.UniqueConstraint("rank", name=op.f("uq_workers_rank")),
    )
    op.create_table(
        "category_misfits",
        sa.Column("category_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["category_id"],
            ["categories.id"],
            name=op.f("fk_category_misfits_category_id_categories"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_category_misfits_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("category_id", "worker_id", name=op.f("pk_category_misfits")),
    )
    with op.batch_alter_table("category_misfits", schema=None) as batch_op:
        batch_op.create_index(
            "ix_category_misfits_worker", ["worker_id", "category_id"], unique=False
        )

    op.create_table(
        "category_tags",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("category_id", sa.Integer(), nullable=False),
        sa.Column("group_name", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column(
            "mode", sa.Enum("R", "O", "X", name="tag_mode", native_enum=False), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["category_id"],
            ["categories.id"],
            name=op.f("fk_category_tags_category_id_categories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_category_tags")),
    )
    with op.batch_alter_table("category_tags", schema=None) as batch_op:
        batch_op.create_index(
            "ix_category_tags_lookup", ["category_id", "group_name", "value", "mode"], unique=False
        )

    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column(
            "state",
            sa.Enum(
                "waiting",
                "running",
                "finished",
                "failed",
                "cancelled",
                name="job_state",
                native_enum=False,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("category_id", sa.Integer(), nullable=False),
        sa.Column("resources", sa.Text(), nullable=False),
        sa.Column("submitter", sa.String(length=255), nullable=False),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("worker_id", sa.Integer(), nullable=True),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("slots >= 1", name=op.f("ck_jobs_slots_positive")),
        sa.ForeignKeyConstraint(
            ["category_id"],
            ["categories.id"],
            name=op.f("fk_jobs_category_id_categories"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_jobs_worker_id_workers"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jobs_category_id"), ["category_id"], unique=False)
        batch_op.create_index("ix_jobs_state_id", ["state", "id"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_worker_id"), ["worker_id"], unique=False)
    # The dispatch query's index: the best waiting job of one category is one index seek.
    op.create_index(
        "ix_jobs_waiting_order",
        "jobs",
        ["category_id", sa.text("priority DESC"), "submitted_at", "id"],
        sqlite_where=sa.text("state = 'waiting'"),
        postgresql_where=sa.text("state = 'waiting'"),
    )

    op.create_table(
        "queue_instances",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("queue_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("used_slots", sa.Integer(), nullable=False),
        sa.CheckConstraint("slots >= 0", name=op.f("ck_queue_instances_slots_not_negative")),
        sa.CheckConstraint(
            "used_slots >= 0 AND used_slots <= slots",
            name=op.f("ck_queue_instances_used_within_slots"),
        ),
        sa.ForeignKeyConstraint(
            ["queue_id"],
            ["queues.id"],
            name=op.f("fk_queue_instances_queue_id_queues"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_queue_instances_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queue_instances")),
        sa.UniqueConstraint(
            "queue_id", "worker_id", name=op.f("uq_queue_instances_queue_id_worker_id")
        ),
    )
    with op.batch_alter_table("queue_instances", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_queue_instances_worker_id"), ["worker_id"], unique=False
        )

    op.create_table(
        "worker_tags",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("group_name", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column(
            "mode", sa.Enum("R", "O", "X", name="tag_mode", native_enum=False), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_worker_tags_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_worker_tags")),
    )
    with op.batch_alter_table("worker_tags", schema=None) as batch_op:
        batch_op.create_index(
            "ix_worker_tags_lookup", ["worker_id", "group_name", "value", "mode"], unique=False
        )

    op.create_table(
        "allocations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("queue_instance_id", sa.Integer(), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("allocated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("slots >= 1", name=op.f("ck_allocations_slots_positive")),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_allocations_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["queue_instance_id"],
            ["queue_instances.id"],
            name=op.f("fk_allocations_queue_instance_id_queue_instances"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_allocations")),
    )
    with op.batch_alter_table("allocations", schema=None) as batch_op:
        batch_op.create_index("ix_allocations_job", ["job_id"], unique=False)
        batch_op.create_index("ix_allocations_queue_instance", ["queue_instance_id"], unique=False)
    for statement in VIEWS:
        op.execute(statement)


def downgrade() -> None:
    for name in VIEW_NAMES:
        op.execute(f"DROP VIEW IF EXISTS {name}")
    op.drop_index("ix_jobs_waiting_order", table_name="jobs")
    with op.batch_alter_table("allocations", schema=None) as batch_op:
        batch_op.drop_index("ix_allocations_queue_instance")
        batch_op.drop_index("ix_allocations_job")

    op.drop_table("allocations")
    with op.batch_alter_table("worker_tags", schema=None) as batch_op:
        batch_op.drop_index("ix_worker_tags_lookup")

    op.drop_table("worker_tags")
    with op.batch_alter_table("queue_instances", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_queue_instances_worker_id"))

    op.drop_table("queue_instances")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_worker_id"))
        batch_op.drop_index("ix_jobs_state_id")
        batch_op.drop_index(batch_op.f("ix_jobs_category_id"))

    op.drop_table("jobs")
    with op.batch_alter_table("category_tags", schema=None) as batch_op:
        batch_op.drop_index("ix_category_tags_lookup")

    op.drop_table("category_tags")
    with op.batch_alter_table("category_misfits", schema=None) as batch_op:
        batch_op.drop_index("ix_category_misfits_worker")

    op.drop_table("category_misfits")
    op.drop_table("workers")
    op.drop_table("queues")
    op.drop_table("categories")
