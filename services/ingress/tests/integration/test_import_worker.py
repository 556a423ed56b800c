"""Live first: ``POST /hook/import`` batches are read in the import worker process, never on the
event loop that answers live hooks (``aimem_ingress.importwork``); a dead worker is a 503 the
importer retries, and a new worker serves the retry."""

from __future__ import annotations

import os
import signal
import time

import pytest

from aimem_ingress import importwork

from .test_import_api import item, stream_msgs

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]


def _on_the_loop(*args, **kwargs):
    raise AssertionError("an import batch was parsed in the ingress process (on the live event loop)")


async def test_batches_are_parsed_in_a_lower_priority_worker_process(ingress, monkeypatch):
    client, app = ingress
    # Reading a batch in this process would now fail the request; the worker (its own interpreter,
    # started with spawn) never sees these patches.
    monkeypatch.setattr(importwork, "parse_batch", _on_the_loop)
    monkeypatch.setattr(importwork, "_envelopes", _on_the_loop)
    monkeypatch.setattr(importwork, "normalize", _on_the_loop)
    monkeypatch.setattr(importwork, "sanitize", _on_the_loop)
    batch = {"agent": "codex", "project": "acme-api", "events": [
        item("w1", "user-prompt", prompt="why does the deploy fail"), {**item("w2", "session-end"), "end": True}]}
    r = await client.post("/hook/import", json=batch)
    assert r.status_code == 202, r.text
    assert (r.json()["accepted"], r.json()["new"]) == (2, 1)
    assert [e["op"] for e, _ in await stream_msgs(app)] == ["observation.append", "session.end"]
    (pid,) = app.state.ctx.imports.pids
    assert pid != os.getpid()
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, mine + importwork.IMPORT_NICE)


async def test_a_refused_batch_keeps_its_error_across_the_process_boundary(ingress):
    client, _ = ingress
    r = await client.post("/hook/import", content=b'{"agent": "codex", "events": [',
                          headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"


async def test_a_dead_import_worker_is_a_503_then_a_new_worker_takes_the_retry(ingress):
    client, app = ingress
    assert app.state.ctx.imports.pids == []  # started by the first batch, not before
    first = {"agent": "codex", "project": "acme-api", "events": [item("d0", "user-prompt", prompt="hi")]}
    assert (await client.post("/hook/import", json=first)).status_code == 202
    (pid,) = app.state.ctx.imports.pids
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)  # reaped by the pool's own thread
    batch = {"agent": "codex", "project": "acme-api", "events": [item("d1", "user-prompt", prompt="hello")]}
    r = await client.post("/hook/import", json=batch)
    assert r.status_code == 503 and r.json()["error"]["code"] == "import_worker_unavailable"
    assert len(await stream_msgs(app)) == 1  # only the first batch: nothing of the refused one stored
    again = await client.post("/hook/import", json=batch)
    assert again.status_code == 202 and again.json()["new"] == 1
    assert app.state.ctx.imports.pids and pid not in app.state.ctx.imports.pids
