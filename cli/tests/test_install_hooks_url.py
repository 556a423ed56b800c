"""``install-hooks`` for a stack not on 8701 records its ingress URL in the hook client's
``config.toml``, so ``aimem run`` and a hook run without ``--ingress-url`` reach that stack
(real ``aimem`` processes, a throwaway HOME, a real HTTP server as the stack's ingress)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from aimem_common.natsserver import free_port

from .conftest import FakeIngress

AIMEM = Path(sys.executable).with_name("aimem")


def aimem(home: Path, cwd: Path, *args: str, stdin: bytes | None = None, path: str | None = None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_") and k != "XDG_DATA_HOME"}
    env.update(HOME=str(home), PATH=path or env["PATH"])
    return subprocess.run([str(AIMEM), *args], cwd=cwd, env=env, input=stdin, capture_output=True, timeout=60)


def test_the_hook_client_and_aimem_run_find_the_stack_install_hooks_named(tmp_path):
    home, repo = tmp_path / "home", tmp_path / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    config = home / ".local/share/aimem/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("# mine\n[hooks]\ntranscript_tail = false\n")
    with FakeIngress() as ingress:
        res = aimem(home, repo, "install-hooks", "--client", "claude-code", "--ingress-url", ingress.url)
        assert res.returncode == 0, res.stderr
        doc = tomllib.loads(config.read_text())
        assert doc == {"ingress_url": ingress.url, "hooks": {"transcript_tail": False}}
        assert config.read_text().endswith("# mine\n[hooks]\ntranscript_tail = false\n")
        payload = {"session_id": "s-url", "cwd": str(repo), "hook_event_name": "UserPromptSubmit", "prompt": "hi"}
        res = aimem(home, repo, "hook", "--agent", "claude-code", "--event", "user-prompt",
                    stdin=json.dumps(payload).encode())
        assert res.returncode == 0, res.stderr
        assert [json.loads(r["body"])["prompt"] for r in ingress.hook_requests()] == ["hi"]
    # installed again for a stack elsewhere (nothing listens there): the line is replaced, and
    # aimem run names that stack, not the default 8701
    dead = f"http://127.0.0.1:{free_port()}"
    res = aimem(home, repo, "install-hooks", "--client", "claude-code", "--ingress-url", dead)
    assert res.returncode == 0, res.stderr
    assert tomllib.loads(config.read_text())["ingress_url"] == dead
    assert config.read_text().count("ingress_url") == 1
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "claude").chmod(0o755)
    res = aimem(home, repo, "run", "claude-code", path=f"{bin_dir}:{os.environ['PATH']}")
    assert res.returncode == 1
    assert res.stderr.decode().strip() == f"aimem: cannot reach ingress at {dead}"


def test_the_default_stack_writes_no_url(tmp_path):
    home, repo = tmp_path / "home", tmp_path / "repo"
    repo.mkdir(parents=True)
    res = aimem(home, repo, "install-hooks", "--client", "claude-code", "--ingress-url", "http://127.0.0.1:8701")
    assert res.returncode == 0, res.stderr
    assert not (home / ".local/share/aimem/config.toml").exists()


def test_an_install_for_the_default_stack_drops_only_aimems_url(tmp_path):
    home, repo = tmp_path / "home", tmp_path / "repo"
    repo.mkdir(parents=True)
    config = home / ".local/share/aimem/config.toml"
    res = aimem(home, repo, "install-hooks", "--client", "claude-code", "--ingress-url", "http://127.0.0.1:19701")
    assert res.returncode == 0 and tomllib.loads(config.read_text()) == {"ingress_url": "http://127.0.0.1:19701"}
    res = aimem(home, repo, "install-hooks", "--client", "claude-code", "--ingress-url", "http://127.0.0.1:8701")
    assert res.returncode == 0 and tomllib.loads(config.read_text()) == {}
    config.write_text('ingress_url = "https://memory.example.com"\n')  # set by hand: never touched
    res = aimem(home, repo, "install-hooks", "--client", "claude-code", "--ingress-url", "http://127.0.0.1:8701")
    assert res.returncode == 0 and config.read_text() == 'ingress_url = "https://memory.example.com"\n'
