"""``ingress.workers``: several uvicorn processes share the ingress port; every 202 is stored."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


def workers_of(pid: int) -> list[int]:
    """The uvicorn worker processes under ``pid`` (spawned children; not multiprocessing's tracker)."""
    kids = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return [k for k in kids if b"spawn_main" in Path(f"/proc/{k}/cmdline").read_bytes()]


def test_two_ingress_workers_serve_hooks(settings, services) -> None:
    services("writer")
    ingress = services("ingress", extra_env={"AIMEM_INGRESS__WORKERS": "2"})["ingress"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(workers_of(ingress.proc.pid)) < 2:
        time.sleep(0.1)
    workers = workers_of(ingress.proc.pid)
    assert len(workers) == 2, workers
    n = 40
    with httpx.Client(base_url=ingress.url, timeout=10) as client:
        for i in range(n):
            # A fresh connection each time: the kernel spreads them over both workers.
            r = client.post("/hook?agent=claude-code", headers={"Idempotency-Key": f"w-{i}", "Connection": "close"},
                            json={"session_id": "s1", "cwd": "/w/app", "hook_event_name": "UserPromptSubmit",
                                  "prompt": f"prompt {i}"})
            assert r.status_code == 202, r.text
    conn = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
    deadline = time.monotonic() + 30
    stored = 0
    while time.monotonic() < deadline:
        stored = conn.execute("SELECT count(*) FROM observations").fetchone()[0]
        if stored >= n:
            break
        time.sleep(0.1)
    assert stored == n
