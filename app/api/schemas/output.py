"""Bodies of the output stream: a worker's chunk, and what a reader gets back."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.common import BodyInt, JobIdField, Text


class OutputChunkIn(BaseModel):
    """The next chunk of a running job's output, sent by the worker that runs it."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"offset": 0, "text": "building...\n"}]},
    )

    offset: BodyInt = Field(
        ge=0,
        le=2**62,
        description="where this text starts in the job's output (characters); a resend of "
        "text the server has is skipped",
    )
    text: Text = Field(max_length=1_048_576, description="the next characters of the output")


class OutputAppended(BaseModel):
    job: JobIdField
    next_offset: int = Field(description="where the next chunk starts")


class OutputOut(BaseModel):
    job: JobIdField
    offset: int = Field(description="the offset of the first character of text")
    text: str = Field(description="the output from offset, as far as the server has it")
    next_offset: int = Field(description="the offset to ask for next")
    missed: int = Field(
        description="characters between the offset asked for and offset that the server no "
        "longer keeps (it keeps a bounded tail)"
    )
