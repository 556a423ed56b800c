"""Page reads: one page with body, frontmatter and backlinks; recent; the link graph.

Shapes (all JSON-ready dicts; times are the stored RFC 3339 strings):

``PageRecord`` (``get_page``)::

    {"page_id": int, "id": int, "workspace", "project", "path", "title", "body",
     "frontmatter": dict, "kind", "tier", "tags": list[str], "pinned": bool, "salience": float|None,
     "session_id": str|None, "expires_at": str|None, "expired": bool,
     "superseded": bool, "is_latest": bool, "supersedes": int|None,
     "access_count": int, "last_accessed_at": str|None, "created_at", "updated_at",
     "links": [LinkOut], "backlinks": [RelatedPage]}

``LinkOut``: ``{"to_path", "to_workspace", "to_project", "page_id": int|None, "resolved": bool,
"link_kind", "label"}`` (``to_workspace``/``to_project`` are names; ``None`` = same).
``RelatedPage``: ``{"page_id", "path", "title", "kind", "workspace", "project", "link_kind"}`` —
backlinks are found by page id, so a link from *another* project appears with that
project's names.

**What the reader sees** (``reader``: the ``Principal``; ``None`` = this project only, fail
closed): backlinks and graph nodes/edges of projects the reader may not read are left out
(not counted either), and a link to a page of such a project shows as written
(``to_path``, ``to_workspace``, ``to_project``: the linking page's own text) but unresolved
(``page_id: None``, ``resolved: False``), so nothing tells whether that page exists.

``PageSummary`` (``recent``): the ``PageRecord`` fields without body, links, backlinks.

All functions are sync and take a read connection (``ReaderPool.run``).
"""

from __future__ import annotations

import base64
import binascii
import json
import sqlite3
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aimem_common.errors import BadRequestError, NotFoundError
from aimem_common.models import Scope
from aimem_common.read import visibility
from aimem_common.read.visibility import Readable

if TYPE_CHECKING:
    from aimem_common.auth import Principal

MAX_RECENT = 500
MAX_GRAPH_NODES = 5000

# Normalised sortable time key: stored values may carry 'Z', '+00:00' or micro-seconds.
_TKEY = "strftime('%Y-%m-%dT%H:%M:%f', {col})"

_PAGE_COLS = """
p.id, p.workspace_id, p.project_id, p.path, p.title, p.frontmatter, p.kind, p.tier, p.tags,
p.pinned, p.salience, p.session_id, p.expires_at, p.is_latest, p.supersedes, p.retired_reason,
p.access_count, p.last_accessed_at, p.created_at, p.updated_at, w.name AS ws_name, pj.name AS pj_name
"""
_PAGE_FROM = " FROM pages p JOIN projects pj ON pj.id = p.project_id JOIN workspaces w ON w.id = p.workspace_id "


