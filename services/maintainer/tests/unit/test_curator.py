"""The curator's merge / split / retire findings over a seeded store."""

from __future__ import annotations

from aimem_common.read.scopes import all_scopes
from aimem_maintainer.curator import curate, render
from aimem_testing.seed import NOW

WAL = ("SQLite runs in WAL mode so readers never block the single writer; checkpoints run after each "
       "batch and the WAL file is truncated when it grows past its limit")


def test_curator_finds_merge_split_and_retire(seed):
    a = seed.project("alpha")
    seed.page(a, "concepts/wal.md", WAL, title="WAL mode", access_count=3)
    seed.page(a, "gotchas/wal-again.md", WAL + " in production", title="WAL again", access_count=3)
    seed.page(a, "decisions/dup1.md", "one thing", title="Same Title", access_count=1)
    seed.page(a, "decisions/dup2.md", "another thing entirely", title="same  title", access_count=1)
    big = "\n".join(f"## Part {i}\n\n" + "text " * 600 for i in range(4))
    seed.page(a, "procedures/big.md", big, title="Big", access_count=2)
    flagged = seed.page(a, "concepts/flagged.md", "an old claim about ports", title="Flagged", access_count=9)
    seed.page(a, "concepts/idle.md", "nobody reads this", title="Idle", age_days=400)
    seed.page(a, "concepts/idle-but-read.md", "read once", title="Read", age_days=400, access_count=1)
    seed.page(a, "sessions/s1.md", WAL, title="Session page is not knowledge", age_days=400)
    for sig in ("stale", "wrong"):
        seed.conn.execute("INSERT INTO page_feedback(workspace_id, project_id, page_id, path, signal, created_at)"
                          " VALUES (?,?,?,?,?,?)", (a.workspace_id, a.project_id, flagged, "concepts/flagged.md",
                                                    sig, "2026-05-01"))
    scope = all_scopes(seed.conn)[0]
    got = {(f["action"], tuple(f["paths"])) for f in curate(seed.conn, scope, now=NOW)}
    assert got == {
        ("merge", ("concepts/wal.md", "gotchas/wal-again.md")),
        ("merge", ("decisions/dup1.md", "decisions/dup2.md")),
        ("split", ("procedures/big.md",)),
        ("retire", ("concepts/flagged.md",)),
        ("retire", ("concepts/idle.md",)),
    }
    findings = curate(seed.conn, scope, now=NOW)
    page = render(scope, findings)
    assert "## Merge (2)" in page and "## Split (1)" in page and "## Retire (2)" in page and "[[" not in page
    assert render(scope, curate(seed.conn, scope, now=NOW)) == page  # deterministic: unchanged = no new version


def test_curator_on_a_tidy_project_says_so(seed):
    a = seed.project("alpha")
    seed.page(a, "concepts/one.md", "a single page", title="One", access_count=1)
    scope = all_scopes(seed.conn)[0]
    assert curate(seed.conn, scope, now=NOW) == []
    assert "Nothing to merge, split or retire." in render(scope, [])
