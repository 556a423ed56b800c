"""The writer as a real process: real nats-server, real SQLite, real git (no mocks)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import json
import sqlite3
import time

import httpx
import pygit2
import pytest

from aimem_common import bus as busmod
from aimem_common.errors import NotFoundError, PreconditionFailedError
from aimem_common.commands import make_envelope
from aimem_common.sanitize import RawObservation, sanitize
from aimem_common.models import ObservationKind

pytestmark = [pytest.mark.integration, pytest.mark.asyncio, pytest.mark.timeout(90)]


def ro(settings) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    return conn


def obs_env(i: int, session: str = "s1", project: str = "app", key: str | None = None):
    raw = RawObservation(session_id=session, kind=ObservationKind.USER_PROMPT, agent="claude-code",
                         cwd=f"/w/{project}", title=f"Prompt {i}", body=f"prompt number {i}")
    return make_envelope("observation.append", sanitize(raw).to_payload(), project=project,
                         idempotency_key=key or f"{session}-{i}")


async def test_request_reply_events_and_health(settings, services, bus) -> None:
    services("writer")
    nc = bus.nc
    js = nc.jetstream()
    got: list[dict] = []

    async def on_event(m) -> None:
        got.append(json.loads(m.data))

    sub = await nc.subscribe("aimem.evt.>", cb=on_event)

    res = await bus.request(make_envelope("page.write", {"path": "concepts/a.md", "body": "# Alpha\n\nhello"},
                                          project="app"))
    assert res["created"] and res["title"] == "Alpha"
    # The caller's next read sees its own write.
    assert ro(settings).execute("SELECT count(*) FROM pages WHERE path='concepts/a.md'").fetchone()[0] == 1
    with pytest.raises(PreconditionFailedError) as exc:
        await bus.request(make_envelope("page.write", {"path": "concepts/a.md", "body": "x", "create_only": True},
                                        project="app"))
    assert exc.value.data["current_page_id"] == res["page_id"]
    with pytest.raises(NotFoundError):
        await bus.request(make_envelope("page.delete", {"path": "concepts/a.md"}, project="ghost"))

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(e.get("action") == "written" for e in got):
        await asyncio.sleep(0.05)
    assert any(e.get("path") == "concepts/a.md" and e["workspace"] == "default" for e in got)
    await sub.unsubscribe()

    port = settings.port("writer")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        h = (await client.get("/healthz")).json()
        text_index = h["checks"].pop("text_index")  # informational: a first start builds it in the background
        assert h["checks"] == {"nats": True, "db": True, "wiki": True, "consumer": True, "store": True}
        assert text_index["enabled"] is True and text_index["failed"] is None and h["status"] == "ok"
        metrics = (await client.get("/metrics")).text
    for name in ("aimem_writer_batch_size", "aimem_writer_apply_seconds", "aimem_writer_commits_total",
                 "aimem_writer_errors_total", "aimem_writer_consumer_pending"):
        assert name in metrics
    assert 'aimem_writer_errors_total{code="precondition_failed",op="page.write"} 1.0' in metrics

    # The debounced checkpoint lands in git.
    repo_dir = settings.wiki_dir
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        repo = pygit2.Repository(str(repo_dir))
        if not repo.head_is_unborn and "page.write" in repo[repo.head.target].message:
            break
        await asyncio.sleep(0.1)
    assert "page.write" in repo[repo.head.target].message
    del js


async def test_hand_edit_is_reindexed_by_the_watcher(settings, services, bus) -> None:
    services("writer")
    res = await bus.request(make_envelope("page.write", {"path": "notes/n.md", "body": "before"}, project="app"))
    conn = ro(settings)
    ws_id, pj_id = conn.execute("SELECT workspace_id, project_id FROM pages WHERE id=?", (res["page_id"],)).fetchone()
    f = settings.wiki_dir / ws_id / pj_id / "notes" / "n.md"
    f.write_text(f.read_text().replace("before", "after an edit in obsidian"))
    deadline = time.monotonic() + 10
    body = ""
    while time.monotonic() < deadline:
        body = conn.execute("SELECT body FROM pages WHERE path='notes/n.md' AND is_latest=1").fetchone()[0]
        if "obsidian" in body:
            break
        await asyncio.sleep(0.1)
    assert "obsidian" in body
    # Only one hand-edit version (the writer's own writes are ignored).
    await asyncio.sleep(1.0)
    assert conn.execute("SELECT count(*) FROM pages WHERE path='notes/n.md'").fetchone()[0] == 2


async def test_second_writer_refuses_to_start(settings, services) -> None:
    services("writer")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_DATA_DIR=str(settings.data_dir), AIMEM_PORT_BASE=str(settings.port_base + 100),
               AIMEM_BUS__NATS_URL=settings.bus.nats_url)
    proc = subprocess.run([sys.executable, "-m", "aimem_writer"], env=env, capture_output=True, timeout=30)
    assert proc.returncode != 0
    assert b"another aimem writer is alive" in proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_crash_mid_stream_replays_without_duplicates(settings, services, bus) -> None:
    """5,000 observations, kill -9 the writer mid-stream, restart: exactly 5,000 rows."""
    n = 5000
    env = {"AIMEM_WRITER__ACK_WAIT_S": "2", "AIMEM_WRITER__BATCH_MAX_MSGS": "200"}
    writer = services("writer", extra_env=env)["writer"]
    js = bus.js
    headers_for = lambda e: {busmod.MSG_ID_HEADER: e.dedupe_id}  # noqa: E731
    envs = [obs_env(i, session=f"s{i % 7}", project="app" if i % 2 else "lib") for i in range(n)]
    futs = [await js.publish_async(busmod.mut_subject(e.op), e.model_dump_json().encode(), headers=headers_for(e))
            for e in envs]
    await asyncio.gather(*futs)
    # Let the writer get part-way, then crash it.
    conn = ro(settings)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done = conn.execute("SELECT count(*) FROM observations").fetchone()[0]
        if done >= 500:
            break
        await asyncio.sleep(0.01)
    writer.kill()
    partial = conn.execute("SELECT count(*) FROM observations").fetchone()[0]
    assert partial < n, "the writer finished before the kill; raise n"
    # Re-publish a slice too (a client retry past the JetStream window is deduped by ingest_keys).
    for e in envs[:50]:
        await js.publish(busmod.mut_subject(e.op), e.model_dump_json().encode(),
                         headers={busmod.MSG_ID_HEADER: e.dedupe_id + "-retry"} | {})
    writer = services("writer", extra_env=env)["writer"]
    deadline = time.monotonic() + 60
    total = 0
    while time.monotonic() < deadline:
        total = conn.execute("SELECT count(*) FROM observations").fetchone()[0]
        info = await js.consumer_info(busmod.MUT_STREAM, busmod.WRITER_DURABLE)
        if total >= n and info.num_pending == 0 and info.num_ack_pending == 0:
            break
        await asyncio.sleep(0.1)
    assert partial < total
    rows = conn.execute("SELECT count(*), count(DISTINCT cmd_id) FROM observations").fetchone()
    assert tuple(rows) == (n, n)
    assert conn.execute("SELECT sum(observation_count) FROM sessions").fetchone()[0] == total
    writer.stop()
    repo = pygit2.Repository(str(settings.wiki_dir))
    assert not repo.head_is_unborn
    status = {p: s for p, s in repo.status().items() if s != pygit2.GIT_STATUS_IGNORED}
    assert status == {}, status  # every page/manifest on disk is committed
    ledgers = list(settings.wiki_dir.glob("*/*/log-*.md"))
    assert ledgers and all(str(p.relative_to(settings.wiki_dir)) not in repo.index for p in ledgers)


async def test_backlog_is_applied_in_larger_transactions(settings, services, bus) -> None:
    """Behind (commands pending after a fetch), the writer fetches ``batch_max_msgs_behind``."""
    n = 1500
    js = bus.js
    envs = [obs_env(i, session=f"s{i % 5}") for i in range(n)]
    futs = [await js.publish_async(busmod.mut_subject(e.op), e.model_dump_json().encode(),
                                   headers={busmod.MSG_ID_HEADER: e.dedupe_id}) for e in envs]
    await asyncio.gather(*futs)
    services("writer", extra_env={"AIMEM_WRITER__BATCH_MAX_MSGS": "100",
                                  "AIMEM_WRITER__BATCH_MAX_MSGS_BEHIND": "1000"})
    conn = ro(settings)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and conn.execute("SELECT count(*) FROM observations").fetchone()[0] < n:
        await asyncio.sleep(0.05)
    metrics = httpx.get(f"http://127.0.0.1:{settings.port('writer')}/metrics", timeout=5).text
    value = {line.split()[0]: float(line.split()[1]) for line in metrics.splitlines()
             if line.startswith("aimem_writer_batch_size_")}
    assert value["aimem_writer_batch_size_sum"] == n
    # one message first (sized for full bundles: 100 // 64), then up to 1,000 a batch; 15 at 100 each.
    assert value["aimem_writer_batch_size_count"] <= 4, value


def _batch_metrics(settings) -> dict[str, float]:
    metrics = httpx.get(f"http://127.0.0.1:{settings.port('writer')}/metrics", timeout=5).text
    return {line.split()[0]: float(line.split()[1]) for line in metrics.splitlines()
            if line.startswith("aimem_writer_batch_size_")}


async def test_trickled_hooks_linger_into_one_transaction_but_a_waiting_caller_does_not(settings, services,
                                                                                       bus) -> None:
    """Observations arriving a few ms apart are gathered for ``batch_linger_ms`` into one
    batch; a command someone waits for (``Aimem-Reply-To``) is applied at once."""
    services("writer", extra_env={"AIMEM_WRITER__BATCH_LINGER_MS": "3000", "AIMEM_WRITER__BATCH_LINGER_MSGS": "1000"})
    await bus.request(make_envelope("page.write", {"path": "concepts/warm.md", "body": "# Warm\n\nup"},
                                    project="app"))  # the writer is up and idle
    before = _batch_metrics(settings)
    n = 20
    for i in range(n):
        e = obs_env(i, session="trickle")
        await bus.js.publish(busmod.mut_subject(e.op), e.model_dump_json().encode(),
                             headers={busmod.MSG_ID_HEADER: e.dedupe_id})
        await asyncio.sleep(0.01)
    conn = ro(settings)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and conn.execute(
            "SELECT count(*) FROM observations WHERE session_id='trickle'").fetchone()[0] < n:
        await asyncio.sleep(0.05)
    after = _batch_metrics(settings)
    assert after["aimem_writer_batch_size_sum"] - before["aimem_writer_batch_size_sum"] == n
    # 20 commands over ~0.2 s: one batch (two if the first fetch raced the second publish)
    assert after["aimem_writer_batch_size_count"] - before["aimem_writer_batch_size_count"] <= 2, (before, after)

    # Observations keep trickling in (the linger would go on); a request in the middle of them
    # is answered at once, with the observations gathered so far.
    async def trickle() -> None:
        for i in range(n, n + 150):
            e = obs_env(i, session="trickle")
            await bus.js.publish(busmod.mut_subject(e.op), e.model_dump_json().encode(),
                                 headers={busmod.MSG_ID_HEADER: e.dedupe_id})
            await asyncio.sleep(0.02)

    task = asyncio.create_task(trickle())
    await asyncio.sleep(0.3)
    t0 = time.monotonic()
    res = await bus.request(make_envelope("page.write", {"path": "concepts/now.md", "body": "# Now\n\nat once"},
                                          project="app"))
    waited = time.monotonic() - t0
    await task
    assert res["created"]
    assert waited < 2.0, f"a request waited {waited:.2f} s: a command with a caller must not linger"
