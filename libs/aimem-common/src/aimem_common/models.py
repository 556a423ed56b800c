"""Domain types shared by every service: identity, kinds, tiers, path rules.

Identity is the typed 3-tuple ``(workspace_id, project_id, path)`` (DESIGN.md invariant 4).
Names (``workspace``, ``project``) are mutable labels; ids are UUIDs that name the wiki
directories, so a rename moves nothing on disk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated
from enum import StrEnum
from pathlib import PurePosixPath

from pydantic import AfterValidator

from aimem_common.errors import BadRequestError
from aimem_common.kinds import ObservationKind  # noqa: F401  (the domain types, one import)

#: The largest integer SQLite stores (a signed 64-bit INTEGER PRIMARY KEY).
DB_INT_MAX = 2**63 - 1
#: A row id as accepted from outside (path parameters, request bodies, tool arguments,
#: command payloads): 1 ≤ id ≤ 2^63−1, so an out-of-range id is a 400, never a 500.
def _db_range(lowest: int):
    def check(value: int) -> int:
        if not -DB_INT_MAX - 1 <= value <= DB_INT_MAX:
            raise ValueError("out of range (a 64-bit integer)")
        if value < lowest:
            raise ValueError(f"must be at least {lowest}")
        return value

    return AfterValidator(check)


DbId = Annotated[int, _db_range(1)]
#: A row id where 0 means "none" (``expected_page_id=0``: the page must not exist yet).
DbIdOrZero = Annotated[int, _db_range(0)]

GLOBAL_PROJECT = "_global"  # reserved preferences scope for memory_write_page(scope="global")
MAX_NAME_LEN = 128
# How every interface documents a ``workspace`` argument (MCP tools, the search parameters).
WORKSPACE_DOC = ("Workspace name: the `workspace` in the repository's .aimem.toml when it has one; else omit "
                 "for the server's default (`default`). Pass it with `project`.")
MAX_PATH_LEN = 512

_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")


class Tier(StrEnum):
    """Memory tiers (by directory, or frontmatter ``tier``): only episodic pages decay."""

    WORKING = "working"
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"


class PageKind(StrEnum):
    """Canonical page kind, derived from the first path segment."""

    SESSION = "session"
    CONCEPT = "concept"
    DECISION = "decision"
    GOTCHA = "gotcha"
    PROCEDURE = "procedure"
    RULE = "rule"
    SLOT = "slot"
    LINT = "lint"
    PENDING = "pending"
    PROMPT = "prompt"
    NOTE = "note"


_KIND_BY_DIR = {
    "sessions": PageKind.SESSION,
    "concepts": PageKind.CONCEPT,
    "decisions": PageKind.DECISION,
    "gotchas": PageKind.GOTCHA,
    "procedures": PageKind.PROCEDURE,
    "_rules": PageKind.RULE,
    "_slots": PageKind.SLOT,
    "_lint": PageKind.LINT,
    "_pending": PageKind.PENDING,
    "_prompts": PageKind.PROMPT,
}

_TIER_BY_KIND = {
    PageKind.SESSION: Tier.EPISODIC,
    PageKind.NOTE: Tier.EPISODIC,
    PageKind.LINT: Tier.EPISODIC,
    PageKind.PENDING: Tier.EPISODIC,
    PageKind.CONCEPT: Tier.SEMANTIC,
    PageKind.DECISION: Tier.SEMANTIC,
    PageKind.GOTCHA: Tier.SEMANTIC,
    PageKind.RULE: Tier.SEMANTIC,
    PageKind.SLOT: Tier.SEMANTIC,
    PageKind.PROMPT: Tier.SEMANTIC,
    PageKind.PROCEDURE: Tier.PROCEDURAL,
}


def kind_for_path(path: str) -> PageKind:
    """Return the page kind of a wiki path from its first directory (``note`` otherwise)."""
    first = path.split("/", 1)[0] if "/" in path else ""
    return _KIND_BY_DIR.get(first, PageKind.NOTE)


def tier_for(kind: PageKind, frontmatter_tier: str | None = None) -> Tier:
    """Return the tier: an explicit valid frontmatter ``tier`` wins, else the kind's default."""
    if frontmatter_tier:
        try:
            return Tier(frontmatter_tier)
        except ValueError:
            pass
    return _TIER_BY_KIND[kind]


def validate_name(value: str, what: str = "project") -> str:
    """Check a workspace/project name: 1–128 chars of ``[A-Za-z0-9._-]``, not ``.``/``..``.

    Raises:
        BadRequestError: code ``invalid_name``.
    """
    if not isinstance(value, str) or not _NAME_RE.match(value) or value in {".", ".."}:
        raise BadRequestError(
            f"invalid {what} name {value!r}: use 1-{MAX_NAME_LEN} chars of letters, digits, '.', '_', '-'",
            code="invalid_name",
        )
    return value


_WINDOWS_DEVICES = frozenset(["CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)),
                              *(f"LPT{i}" for i in range(1, 10))])
_WINDOWS_FORBIDDEN = re.compile(r'[<>:"|?*]')


def windows_unsafe(segment: str) -> bool:
    """True when ``segment`` cannot be a file or directory name on Windows: it holds one of
    ``<>:"|?*``, ends in ``.`` or a space, or its part before the first ``.`` is a device name
    (``CON``, ``PRN``, ``AUX``, ``NUL``, ``COM1``–``COM9``, ``LPT1``–``LPT9``, any case; Git for
    Windows refuses to check such a path out)."""
    return (bool(_WINDOWS_FORBIDDEN.search(segment)) or segment.endswith((".", " "))
            or segment.split(".", 1)[0].rstrip(" ").upper() in _WINDOWS_DEVICES)


def validate_page_path(path: str) -> str:
    """Normalise and check a page path relative to a project directory.

    Rules: relative POSIX path, ends in ``.md``, no ``..``/``.`` segments, no NUL or
    control characters, no backslashes, no hidden segments (except the reserved
    ``_``-prefixed directories), at most 512 chars, not ``_meta.md``/``log-*.md``.

    Returns the normalised path (duplicate slashes removed).

    Raises:
        BadRequestError: code ``invalid_path`` with the reason.
    """

    def bad(reason: str) -> BadRequestError:
        return BadRequestError(f"invalid page path {path!r}: {reason}", code="invalid_path")

    if not isinstance(path, str) or not path.strip():
        raise bad("empty")
    if len(path) > MAX_PATH_LEN:
        raise bad(f"longer than {MAX_PATH_LEN} chars")
    if any(ord(c) < 32 or c == "\x7f" for c in path):
        raise bad("control character or NUL")
    if "\\" in path:
        raise bad("backslash")
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        raise bad("absolute path")
    parts = [p for p in path.split("/") if p != ""]
    if not parts:
        raise bad("empty")
    for part in parts:
        if part in {".", ".."}:
            raise bad("'.' or '..' segment")
        if part.startswith("."):
            raise bad("hidden segment")
    norm = str(PurePosixPath(*parts))
    if not norm.endswith(".md"):
        raise bad("must end in .md")
    if norm == "_meta.md" or (len(parts) == 1 and re.match(r"^log-\d{4}-\d{2}\.md$", norm)):
        raise bad("reserved file name")
    return norm


@dataclass(frozen=True, slots=True)
class Scope:
    """A resolved project scope: names plus their stable ids."""

    workspace: str
    project: str
    workspace_id: str
    project_id: str
