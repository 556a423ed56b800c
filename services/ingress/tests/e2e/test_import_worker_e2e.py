"""The import worker under the real processes: ``python -m aimem_ingress`` reads
``/hook/import`` batches in a child process at a lower OS priority, the writer stores what it
acknowledged, live hooks are answered meanwhile, and a ``kill -9`` of ingress leaves no worker."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from aimem_ingress.importwork import IMPORT_NICE

from aimem_testing.probe import db_rows

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
JSON = {"Content-Type": "application/json"}


def children(pid: int) -> dict[int, str]:
    """Live child processes of ``pid``: pid → command line."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out[int(entry.name)] = cmdline
    return out


def alive(pid: int) -> bool:
    """``pid`` runs (neither gone nor a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def imported_count(settings) -> int:
    return len(db_rows(settings.db_path, "SELECT id FROM observations WHERE session_id = 'imp-e2e'"))


def test_import_batches_are_read_by_a_low_priority_child_that_dies_with_ingress(services, settings, tmp_path):
    ingress = services("writer", "ingress")["ingress"]
    assert not [p for p, cmd in children(ingress.proc.pid).items() if "spawn_main" in cmd]  # none before an import
    cwd = str(tmp_path / "acme")
    events = [{"key": f"imp-e2e:{i}", "payload": {"hook_event_name": "user-prompt", "session_id": "imp-e2e",
                                                  "cwd": cwd, "timestamp": f"2026-03-01T10:00:{i:02d}Z",
                                                  "prompt": f"step {i} of the migration"}} for i in range(40)]
    with httpx.Client(base_url=ingress.url, timeout=30) as http:
        r = http.post("/hook/import", json={"agent": "codex", "project": "acme", "events": events})
        assert r.status_code == 202, r.text
        assert (r.json()["accepted"], r.json()["new"]) == (40, 40)
        workers = [p for p, cmd in children(ingress.proc.pid).items() if "spawn_main" in cmd]
        assert len(workers) == 1, children(ingress.proc.pid)
        (worker,) = workers
        ingress_nice = os.getpriority(os.PRIO_PROCESS, ingress.proc.pid)
        assert os.getpriority(os.PRIO_PROCESS, worker) == min(19, ingress_nice + IMPORT_NICE)
        live = http.post("/hook?agent=generic", json={"hook_event_name": "user-prompt", "session_id": "live-e2e",
                                                      "cwd": cwd, "prompt": "still answered"}, headers=JSON)
        assert live.status_code == 202
    deadline = time.monotonic() + 30
    while imported_count(settings) < 40 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert imported_count(settings) == 40  # every acknowledged event stored
    left = children(ingress.proc.pid)  # the worker and multiprocessing's resource tracker
    assert worker in left
    ingress.kill()  # SIGKILL: the worker gets SIGTERM from the kernel (parent death signal)
    deadline = time.monotonic() + 10
    while any(alive(p) for p in left) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in left if alive(p)], left
