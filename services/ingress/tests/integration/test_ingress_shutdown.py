"""SIGTERM under load: the ingress stops cleanly and every hook it answered 202 is stored."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time

import httpx
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CLIENTS = 8


def test_sigterm_under_load_loses_no_accepted_hook(settings, services) -> None:
    services("writer")
    ingress = services("ingress")["ingress"]
    accepted: list[str] = []
    other: list[int] = []
    stop = threading.Event()

    def client(k: int) -> None:
        with httpx.Client(base_url=ingress.url, timeout=10) as http:
            i = 0
            while not stop.is_set():
                try:
                    r = http.post("/hook?agent=claude-code", headers={"Idempotency-Key": f"term-{k}-{i}"},
                                  json={"session_id": f"s{k}", "cwd": "/w/app", "hook_event_name": "UserPromptSubmit",
                                        "prompt": f"prompt {k}-{i}"})
                except httpx.HTTPError:  # refused or reset once the server is going away
                    if ingress.proc.poll() is not None:
                        return
                    time.sleep(0.01)
                    continue
                i += 1
                if r.status_code == 202:
                    accepted.append(r.json()["accepted"])
                else:
                    other.append(r.status_code)

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(accepted) < 200 and time.monotonic() < deadline:
        time.sleep(0.02)
    before = len(accepted)
    ingress.proc.send_signal(signal.SIGTERM)  # mid-load: requests are in flight on every connection
    code = ingress.proc.wait(timeout=20)
    stop.set()
    for t in threads:
        t.join(timeout=15)
    # uvicorn re-raises the signal once it has drained (exit by SIGTERM); the lifespan's
    # teardown (the NATS drain) must have run before that
    assert code in (0, -signal.SIGTERM), code
    assert "Application shutdown complete" in ingress.log_path.read_text(), "no graceful shutdown"
    assert before >= 200, f"only {before} hooks accepted before the signal"
    assert set(other) <= {503}, other  # while stopping: 202 or "not now", never a 5xx crash

    want = set(accepted)
    assert len(want) == len(accepted)  # one cmd id per 202
    conn = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
    stored: set[str] = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        stored = {row[0] for row in conn.execute("SELECT cmd_id FROM observations")}
        if want <= stored:
            break
        time.sleep(0.2)
    conn.close()
    missing = want - stored
    assert not missing, f"{len(missing)} of {len(want)} hooks answered 202 were never stored"