def now_iso() -> str:
    """Return the current UTC time as RFC 3339 with milliseconds (``...Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _json(text: str | None, default: Any) -> Any:
    if not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


def is_expired(expires_at: str | None, now: str | None = None) -> bool:
    """Return True when ``expires_at`` (RFC 3339 or date) is at or before ``now``."""
    if not expires_at:
        return False
    try:
        exp = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    except ValueError:
        return False
    if exp.tzinfo is None:
        exp = exp.replace(tzinfo=UTC)
    ref = datetime.fromisoformat((now or now_iso()).replace("Z", "+00:00"))
    return exp <= ref


def summary_from_row(row: sqlite3.Row) -> dict[str, Any]:
    """Build a ``PageSummary`` dict from a row selected with ``_PAGE_COLS``."""
    return {
        "page_id": row["id"],
        "id": row["id"],
        "workspace": row["ws_name"],
        "project": row["pj_name"],
        "path": row["path"],
        "title": row["title"],
        "frontmatter": _json(row["frontmatter"], {}),
        "kind": row["kind"],
        "tier": row["tier"],
        "tags": _json(row["tags"], []),
        "pinned": bool(row["pinned"]),
        "salience": row["salience"],
        "session_id": row["session_id"],
        "expires_at": row["expires_at"],
        "expired": is_expired(row["expires_at"]),
        "is_latest": bool(row["is_latest"]),
        "superseded": not row["is_latest"],
        "supersedes": row["supersedes"],
        "access_count": row["access_count"],
        "last_accessed_at": row["last_accessed_at"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def get_page(
    conn: sqlite3.Connection,
    scope: Scope,
    *,
    path: str | None = None,
    page_id: int | None = None,
    include_expired: bool = True,
    reader: "Principal | None" = None,
) -> dict[str, Any]:
    """Return one page of ``scope`` as a ``PageRecord`` (full body, links, backlinks).

    Exactly one of ``path`` (the live version) or ``page_id`` (any retained version of a
    page in this scope, including superseded ones) must be given. Links and backlinks show
    what ``reader`` may read (module docstring; ``None``: this project only).

    Raises:
        BadRequestError: neither or both of ``path``/``page_id``.
        NotFoundError: ``page_not_found`` (also for a page id of another scope, and for an
            expired page when ``include_expired`` is False).
    """
    if (path is None) == (page_id is None):
        raise BadRequestError("give exactly one of path or page_id", code="bad_request")
    sql = f"SELECT {_PAGE_COLS}, p.body {_PAGE_FROM} WHERE p.project_id = ? "
    if path is not None:
        row = conn.execute(sql + "AND p.path = ? AND p.is_latest = 1", (scope.project_id, path)).fetchone()
    elif 0 < page_id < 2**63:  # beyond SQLite's INTEGER range no row can match (and bind fails)
        row = conn.execute(sql + "AND p.id = ?", (scope.project_id, page_id)).fetchone()
    else:
        row = None
    what = path if path is not None else f"#{page_id}"
    if row is None or (not include_expired and is_expired(row["expires_at"])):
        raise NotFoundError(
            f"page {what} not found in {scope.workspace}/{scope.project}",
            code="page_not_found",
            data={"workspace": scope.workspace, "project": scope.project, "path": path, "page_id": page_id},
        )
    page = summary_from_row(row)
    page["body"] = row["body"]
    vis = _visible(conn, scope, reader)
    page["links"] = outgoing_links(conn, row["id"], vis)
    page["backlinks"] = backlinks(conn, row["id"], vis)
    return page


def _visible(conn: sqlite3.Connection, scope: Scope, reader: "Principal | None") -> Readable:
    """What a read of ``scope`` shows: ``reader``'s readable projects, or ``scope`` alone."""
    return visibility.only(scope) if reader is None else visibility.readable(conn, reader)


def outgoing_links(conn: sqlite3.Connection, page_id: int, visible: Readable) -> list[dict[str, Any]]:
    """Return the ``LinkOut`` list of page version ``page_id`` in document order.

    A target in a project ``visible`` does not cover is shown unresolved (``page_id: None``).
    """
    rows = conn.execute(
        "SELECT l.to_workspace, l.to_project, l.to_path, l.to_page_id, l.link_kind, l.label,"
        " t.project_id AS to_project_id FROM links l LEFT JOIN pages t ON t.id = l.to_page_id"
        " WHERE l.from_page_id = ? ORDER BY l.id",
        (page_id,),
    ).fetchall()
    out = []
    for r in rows:
        target = r["to_page_id"] if r["to_page_id"] is not None and visible.sees(r["to_project_id"]) else None
        out.append({
            "to_path": r["to_path"],
            "to_workspace": r["to_workspace"],
            "to_project": r["to_project"],
            "page_id": target,
            "resolved": target is not None,
            "link_kind": r["link_kind"],
            "label": r["label"],
        })
    return out


def backlinks(conn: sqlite3.Connection, page_id: int, visible: Readable, *, limit: int = 200) -> list[dict[str, Any]]:
    """Return live pages of ``visible`` projects linking to ``page_id``, as ``RelatedPage`` dicts.

    Ordered by workspace, project, path; at most ``limit``.
    """
    where, args = visible.where("p.project_id")
    rows = conn.execute(
        "SELECT DISTINCT p.id, p.path, p.title, p.kind, w.name AS ws_name, pj.name AS pj_name, l.link_kind"
        " FROM links l JOIN pages p ON p.id = l.from_page_id AND p.is_latest = 1"
        " JOIN projects pj ON pj.id = p.project_id JOIN workspaces w ON w.id = p.workspace_id"
        f" WHERE l.to_page_id = ?{where} ORDER BY w.name, pj.name, p.path LIMIT ?",
        (page_id, *args, limit),
    ).fetchall()
    return [
        {"page_id": r["id"], "path": r["path"], "title": r["title"], "kind": r["kind"],
         "workspace": r["ws_name"], "project": r["pj_name"], "link_kind": r["link_kind"]}
        for r in rows
    ]


