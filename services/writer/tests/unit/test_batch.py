"""The batch transaction: dedupe replies, isolation of bad commands, outbox, checkpoints, hand edits."""

from __future__ import annotations


import json

import pygit2
import pytest

from aimem_common.errors import ConflictError

from aimem_writer.lock import WriterLock, writer_alive
from aimem_writer.reindex import index_hand_edits, rebuild
from aimem_writer.wiki import FileOp, replay_outbox, store_outbox


def test_duplicate_key_gets_the_stored_reply(wh) -> None:
    env = wh.envelope("page.write", {"path": "notes/a.md", "body": "x"}, key="k1")
    first = wh.batch([env])[0]
    again = wh.envelope("page.write", {"path": "notes/a.md", "body": "different"}, key="k1")
    second = wh.batch([again])[0]
    assert second["duplicate"] is True and second["result"] == first["result"]
    assert second["cmd_id"] == again.cmd_id
    assert wh.count("SELECT count(*) FROM pages") == 1
    # Inside one batch too, and error replies are stored as well.
    bad = wh.envelope("page.delete", {"path": "notes/a.md"}, pj="missing", key="k2")
    r = wh.batch([bad, bad])
    assert r[0]["error"]["code"] == "not_found" and r[1]["duplicate"] and r[1]["error"] == r[0]["error"]


def test_bad_commands_do_not_block_the_batch(wh) -> None:
    envs = [
        wh.envelope("page.write", {"path": "notes/1.md", "body": "one"}),
        wh.envelope("page.write", {"path": "../x.md", "body": "bad"}),
        wh.envelope("no.such_op", {}),
        wh.envelope("page.write", {"path": "notes/2.md", "body": "two", "bogus": 1}),
        wh.envelope("page.write", {"path": "notes/3.md", "body": "three"}),
    ]
    replies = wh.batch(envs, raw=[b"not json", b'{"op": 1}'])
    assert [r["ok"] for r in replies] == [True, False, False, False, True, False, False]
    assert [r["error"]["code"] for r in replies if not r["ok"]] == [
        "invalid_path", "unknown_op", "invalid_payload", "invalid_envelope", "invalid_envelope"]
    assert wh.count("SELECT count(*) FROM pages") == 2
    errors = wh.applier.metrics.errors
    assert errors.labels("page.write", "invalid_path")._value.get() == 1


def _savepoints_during(wh, envs) -> tuple[list[dict], int]:
    """Apply ``envs`` as one batch; return the replies and how many command savepoints SQLite saw."""
    seen: list[str] = []
    wh.conn.set_trace_callback(seen.append)
    try:
        replies = wh.batch(envs)
    finally:
        wh.conn.set_trace_callback(None)
    return replies, sum(1 for sql in seen if sql == "SAVEPOINT cmd")


def test_a_clean_batch_runs_without_savepoints(wh) -> None:
    envs = [wh.envelope("observation.append", {"session_id": "s", "kind": "user-prompt", "title": f"t{i}",
                                               "body": "b", "agent": "claude-code", "sanitized": True})
            for i in range(5)]
    replies, savepoints = _savepoints_during(wh, envs)
    assert all(r["ok"] for r in replies) and savepoints == 0
    assert wh.count("SELECT count(*) FROM observations") == 5
    assert wh.count("SELECT observation_count FROM sessions WHERE session_id = 's'") == 5


def test_a_command_failing_after_it_wrote_is_rolled_back_alone(wh) -> None:
    # page.write_batch writes its first page, then fails on the second: without a savepoint
    # the first page would stay. The batch is re-applied with one savepoint per command.
    obs = {"kind": "user-prompt", "title": "t", "body": "b", "agent": "claude-code", "sanitized": True}
    envs = [
        wh.envelope("observation.append", {"session_id": "s", **obs}),
        wh.envelope("page.write_batch", {"pages": [{"path": "notes/first.md", "body": "one"},
                                                   {"path": "notes/dup.md", "body": "x", "expected_page_id": 999999}]}),
        wh.envelope("observation.append", {"session_id": "s", **obs}),
    ]
    replies, savepoints = _savepoints_during(wh, envs)
    assert [r["ok"] for r in replies] == [True, False, True]
    assert replies[1]["error"]["data"]["index"] == 1
    assert savepoints == 3  # the second attempt, one per command
    assert wh.count("SELECT count(*) FROM pages") == 0
    assert not wh.page_file("notes/first.md").exists()
    assert wh.count("SELECT count(*) FROM observations") == 2
    assert wh.count("SELECT observation_count FROM sessions WHERE session_id = 's'") == 2
    ids = [r["result"]["observation_id"] for r in (replies[0], replies[2])]
    assert wh.count("SELECT count(*) FROM ingest_keys") == 3 and ids[0] < ids[1]


def test_outbox_replay_repairs_a_crash_after_commit(wh) -> None:
    wh.ok("page.write", {"path": "notes/a.md", "body": "x"})
    rel = str(wh.page_file("notes/a.md").relative_to(wh.wiki.root))
    # Simulate: committed to SQLite, process died before the flush.
    wh.conn.execute("BEGIN IMMEDIATE")
    store_outbox(wh.conn, [FileOp(rel, "write", "recovered\n")], "now")
    wh.conn.execute("COMMIT")
    assert replay_outbox(wh.conn, wh.wiki) == 1
    assert wh.page_file("notes/a.md").read_text() == "recovered\n"
    assert wh.count("SELECT count(*) FROM wiki_outbox") == 0


