"""Bodies of the resource quota set routes (``qconf -arqs``/``-srqs``/``-mrqs``/``-drqs``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

#: The largest quota set text accepted, the same as every other notation field: a set of
#: several hundred rules fits, and even written as JSON escapes of four-byte characters
#: (12 bytes each) the largest text stays under the default body limit of 1 MiB, so an
#: over-long one is refused by its length (422), not by the body limit (413).
MAX_QUOTA_TEXT = 65_536

_EXAMPLE = (
    "{\n"
    "   name         max_u_slots\n"
    '   description  "each user at most 4 slots"\n'
    "   enabled      TRUE\n"
    "   limit        users {*} to slots=4\n"
    "}\n"
)


class QuotaSetIn(BaseModel):
    """A resource quota set in the text form ``qconf -srqs`` prints and ``-arqs`` reads."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"text": _EXAMPLE}]})

    text: str = Field(
        min_length=1,
        max_length=MAX_QUOTA_TEXT,
        description=(
            "the set: `name`, `description`, `enabled` and one `limit` line per rule, "
            "`limit [name N] [users L] [projects L] [pes L] [queues L] [hosts L] to "
            "attr=value[,...]`; `{...}` around a list limits each member separately"
        ),
    )


class QuotaLimitOut(BaseModel):
    attribute: str = Field(description="the limited consumable (full name), e.g. `slots`")
    value: str = Field(description="the limit as written: a value, or a dynamic `$num_proc*2`")


class QuotaRuleOut(BaseModel):
    label: str = Field(description="the rule as messages name it: `set/name` or `set/N`")
    text: str = Field(description="the rule's `limit` line without the keyword")
    limits: list[QuotaLimitOut] = Field(description="its limits in written order")


class QuotaUsageOut(BaseModel):
    rule: str = Field(description="the rule's label")
    key: str = Field(
        description="the usage key: values of the expanded filters, `user/project/pe/queue/host`"
    )
    attribute: str = Field(description="the limited attribute")
    used: float = Field(description="what running jobs hold, in base units (bytes, seconds)")
    limit: str = Field(description="the rule's limit as written")


class QuotaSetOut(BaseModel):
    name: str = Field(description="the set's name")
    description: str = Field(description="its description, `NONE` without one")
    enabled: bool = Field(description="whether dispatch holds jobs to it")
    text: str = Field(description="the set in `qconf -srqs` form")
    rules: list[QuotaRuleOut] = Field(
        description="its rules in order (the first that matches applies)"
    )
    usage: list[QuotaUsageOut] = Field(description="what running jobs hold of each limit, per key")
