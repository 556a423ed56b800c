"""``SearchParams``: one search as every interface states it (REST body and query string, MCP, web)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from aimem_common.models import GLOBAL_PROJECT

# The longest question every interface accepts (API, MCP, web); what is read of it is cut shorter
# before tokenising (``text.MAX_QUERY_CHARS``), so a pasted log stays cheap and is not refused.
MAX_QUERY_INPUT_CHARS = 16 * 1024


class SearchParams(BaseModel):
    """One search: the question, where to look, how many hits and what to add.

    ``workspace`` defaults to ``settings.workspace_default``; ``project`` and ``scopes``
    (``"project"`` or ``"workspace/project"`` each) are unioned; ``global`` searches every
    project the principal may read. ``limit`` None = ``settings.query.default_limit``. The REST
    body (``POST /api/v1/search``) is this model; the GET query string and the MCP
    ``memory_query`` arguments turn into it (``to_params``).
    """

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    query: str = Field("", max_length=MAX_QUERY_INPUT_CHARS, validation_alias="q", description="the question")
    workspace: str | None = Field(None, description="defaults to the server's workspace_default")
    project: str | None = None
    scopes: list[str] = Field(default_factory=list, description="'project' or 'workspace/project' names")
    global_: bool = Field(False, alias="global", description="search every readable project")
    limit: int | None = Field(None, ge=1, le=100)
    explain: bool = False
    include_expired: bool = False
    include_superseded: bool = False

    @property
    def default_scoped(self) -> bool:
        """True for a plain one-project search (the case that also gets ``_global`` hits)."""
        return bool(self.project) and not self.scopes and not self.global_ and self.project != GLOBAL_PROJECT
