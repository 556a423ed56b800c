"""Forget sweep through real writer + maintainer processes: the dry run predicts exactly."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from aimem_common import maint_rpc
from aimem_common.db.connect import open_reader
from aimem_common.commands import make_envelope

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]


async def write(bus, project, path, body="text", **fm):
    env = make_envelope("page.write", {"path": path, "body": body, "frontmatter": fm}, project=project)
    return (await bus.request(env))["page_id"]


async def test_sweep_dry_run_predicts_real_run(settings, services, bus, tmp_path):
    services("writer", "maintainer")
    now = datetime.now(UTC)
    ids = {
        "cold_note": await write(bus, "alpha", "notes/cold.md", salience=0.1),
        "warm_note": await write(bus, "alpha", "notes/warm.md"),
        "pinned_cold": await write(bus, "alpha", "notes/pinned.md", salience=0.1, pinned=True),
        "concept": await write(bus, "alpha", "concepts/idea.md", salience=0.1),
        "ttl_pinned": await write(bus, "alpha", "concepts/ttl.md", pinned=True,
                                  expires_at=(now + timedelta(days=3)).isoformat()),
        "old_session": await write(bus, "alpha", "sessions/s-old.md"),
        "slot": await write(bus, "alpha", "_slots/focus.md", salience=0.1),
    }
    other = await write(bus, "beta", "notes/cold.md", salience=0.1)  # same path, other project
    as_of = (now + timedelta(days=10)).isoformat()  # old_session: e^-0.2 = 0.82, stays

    async def sweep(**args):
        return await maint_rpc.call(bus.nc, "forget_sweep", workspace="default", project="alpha", actor="test",
                                    args={"as_of": as_of, **args}, timeout_s=30)

    dry = await sweep(dry_run=True)
    assert dry["expired"] == [ids["ttl_pinned"]]
    assert dry["evicted"] == [ids["cold_note"]]
    assert dry["purged"] == []
    real = await sweep()
    applied = real["applied"]
    assert (applied["expired"], applied["evicted"], applied["purged"]) == (dry["expired"], dry["evicted"], dry["purged"])
    assert applied["skipped"] == []

    conn = open_reader(settings.db_path)
    try:
        rows = {r["path"]: dict(r) for r in conn.execute(
            "SELECT path, is_latest, retired_reason FROM pages WHERE project_id = (SELECT id FROM projects WHERE name='alpha')")}
        assert rows["notes/cold.md"]["is_latest"] == 0 and rows["notes/cold.md"]["retired_reason"] == "evicted"
        assert "concepts/ttl.md" not in rows  # hard delete: no row left
        for keep in ("notes/warm.md", "notes/pinned.md", "concepts/idea.md", "sessions/s-old.md", "_slots/focus.md"):
            assert rows[keep]["is_latest"] == 1
        assert conn.execute("SELECT is_latest FROM pages WHERE id = ?", (other,)).fetchone()[0] == 1
        # FTS no longer finds the evicted page.
        hits = conn.execute("SELECT rowid FROM pages_fts WHERE pages_fts MATCH 'text'").fetchall()
        assert ids["cold_note"] not in {h[0] for h in hits}
    finally:
        conn.close()
    await asyncio.sleep(0.8)  # let the writer's debounced checkpoint flush the wiki files
    wiki_files = {p.relative_to(settings.wiki_dir).as_posix().split("/", 2)[2] for p in settings.wiki_dir.rglob("*.md")
                  if p.name != "_meta.md" and p.relative_to(settings.wiki_dir).as_posix().count("/") >= 2}
    assert "notes/cold.md" in wiki_files  # beta's copy
    assert "concepts/ttl.md" not in wiki_files

    # A page recreated at the evicted path survives the later tombstone purge.
    recreated = await write(bus, "alpha", "notes/cold.md", body="recreated")
    as_of = (now + timedelta(days=200)).isoformat()
    dry2 = await sweep(dry_run=True)
    assert dry2["purged"] == [ids["cold_note"]]
    real2 = await sweep()
    assert real2["applied"]["purged"] == dry2["purged"] and real2["applied"]["evicted"] == dry2["evicted"]
    conn = open_reader(settings.db_path)
    try:
        assert conn.execute("SELECT count(*) FROM pages WHERE id = ?", (ids["cold_note"],)).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM pages WHERE id = ?", (recreated,)).fetchone()[0] == 1
    finally:
        conn.close()


def _month(now: datetime, back: int) -> str:
    i = now.year * 12 + now.month - 1 - back
    return f"{i // 12:04d}-{i % 12 + 1:02d}"


async def test_sweep_prunes_old_monthly_ledgers_as_its_dry_run_says(settings, services, bus):
    """[decay] ledger_retention_months: ledgers past it go in the sweep (the dry run lists the
    same names); the current and previous month and other projects are never touched."""
    services("writer", "maintainer", extra_env={"AIMEM_DECAY__LEDGER_RETENTION_MONTHS": "3"})
    await write(bus, "alpha", "notes/a.md")
    await write(bus, "beta", "notes/b.md")
    conn = open_reader(settings.db_path)
    try:
        dirs = {r[0]: settings.wiki_dir / r[1] / r[2] for r in conn.execute(
            "SELECT p.name, w.id, p.id FROM projects p JOIN workspaces w ON w.id = p.workspace_id")}
    finally:
        conn.close()
    now = datetime.now(UTC)
    names = {back: f"log-{_month(now, back)}.md" for back in (0, 1, 2, 3, 14)}
    for name in names.values():
        (dirs["alpha"] / name).write_text("- hook line\n")
    (dirs["beta"] / names[14]).write_text("- other project\n")

    async def sweep(**args):
        return await maint_rpc.call(bus.nc, "forget_sweep", workspace="default", project="alpha", actor="test",
                                    args=args, timeout_s=30)

    dry = await sweep(dry_run=True)
    assert dry["ledgers"] == sorted([names[3], names[14]]) and dry["counts"]["ledgers_pruned"] == 2
    assert all((dirs["alpha"] / n).exists() for n in names.values())  # the dry run deletes nothing
    real = await sweep()
    assert real["applied"]["ledgers_pruned"] == dry["ledgers"]
    left = sorted(p.name for p in dirs["alpha"].glob("log-*.md"))
    assert left == sorted([names[0], names[1], names[2]])
    assert (dirs["beta"] / names[14]).exists()

    # the writer itself never deletes the current or previous month's ledger, whatever a plan says
    env = make_envelope("sweep.apply", {"prune_ledgers": [names[0], names[1], names[2]]}, project="alpha")
    res = await bus.request(env)
    assert res["ledgers_pruned"] == [names[2]]
    assert sorted(p.name for p in dirs["alpha"].glob("log-*.md")) == sorted([names[0], names[1]])
