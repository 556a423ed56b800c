"""A purge leaves none of the purged text anywhere in the store, nor in a later backup
(real stack: ``aimem up`` with nats-server, writer, ingress, query, mcp-gateway, maintainer).

The rule (``aimem_writer.forget``): purging a session, a project or a workspace deletes its
rows and, in the same writer transaction,

* replaces every stored reply (``ingest_keys.result``) of the purged project's commands and
  every stored reply that names a purged session id with a ``purged`` error (410). The
  idempotency key stays: a re-sent command is answered from the ledger — never applied
  again — with that marker, not with a reply with holes (which fields carry text differs by
  op, and a caller could not tell a stripped handoff from a real one);
* deletes the dead letters of the purged place or naming a purged session;
* merges every FTS5 index so no segment keeps a deleted row's terms;
* and the writer runs with ``PRAGMA secure_delete = ON`` (deleted content is zeroed, not left
  in free pages) and truncates the WAL right after the purge commits.

The test seeds one unique word through every write path that reaches the store — a hook
prompt and a reply (observations, their FTS and trigram indexes, the hook ledger), the session
end (session page, handoff), the next session's start (``handoff.accept``, whose stored reply
holds the handoff's title and body), a profile entry stated in the session over MCP, and a
command the writer gave up on (a dead letter) — checks the word is in the store, purges the
session, then reads every row of every table of the SQLite file (FTS shadow tables
included), the bytes of the file and of its WAL, and every member of a fresh
``aimem backup`` archive, and finds it nowhere. A re-sent ``handoff.accept`` with the stored
key is answered with the ``purged`` marker and claims nothing.

Not covered: the wiki's git history (``wiki/.git``, compressed objects) keeps the text of a
page committed before the purge, by design of the checkpoints.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import sqlite3
import subprocess
import sys
import tarfile
import time
import uuid
from pathlib import Path

import httpx
import pytest

from aimem_common import bus as busmod
from aimem_common.commands import make_envelope
from aimem_common.commands.handoffs import HandoffAccept
from aimem_testing.stack import LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

AIMEM = str(Path(sys.executable).with_name("aimem"))
WORD = "Quokkazebracorn" + uuid.uuid4().hex[:8]  # seeded everywhere, found nowhere after the purge
PROJECT = "pay"
CWD = "/src/pay"


def hook(live: LocalStack, sid: str, event: str, project: str = PROJECT, **fields) -> httpx.Response:
    body = {"session_id": sid, "cwd": f"/src/{project}", "hook_event_name": event, "project": project, **fields}
    return httpx.post(live.url("ingress") + "/hook?agent=claude-code", json=body, headers=live.headers, timeout=30)


def start_context(live: LocalStack, sid: str) -> httpx.Response:
    body = {"session_id": sid, "cwd": CWD, "hook_event_name": "SessionStart", "source": "startup",
            "project": PROJECT}
    return httpx.post(live.url("ingress") + "/hook/session-start-context?agent=claude-code", json=body,
                      headers=live.headers, timeout=30)


def db(live: LocalStack) -> Path:
    return live.data_dir / "db" / "memory.sqlite"


def ro(live: LocalStack, sql: str, *args) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db(live)}?mode=ro", uri=True)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def wait_for(fn, what: str, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out = fn()
        if out:
            return out
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def tables_holding(live: LocalStack, word: str) -> dict[str, int]:
    """Every table of the file (virtual ones and FTS shadow tables too) → rows holding ``word``
    in any column, text or blob."""
    needle = word.encode()
    conn = sqlite3.connect(f"file:{db(live)}?mode=ro", uri=True)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        out: dict[str, int] = {}
        for name in names:
            try:
                rows = conn.execute(f'SELECT * FROM "{name}"').fetchall()
            except sqlite3.OperationalError:  # a contentless FTS table reads no columns back
                continue
            hits = sum(1 for row in rows for v in row
                       if (isinstance(v, str) and word.lower() in v.lower())
                       or (isinstance(v, bytes) and needle.lower() in v.lower()))
            if hits:
                out[name] = hits
        return out
    finally:
        conn.close()


def in_bytes(path: Path, word: str) -> bool:
    return path.exists() and word.lower().encode() in path.read_bytes().lower()


def backup_members_holding(live: LocalStack, tmp: Path, word: str) -> list[str]:
    """Take ``aimem backup`` now; the archive members (and the whole gunzipped stream) holding ``word``."""
    to = tmp / "after.tar.gz"
    proc = subprocess.run([AIMEM, "backup", "--to", str(to)], env=live.client_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    needle = word.lower().encode()
    found = ["<stream>"] if needle in gzip.decompress(to.read_bytes()).lower() else []
    with tarfile.open(to) as tar:
        for m in tar.getmembers():
            f = tar.extractfile(m) if m.isfile() else None
            if f is not None and needle in f.read().lower():
                found.append(m.name)
    return found


async def replay_accept(live: LocalStack, key: str) -> dict:
    """Send ``handoff.accept`` again under a stored key (a JetStream redelivery or a re-sent
    command looks so to the writer); return the writer's reply."""
    import nats

    nc = await nats.connect(live.nats_url.split(","), token=live.token, allow_reconnect=False)
    try:
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        env = make_envelope("handoff.accept", HandoffAccept(cwd=CWD, agent="claude-code", session_id="p3"),
                            project=PROJECT).model_copy(update={"cmd_id": key})
        js = nc.jetstream()
        await js.publish(busmod.mut_subject(env.op), env.model_dump_json().encode(),
                         headers={busmod.MSG_ID_HEADER: uuid.uuid4().hex, busmod.REPLY_HEADER: inbox})
        msg = await sub.next_msg(timeout=20)
        return json.loads(msg.data)
    finally:
        await nc.close()