def recent(conn: sqlite3.Connection, scope: Scope, *, limit: int = 20, include_expired: bool = False) -> list[dict]:
    """Return the most recently updated live pages of ``scope`` (legacy array form).

    Returns ``list[PageSummary]``, ``updated_at`` descending, len ≤ ``limit`` (≤ 500).
    """
    limit = max(1, min(limit, MAX_RECENT))
    rows = conn.execute(
        f"SELECT {_PAGE_COLS} {_PAGE_FROM} WHERE p.project_id = ? AND p.is_latest = 1"
        " ORDER BY p.updated_at DESC, p.path LIMIT ?",
        (scope.project_id, limit * 2 if not include_expired else limit),
    ).fetchall()
    out = [summary_from_row(r) for r in rows]
    if not include_expired:
        out = [p for p in out if not p["expired"]]
    return out[:limit]


def _encode_cursor(data: dict[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> dict[str, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
    except (ValueError, binascii.Error) as exc:
        raise BadRequestError("invalid cursor", code="invalid_cursor") from exc
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("p", "s", "u", "a")):
        raise BadRequestError("invalid cursor", code="invalid_cursor")
    return data


def recent_since(
    conn: sqlite3.Connection,
    scope: Scope,
    *,
    updated_since: str | None = None,
    cursor: str | None = None,
    limit: int = 100,
) -> dict[str, Any]:
    """Incremental recent: live, unexpired pages updated strictly after ``updated_since``.

    Give ``updated_since`` (RFC 3339 or a date) for the first call, then ``cursor`` (the
    previous ``next_cursor``) until it is ``None``. The opaque cursor keeps the cutoff and
    the scope; a cursor from another project is refused.

    Returns ``{"pages": list[PageSummary], "next_cursor": str|None}``, ordered by
    (``updated_at``, ``path``) ascending, len ≤ ``limit`` (≤ 500).

    Raises:
        BadRequestError: neither argument, an unparseable time (``invalid_time``) or a bad
            or foreign cursor (``invalid_cursor``).
    """
    limit = max(1, min(limit, MAX_RECENT))
    if cursor:
        c = _decode_cursor(cursor)
        if c["p"] != scope.project_id:
            raise BadRequestError("cursor belongs to another scope", code="invalid_cursor")
        since, after_key, after_path = c["s"], c["u"], c["a"]
    elif updated_since:
        since = conn.execute("SELECT " + _TKEY.format(col="?"), (updated_since,)).fetchone()[0]
        if since is None:
            raise BadRequestError(f"invalid updated_since {updated_since!r}: use RFC 3339", code="invalid_time")
        after_key, after_path = since, ""
    else:
        raise BadRequestError("give updated_since or cursor", code="bad_request")
    tkey = _TKEY.format(col="p.updated_at")
    rows = conn.execute(
        f"SELECT {_PAGE_COLS}, {tkey} AS tkey {_PAGE_FROM}"
        f" WHERE p.project_id = ? AND p.is_latest = 1 AND {tkey} > ?"
        f" AND ({tkey} > ? OR ({tkey} = ? AND p.path > ?))"
        f" ORDER BY tkey, p.path LIMIT ?",
        (scope.project_id, since, after_key, after_key, after_path, limit + 1),
    ).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    pages = [summary_from_row(r) for r in rows]
    next_cursor = None
    if more:
        last = rows[-1]
        next_cursor = _encode_cursor({"p": scope.project_id, "s": since, "u": last["tkey"], "a": last["path"]})
    # Expired pages are skipped after paging so the cursor still advances past them.
    return {"pages": [p for p in pages if not p["expired"]], "next_cursor": next_cursor}


def graph(conn: sqlite3.Connection, scope: Scope, *, max_nodes: int = MAX_GRAPH_NODES,
          reader: "Principal | None" = None) -> dict[str, Any]:
    """Return the link graph of ``scope``'s live pages.

    Returns ``{"nodes": [{"id", "path", "title", "kind", "workspace", "project",
    "external": bool}], "edges": [{"from", "to": int|None, "to_path", "to_workspace",
    "to_project", "kind", "resolved": bool}], "truncated": bool}``. Targets in other
    projects ``reader`` may read appear as ``external`` nodes; unresolved links, and links
    into projects it may not read, have ``to: None``; pages of those projects that link
    here are left out (``reader`` None: this project only).
    """
    vis = _visible(conn, scope, reader)
    rows = conn.execute(
        f"SELECT {_PAGE_COLS} {_PAGE_FROM} WHERE p.project_id = ? AND p.is_latest = 1 ORDER BY p.path LIMIT ?",
        (scope.project_id, max_nodes + 1),
    ).fetchall()
    truncated = len(rows) > max_nodes
    nodes: dict[int, dict[str, Any]] = {}
    for r in rows[:max_nodes]:
        nodes[r["id"]] = {"id": r["id"], "path": r["path"], "title": r["title"], "kind": r["kind"],
                          "workspace": r["ws_name"], "project": r["pj_name"], "external": False}
    edges: list[dict[str, Any]] = []
    if nodes:
        link_rows = conn.execute(
            "SELECT l.from_page_id, l.to_page_id, l.to_path, l.to_workspace, l.to_project, l.link_kind,"
            " t.project_id AS to_project_id"
            " FROM links l JOIN pages p ON p.id = l.from_page_id AND p.is_latest = 1"
            " LEFT JOIN pages t ON t.id = l.to_page_id WHERE p.project_id = ? ORDER BY l.id",
            (scope.project_id,),
        ).fetchall()
        external: set[int] = set()
        for lr in link_rows:
            if lr["from_page_id"] not in nodes:
                continue
            to = lr["to_page_id"]
            if to is not None and to not in nodes:
                if vis.sees(lr["to_project_id"]):
                    external.add(to)
                else:
                    to = None  # a page the reader may not read: shown as written, unresolved
            edges.append({"from": lr["from_page_id"], "to": to, "to_path": lr["to_path"],
                          "to_workspace": lr["to_workspace"], "to_project": lr["to_project"],
                          "kind": lr["link_kind"], "resolved": to is not None})
        # Incoming cross-project edges: pages of other readable projects that link into this one.
        where, args = vis.where("s.project_id")
        in_rows = conn.execute(
            "SELECT l.from_page_id, l.to_page_id, l.to_path, l.to_workspace, l.to_project, l.link_kind"
            " FROM links l JOIN pages t ON t.id = l.to_page_id AND t.project_id = ?"
            f" JOIN pages s ON s.id = l.from_page_id AND s.is_latest = 1 AND s.project_id != ?{where}",
            (scope.project_id, scope.project_id, *args),
        ).fetchall()
        for lr in in_rows:
            external.add(lr["from_page_id"])
            edges.append({"from": lr["from_page_id"], "to": lr["to_page_id"], "to_path": lr["to_path"],
                          "to_workspace": lr["to_workspace"], "to_project": lr["to_project"],
                          "kind": lr["link_kind"], "resolved": True})
        if external:
            marks = ",".join("?" * len(external))
            for r in conn.execute(f"SELECT {_PAGE_COLS} {_PAGE_FROM} WHERE p.id IN ({marks})", tuple(external)):
                nodes[r["id"]] = {"id": r["id"], "path": r["path"], "title": r["title"], "kind": r["kind"],
                                  "workspace": r["ws_name"], "project": r["pj_name"], "external": True}
    return {"nodes": list(nodes.values()), "edges": edges, "truncated": truncated}


MAX_VERSIONS = 500
MAX_TREE_PAGES = 500


def versions(conn: sqlite3.Connection, scope: Scope, path: str, *, limit: int = 100) -> list[dict[str, Any]]:
    """Return the retained versions of ``path`` in ``scope``, newest first (no bodies).

    Each: ``{"page_id", "title", "is_latest": bool, "retired_reason", "actor", "updated_at",
    "superseded_at", "content_hash", "body_chars"}``; len ≤ ``limit`` (≤ 500). Empty when
    the path never existed.
    """
    limit = max(1, min(limit, MAX_VERSIONS))
    rows = conn.execute(
        "SELECT id, title, is_latest, retired_reason, actor, updated_at, superseded_at, content_hash,"
        " length(body) AS body_chars FROM pages WHERE project_id = ? AND path = ? ORDER BY id DESC LIMIT ?",
        (scope.project_id, path, limit),
    ).fetchall()
    return [
        {"page_id": r["id"], "title": r["title"], "is_latest": bool(r["is_latest"]),
         "retired_reason": r["retired_reason"], "actor": r["actor"], "updated_at": r["updated_at"],
         "superseded_at": r["superseded_at"], "content_hash": r["content_hash"], "body_chars": r["body_chars"]}
        for r in rows
    ]


def version_body(conn: sqlite3.Connection, scope: Scope, page_id: int) -> dict[str, Any]:
    """Return ``{"page_id", "path", "title", "body", "is_latest", "updated_at"}`` of one version.

    Raises:
        NotFoundError: ``page_not_found`` (also for a version of another scope).
    """
    row = None
    if 0 < page_id < 2**63:
        row = conn.execute(
            "SELECT id, path, title, body, is_latest, updated_at FROM pages WHERE project_id = ? AND id = ?",
            (scope.project_id, page_id),
        ).fetchone()
    if row is None:
        raise NotFoundError(f"page version #{page_id} not found in {scope.workspace}/{scope.project}",
                            code="page_not_found", data={"page_id": page_id})
    return {"page_id": row["id"], "path": row["path"], "title": row["title"], "body": row["body"],
            "is_latest": bool(row["is_latest"]), "updated_at": row["updated_at"]}


def tree(conn: sqlite3.Connection, scope: Scope, folder: str = "", *, limit: int = MAX_TREE_PAGES) -> dict[str, Any]:
    """Return one folder of the live page tree of ``scope``.

    Args:
        folder: ``""`` (the project root) or a path prefix ending in ``/``.
        limit: pages listed directly in the folder (≤ 500), by path.

    Returns ``{"folder", "folders": [{"name", "path", "pages": int}], "pages":
    [{"page_id", "path", "name", "title", "kind", "updated_at"}], "truncated": bool}``;
    ``folders`` counts every live page below each subfolder.

    Cost: a skip scan over the live-path index — each subfolder is one seek plus one
    range count, so a folder of a few subfolders costs the same at 10 or 100,000 pages.
    """
    limit = max(1, min(limit, MAX_TREE_PAGES))
    n = len(folder)
    upper = folder[:-1] + "0" if folder else "\U0010ffff"  # '/' + 1 = '0': just past the folder
    where = "WHERE project_id = ? AND is_latest = 1 AND path >= ? AND path < ?"
    live = f"FROM pages {where}"
    folders: list[dict[str, Any]] = []
    pages: list[dict[str, Any]] = []
    truncated = False
    cursor = folder
    while True:
        # Once the page list is full only paths matter (subfolders further on): read them from
        # the live-path index alone, without a table row each (~6x cheaper a row).
        sql = (f"SELECT path FROM pages INDEXED BY pages_live_path {where}" if len(pages) >= limit
               else f"SELECT id, path, title, kind, updated_at {live}")
        rows = conn.execute(f"{sql} ORDER BY path LIMIT 200", (scope.project_id, cursor, upper)).fetchall()
        jumped = False
        for r in rows:
            rest = r["path"][n:]
            slash = rest.find("/")
            if slash >= 0:  # the first page of a subfolder: count it whole, then seek past it
                sub = folder + rest[:slash + 1]
                count = conn.execute(f"SELECT count(*) {live}", (scope.project_id, sub, sub[:-1] + "0")).fetchone()[0]
                folders.append({"name": rest[:slash], "path": sub, "pages": count})
                cursor, jumped = sub[:-1] + "0", True
                break
            if len(pages) < limit:
                pages.append({"page_id": r["id"], "path": r["path"], "name": rest, "title": r["title"],
                              "kind": r["kind"], "updated_at": r["updated_at"]})
            else:
                truncated = True
        if not jumped:
            if len(rows) < 200:
                break
            cursor = rows[-1]["path"] + "\x00"
    return {"folder": folder, "folders": folders, "pages": pages, "truncated": truncated}
