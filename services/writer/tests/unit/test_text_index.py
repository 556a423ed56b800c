"""The page text index (tantivy) kept by the writer and read through a ``ReaderPool``.

Real parts: the batch path (``Applier.apply``) on a migrated SQLite, the index on disk in
the data dir, a read-only pool opening it as a query service would.
"""

from __future__ import annotations

import shutil

import pytest

from aimem_common.read import textindex as ti
from aimem_common.readpool import ReaderPool
from aimem_common.search.question import QueryOptions
from aimem_common.search.query import memory_query
from aimem_common.read.scopes import all_scopes
from aimem_writer.textindex import TextIndexWriter


@pytest.fixture
def ix(wh):
    tw = TextIndexWriter(wh.settings.search_dir, wh.settings.db_path)
    tw.start(wh.conn)
    assert tw.wait_ready(30)
    wh.applier.text_index = tw
    pool = ReaderPool(wh.settings.db_path, size=1, budget_ms=0, text_index_dir=wh.settings.search_dir)
    try:
        yield wh, tw, pool
    finally:
        pool.close()
        tw.close()


def project_id(wh, name: str = "app") -> str:
    return wh.conn.execute("SELECT id FROM projects WHERE name = ?", (name,)).fetchone()[0]


def found(pool: ReaderPool, words: list[str], projects: list[str] | None = None) -> list[int]:
    res = pool.text_index.search(words, projects, 50)
    assert res is not None, "the index is not in use"
    return [pid for pid, _ in res]


def live_id(wh, path: str, pj: str = "app") -> int:
    return wh.conn.execute("SELECT id FROM pages WHERE path = ? AND project_id = ? AND is_latest = 1",
                           (path, project_id(wh, pj))).fetchone()[0]


def outbox(wh) -> int:
    return wh.count("SELECT count(*) FROM search_outbox")


def test_written_page_is_found_at_once_and_an_edit_replaces_it(ix) -> None:
    wh, tw, pool = ix
    a = wh.ok("page.write", {"path": "concepts/retry.md", "body": "# Retry policy\n\nBackoff with jitter.\n"})
    # The reply came after the index commit: the next search finds the page.
    assert found(pool, ["jitter"]) == [a["page_id"]]
    assert outbox(wh) == 0
    hits = pool.call(memory_query, "how do we use jitter?", None, options=QueryOptions(explain=True)).to_json()
    assert [h["page_id"] for h in hits["hits"]] == [a["page_id"]] and "fts" in hits["streams_active"]
    b = wh.ok("page.write", {"path": "concepts/retry.md", "body": "# Retry policy\n\nExponential backoff only.\n"})
    assert found(pool, ["jitter"]) == []
    assert found(pool, ["exponential"]) == [b["page_id"]]
    assert pool.text_index.info()["docs"] == 1  # the superseded version left the index


def test_title_outweighs_body_and_stemming_matches_fts5(ix) -> None:
    wh, _, pool = ix
    body = wh.ok("page.write", {"path": "notes/a.md", "body": "# Notes\n\nwe talk about migrations here and there"})
    title = wh.ok("page.write", {"path": "notes/b.md", "body": "# Migration\n\nsome other words entirely here"})
    assert found(pool, ["migrating"]) == [title["page_id"], body["page_id"]]  # porter-like stems, title first
    assert found(pool, ["MIGRATIONS"]) == [title["page_id"], body["page_id"]]


def test_deleted_evicted_expired_pages_disappear(ix) -> None:
    wh, _, pool = ix
    for name in ("gone", "cold", "old"):
        wh.ok("page.write", {"path": f"notes/{name}.md", "body": f"# {name}\n\nshared zebra word"})
    assert len(found(pool, ["zebra"])) == 3
    wh.ok("page.delete", {"path": "notes/gone.md"})
    cold, old = live_id(wh, "notes/cold.md"), live_id(wh, "notes/old.md")
    wh.ok("sweep.apply", {"evict_page_ids": [cold], "expire_page_ids": [old]})
    assert found(pool, ["zebra"]) == []
    assert outbox(wh) == 0 and pool.text_index.info()["docs"] == 0


