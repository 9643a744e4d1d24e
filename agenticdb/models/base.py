"""The base of every agenticdb model (:class:`Strict`), apart so that the modules of :mod:`agenticdb.models`
can share it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Base for every model: unknown fields are errors (a typo in a planner reply is caught)."""

    model_config = ConfigDict(extra="forbid")
