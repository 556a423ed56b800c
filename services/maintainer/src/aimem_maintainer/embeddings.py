"""Embedding backfill: every live page without current vectors gets them.

A page is embedded in chunks (``aimem_common.chunking``: ~200-token windows of its
paragraphs and, for a session page, of its captured turns), one vector each; the first
chunk's vector is also the page's ``page_embeddings`` row (status and coverage count those).
"Current" = same ``{provider, model, dim}`` as the configured embedder **and** the page's
``content_hash``, for the page row and its first chunk row; anything else is stale (ignored
by the read side) and re-embedded here, one page at a time as pages change — not only when
the table is empty. Vectors go to the writer as ``embedding.upsert`` commands (float32 LE,
base64), at most ``SEND_BYTES`` of vectors per command.
"""

from __future__ import annotations

import base64
import sqlite3
from typing import TYPE_CHECKING, Any

from aimem_common.chunking import chunks, units_of
from aimem_common.embed import EmbedIdentity, encode_vector

from aimem_common.models import Scope

if TYPE_CHECKING:
    from aimem_maintainer.context import MaintContext

TEXT_CHARS = 200_000  # page bodies are capped far below this; the bound is for a foreign row
TURN_CHARS = 1200  # of each captured turn (title + body) of a session page
MAX_TURNS = 2000
SEND_BYTES = 1 << 20  # vectors per embedding.upsert (base64), well under the bus's message cap
MAX_BATCHES_PER_RUN = 50


def missing(conn: sqlite3.Connection, ident: EmbedIdentity, scope: Scope | None, limit: int,
            exclude: set[int]) -> list[dict[str, Any]]:
    """Live pages whose vector is absent or stale (worker thread)."""
    sql = ("SELECT p.id, p.title, substr(p.body, 1, ?) AS body, p.content_hash, p.project_id, p.session_id"
           " FROM pages p LEFT JOIN page_embeddings e ON e.page_id = p.id"
           " LEFT JOIN page_chunk_embeddings c ON c.page_id = p.id AND c.chunk = 0"
           " WHERE p.is_latest = 1 AND (e.page_id IS NULL"
           " OR e.provider != ? OR e.model != ? OR e.dim != ? OR e.content_hash != p.content_hash"
           " OR c.id IS NULL OR c.provider != ? OR c.model != ? OR c.dim != ? OR c.content_hash != p.content_hash)")
    args: list[Any] = [TEXT_CHARS, *([ident.provider, ident.model, ident.dim] * 2)]
    if scope is not None:
        sql += " AND p.project_id = ?"
        args.append(scope.project_id)
    if exclude:
        sql += f" AND p.id NOT IN ({','.join('?' * len(exclude))})"
        args += sorted(exclude)
    sql += " ORDER BY p.id LIMIT ?"
    args.append(limit)
    out = [dict(r) for r in conn.execute(sql, args)]
    for r in out:
        r["turns"] = session_turns(conn, r["project_id"], r["session_id"]) if r["session_id"] else []
    return out


def session_turns(conn: sqlite3.Connection, project_id: str, session_id: str) -> list[str]:
    """The captured turns of a session (title + body, ≤ ``TURN_CHARS`` each), in order.

    A session page holds a bounded digest (its later prompts are cut), so its chunks are
    made from the observations too: a long session is findable by any of its turns.
    """
    rows = conn.execute(
        "SELECT title, substr(body, 1, ?) FROM observations WHERE project_id = ? AND session_id = ?"
        " ORDER BY id LIMIT ?", (TURN_CHARS, project_id, session_id, MAX_TURNS)).fetchall()
    out = []
    for title, body in rows:
        text = " ".join((body or "").split())  # a title is made from its body; start/end events have none
        if text:
            out.append(text[:TURN_CHARS])
    return out


def page_chunks(row: dict[str, Any]) -> list[str]:
    """The texts embedded for one ``missing`` row: its chunks (``aimem_common.chunking``)."""
    units = units_of(row["body"])
    if row.get("turns"):
        body = " ".join((row["body"] or "").split())
        units += [u for t in row["turns"] if t[:200] not in body for u in units_of(t)]  # the digest kept it already
    return chunks(row["title"], units)


def coverage(conn: sqlite3.Connection, ident: EmbedIdentity | None) -> dict[str, int]:
    """``{live_pages, current, stale}`` for status reports."""
    live = conn.execute("SELECT count(*) FROM pages WHERE is_latest = 1").fetchone()[0]
    if ident is None:
        return {"live_pages": live, "current": 0, "stale": 0}
    cur = conn.execute(
        "SELECT count(*) FROM page_embeddings e JOIN pages p ON p.id = e.page_id AND p.is_latest = 1"
        " WHERE e.provider = ? AND e.model = ? AND e.dim = ? AND e.content_hash = p.content_hash",
        (ident.provider, ident.model, ident.dim),
    ).fetchone()[0]
    total = conn.execute("SELECT count(*) FROM page_embeddings").fetchone()[0]
    return {"live_pages": live, "current": cur, "stale": total - cur}


async def _send(ctx: "MaintContext", ident: EmbedIdentity, items: list[dict[str, Any]], skipped: set[int]) -> int:
    res = await ctx.send("embedding.upsert", {"provider": ident.provider, "model": ident.model, "dim": ident.dim,
                                              "items": items})
    skipped.update(res.get("skipped", []))
    return int(res.get("upserted", 0))


async def backfill(ctx: "MaintContext", scope: Scope | None = None) -> dict[str, Any]:
    """Embed missing/stale pages (all scopes when ``scope`` is None) in batches."""
    emb = ctx.embedder
    if emb is None:
        return {"enabled": False, "embedded": 0}
    ident = emb.identity
    batch = max(1, ctx.settings.embedding.batch_size)
    embedded, skipped = 0, set()
    for _ in range(MAX_BATCHES_PER_RUN):
        rows = await ctx.read_pool.run(lambda conn: missing(conn, ident, scope, batch, skipped))
        if not rows:
            break
        texts = [page_chunks(r) for r in rows]
        vecs = await emb.embed([t for ts in texts for t in ts])
        items, size, at = [], 0, 0
        for r, ts in zip(rows, texts):
            b64 = [base64.b64encode(encode_vector(v)).decode() for v in vecs[at:at + len(ts)]]
            at += len(ts)
            if items and size + sum(map(len, b64)) > SEND_BYTES:
                embedded += await _send(ctx, ident, items, skipped)
                items, size = [], 0
            items.append({"page_id": r["id"], "content_hash": r["content_hash"], "vector_b64": b64[0], "chunks": b64})
            size += sum(map(len, b64))
        if items:
            embedded += await _send(ctx, ident, items, skipped)
    cov = await ctx.read_pool.run(lambda conn: coverage(conn, ident))
    return {"enabled": True, "identity": {"provider": ident.provider, "model": ident.model, "dim": ident.dim},
            "embedded": embedded, "skipped": sorted(skipped), **cov}
