"""Per-chunk vectors on the read side: a page is found by a chunk past its first window, rows
of another identity or an older content hash are ignored, the process copy follows new rows,
and the HNSW path ranks a small set as the exact path does."""

from __future__ import annotations

import asyncio

import numpy as np

from aimem_common.auth import ROOT
from aimem_common.chunking import chunks, units_of
from aimem_common.config import Settings
from aimem_common.embed import EmbedIdentity
from aimem_common.search.params import SearchParams
from aimem_common.search.query_embed import QueryEmbedder
from aimem_common.search.service import Searcher
from aimem_common.search.question import QueryOptions, QueryVector
from aimem_common.read.vectors import ChunkVectors, Identity
from aimem_common.search.query import memory_query
from aimem_testing.fake_llm import hash_embed

DIM = 256
FILLER = "\n".join(f"Minute{i} topic{i} owner{i} budget{i} staffing{i} roadmap{i}." for i in range(120))
LATE = "The backup drill restores the ledger replica from cold storage."


def embed_page(seeder, pid: int, title: str, body: str, *, model: str = "m", content_hash: str | None = None) -> int:
    """Replace the page's chunk rows as the writer does for the maintainer; return the chunk count."""
    texts = chunks(title, units_of(body))
    seeder.conn.execute("DELETE FROM page_chunk_embeddings WHERE page_id = ?", (pid,))
    h = content_hash or seeder.conn.execute("SELECT content_hash FROM pages WHERE id = ?", (pid,)).fetchone()[0]
    seeder.conn.executemany(
        "INSERT INTO page_chunk_embeddings(page_id, chunk, provider, model, dim, vector, content_hash, created_at)"
        " VALUES (?,?,?,?,?,?,?,?)",
        [(pid, i, "fake", model, DIM, np.asarray(hash_embed(t, DIM), dtype="<f4").tobytes(), h, seeder.tick())
         for i, t in enumerate(texts)])
    return len(texts)


def qv(text: str, model: str = "m") -> QueryVector:
    return QueryVector(hash_embed(text, DIM), "fake", model, DIM)


def test_a_sentence_past_the_first_window_is_found_by_its_chunk(pool, seeder):
    app = seeder.scope("default", "app")
    body = FILLER + "\n" + LATE
    assert len(body) > 4000  # far past the ~1,000 characters (256 tokens) one page vector reads
    long_page = seeder.page(app, "notes/status.md", "# Status\n" + body)
    others = [seeder.page(app, f"notes/o{i}.md", f"# Other {i}\nCanteen menu, parking.")
              for i in range(5)]
    n = embed_page(seeder, long_page, "Status", body)
    for pid in others:
        embed_page(seeder, pid, "Other", "The canteen menu and parking.")
    assert n > 4
    with pool.connection() as conn:
        res = memory_query(conn, "zzzz-nothing", [app], vector=qv(LATE), vectors=pool.vectors,
                                  options=QueryOptions(explain=True)).to_json()
    top = res["hits"][0]
    assert top["page_id"] == long_page and res["streams_active"] == ["vector"]
    assert top["score_details"]["streams"]["vector"]["chunks"][0]["chunk"] == n - 1  # the last window
    # The page's first window alone (what a single page vector sees) does not match the sentence.
    first = np.asarray(hash_embed(chunks("Status", units_of(body))[0], DIM))
    assert float(first @ np.asarray(hash_embed(LATE, DIM))) < 0.5 * top["score_details"]["streams"]["vector"]["score"]


def test_stale_identity_and_hash_are_ignored_and_new_rows_are_seen(pool, seeder):
    app, infra = seeder.scope("default", "app"), seeder.scope("default", "infra")
    page = seeder.page(app, "notes/backup.md", "# Backup\n" + LATE)
    embed_page(seeder, page, "Backup", LATE, model="old-model")
    with pool.connection() as conn:
        assert memory_query(conn, "zzzz", [app], vector=qv(LATE), vectors=pool.vectors).to_json()["hits"] == []
    embed_page(seeder, page, "Backup", LATE, model="m", content_hash="an-older-hash")  # the page changed since
    with pool.connection() as conn:
        assert memory_query(conn, "zzzz", [app], vector=qv(LATE), vectors=pool.vectors).to_json()["hits"] == []
    embed_page(seeder, page, "Backup", LATE)  # current rows: new ids, the kept copy loads them
    with pool.connection() as conn:
        hits = memory_query(conn, "zzzz", [app], vector=qv(LATE), vectors=pool.vectors).to_json()["hits"]
        assert [h["page_id"] for h in hits] == [page]
        assert memory_query(conn, "zzzz", [infra], vector=qv(LATE), vectors=pool.vectors).to_json()["hits"] == []
    # Moved to another project (a session move keeps page ids): the writer gives its rows new ids.
    seeder.conn.execute("UPDATE pages SET project_id = ? WHERE id = ?", (infra.project_id, page))
    seeder.conn.execute("UPDATE page_chunk_embeddings SET id = id + (SELECT max(id) FROM page_chunk_embeddings)"
                        " WHERE page_id = ?", (page,))
    with pool.connection() as conn:
        assert memory_query(conn, "zzzz", [app], vector=qv(LATE), vectors=pool.vectors).to_json()["hits"] == []
        hits = memory_query(conn, "zzzz", [infra], vector=qv(LATE), vectors=pool.vectors).to_json()["hits"]
        assert [h["page_id"] for h in hits] == [page]