def test_project_filter_move_and_purge(ix) -> None:
    wh, _, pool = ix
    a = wh.ok("page.write", {"path": "notes/a.md", "body": "# A\n\ncommon quokka"}, pj="app")
    b = wh.ok("page.write", {"path": "notes/b.md", "body": "# B\n\ncommon quokka"}, pj="lib")
    app, lib = project_id(wh, "app"), project_id(wh, "lib")
    assert found(pool, ["quokka"], [app]) == [a["page_id"]]
    assert found(pool, ["quokka"], [lib]) == [b["page_id"]]
    assert sorted(found(pool, ["quokka"], [app, lib])) == sorted([a["page_id"], b["page_id"]])
    scopes = {s.project: s for s in pool.call(all_scopes)}
    hits = pool.call(memory_query, "quokka", [scopes["lib"]]).to_json()["hits"]
    assert [h["page_id"] for h in hits] == [b["page_id"]]
    # A move into another workspace holding a project of the same name copies and purges.
    wh.ok("page.write", {"path": "notes/c.md", "body": "# C\n\nother"}, ws="lab", pj="lib")
    out = wh.ok("project.move", {"to_workspace": "lab", "on_conflict": "duplicate"}, ws="default", pj="lib")
    assert out["moved_via"] == "copy-purge"
    lab_lib = wh.conn.execute("SELECT p.id FROM projects p JOIN workspaces w ON w.id = p.workspace_id"
                              " WHERE w.name = 'lab' AND p.name = 'lib'").fetchone()[0]
    assert found(pool, ["quokka"], [lib]) == []
    moved = found(pool, ["quokka"], [lab_lib])
    assert len(moved) == 1 and moved[0] != b["page_id"]
    wh.ok("project.purge", {}, ws="default", pj="app")
    assert found(pool, ["quokka"]) == moved
    assert outbox(wh) == 0


def test_operators_in_the_question_are_inert(ix) -> None:
    wh, _, pool = ix
    a = wh.ok("page.write", {"path": "notes/a.md", "body": "# Alpha\n\nplain text"})
    for q in ['alpha) OR (*', 'title:alpha AND -body:"', 'project:x alpha^9 NEAR/2', '"alpha']:
        res = pool.call(memory_query, q, None).to_json()
        assert [h["page_id"] for h in res["hits"]] == [a["page_id"]], q
    assert pool.call(memory_query, ') ( * " : ^', None).to_json()["hits"] == []
    assert found(pool, ["*"]) == [] and found(pool, [project_id(wh)]) == []  # the filter field is not text


def test_batches_without_page_changes_do_not_touch_the_index(ix) -> None:
    wh, _, pool = ix
    wh.ok("page.write", {"path": "notes/a.md", "body": "# A\n\ntext"})
    meta = ti.index_dir(wh.settings.search_dir) / "meta.json"
    before = meta.stat().st_mtime_ns
    wh.obs("s-1", "user-prompt", "hello", "a prompt that writes no page")
    assert meta.stat().st_mtime_ns == before and outbox(wh) == 0


def test_missing_index_falls_back_to_fts5(wh, tmp_path) -> None:
    a = wh.ok("page.write", {"path": "notes/a.md", "body": "# A\n\nwombat"})  # no index kept
    pool = ReaderPool(wh.settings.db_path, size=1, budget_ms=0, text_index_dir=tmp_path / "nowhere")
    try:
        assert not pool.text_index.available()
        assert pool.text_index.search(["wombat"], None, 10) is None
        res = pool.call(memory_query, "wombat", None, options=QueryOptions(explain=True)).to_json()
        assert [h["page_id"] for h in res["hits"]] == [a["page_id"]] and "fts" in res["streams_active"]
    finally:
        pool.close()


def test_crash_between_the_two_commits_is_replayed_at_start(ix) -> None:
    wh, tw, pool = ix
    a = wh.ok("page.write", {"path": "notes/a.md", "body": "# A\n\nnarwhal"})
    # A crash after SQLite's COMMIT and before the index commit: the page and its outbox row
    # are stored, the index never heard of it.
    tw.close()
    wh.applier.text_index = None
    b = wh.ok("page.write", {"path": "notes/b.md", "body": "# B\n\nnarwhal too"})
    assert outbox(wh) == 1 and found(pool, ["narwhal"]) == [a["page_id"]]
    tw2 = TextIndexWriter(wh.settings.search_dir, wh.settings.db_path)
    tw2.start(wh.conn)  # the index is complete: drained in place, no rebuild
    try:
        assert tw2.ready and outbox(wh) == 0
        assert sorted(found(pool, ["narwhal"])) == sorted([a["page_id"], b["page_id"]])
    finally:
        tw2.close()


