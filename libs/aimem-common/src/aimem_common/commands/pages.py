"""Page ops: write (conditional), batch write, delete, access bump, feedback."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from aimem_common.models import validate_page_path
from aimem_common.commands.envelope import OpPayload, register
from aimem_common.commands.freetext import FreeData, FreeText
from aimem_common.models import DbId, DbIdOrZero

MAX_PAGE_BODY_BYTES = 256 * 1024


class PageWrite(OpPayload):
    """Create or supersede the page at ``path`` (versioned: history is kept).

    ``create_only`` fails with ``precondition_failed`` when a live page exists;
    ``expected_page_id`` fails unless the live page's id equals it (0 = must not exist).
    ``frontmatter`` is merged under the writer's own keys; ``expires_at`` is RFC 3339 or a date.
    ``evidence`` cites what produced this version (e.g. ``[{"kind": "session", "id": "..."}]``).
    """

    path: str
    title: FreeText | None = Field(None, max_length=512)
    body: FreeText
    frontmatter: Annotated[dict[str, Any], FreeData] = {}
    create_only: bool = False
    expected_page_id: DbIdOrZero | None = None
    expires_at: str | None = None
    evidence: Annotated[list[dict[str, str]], FreeData] = []

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        return validate_page_path(v)

    @field_validator("body")
    @classmethod
    def _body(cls, v: str) -> str:
        if "\x00" in v:
            raise ValueError("body contains NUL")
        if len(v.encode("utf-8", "surrogatepass")) > MAX_PAGE_BODY_BYTES:
            raise ValueError(f"body larger than {MAX_PAGE_BODY_BYTES} bytes")
        return v


register("page.write", creates_scope=True)(PageWrite)


@register("page.write_batch", creates_scope=True)
class PageWriteBatch(OpPayload):
    """1–100 page writes applied all or nothing."""

    pages: list[PageWrite] = Field(min_length=1, max_length=100)


@register("page.delete")
class PageDelete(OpPayload):
    """Delete the live page at ``path`` (idempotent: deleting nothing is ``deleted: false``).

    ``expected_page_id`` deletes only while the live page's id equals it (0: there must be
    none); otherwise nothing changes and the op fails ``precondition_failed``.
    """

    path: str
    expected_page_id: DbIdOrZero | None = None

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        return validate_page_path(v)


@register("page.access")
class PageAccess(OpPayload):
    """Bump ``access_count``/``last_accessed_at`` of pages (throttled once a minute per page)."""

    page_ids: list[DbId] = Field(min_length=1, max_length=200)
    at: str | None = None


@register("page.feedback")
class PageFeedback(OpPayload):
    """Record a quality signal on the live page at ``path`` (the ``memory_feedback`` tool): it nudges the page's salience."""

    path: str
    signal: Literal["helpful", "not_helpful", "stale", "wrong"]
    reason: FreeText | None = Field(None, max_length=2000)

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        return validate_page_path(v)
