"""``SearchParams``: the one definition of a search's parameters, bounds and docs.

The REST body (``POST /api/v1/search``) and query string (``GET``) are this model; the MCP
``memory_query`` arguments subclass it; the web search form and the ``aimem search`` flags
are made from ``param_specs()`` (the same names, bounds, defaults and help) and send this model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from annotated_types import Ge, Le, MaxLen
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from aimem_common.models import GLOBAL_PROJECT, MAX_NAME_LEN, WORKSPACE_DOC

# The longest question every interface accepts (API, MCP, web); what is read of it is cut shorter
# before tokenising (``text.MAX_QUERY_CHARS``), so a pasted log stays cheap and is not refused.
MAX_QUERY_INPUT_CHARS = 16 * 1024
MAX_SCOPES = 20  # sibling projects one search may name
MAX_LIMIT = 100  # hits one search may ask for (``query.max_limit`` may clamp lower)

# The question's declaration: every interface accepts ``query`` and the names agents and URLs
# use for it (``q``, ``search``). An interface that requires a question (MCP) narrows it with
# ``Field(min_length=1, **QUERY_FIELD)``; nothing else about it is declared twice.
QUERY_FIELD: dict[str, Any] = {
    "validation_alias": AliasChoices("query", "q", "search"),
    "max_length": MAX_QUERY_INPUT_CHARS,
    "description": "What you want to know, in natural language or keywords. Aliases: `q`, `search`.",
}


class SearchParams(BaseModel):
    """One search: the question, where to look, how many hits and what to add.

    ``workspace`` defaults to ``settings.workspace_default``; ``project`` and ``scopes``
    (``"project"`` or ``"workspace/project"`` each; a comma-separated entry is split) are
    unioned; ``global`` searches every project the principal may read; one of the three is
    required (``scope_required``). ``limit`` None = ``settings.query.default_limit``; any
    positive integer is accepted and the search clamps it to ``settings.query.max_limit``
    (≤ ``MAX_LIMIT``), so asking for more is never an error; 0, a negative number, text or a
    boolean is refused. An empty question finds nothing.
    """

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    query: str = Field("", **QUERY_FIELD)
    workspace: str | None = Field(None, description=WORKSPACE_DOC, max_length=MAX_NAME_LEN)
    project: str | None = Field(
        None, description="Project to search (required unless `scopes` or `global: true` is given).",
        max_length=MAX_NAME_LEN)
    limit: int | None = Field(
        None, ge=1, validation_alias=AliasChoices("limit", "n", "top_k"),
        description="Maximum number of hits: a positive integer, clamped to the server's `query.max_limit` "
                    f"(at most {MAX_LIMIT}); default: the server's `query.default_limit`, 10 unless configured. "
                    "Aliases: `n`, `top_k`.")
    scopes: list[str] = Field(
        default_factory=list, max_length=MAX_SCOPES,
        description="Also search these sibling projects: `project` or `workspace/project` each "
                    "(a comma-separated entry is split).")
    global_: bool = Field(
        False, alias="global",
        description="Search every project you can read at once (hits carry workspace + project).")
    explain: bool = Field(False, description="Attach per-hit `score_details` and the active streams.")
    include_expired: bool = Field(False, description="Also return pages past their `expires_at` TTL.")
    include_superseded: bool = Field(False, description="Also return older versions (labelled `superseded: true`).")

    @field_validator("limit", mode="before")
    @classmethod
    def _no_boolean_limit(cls, value: Any) -> Any:
        # JSON ``true`` would pass as the integer 1: a count is a number, never a boolean.
        if isinstance(value, bool):
            raise ValueError("limit must be a positive integer, not a boolean")
        return value

    @field_validator("scopes", mode="before")
    @classmethod
    def _split_scopes(cls, value: Any) -> Any:
        """``None`` is no scopes; ``"a,b"`` (one entry or a list of them, as a query string
        repeats or comma-separates) is ``["a", "b"]``; blanks are dropped."""
        if value is None:
            return []
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
            return value  # the type check names the bad entry
        return [s.strip() for item in items for s in item.split(",") if s.strip()]

    @property
    def default_scoped(self) -> bool:
        """True for a plain one-project search (the case that also gets ``_global`` hits)."""
        return bool(self.project) and not self.scopes and not self.global_ and self.project != GLOBAL_PROJECT


class SearchQuery(SearchParams):
    """``GET /api/v1/search``'s query string: ``SearchParams``, but an unknown parameter (a cache
    buster, a tracking tag) is ignored, as URLs pick them up."""

    model_config = ConfigDict(extra="ignore")


ParamKind = Literal["text", "count", "flag", "list"]
# The Python types of ``SearchParams`` fields and how a form or a command line offers each.
_KINDS: dict[Any, ParamKind] = {str: "text", str | None: "text", int | None: "count", bool: "flag",
                                list[str]: "list"}
_ALIASES = re.compile(r"\s*Aliases: [^.]*\.$")


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """One ``SearchParams`` field as an interface that is not a pydantic model offers it.

    ``name`` is the public name (``global``, ``include_expired``; a flag ``--include-expired``,
    a form input ``include_expired``) and ``field`` the model's attribute (``global_``);
    ``kind``: ``text`` (a string), ``count`` (a positive integer), ``flag`` (a boolean) or
    ``list`` (strings, repeated or comma-separated). ``default`` None: the server decides
    (``limit``: ``query.default_limit``). ``minimum``/``maximum`` bound a count,
    ``max_length`` a text (characters) or a list (entries). ``help`` is the field's description
    without the JSON aliases, which only the API and MCP accept.
    """

    name: str
    field: str
    kind: ParamKind
    default: Any
    minimum: int | None
    maximum: int | None
    max_length: int | None
    title: str
    help: str


def param_specs(model: type[SearchParams] = SearchParams) -> tuple[ParamSpec, ...]:
    """Return ``model``'s fields as ``ParamSpec``s, in declaration order.

    Raises:
        TypeError: a field whose type no form or flag can offer (add it to ``_KINDS`` with a
            rendering in the web form and the CLI).
    """
    out = []
    for attr, field in model.model_fields.items():
        kind = _KINDS.get(field.annotation)
        if kind is None:
            raise TypeError(f"SearchParams.{attr}: no form input or flag for {field.annotation!r}")
        bounds = {type(m): m for m in field.metadata}
        name = field.alias or attr
        out.append(ParamSpec(
            name=name, field=attr, kind=kind,
            default=field.get_default(call_default_factory=True),
            minimum=bounds[Ge].ge if Ge in bounds else None,
            maximum=bounds[Le].le if Le in bounds else None,
            max_length=bounds[MaxLen].max_length if MaxLen in bounds else None,
            title=name.replace("_", " ").capitalize(),
            help=_ALIASES.sub("", field.description or "")))
    return tuple(out)