async def dead_letter(live: LocalStack) -> None:
    """A command nobody waits for and the writer cannot apply (an unknown observation kind):
    kept whole, with its text, as a dead letter."""
    import nats

    from aimem_common.commands.envelope import Envelope, ScopeRef

    env = Envelope(op="observation.append", cmd_id=uuid.uuid4().hex, scope=ScopeRef(workspace="default", project=PROJECT),
                   payload={"session_id": "p1", "kind": "no-such-kind", "agent": "claude-code", "cwd": CWD,
                            "title": f"late {WORD}", "body": f"late {WORD} body"})
    nc = await nats.connect(live.nats_url.split(","), token=live.token, allow_reconnect=False)
    try:
        await nc.jetstream().publish(busmod.mut_subject(env.op), env.model_dump_json().encode(),
                                     headers={busmod.MSG_ID_HEADER: env.cmd_id})
    finally:
        await nc.close()


async def profile_in_session(live: LocalStack, project: str = PROJECT, word: str = WORD, sid: str = "p1") -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    transport = streamable_http_client(live.url("mcp-gateway") + "/mcp", http_client=httpx2.AsyncClient(
        headers=live.headers, timeout=60))
    async with Client(transport, mode="legacy") as c:
        res = await c.call_tool("memory_profile", {"action": "add", "text": f"I prefer {word} naming",
                                                   "project": project, "session_id": sid})
        assert not res.is_error, res


