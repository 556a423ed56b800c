"""Embedding backfill: every live page without a current vector gets one.

"Current" = same ``{provider, model, dim}`` as the configured embedder **and** the page's
``content_hash``; anything else is stale (ignored by the read side) and re-embedded here, one
page at a time as pages change — not only when the table is empty. Vectors go to the
writer as ``embedding.upsert`` commands (float32 LE, base64).
"""

from __future__ import annotations

import base64
import sqlite3
from typing import TYPE_CHECKING, Any

from aimem_common.embed import EmbedIdentity, encode_vector

from aimem_common.models import Scope

if TYPE_CHECKING:
    from aimem_maintainer.context import MaintContext

TEXT_CHARS = 8000
MAX_BATCHES_PER_RUN = 50


def missing(conn: sqlite3.Connection, ident: EmbedIdentity, scope: Scope | None, limit: int,
            exclude: set[int]) -> list[dict[str, Any]]:
    """Live pages whose vector is absent or stale (worker thread)."""
    sql = ("SELECT p.id, p.title, substr(p.body, 1, ?) AS body, p.content_hash FROM pages p"
           " LEFT JOIN page_embeddings e ON e.page_id = p.id WHERE p.is_latest = 1 AND (e.page_id IS NULL"
           " OR e.provider != ? OR e.model != ? OR e.dim != ? OR e.content_hash != p.content_hash)")
    args: list[Any] = [TEXT_CHARS, ident.provider, ident.model, ident.dim]
    if scope is not None:
        sql += " AND p.project_id = ?"
        args.append(scope.project_id)
    if exclude:
        sql += f" AND p.id NOT IN ({','.join('?' * len(exclude))})"
        args += sorted(exclude)
    sql += " ORDER BY p.id LIMIT ?"
    args.append(limit)
    return [dict(r) for r in conn.execute(sql, args)]


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
        vecs = await emb.embed([f"{r['title']}\n\n{r['body']}" for r in rows])
        items = [{"page_id": r["id"], "content_hash": r["content_hash"],
                  "vector_b64": base64.b64encode(encode_vector(v)).decode()} for r, v in zip(rows, vecs)]
        res = await ctx.send("embedding.upsert", {"provider": ident.provider, "model": ident.model, "dim": ident.dim,
                                                  "items": items})
        embedded += int(res.get("upserted", 0))
        skipped.update(res.get("skipped", []))
    cov = await ctx.read_pool.run(lambda conn: coverage(conn, ident))
    return {"enabled": True, "identity": {"provider": ident.provider, "model": ident.model, "dim": ident.dim},
            "embedded": embedded, "skipped": sorted(skipped), **cov}