def test_deleted_or_outdated_index_is_rebuilt_while_readers_use_fts5(ix) -> None:
    wh, tw, pool = ix
    a = wh.ok("page.write", {"path": "notes/a.md", "body": "# A\n\nokapi"})
    tw.close()
    shutil.rmtree(wh.settings.search_dir)
    assert not pool.text_index.available()
    assert [h["page_id"] for h in pool.call(memory_query, "okapi", None).to_json()["hits"]] == [a["page_id"]]  # FTS5
    tw2 = TextIndexWriter(wh.settings.search_dir, wh.settings.db_path)
    tw2.start(wh.conn)
    assert tw2.wait_ready(30) and found(pool, ["okapi"]) == [a["page_id"]]
    tw2.close()
    # A marker of another index version: rebuilt, not trusted.
    ti.marker_path(wh.settings.search_dir).write_text("aimem-pages-0\n")
    assert not pool.text_index.available()
    tw3 = TextIndexWriter(wh.settings.search_dir, wh.settings.db_path)
    tw3.start(wh.conn)
    assert not tw3.ready or tw3.wait_ready(30)
    assert tw3.wait_ready(30) and found(pool, ["okapi"]) == [a["page_id"]]
    # A damaged index: its files are gone under a complete marker.
    tw3.close()
    for f in ti.index_dir(wh.settings.search_dir).iterdir():
        f.unlink()
    assert not pool.text_index.available()
    tw4 = TextIndexWriter(wh.settings.search_dir, wh.settings.db_path)
    tw4.start(wh.conn)
    assert tw4.wait_ready(30) and found(pool, ["okapi"]) == [a["page_id"]]
    wh.applier.text_index = tw4
    b = wh.ok("page.write", {"path": "notes/b.md", "body": "# B\n\nokapi again"})
    assert sorted(found(pool, ["okapi"])) == sorted([a["page_id"], b["page_id"]])
    tw4.close()


def test_changes_during_a_rebuild_are_indexed_before_the_marker(wh) -> None:
    for i in range(300):
        wh.ok("page.write", {"path": f"notes/{i}.md", "body": f"# N{i}\n\nfiller text {i}"})
    tw = TextIndexWriter(wh.settings.search_dir, wh.settings.db_path)
    wh.applier.text_index = tw
    tw.start(wh.conn)  # no index yet: rebuilding in the background
    late = wh.ok("page.write", {"path": "notes/late.md", "body": "# Late\n\naardvark"})
    wh.ok("page.delete", {"path": "notes/0.md"})
    assert tw.wait_ready(60)
    pool = ReaderPool(wh.settings.db_path, size=1, budget_ms=0, text_index_dir=wh.settings.search_dir)
    try:
        assert found(pool, ["aardvark"]) == [late["page_id"]]
        assert pool.text_index.info()["docs"] == 300  # 300 written + late - deleted
        wh.ok("page.write", {"path": "notes/after.md", "body": "# After\n\naardvark"})
        assert outbox(wh) == 0 and len(found(pool, ["aardvark"])) == 2
    finally:
        pool.close()
        tw.close()


def test_live_page_count_of_a_project_comes_from_the_index(ix) -> None:
    from aimem_common.search.sql import live_page_count

    wh, _, pool = ix
    for i in range(7):
        wh.ok("page.write", {"path": f"notes/{i}.md", "body": f"# {i}\n\ntext"}, pj="app")
    for i in range(3):
        wh.ok("page.write", {"path": f"notes/{i}.md", "body": f"# {i}\n\ntext"}, pj="lib")
    wh.ok("page.write", {"path": "notes/1.md", "body": "# 1\n\nnew text"}, pj="app")
    wh.ok("page.delete", {"path": "notes/2.md"}, pj="app")
    scopes = {s.project: s for s in pool.call(all_scopes)}
    assert pool.text_index.count([project_id(wh, "app")]) == 6
    with pool.connection() as conn:
        assert live_page_count(conn, [scopes["app"]]) == 6
        assert live_page_count(conn, [scopes["app"], scopes["lib"]]) == 9
        conn.text_index = None  # the SQL count agrees
        assert live_page_count(conn, [scopes["app"], scopes["lib"]]) == 9


