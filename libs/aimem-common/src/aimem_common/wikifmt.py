"""The markdown page format of the wiki: frontmatter, titles, links, entity names.

Shared by the writer (page writes, the hand-edit watcher, ``aimem reindex``) and the
maintainer's lint, so every reader of the wiki agrees on what a page says. Pure functions,
no I/O, safe on any thread.

A page file is YAML frontmatter between ``---`` fences followed by a markdown body::

    ---
    title: Retry policy
    tags: [nats]
    entities: [JetStream]
    ---
    # Retry policy
    See [[decisions/0001.md]] and [[infra:runbooks/nats.md]].

Links:

* ``[[path.md]]`` / ``[[path.md|label]]`` — a page of the same project (path from the
  project root; ``.md`` is appended when missing).
* ``[[project:path.md]]`` — a sibling project in the same workspace.
* ``[[workspace/project:path.md]]`` — a project in another workspace.
* ``[label](../gotchas/x.md)`` — a markdown link, relative to the linking page's directory.

Links inside fenced or inline code are ignored; URLs and anchors are not links.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import PurePosixPath
from typing import Any

import yaml

from aimem_common.errors import BadRequestError

META_FILE = "_meta.md"
WRITER_KEYS = ("created_at", "updated_at")  # frontmatter owned by the writer, stripped from input
LEDGER_RE = re.compile(r"^log(?:-\d{4}-\d{2})?\.md$")
# First 8 KiB of a ledger open with a hook entry, under optional frontmatter.
LEDGER_ENTRY_RE = re.compile(r"^## \[\d{4}-\d{2}-\d{2}[^\]]*\]", re.MULTILINE)
MAX_FRONTMATTER_BYTES = 64 * 1024

_FENCE_RE = re.compile(r"^(```|~~~)[^\n]*\n.*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE_RE = re.compile(r"`[^`\n]*`")
_WIKILINK_RE = re.compile(r"\[\[([^\[\]\n|]{1,600})(?:\|([^\[\]\n]{0,300}))?\]\]")
_MDLINK_RE = re.compile(r"(?<!!)\[([^\[\]\n]{0,300})\]\(\s*<?([^()\s<>]{1,600})>?(?:\s+\"[^\"]*\")?\s*\)")
_SCOPED_RE = re.compile(
    r"^(?:(?P<ws>[A-Za-z0-9_][A-Za-z0-9._-]{0,127})/)?(?P<pj>[A-Za-z0-9_][A-Za-z0-9._-]{0,127}):(?P<path>.+)$"
)
_H1_RE = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_URL_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True, slots=True)
class ParsedPage:
    """A page file split into its frontmatter (dict, JSON-safe values) and body."""

    frontmatter: dict[str, Any]
    body: str


@dataclass(frozen=True, slots=True)
class LinkTarget:
    """One outgoing link: ``workspace``/``project`` are None for the source's own scope."""

    path: str
    workspace: str | None = None
    project: str | None = None
    kind: str = "wikilink"  # wikilink | markdown
    label: str | None = None


@dataclass(slots=True)
class PageFields:
    """The typed fields the index derives from frontmatter (see ``page_fields``)."""

    title: str | None = None
    tags: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    pinned: bool = False
    tier: str | None = None
    expires_at: str | None = None
    salience: float | None = None


def _invalid(message: str) -> BadRequestError:
    return BadRequestError(message, code="invalid_frontmatter")


