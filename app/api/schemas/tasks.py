"""Bodies of the task registry routes."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.common import BodyInt, ChangedAt, RegisteredAt


class TaskIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "sbuild",
                    "description": "build a Debian source package",
                    "requirements": {
                        "and": [
                            {"eq": ["system:architecture", "amd64"]},
                            {"ge": ["system:cpu_count", 4]},
                        ]
                    },
                },
                {"name": "shell", "requirements": {"ge": ["system:cpu_count", 1]}},
            ]
        },
    )

    name: str = Field(min_length=1, max_length=255, description="lower case, e.g. `sbuild`")
    version: BodyInt = Field(
        default=1,
        ge=1,
        le=2**31 - 1,
        description="the version workers must report for this task's namespace",
    )
    description: str = Field(default="", max_length=65_536, description="what the task does")
    requirements: Any = Field(
        default=None,
        description="a condition on the worker's effective metadata, e.g. "
        '`{"and": [{"eq": ["system:architecture", "amd64"]}, '
        '{"ge": ["system:cpu_count", 4]}]}`; operators: and, or, not, exists, eq, ne, '
        "lt, le, gt, ge, in, contains",
    )
    plugin: str | None = Field(
        default=None,
        max_length=255,
        description="an entry point of group `jobmatch.tasks` whose can_run_on runs on "
        "the workers SQL found suitable",
    )


class TaskOut(BaseModel):
    name: str = Field(description="the task type's name")
    version: int = Field(description="the version workers must report for this task")
    description: str = Field(description="what the task does")
    requirements: Any = Field(
        description="the condition on the worker's effective metadata, null for none"
    )
    plugin: str | None = Field(description="the `jobmatch.tasks` entry point, if any")
    created_at: RegisteredAt
    updated_at: ChangedAt
