"""Clients installed for a stack that is not on the default ports reach that stack.

``aimem up --port-base P --nats-port N`` (flags only, nothing in ``config.toml``): the
installers write the stack's ingress URL into the hook commands, and the hook command run
exactly as written, with nothing but ``HOME`` in its environment, stores its event there;
the CLI's NATS verbs on that data dir reach that stack's bus (they went to 4222).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from aimem_testing.stack import LocalStack

pytestmark = [pytest.mark.e2e]
AIMEM = str(Path(sys.executable).with_name("aimem"))


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory) -> LocalStack:
    base = tmp_path_factory.mktemp("elsewhere")
    with LocalStack(base / "data", base / "logs") as stack:
        assert stack.port_base != 8701
        yield stack


def clean_env(**extra: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("AIMEM_", "XDG_"))} | extra


def search(stack: LocalStack, word: str, timeout_s: float = 30.0) -> dict:
    """``GET /api/v1/search`` for ``word`` until it has a hit (page or raw observation)."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = httpx.get(stack.url("query") + "/api/v1/search", params={"q": word, "workspace": "default",
                                                                     "project": "elsewhere-proj"},
                      headers=stack.headers, timeout=10)
        body = r.json() if r.status_code == 200 else {}
        if body.get("hits") or body.get("raw_hits") or time.monotonic() > deadline:
            return body
        time.sleep(0.3)


def test_installed_hook_command_run_with_home_only_stores_the_event(elsewhere, tmp_path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    out = subprocess.run([AIMEM, "install-hooks", "--client", "claude-code", "--home", str(home),
                          "--data-dir", str(elsewhere.data_dir)], capture_output=True, text=True, timeout=60,
                         env=clean_env(HOME=str(home)), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    hooks = json.loads((home / ".claude" / "settings.json").read_text())["hooks"]
    commands = {event: groups[0]["hooks"][0]["command"] for event, groups in hooks.items()}
    ingress = f"http://127.0.0.1:{elsewhere.port_base}"
    assert all(f"--ingress-url {ingress}" in c for c in commands.values()), commands
    status = subprocess.run([AIMEM, "hook", "status", "--json"], capture_output=True, text=True, timeout=60,
                            env=clean_env(HOME=str(home)), cwd=tmp_path)
    assert status.returncode == 0 and json.loads(status.stdout)["server"] == ingress, status.stdout + status.stderr

    word = f"zebrafinch{uuid.uuid4().hex[:8]}"
    project = tmp_path / "elsewhere-proj"
    project.mkdir()
    sid = f"s-{uuid.uuid4().hex[:8]}"
    base = {"session_id": sid, "transcript_path": str(tmp_path / f"{sid}.jsonl"), "cwd": str(project)}
    # Exactly what Claude Code runs: the command string through a shell, HOME and nothing else.
    for event, extra in (("UserPromptSubmit", {"prompt": f"remember the {word}"}), ("SessionEnd", {"reason": "exit"})):
        run = subprocess.run(["/bin/sh", "-c", commands[event]], input=json.dumps(base | extra | {"hook_event_name": event}),
                             capture_output=True, text=True, timeout=60, env={"HOME": str(home)}, cwd=project)
        assert run.returncode == 0 and run.stdout == "", run.stderr
    found = search(elsewhere, word)
    assert found.get("hits") or found.get("raw_hits"), found
    assert word in json.dumps(found)


def test_nats_verbs_reach_the_data_dirs_stack(elsewhere, tmp_path) -> None:
    """``finalize-idle`` with only the data dir: it talks to that stack's NATS, not 4222."""
    out = subprocess.run([AIMEM, "finalize-idle", "--json"], capture_output=True, text=True, timeout=120,
                         env=clean_env(HOME=str(tmp_path), AIMEM_DATA_DIR=str(elsewhere.data_dir)), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "finalized" in json.loads(out.stdout)
    record = json.loads((elsewhere.data_dir / "run" / "up.json").read_text())
    assert record["nats_url"] == elsewhere.nats_url and record["port_base"] == elsewhere.port_base
