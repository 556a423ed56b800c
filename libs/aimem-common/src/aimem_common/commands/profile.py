"""Profile memory: preferences a user states once, seen by every later session of that user.

The owner is ``user_id`` (``users.id``), or None for the operator (the root token, or anyone
on a server with auth off). Callers fill it from the authenticated principal
(``aimem_common.read.profile.owner_of``), never from what a client sent. The envelope's
scope, when it has one, is where the preference was stated (its source project).
"""

from __future__ import annotations

from pydantic import Field, field_validator

from aimem_common.commands.envelope import OpPayload, register
from aimem_common.commands.freetext import FreeText
from aimem_common.models import DbId

MAX_ENTRY_CHARS = 500  # one preference is a sentence or two, not a page
MAX_ENTRIES_PER_OWNER = 100


@register("profile.add")
class ProfileAdd(OpPayload):
    """Store one preference of ``user_id`` (None: the operator). Secrets are redacted."""

    user_id: DbId | None = None
    body: FreeText = Field(min_length=1, max_length=MAX_ENTRY_CHARS)
    session_id: str | None = Field(None, max_length=256)

    @field_validator("body")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("a profile entry needs some text")
        return v


@register("profile.remove")
class ProfileRemove(OpPayload):
    """Delete one preference of ``user_id`` (None: the operator) by its id."""

    user_id: DbId | None = None
    entry_id: DbId