def test_disabled_index_is_removed_and_the_outbox_kept_empty(ix) -> None:
    wh, tw, pool = ix
    wh.ok("page.write", {"path": "notes/a.md", "body": "# A\n\nibex"})
    tw.close()
    off = TextIndexWriter(wh.settings.search_dir, wh.settings.db_path, enabled=False)
    wh.applier.text_index = off
    off.start(wh.conn)
    assert not ti.is_complete(wh.settings.search_dir) and not pool.text_index.available()
    wh.ok("page.write", {"path": "notes/b.md", "body": "# B\n\nibex"})
    assert outbox(wh) == 0
    assert len(pool.call(memory_query, "ibex", None).to_json()["hits"]) == 2  # FTS5


def test_reindex_leaves_the_index_to_a_rebuild_from_the_new_db(ix) -> None:
    import subprocess
    import sys

    wh, tw, pool = ix
    wh.ok("page.write", {"path": "concepts/a.md", "body": "# A\n\nalpaca"})
    assert ti.is_complete(wh.settings.search_dir)
    tw.close()
    wh.close()
    for p in wh.settings.db_path.parent.glob("memory.sqlite*"):
        p.unlink()
    done = subprocess.run([sys.executable, "-m", "aimem_writer.reindex", "--data-dir", str(wh.settings.data_dir)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not ti.is_complete(wh.settings.search_dir)  # the old DB's index is gone
    from aimem_common.db.connect import open_writer

    wh.conn = open_writer(wh.settings.db_path)
    assert outbox(wh) == 0  # not replayed page by page: rebuilt in bulk at the writer's start
    tw2 = TextIndexWriter(wh.settings.search_dir, wh.settings.db_path)
    tw2.start(wh.conn)
    try:
        assert tw2.wait_ready(30)
        assert found(pool, ["alpaca"]) == [live_id(wh, "concepts/a.md")]
    finally:
        tw2.close()


def test_index_dir_removed_under_the_writer_never_stops_the_writer(ix) -> None:
    """Files gone under a running writer: its index commit fails, and the rollback of that
    tantivy writer then panics (a BaseException). Every batch still commits and replies, the
    rows stay in the outbox, and searches use FTS5 (the marker went with the files)."""
    wh, tw, pool = ix
    tw._backoff_s = 3600.0  # no rebuild retry within this test (a slow box must not race it)
    shutil.rmtree(wh.settings.search_dir)
    ids = [wh.ok("page.write", {"path": f"notes/{i}.md", "body": f"# N\n\nquokka {i}"})["page_id"] for i in range(3)]
    assert outbox(wh) == 3 and tw.failed and tw.failed.startswith("drain:")
    res = pool.call(memory_query, "quokka", None).to_json()
    assert sorted(h["page_id"] for h in res["hits"]) == sorted(ids)


def test_damaged_postings_fall_back_to_fts5(ix) -> None:
    """Postings damaged under a complete marker make tantivy panic while searching: the
    search falls back to FTS5 (never an error), and so do the next ones without searching
    the damaged files again until the writer commits."""
    wh, tw, pool = ix
    ids = [wh.ok("page.write", {"path": f"notes/{i}.md", "body": f"# N{i}\n\nplatypus burrow {i} " + "river " * 50})["page_id"]
           for i in range(40)]
    assert sorted(found(pool, ["platypus"])) == sorted(ids)
    for f in ti.index_dir(wh.settings.search_dir).glob("*.idx"):
        # In place, same length: the readers of this process have the file mapped, and a
        # truncating write (write_bytes) would end the process with SIGBUS, not test a search.
        data = bytearray(f.read_bytes())
        for off in range(len(data) // 4, len(data) // 2, 7):
            data[off] ^= 0xFF
        with f.open("r+b") as fh:
            fh.write(bytes(data))
    res = pool.call(memory_query, "platypus burrow river", None, options=QueryOptions(limit=50)).to_json()
    assert sorted(h["page_id"] for h in res["hits"]) == sorted(ids)
    assert pool.text_index.search(["platypus"], None, 10) is None


def test_a_term_in_every_live_page_after_an_edit_is_searched_on_the_index(ix) -> None:
    """tantivy's doc_freq still counts the superseded version of an edited page (until its
    segment is merged), so a term in every live page has df > num_docs: its idf boost must
    not fail (it raised "math domain error", and every such search went to FTS5)."""
    wh, tw, pool = ix
    # both pages in one index segment, so the edit's delete stays in a segment that has live docs
    wh.ok("page.write_batch", {"pages": [{"path": "notes/a.md", "body": "# A\n\nmarmot one", "create_only": True},
                                         {"path": "notes/b.md", "body": "# B\n\nmarmot two", "create_only": True}]})
    b2 = wh.ok("page.write", {"path": "notes/b.md", "body": "# B\n\nmarmot two, edited"})
    searcher = ti.open_index(ti.index_dir(wh.settings.search_dir)).searcher()
    assert searcher.doc_freq("text", "marmot") > searcher.num_docs == 2
    assert sorted(found(pool, ["marmot"])) == sorted([live_id(wh, "notes/a.md"), b2["page_id"]])
    assert ti.fts5_idf_ratio(2, 3) == ti.fts5_idf_ratio(2, 2)


class _FailingCommit:
    """A tantivy writer whose commit fails as on a full disk (everything else passes through)."""

    def __init__(self, inner):
        self.inner = inner

    def commit(self):
        raise ValueError("No space left on device (os error 28)")

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_failed_index_commit_hands_searches_to_fts5_and_a_rebuild_catches_up(ix, monkeypatch) -> None:
    """When the index cannot take a batch (disk full, damaged files) it lags the DB: the
    marker goes at once, so readers answer from FTS5 and find the pages just written (before,
    they kept trusting the stale index and missed them); ``/healthz`` says why; the next
    drain past the backoff rebuilds the index, which then holds every page."""
    import aimem_writer.textindex as wti

    wh, tw, pool = ix
    first = wh.ok("page.write", {"path": "notes/a.md", "body": "# A\n\nwombat one"})["page_id"]
    monkeypatch.setattr(wti, "REBUILD_BACKOFF_MIN_S", 0.0)
    tw._backoff_s = 0.0
    tw._writer = _FailingCommit(tw._writer)
    second = wh.ok("page.write", {"path": "notes/b.md", "body": "# B\n\nwombat two"})["page_id"]
    assert not ti.is_complete(wh.settings.search_dir) and not tw.ready
    assert tw.status() == {"enabled": True, "ready": False, "failed": "drain: No space left on device (os error 28)"}
    assert pool.text_index.search(["wombat"], None, 10) is None  # FTS5 answers
    res = pool.call(memory_query, "wombat", None).to_json()
    assert sorted(h["page_id"] for h in res["hits"]) == sorted([first, second])
    assert outbox(wh) == 1
    third = wh.ok("page.write", {"path": "notes/c.md", "body": "# C\n\nwombat three"})["page_id"]  # starts the rebuild
    assert tw.wait_ready(30) and tw.status()["failed"] is None
    wh.ok("page.write", {"path": "notes/d.md", "body": "# D\n\nunrelated"})  # a drain on the rebuilt index
    assert sorted(found(pool, ["wombat"])) == sorted([first, second, third])
    assert outbox(wh) == 0


def test_unicode_forms_of_a_word_find_each_other(ix) -> None:
    """The index holds NFC text and İ as I (lower-cased, İ is i + a combining dot, which the
    tokenizer would split off): a page's NFD or Turkish word is found by its usual spellings."""
    wh, _, pool = ix
    nfd = wh.ok("page.write", {"path": "notes/nfd.md", "body": "# Contract\n\nAme\u0301lie signed it.\n"})
    tr = wh.ok("page.write", {"path": "notes/tr.md", "body": "# Trip\n\nThe team met in İstanbul.\n"})
    for q, want in [("Amélie", nfd), ("amelie", nfd), ("İstanbul", tr), ("İSTANBUL", tr), ("istanbul", tr)]:
        res = pool.call(memory_query, q, None, options=QueryOptions(explain=True)).to_json()
        assert [h["page_id"] for h in res["hits"]] == [want["page_id"]], q
    assert pool.text_index.available()