def test_a_purged_session_leaves_no_text_in_any_table_file_wal_or_backup(live: LocalStack, tmp_path) -> None:
    # Seed the word through every write path.
    for event, extra in (("SessionStart", {"source": "startup"}),
                         ("UserPromptSubmit", {"prompt": f"rotate the {WORD} key"}),
                         ("Stop", {"last_assistant_message": f"Rotated {WORD}."}),
                         ("SessionEnd", {"reason": "exit"})):
        r = hook(live, "p1", event, **extra)
        assert r.status_code == 202, r.text
    wait_for(lambda: ro(live, "SELECT 1 FROM handoffs WHERE from_session_id = 'p1'"), "p1's handoff")
    context = wait_for(lambda: (t := start_context(live, "p2").json().get("context", "")) and WORD in t and t,
                       "p2 receiving p1's handoff")
    assert WORD in context
    asyncio.run(profile_in_session(live))
    asyncio.run(dead_letter(live))
    wait_for(lambda: ro(live, "SELECT 1 FROM dead_letters WHERE envelope LIKE ?", f"%{WORD}%"), "the dead letter")
    accepted = ro(live, "SELECT key FROM ingest_keys WHERE op = 'handoff.accept' AND result LIKE ?", f"%{WORD}%")
    assert accepted, "the stored reply of handoff.accept holds the handoff's text"
    assert ro(live, "SELECT count(*) FROM ingest_keys WHERE project_id IS NOT NULL AND op = 'observation.append'")[0][0] >= 2
    before = tables_holding(live, WORD)
    for table in ("observations", "handoffs", "pages", "ingest_keys", "dead_letters", "profile_entries"):
        assert table in before, (table, before)

    r = httpx.post(live.url("query") + "/admin/purge-session", headers=live.headers, timeout=120,
                   json={"project": PROJECT, "session_id": "p1", "confirm": True})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["forgotten"]["stored_replies_forgotten"] >= 1 and out["forgotten"]["dead_letters_deleted"] == 1, out

    assert tables_holding(live, WORD) == {}
    assert not in_bytes(db(live), WORD), "the SQLite file"
    assert not in_bytes(db(live).with_name("memory.sqlite-wal"), WORD), "the WAL"
    assert backup_members_holding(live, tmp_path, WORD) == []
    # Every other file of the data dir: the wiki's working tree, the derived search index, … (not
    # the wiki's git objects, compressed, see the module docstring).
    left = [str(f.relative_to(live.data_dir)) for f in live.data_dir.rglob("*")
            if f.is_file() and ".git" not in f.parts and in_bytes(f, WORD)]
    assert left == []

    # A re-sent handoff.accept under the stored key: answered from the ledger with the marker.
    reply = asyncio.run(replay_accept(live, accepted[0][0]))
    assert reply["ok"] is False and reply["error"]["code"] == "purged" and reply["error"]["status"] == 410, reply
    assert reply.get("duplicate") is True and WORD not in json.dumps(reply)
    assert ro(live, "SELECT count(*) FROM handoffs WHERE accepted_session_id = 'p3'")[0][0] == 0


def test_a_purged_project_leaves_no_reply_of_its_commands_and_no_text(live: LocalStack, tmp_path) -> None:
    """``purge-project``: every stored reply of the project's commands is the ``purged`` marker
    (found by ``ingest_keys.project_id``), and its word is nowhere in the tables, the file, the
    WAL, the data dir or a fresh backup."""
    word = "Wombatquill" + uuid.uuid4().hex[:8]
    for event, extra in (("SessionStart", {"source": "startup"}), ("UserPromptSubmit", {"prompt": f"ship {word}"}),
                         ("SessionEnd", {"reason": "exit"})):
        assert hook(live, "q1", event, project="shop", **extra).status_code == 202
    wait_for(lambda: ro(live, "SELECT 1 FROM handoffs WHERE body LIKE ?", f"%{word}%"), "shop's handoff")
    asyncio.run(profile_in_session(live, "shop", word, "q1"))
    pid = ro(live, "SELECT id FROM projects WHERE name = 'shop'")[0][0]
    assert ro(live, "SELECT count(*) FROM ingest_keys WHERE project_id = ?", pid)[0][0] >= 3
    proc = subprocess.run([AIMEM, "purge-project", "-p", "shop", "--confirm"], env=live.client_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    said = re.search(r"Also forgotten: (\d+) stored replies and 0 dead letters that held its text", proc.stdout)
    assert said and int(said.group(1)) >= 3, proc.stdout
    kept = ro(live, "SELECT op FROM ingest_keys WHERE project_id = ? AND"
                    " coalesce(json_extract(result, '$.error.code'), '') != 'purged'", pid)
    assert kept == [("project.purge",)]  # the purge's own reply (names and counts), for its retries
    assert tables_holding(live, word) == {}
    assert not in_bytes(db(live), word) and not in_bytes(db(live).with_name("memory.sqlite-wal"), word)
    assert backup_members_holding(live, tmp_path, word) == []
