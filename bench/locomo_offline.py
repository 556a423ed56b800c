"""LoCoMo ranking work without a stack: the questions asked in-process against a kept DB.

``python -m bench.locomo --keep-db PATH`` copies the stack's ``memory.sqlite`` after a run
(``keep_db``); ``python -m bench.locomo --offline PATH [--vectors]`` then scores every
question through ``memory_query`` on a ``ReaderPool`` over that copy (``offline``), with the
page text index and with FTS5 alone, optionally after embedding the copy's pages with the
local embedder (``embed_offline``). The loading and scoring are ``bench.locomo``'s own.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.common import table
from bench.locomo import half_table, load, ranked_sessions, score, score_halves, strip_indices


def keep_db(db: Path, dest: Path) -> None:
    """Copy the live DB (``VACUUM INTO``: a consistent snapshot while the writer runs)."""
    import sqlite3

    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.unlink(missing_ok=True)
    src = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        src.execute("VACUUM INTO ?", (str(dest),))
    finally:
        src.close()


def embed_offline(db: Path) -> dict[str, Any]:
    """Give every live page of ``db`` (a copy kept by ``--keep-db``) its current local chunk vectors.

    The bench's own shortcut for ranking work: the maintainer's chunking
    (``aimem_maintainer.embeddings.missing`` + ``page_chunks``) and the local embedder, rows
    inserted straight into the kept copy (never a live store: there only the writer writes).
    Returns ``{pages, chunks, embed_cpu_s, embed_wall_s}`` for the pages embedded now.
    """
    import sqlite3

    from aimem_common.config import EmbeddingSettings
    from aimem_common.db.connect import migrate
    from aimem_common.embed import build_embedder, encode_vector
    from aimem_maintainer.embeddings import missing, page_chunks

    emb = build_embedder(EmbeddingSettings(provider="local"))
    ident = emb.identity
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    migrate(conn)
    pages = chunks_n = 0
    c0, t0 = time.process_time(), time.perf_counter()
    while True:
        rows = missing(conn, ident, None, 64, set())
        if not rows:
            break
        texts = [page_chunks(r) for r in rows]
        vecs = emb._model[1].encode([t for ts in texts for t in ts], normalize_embeddings=True)  # the encoder itself
        at = 0
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for r, ts in zip(rows, texts):
            vs = vecs[at:at + len(ts)]
            at += len(ts)
            conn.execute("INSERT OR REPLACE INTO page_embeddings(page_id, workspace_id, project_id, provider, model, dim,"
                         " vector, content_hash, created_at) SELECT id, workspace_id, project_id, ?, ?, ?, ?, ?, ?"
                         " FROM pages WHERE id = ?", (ident.provider, ident.model, ident.dim,
                                                      encode_vector(vs[0].tolist()), r["content_hash"], now, r["id"]))
            conn.execute("DELETE FROM page_chunk_embeddings WHERE page_id = ?", (r["id"],))
            conn.executemany("INSERT INTO page_chunk_embeddings(page_id, chunk, provider, model, dim, vector,"
                             " content_hash, created_at) VALUES (?,?,?,?,?,?,?,?)",
                             [(r["id"], i, ident.provider, ident.model, ident.dim, encode_vector(v.tolist()),
                               r["content_hash"], now) for i, v in enumerate(vs)])
        conn.commit()
        pages += len(rows)
        chunks_n += len(vecs)
    conn.close()
    out = {"pages": pages, "chunks": chunks_n, "embed_cpu_s": round(time.process_time() - c0, 2),
           "embed_wall_s": round(time.perf_counter() - t0, 2)}
    print("embedded", out)
    return out


def offline(data_path: Path, db: Path, *, show_misses: int = 40, vectors: bool = False) -> dict[str, Any]:
    """Score the questions in-process (``memory_query`` through a ``ReaderPool``) against ``db``.

    Twice, the two sides taking turns question by question: with the page text index the
    services use (built in bulk beside ``db`` as ``<db>.search`` when missing, as the writer's
    rebuild does) and with FTS5 alone (the fallback). With ``vectors`` the kept DB's pages are
    embedded once (``embed_offline``) and both sides get the question's vector (its embedding
    timed apart, ``embed_*``). Prints each side's table, query p50/p95 (wall and CPU ms) and
    the first ``show_misses`` questions of the text-index side whose evidence session is not
    in the top 5, with what ranked instead.
    """
    from aimem_common.db.connect import open_reader
    from aimem_common.embed import normalize
    from aimem_common.readpool import ReaderPool
    from aimem_common.read.scopes import find
    from aimem_common.search.question import QueryOptions, QueryVector
    from aimem_common.search.query import memory_query
    from aimem_common.read.textindex import is_complete
    from aimem_writer.textindex import build

    data = load(data_path)
    extra: dict[str, Any] = {}
    encoder = ident = None
    if vectors:
        from aimem_common.config import EmbeddingSettings
        from aimem_common.embed import build_embedder

        extra["embedded_now"] = embed_offline(db)
        emb = build_embedder(EmbeddingSettings(provider="local"))
        encoder, ident = emb._model[1], emb.identity  # the encoder itself: no event loop here
    search_dir = db.with_name(db.name + ".search")
    if not is_complete(search_dir):
        conn = open_reader(db)
        try:
            build(conn, search_dir)
        finally:
            conn.close()
    pools = {"text_index": ReaderPool(db, size=1, budget_ms=0, text_index_dir=search_dir),
             "fts5": ReaderPool(db, size=1, budget_ms=0)}
    assert pools["text_index"].text_index.available()
    opts = QueryOptions(limit=10)
    with pools["fts5"].connection() as conn:
        scopes = {c.sample_id: find(conn, "default", c.project) for c in data.conversations}
    sides = {name: {"rankings": [], "wall": [], "cpu": [], "misses": []} for name in pools}
    emb_cpu: list[float] = []
    emb_wall: list[float] = []
    for q in data.questions:
        qv = None
        if encoder is not None:
            t0, c0 = time.perf_counter(), time.process_time()
            v = normalize([float(x) for x in encoder.encode([q.text])[0]])
            emb_cpu.append((time.process_time() - c0) * 1000)
            emb_wall.append((time.perf_counter() - t0) * 1000)
            qv = QueryVector(v, ident.provider, ident.model, ident.dim)
        for name, pool in pools.items():
            side = sides[name]
            t0, c0 = time.perf_counter(), time.process_time()
            res = pool.call(memory_query, q.text, [scopes[q.sample_id]], options=opts, vector=qv, vectors=pool.vectors)
            side["cpu"].append((time.process_time() - c0) * 1000)
            side["wall"].append((time.perf_counter() - t0) * 1000)
            r = ranked_sessions(res.to_json(), q.sample_id)
            side["rankings"].append(r)
            if not set(r[:5]) & q.sessions:
                side["misses"].append((q, r))

    def p(xs: list[float], q: float) -> float:
        xs = sorted(xs)
        return round(xs[len(xs) // 2] if q == 0.5 else xs[max(0, int(len(xs) * q) - 1)], 2)

    out: dict[str, Any] = {}
    for name, pool in pools.items():
        pool.close()
        side = sides[name]
        rows = score(data.questions, side["rankings"])
        half_rows = score_halves(data, side["rankings"])
        print(f"-- {name}")
        print(table(rows, ["category", "n", "hit@1", "hit@5", "hit@10", "recall@5", "recall@10", "mrr"]))
        print(half_table(half_rows))
        lat = {"p50_ms": p(side["wall"], 0.5), "p95_ms": p(side["wall"], 0.95),
               "cpu_p50_ms": p(side["cpu"], 0.5), "cpu_p95_ms": p(side["cpu"], 0.95)}
        if emb_cpu:
            lat.update(embed_p50_ms=p(emb_wall, 0.5), embed_p95_ms=p(emb_wall, 0.95),
                       embed_cpu_p50_ms=p(emb_cpu, 0.5), embed_cpu_p95_ms=p(emb_cpu, 0.95))
        print("query", lat)
        # Only counts are kept in the results: the questions are the dataset's text (CC BY-NC,
        # read in place from ../shared/data/locomo, never copied into the repository).
        out[name] = {"rows": rows, "halves": strip_indices(half_rows), "latency": lat, "misses": len(side["misses"])}
    for q, r in sides["text_index"]["misses"][:show_misses]:
        print(f"MISS cat {q.category} want {sorted(q.sessions)} got {r[:5]}: {q.text}")
    return {**out["text_index"], "fts5": out["fts5"], "vectors": vectors, **extra}
