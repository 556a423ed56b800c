"""Live first on the real stack: an import's backlog never delays a live session's handoff.

A generated corpus is imported while the writer is down, so the whole import waits in the
bulk lane (``AIMEM_BULK``). A live session then starts, works and ends through ``/hook``.
When the writer comes back, the live lane goes first: the session's handoff is open and
claimed by the next session start within ``HANDOFF_DEADLINE_S`` of the writer being healthy,
while most of the import is still waiting (the writer's bulk lane still has thousands of
commands pending and few imported observations are stored). With one lane, the handoff
came only after every imported command before it had been applied. The import then
completes: every event once.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from pathlib import Path

import httpx
import pytest

from aimem_common import bus as busmod
from aimem_testing.transcripts import make_corpus

from .test_import import aimem_import, counts, settle

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]
HANDOFF_DEADLINE_S = 5.0  # well below the backlog's own apply time (asserted: most of it still waits)


async def _pending(settings, lane: str) -> int:
    nc = await busmod.connect(settings.bus, name="test-lanes", reconnect=False)
    try:
        return await busmod.Bus(nc, settings.bus).writer_lag(lane)
    finally:
        await nc.close()


def pending(settings, lane: str) -> int:
    """Commands the writer has not applied in ``lane`` (its durable's pending + unacked)."""
    return asyncio.run(_pending(settings, lane))


def imported_stored(settings) -> int:
    conn = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT coalesce(sum(imported_count), 0) FROM sessions").fetchone()[0]
    finally:
        conn.close()


def open_handoff(settings, session_id: str) -> bool:
    conn = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT 1 FROM handoffs WHERE from_session_id = ?", (session_id,)).fetchone() is not None
    finally:
        conn.close()


def hook(url: str, kind: str, sid: str, cwd: Path, **fields) -> httpx.Response:
    payload = {"hook_event_name": kind, "session_id": sid, "cwd": str(cwd), **fields}
    return httpx.post(f"{url}/hook?agent=generic", json=payload, timeout=10)


@pytest.mark.timeout(900)
def test_a_live_session_is_handed_off_before_the_import_backlog(services, settings, tmp_path):
    writer = services("writer")["writer"]
    # The writer will be down for a while: the import lane's time bound must not turn the
    # import away meanwhile (its 429s are retried by the importer, but the test would wait).
    url = services("ingress", extra_env={"AIMEM_INGRESS__MAX_IMPORT_DELAY_S": "3600"})["ingress"].url
    corpus = make_corpus(tmp_path / "corpus", claude=250, codex=250, turns=(8, 20))
    expected = {sid: n for sid, n in corpus.expected.items() if sid not in corpus.capture_off}
    writer.stop()

    stats = aimem_import(tmp_path / "client", url, "--home", str(corpus.home), status=2)
    assert stats["new"] == sum(expected.values()) > 15_000
    backlog = pending(settings, busmod.BULK)
    assert backlog >= stats["new"] and pending(settings, busmod.LIVE) == 0

    repo = tmp_path / "live-repo"
    repo.mkdir()
    sid = f"live-{uuid.uuid4().hex}"
    for kind, fields in [("session-start", {"source": "startup"}),
                         ("user-prompt", {"prompt": "rename the billing cron to nightly-billing"}),
                         ("post-tool-use", {"tool_name": "Bash", "tool_input": {"command": "make test"},
                                            "tool_response": "all passed"}),
                         ("session-end", {"reason": "exit"})]:
        r = hook(url, kind, sid, repo, **fields)
        assert r.status_code == 202, r.text  # never a 429: the import's backlog is not the hooks' lag
    assert pending(settings, busmod.LIVE) > 0

    writer.start()
    t0 = time.monotonic()
    while not open_handoff(settings, sid):
        assert time.monotonic() - t0 < HANDOFF_DEADLINE_S, "the live session's handoff waited for the import"
        time.sleep(0.02)
    handoff_s = time.monotonic() - t0
    still_waiting, stored = pending(settings, busmod.BULK), imported_stored(settings)
    # The live lane overtook the backlog: most of the import was still to be applied.
    assert still_waiting > backlog // 2, (handoff_s, still_waiting, backlog)
    assert stored < stats["new"] // 2, (handoff_s, stored)

    nxt = f"next-{uuid.uuid4().hex}"
    assert hook(url, "session-start", nxt, repo, source="startup").status_code == 202
    t1 = time.monotonic()
    ctx = httpx.post(f"{url}/hook/session-start-context?agent=generic", timeout=10,
                     json={"hook_event_name": "session-start", "session_id": nxt, "cwd": str(repo),
                           "source": "startup"})
    claim_s = time.monotonic() - t1
    logs = "".join(p.read_text()[-3000:] for p in (tmp_path / "logs").glob("*.log"))
    assert ctx.status_code == 200 and ctx.json()["handoff_id"] is not None, (ctx.text, claim_s, logs)
    assert "nightly-billing" in ctx.json()["context"]

    settle(settings, url, timeout_s=600)  # the import completes behind it: every event once
    stored_counts = counts(settings)
    assert {s: stored_counts.get(s) for s in expected} == expected
    deadline = time.monotonic() + 30  # the last acks are fire-and-forget: the count follows them
    while pending(settings, busmod.BULK) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pending(settings, busmod.BULK) == 0