def test_hnsw_and_exact_paths_agree_on_a_small_set(pool, seeder):
    app, infra = seeder.scope("default", "app"), seeder.scope("default", "infra")
    rng = np.random.default_rng(7)
    ids = []
    for i in range(400):
        pid = seeder.page(app if i % 4 else infra, f"notes/r{i}.md", f"# R{i}\nrandom page {i}")
        ids.append(pid)
        h = seeder.conn.execute("SELECT content_hash FROM pages WHERE id = ?", (pid,)).fetchone()[0]
        for c in range(3):
            v = rng.normal(size=DIM).astype("<f4")
            v /= np.linalg.norm(v)
            seeder.conn.execute("INSERT INTO page_chunk_embeddings(page_id, chunk, provider, model, dim, vector,"
                                " content_hash, created_at) VALUES (?,?,?,?,?,?,?,?)",
                                (pid, c, "fake", "m", DIM, v.tobytes(), h, seeder.tick()))
    index = ChunkVectors(ann_min_rows=100, background=False)
    ident = Identity("fake", "m", DIM)
    with pool.connection() as conn:
        index.refresh(conn, ident)
        assert index.indexed and index.n == 1200
        index.ann_min_rows = 100  # the app scope's 900 rows also go through the index
        for _ in range(10):
            q = rng.normal(size=DIM).astype(np.float32)
            q /= np.linalg.norm(q)
            for projects in (None, [app.project_id]):
                ann = index.nearest(conn, q, ident, projects, 10)
                exact = index.nearest(conn, q, ident, projects, 10, exact=True)
                assert list(ann)[:5] == list(exact)[:5]  # HNSW is approximate: the head is the same
                assert len(set(ann) & set(exact)) >= 9
                assert all(abs(ann[p][0][1] - exact[p][0][1]) < 1e-4 for p in list(exact)[:5])
        # Rows written after the index was built join it.
        pid = seeder.page(app, "notes/new.md", "# New\nnew page")
        h = seeder.conn.execute("SELECT content_hash FROM pages WHERE id = ?", (pid,)).fetchone()[0]
        q = rng.normal(size=DIM).astype("<f4")
        q /= np.linalg.norm(q)
        seeder.conn.execute("INSERT INTO page_chunk_embeddings(page_id, chunk, provider, model, dim, vector,"
                            " content_hash, created_at) VALUES (?,?,?,?,?,?,?,?)",
                            (pid, 0, "fake", "m", DIM, q.tobytes(), h, seeder.tick()))
        near = index.nearest(conn, q, ident, [app.project_id], 3)
        assert next(iter(near)) == pid and index.n == 1201


class _HashEmbedder:
    """The fake LLM's hashing embedder as an in-process ``Embedder`` (identity fake/m/DIM)."""

    identity = EmbedIdentity("fake", "m", DIM)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return [hash_embed(t, DIM) for t in texts]

    async def aclose(self) -> None:
        return None


def test_a_service_search_ranks_on_the_pools_copy(pool, seeder, tmp_path):
    """``Searcher.search`` hands the pool's kept copy to the vector stream: it loads the rows
    once and follows new ones, instead of reading every chunk row of the scope per search."""
    app = seeder.scope("default", "app")
    page = seeder.page(app, "notes/backup.md", "# Backup\n" + LATE)
    embed_page(seeder, page, "Backup", LATE)
    searcher = Searcher(pool=pool, settings=Settings(data_dir=tmp_path),
                        embedder=QueryEmbedder(_HashEmbedder(), timeout_ms=5000, cooldown_s=1))
    params = SearchParams(query=LATE, workspace="default", project="app", explain=True)
    assert pool.vectors.n == 0
    res = asyncio.run(searcher.search(ROOT, params)).to_json()
    assert [h["page_id"] for h in res["hits"]] == [page] and "vector" in res["streams_active"]
    assert pool.vectors.n == 1 and pool.vectors.ident == Identity("fake", "m", DIM)
    other = seeder.page(app, "notes/restore.md", "# Restore\nrestores the ledger replica")
    embed_page(seeder, other, "Restore", "restores the ledger replica")
    asyncio.run(searcher.search(ROOT, params))
    assert pool.vectors.n == 2  # the new row joined the kept copy