def test_checkpoint_names_the_ops_and_skips_ledgers(wh) -> None:
    wh.obs("s", "user-prompt", "Prompt: hi", "hi")
    wh.ok("page.write", {"path": "notes/a.md", "body": "x"})
    wh.ok("page.write", {"path": "notes/b.md", "body": "y"})
    oid = wh.applier.checkpoint()
    repo = pygit2.Repository(str(wh.wiki.root))
    msg = repo[oid].message
    assert "page.write×2" in msg and "observation.append×1" in msg
    paths = wh.wiki.head_tree_paths()
    assert any(p.endswith("notes/a.md") for p in paths) and not any("/log-" in p for p in paths)
    assert wh.applier.checkpoint() is None  # nothing dirty


def test_hand_edits_are_indexed_and_own_writes_ignored(wh) -> None:
    a = wh.ok("page.write", {"path": "notes/a.md", "body": "original text"})
    f = wh.page_file("notes/a.md")
    rel = str(f.relative_to(wh.wiki.root))
    assert index_hand_edits(wh.applier, [rel]) == []  # the writer's own file: no-op
    f.write_text(f.read_text().replace("original text", "edited by hand in vim"))
    events = index_hand_edits(wh.applier, [rel])
    assert [e.kind for e in events] == ["page.changed"]
    row = wh.conn.execute("SELECT * FROM pages WHERE path='notes/a.md' AND is_latest=1").fetchone()
    assert row["supersedes"] == a["page_id"] and "edited by hand" in row["body"] and row["actor"] == "wiki-watcher"
    new = wh.scope_dir() / "concepts" / "new.md"
    new.parent.mkdir()
    new.write_text("# Brand new\n\nlinks [[notes/a.md]]\n")
    broken = wh.scope_dir() / "concepts" / "broken.md"
    broken.write_text("---\ntitle: [oops\n---\nbody\n")
    index_hand_edits(wh.applier, [str(new.relative_to(wh.wiki.root)), str(broken.relative_to(wh.wiki.root))])
    assert wh.count("SELECT count(*) FROM pages WHERE path='concepts/new.md' AND title='Brand new'") == 1
    assert wh.count("SELECT count(*) FROM pages WHERE path='concepts/broken.md'") == 0
    f.unlink()
    index_hand_edits(wh.applier, [rel])
    assert wh.count("SELECT count(*) FROM pages WHERE path='notes/a.md' AND is_latest=1") == 0


def test_writer_lock_and_rebuild(wh, tmp_path) -> None:
    wh.ok("page.write", {"path": "concepts/a.md", "body": "alpha links [[infra:b.md]]",
                         "frontmatter": {"entities": ["Zebra"]}})
    wh.ok("page.write", {"path": "b.md", "body": "beta"}, ws="team", pj="infra")
    wh.ok("page.write", {"path": "b.md", "body": "beta"}, pj="infra")
    wh.obs("s", "user-prompt", "Prompt", "ledger only")
    settings = wh.settings
    lock = WriterLock(settings.data_dir).acquire()
    assert writer_alive(settings.data_dir)
    with pytest.raises(ConflictError) as exc:
        rebuild(settings)
    assert exc.value.code == "writer_alive"
    lock.release()
    assert not writer_alive(settings.data_dir)
    with pytest.raises(ConflictError) as exc:
        rebuild(settings)
    assert exc.value.code == "db_not_empty"
    before = {tuple(r) for r in wh.conn.execute("SELECT workspace_id, project_id, path, title, body FROM pages")}
    wh.close()
    for suffix in ("", "-wal", "-shm"):
        p = settings.db_path.with_name(settings.db_path.name + suffix)
        if p.exists():
            p.unlink()
    report = rebuild(settings)
    assert (report.workspaces, report.projects, report.pages) == (2, 3, 3)
    from aimem_common.db.connect import open_writer

    conn = open_writer(settings.db_path)
    try:
        after = {tuple(r) for r in conn.execute("SELECT workspace_id, project_id, path, title, body FROM pages")}
        assert after == before
        link = conn.execute("SELECT to_page_id FROM links").fetchone()[0]
        target = conn.execute("SELECT p.workspace_id, w.name FROM pages p JOIN workspaces w ON w.id=p.workspace_id"
                              " WHERE p.id=?", (link,)).fetchone()
        assert target[1] == "default"
        assert conn.execute("SELECT count(*) FROM entities WHERE name='zebra'").fetchone()[0] == 1
    finally:
        conn.close()
    wh.conn = open_writer(settings.db_path)  # for the fixture's close()


def test_observations_are_parsed_with_their_payload_and_bad_ones_still_answered(wh) -> None:
    good = {"session_id": "s", "kind": "user-prompt", "title": "t", "body": "b", "agent": "claude-code",
            "sanitized": True}
    envs = [wh.envelope("observation.append", good),
            wh.envelope("observation.append", {**good, "kind": "no-such-kind"}),
            wh.envelope("observation.append", {**good, "bogus": 1}),
            wh.envelope("observation.append", {**good, "sanitized": False})]
    spaced = json.dumps(json.loads(wh.envelope("observation.append", good).model_dump_json())).encode()
    assert b'"op": "observation.append"' in spaced  # not the compact form: the plain parse
    replies = wh.batch(envs, raw=[spaced])
    assert [r["ok"] for r in replies] == [True, False, False, False, True]
    assert [r["error"]["code"] for r in replies if not r["ok"]] == ["invalid_payload"] * 3
    assert wh.count("SELECT count(*) FROM observations") == 2