def _json_safe(value: Any) -> Any:
    """Turn YAML scalars (dates, datetimes) into JSON-safe values, recursively."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def parse(text: str) -> ParsedPage:
    """Split ``text`` into frontmatter and body.

    A file without a leading ``---`` fence has empty frontmatter. CRLF is normalised.

    Returns:
        ``ParsedPage``; frontmatter values are JSON-safe (dates become ISO strings).

    Raises:
        BadRequestError: code ``invalid_frontmatter`` — unterminated fence, YAML syntax
            error, a non-mapping document, or frontmatter over 64 KiB.
    """
    text = text.replace("\r\n", "\n")
    if text.startswith("\ufeff"):
        text = text[1:]
    if not (text.startswith("---\n") or text == "---"):
        return ParsedPage({}, text)
    end = re.search(r"^(?:---|\.\.\.)[ \t]*$", text[4:], re.MULTILINE)
    if end is None:
        raise _invalid("frontmatter opened with '---' but never closed")
    raw = text[4 : 4 + end.start()]
    if len(raw.encode("utf-8", "surrogatepass")) > MAX_FRONTMATTER_BYTES:
        raise _invalid(f"frontmatter larger than {MAX_FRONTMATTER_BYTES} bytes")
    body = text[4 + end.end() :]
    if body.startswith("\n"):
        body = body[1:]
    try:
        data = yaml.safe_load(raw) if raw.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise _invalid(f"frontmatter is not valid YAML{where}: {problem}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise _invalid("frontmatter must be a YAML mapping")
    return ParsedPage(_json_safe(data), body)


def render(frontmatter: dict[str, Any], body: str) -> str:
    """Render a page file: ``---`` YAML frontmatter ``---`` then the body (ends in ``\\n``).

    Keys keep their insertion order; an empty frontmatter renders the body alone.
    """
    body = body.replace("\r\n", "\n")
    if not body.endswith("\n"):
        body += "\n"
    if not frontmatter:
        return body
    fm = yaml.safe_dump(
        _json_safe(frontmatter), sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000
    )
    return f"---\n{fm}---\n{body}"


def content_hash(text: str) -> str:
    """Return the sha256 hex of ``text`` as UTF-8 (the page's ``content_hash``)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def extract_title(frontmatter: dict[str, Any], body: str, path: str) -> str:
    """Return the page title: frontmatter ``title``, else the first ``# H1``, else the file stem."""
    t = frontmatter.get("title")
    if isinstance(t, str) and t.strip():
        return t.strip()[:512]
    m = _H1_RE.search(strip_code(body))
    if m:
        return m.group(1).strip()[:512]
    return PurePosixPath(path).stem.replace("-", " ").replace("_", " ").strip() or path


def strip_code(body: str) -> str:
    """Return ``body`` with fenced code blocks and inline code spans blanked out."""
    body = _FENCE_RE.sub("", body)
    return _INLINE_CODE_RE.sub("", body)


def _norm_target(path: str) -> str | None:
    """Normalise a link path (strip anchor/query, add ``.md``); None when it is not a page."""
    path = path.strip().split("#", 1)[0].split("?", 1)[0].strip()
    if not path or "\x00" in path:
        return None
    if not path.endswith(".md"):
        path += ".md"
    return path


def _join(base_dir: str, rel: str) -> str | None:
    """Resolve ``rel`` against ``base_dir`` inside the project root; None when it escapes."""
    if rel.startswith("/"):
        parts: list[str] = []
        rel = rel.lstrip("/")
    else:
        parts = [p for p in base_dir.split("/") if p]
    for seg in rel.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(seg)
    return "/".join(parts) if parts else None


WIKILINK_RE = _WIKILINK_RE  # ``[[target]]`` / ``[[target|label]]``: group 1 target, group 2 label


def parse_wikilink(target: str, label: str | None = None) -> LinkTarget | None:
    """Resolve the inside of ``[[target|label]]`` to a ``LinkTarget`` (None: not a page).

    ``target`` is a path from the project root (``.md`` added), or ``project:path`` /
    ``workspace/project:path`` for another project; URLs and paths escaping the root are
    not pages.
    """
    target, label = target.strip(), (label or "").strip() or None
    ws = pj = None
    if "://" in target:
        return None
    sm = _SCOPED_RE.match(target)
    if sm:
        ws, pj, target = sm.group("ws"), sm.group("pj"), sm.group("path")
    path = _norm_target(target)
    path = _join("", path) if path is not None else None
    if not path:
        return None
    return LinkTarget(path=path, workspace=ws, project=pj, kind="wikilink", label=label)


def extract_links(body: str, source_path: str = "") -> list[LinkTarget]:
    """Return the outgoing page links of ``body`` in order of appearance, deduplicated.

    Args:
        body: markdown (frontmatter already removed).
        source_path: the linking page's path, for relative markdown links.

    Returns:
        ``list[LinkTarget]``; cross-project wikilinks carry ``project`` (and ``workspace``
        for ``[[ws/project:path]]``). Markdown links to URLs, anchors, non-``.md`` files
        or outside the project are skipped.
    """
    text = strip_code(body)
    out: list[LinkTarget] = []
    seen: set[tuple] = set()

    def add(t: LinkTarget) -> None:
        key = (t.workspace, t.project, t.path, t.kind)
        if key not in seen:
            seen.add(key)
            out.append(t)

    for m in _WIKILINK_RE.finditer(text):
        link = parse_wikilink(m.group(1), m.group(2))
        if link is not None:
            add(link)
    base_dir = str(PurePosixPath(source_path).parent) if source_path else ""
    base_dir = "" if base_dir == "." else base_dir
    for m in _MDLINK_RE.finditer(text):
        label, href = m.group(1).strip() or None, m.group(2)
        if href.startswith("#") or _URL_SCHEME_RE.match(href) or href.startswith("//"):
            continue
        raw = href.split("#", 1)[0].split("?", 1)[0]
        if not raw.endswith(".md"):
            continue
        path = _join(base_dir, raw)
        if path:
            add(LinkTarget(path=path, kind="markdown", label=label))
    return out


def normalize_entity(name: str) -> str:
    """Return the index key of an entity name: NFKC, casefolded, single spaces, trimmed."""
    s = unicodedata.normalize("NFKC", str(name)).casefold()
    return " ".join(s.split())[:256]


def _str_list(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [v for v in (x.strip() for x in value.split(",")) if v]
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise _invalid(f"frontmatter '{key}' must be a list of strings")
    out = [str(v).strip() for v in value if str(v).strip()]
    if len(out) > 200:
        raise _invalid(f"frontmatter '{key}' has more than 200 entries")
    return out


def page_fields(frontmatter: dict[str, Any]) -> PageFields:
    """Validate and extract the typed fields the index uses from ``frontmatter``.

    Keys: ``title`` (str), ``tags`` / ``entities`` (list of str, or a comma string),
    ``pinned`` (bool), ``tier`` (working|episodic|semantic|procedural), ``expires_at``
    (RFC 3339 datetime or date), ``salience`` (number ≥ 0).

    Raises:
        BadRequestError: code ``invalid_frontmatter`` naming the bad key.
    """
    f = PageFields()
    title = frontmatter.get("title")
    if title is not None and not isinstance(title, str):
        raise _invalid("frontmatter 'title' must be a string")
    f.title = title
    f.tags = _str_list(frontmatter.get("tags"), "tags")
    f.entities = _str_list(frontmatter.get("entities"), "entities")
    pinned = frontmatter.get("pinned", False)
    if not isinstance(pinned, bool):
        raise _invalid("frontmatter 'pinned' must be true or false")
    f.pinned = pinned
    tier = frontmatter.get("tier")
    if tier is not None and tier not in ("working", "episodic", "semantic", "procedural"):
        raise _invalid("frontmatter 'tier' must be working|episodic|semantic|procedural")
    f.tier = tier
    exp = frontmatter.get("expires_at")
    if exp is not None:
        f.expires_at = normalize_timestamp(exp, "expires_at")
    sal = frontmatter.get("salience")
    if sal is not None:
        if isinstance(sal, bool) or not isinstance(sal, (int, float)) or sal < 0:
            raise _invalid("frontmatter 'salience' must be a number >= 0")
        f.salience = float(sal)
    return f


EVENT_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # fixed width: text order = time order


def event_timestamp(value: Any) -> str:
    """Return ``value`` (as ``normalize_timestamp`` takes it) as ISO-8601 UTC in ONE fixed-width
    form, always with microseconds (``2026-12-01T09:00:35.000000Z``): stored event times of
    sessions, observations and handoffs compare correctly as text (``…:35Z`` would sort after
    ``…:35.839Z``).

    Raises:
        BadRequestError: code ``invalid_frontmatter``.
    """
    from datetime import UTC

    s = normalize_timestamp(value)
    return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(UTC).strftime(EVENT_TIME_FORMAT)


def normalize_timestamp(value: Any, key: str = "timestamp") -> str:
    """Return ``value`` (RFC 3339 datetime or ``YYYY-MM-DD``) as an ISO-8601 UTC string.

    Raises:
        BadRequestError: code ``invalid_frontmatter``.
    """
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, date):
        dt = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        s = value.strip()
        try:
            dt = datetime.fromisoformat(s.replace("Z", "+00:00")) if "T" in s or " " in s else None
            if dt is None:
                d = date.fromisoformat(s)
                dt = datetime(d.year, d.month, d.day)
        except ValueError as exc:
            raise _invalid(f"frontmatter '{key}' is not an RFC 3339 datetime or date: {value!r}") from exc
    else:
        raise _invalid(f"frontmatter '{key}' must be a datetime string")
    from datetime import UTC

    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def is_ledger_name(name: str) -> bool:
    """Return True for a ledger file name (``log.md`` or ``log-YYYY-MM.md``)."""
    return bool(LEDGER_RE.match(name))


def looks_like_ledger(head: str) -> bool:
    """Return True when a file's first 8 KiB open with a hook ledger entry (after frontmatter)."""
    head = head[: 8 * 1024].replace("\r\n", "\n")
    if head.startswith("---\n"):
        end = re.search(r"^---[ \t]*$", head[4:], re.MULTILINE)
        head = head[4 + end.end() :] if end else head
    stripped = head.lstrip()
    return bool(LEDGER_ENTRY_RE.match(stripped))


def render_meta(kind: str, *, id: str, name: str, workspace_id: str | None = None, workspace: str | None = None,
                root: str | None = None, origin: str | None = None, repo_id: str | None = None,
                aliases: list[str] | tuple[str, ...] = ()) -> str:
    """Render a scope manifest ``_meta.md`` (``kind`` is ``workspace`` or ``project``).

    ``aimem reindex`` reads these to rebuild workspaces and projects with their ids and a
    project's identity keys (``root``, ``origin``, ``repo_id``, root ``aliases``; written
    only when known).
    """
    fm: dict[str, Any] = {"aimem": "scope", "kind": kind, "id": id, "name": name}
    if kind == "project":
        fm["workspace_id"] = workspace_id
        fm["workspace"] = workspace
        fm.update({k: v for k, v in (("root", root), ("origin", origin), ("repo_id", repo_id)) if v})
        if aliases:
            fm["aliases"] = list(aliases)
    heading = f"Workspace {name}" if kind == "workspace" else f"Project {workspace}/{name}"
    return render(fm, f"# {heading}\n\nScope manifest written by aimem; do not edit the ids.\n")


def parse_meta(text: str) -> dict[str, Any]:
    """Parse a ``_meta.md`` manifest; returns its frontmatter (``kind``, ``id``, ``name``...).

    Raises:
        BadRequestError: code ``invalid_frontmatter`` (bad YAML or missing ``kind``/``id``/``name``).
    """
    fm = parse(text).frontmatter
    if fm.get("kind") not in ("workspace", "project") or not fm.get("id") or not fm.get("name"):
        raise _invalid("scope manifest needs kind (workspace|project), id and name")
    return fm


def dumps_json(value: Any) -> str:
    """Compact, stable JSON for frontmatter/tag columns."""
    return json.dumps(_json_safe(value), ensure_ascii=False, separators=(",", ":"))
