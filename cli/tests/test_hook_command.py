"""``aimem hook``: documented by ``--help`` and listed in ``aimem --help`` (through typer),
while a hook call itself keeps its fast path (no typer, no pydantic); ``--ingress-url``
(what ``install-hooks`` writes for a stack on another port) wins and stays with the
spooled entry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

AIMEM = str(Path(sys.executable).with_name("aimem"))


def test_hook_help_documents_events_environment_exit_status_and_spool() -> None:
    out = subprocess.run([AIMEM, "hook", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for needle in ("SessionStart", "AIMEM_INGRESS_URL", "AIMEM_HOOK_BUDGET_MS", "150 ms", "--ingress-url",
                   "client-token", "spool", "Exit status: always 0", "--agent", "--event", "--drain"):
        assert needle in text, needle
    assert subprocess.run([AIMEM, "hook", "-h"], capture_output=True, text=True, timeout=60).stdout == text


def test_aimem_help_lists_hook() -> None:
    out = subprocess.run([AIMEM, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert any(line.strip("│ ").startswith("hook ") for line in out.stdout.splitlines()), out.stdout


def test_a_hook_call_imports_neither_typer_nor_pydantic(tmp_path: Path) -> None:
    code = ("import sys; sys.argv = ['aimem', 'hook', '--agent', 'generic'];"
            "from aimem_cli.main import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'pydantic', 'click'))))")
    out = subprocess.run([sys.executable, "-c", "import json\n" + code], input="", capture_output=True, text=True,
                         timeout=60, env={"HOME": str(tmp_path), "AIMEM_DATA_DIR": str(tmp_path / "d")})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_ingress_url_argument_wins_and_the_spool_keeps_it(tmp_path: Path, hook, ingress_factory) -> None:
    with ingress_factory() as env_ingress, ingress_factory(status=503) as stack_b:
        payload = {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "cwd": str(tmp_path), "prompt": "p"}
        proc, _ = hook(["--agent", "claude-code", "--ingress-url", stack_b.url], payload, data_dir=tmp_path / "d",
                       url=env_ingress.url)
        assert proc.returncode == 0
        assert len(stack_b.hook_requests()) == 1 and env_ingress.hook_requests() == []
        stack_b.status = 202  # the spooled entry goes to its own stack on the next drain
        proc, _ = hook(["--drain"], None, data_dir=tmp_path / "d", url=env_ingress.url)
        assert len(stack_b.hook_requests()) == 2 and env_ingress.hook_requests() == []


def test_up_refuses_an_unknown_log_format_in_one_line(tmp_path: Path) -> None:
    out = subprocess.run([AIMEM, "up", "--data-dir", str(tmp_path / "d"), "--log-format", "xml"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == "aimem up: --log-format must be text, json or auto, not 'xml'\n"
    assert not (tmp_path / "d").exists()  # nothing was started or created


def test_hook_status_names_the_server_the_installed_hooks_post_to(tmp_path: Path) -> None:
    """Hooks installed with ``--ingress-url`` for a stack on another port base: ``hook status``
    names that stack (it said 8701), per client when clients were installed for different stacks."""
    import os

    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIMEM_", "XDG_", "CODEX_"))} | {"HOME": str(home)}

    def aimem(*args: str) -> subprocess.CompletedProcess:
        out = subprocess.run([AIMEM, *args], capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        return out

    def status() -> dict:
        return json.loads(aimem("hook", "status", "--json").stdout)

    assert status()["server"] == "http://127.0.0.1:8701" and status()["servers"] == {}  # nothing installed
    aimem("install-hooks", "--client", "claude-code", "--home", str(home), "--data-dir", str(tmp_path / "d"),
          "--ingress-url", "http://127.0.0.1:18721")
    assert status()["server"] == "http://127.0.0.1:18721"
    assert status()["servers"] == {"claude-code": "http://127.0.0.1:18721"}
    assert "(server http://127.0.0.1:18721)" in aimem("hook", "status").stdout
    aimem("install-hooks", "--client", "opencode", "--home", str(home), "--data-dir", str(tmp_path / "d"),
          "--ingress-url", "http://127.0.0.1:18721")
    aimem("install-hooks", "--client", "gemini-cli", "--home", str(home), "--data-dir", str(tmp_path / "d"))
    doc = status()  # gemini-cli without --ingress-url: the hook client's own default
    assert doc["servers"] == {"claude-code": "http://127.0.0.1:18721", "opencode": "http://127.0.0.1:18721",
                              "gemini-cli": "http://127.0.0.1:8701"} and doc["server"] is None
    text = aimem("hook", "status").stdout
    assert "claude-code → http://127.0.0.1:18721" in text and "gemini-cli → http://127.0.0.1:8701" in text
    codex_home = tmp_path / "codex-home"  # Codex's files under $CODEX_HOME, read there like install-hooks does
    aimem("install-hooks", "--client", "codex", "--home", str(home), "--data-dir", str(tmp_path / "d"),
          "--codex-home", str(codex_home), "--ingress-url", "http://127.0.0.1:28721")
    env["CODEX_HOME"] = str(codex_home)
    assert status()["servers"]["codex"] == "http://127.0.0.1:28721"


def _finalize(tmp_path, monkeypatch, url: str, *args: str):
    from typer.testing import CliRunner

    from aimem_cli.main import build_app

    for name in [k for k in __import__("os").environ if k.startswith("AIMEM_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AIMEM_DATA_DIR", str(tmp_path / "client"))
    monkeypatch.setenv("AIMEM_INGRESS_URL", url)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(build_app(), ["finalize-session", *args])
    return r.exit_code, r.output


def test_finalize_session_checks_agent_and_session_id_before_sending(tmp_path, monkeypatch, fake_ingress):
    from aimem_cli.hookspool import Spool

    for args, says in ((("--agent", "nosuch", "--session-id", "z1"), "unknown agent 'nosuch'"),
                       (("--agent", "codex", "--session-id", ""), "--session-id is empty"),
                       (("--agent", "codex", "--session-id", "  "), "--session-id is empty"),
                       (("--agent", "codex", "--session-id", "a\nb"), "control character")):
        code, out = _finalize(tmp_path, monkeypatch, fake_ingress.url, *args)
        assert code == 1 and says in out and "spooled" not in out and len(out.strip().splitlines()) == 1, out
    assert fake_ingress.requests == [] and Spool(tmp_path / "client/spool").pending() == []
    code, out = _finalize(tmp_path, monkeypatch, fake_ingress.url, "--agent", "Claude", "--session-id", "s1")
    assert code == 0 and "end accepted" in out and len(fake_ingress.hook_requests()) == 1  # aliases are agents


def test_finalize_session_says_dropped_when_the_server_refuses_for_good(tmp_path, monkeypatch, ingress_factory):
    from aimem_cli.hookspool import Spool

    with ingress_factory(status=400) as refusing:
        code, out = _finalize(tmp_path, monkeypatch, refusing.url, "--agent", "codex", "--session-id", "z1")
    assert code == 1 and "dropped" in out and "400" in out and "spooled" not in out, out
    assert Spool(tmp_path / "client/spool").pending() == []
    with ingress_factory(status=503) as busy:
        code, out = _finalize(tmp_path, monkeypatch, busy.url, "--agent", "codex", "--session-id", "z2")
    assert code == 0 and "spooled (server answered 503)" in out
    assert [e["p"]["session_id"] for e in Spool(tmp_path / "client/spool").pending()] == ["z2"]
