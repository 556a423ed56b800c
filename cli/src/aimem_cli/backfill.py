"""Backfill on start: a new project's one import of its repository's local history.

The first session start of a project that has nothing yet imports that repository's
transcripts of the starting client once (docs/lifecycle.md "Backfill on start"), so hooks
installed mid-project do not start amnesiac. It runs on the client, where the transcripts
are (the server usually cannot read them: another machine), and never in the hook's time:

1. the hook client (``aimem_cli.hookclient``), on a session start the server accepted, checks
   ``wanted`` (enabled, a client whose transcripts ``aimem import`` reads, and no local
   marker for this project and stack yet: one ``stat``) and ``spawn``\\ s
   ``python -m aimem_cli.backfill`` in its own session, without waiting, and answers as always;
2. the detached process asks the writer (``POST /hook/backfill/claim``): claimed only once per
   project and only while the project has no page and no session but the live one. Whatever
   the answer, it writes the local marker (``<data_dir>/backfill/<key>.json``) so later starts
   on this machine spawn nothing; the server's row is the durable "at most once";
3. claimed: it takes the import lock (``<data_dir>/import.lock``, shared with ``aimem import``:
   one import state file, one writer of it), reads that client's transcripts of this
   repository with the ``aimem import`` engine (``Importer`` with ``only=`` the project's
   identity: sessions of other repositories, or without a cwd, are never sent), bounded by
   ``MAX_FILES`` newest transcripts, ``MAX_BYTES`` and ``MAX_SECONDS``, niced like
   ``aimem import``, in the server's bulk lane ("live first");
4. it reports the outcome (``POST /hook/backfill/finish``); ``aimem status`` and
   ``/admin/status`` show it.

Off: ``[hooks] backfill_on_start = false`` in the client's ``config.toml``, or
``AIMEM_HOOK_BACKFILL=0`` (the environment wins). ``aimem import`` remains the way to import
by hand (any project, any time).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from aimem_cli.identity import Identity

MAX_FILES = 500  # newest transcripts of the repository read at most
MAX_BYTES = 256 * 1024 * 1024  # their total size at most
MAX_SECONDS = 600.0  # wall time of the import; files not started by then are left (truncated)
LOCK_WAIT_S = 600.0  # how long it waits for a running `aimem import` (or another backfill)
CLAIM_TIMEOUT_S = 10.0
CHUNK_FILES = 10  # files imported between two looks at the clock
NICE = 10
# Clients whose transcripts `aimem import` reads (aimem_cli.transcripts.READERS), by hook agent name.
CLIENTS = ("claude-code", "codex", "gemini-cli", "opencode", "copilot-cli", "pi", "omp", "openclaw", "crush")
_OFF = ("0", "false", "no", "off")


def enabled(env: Any, data_dir: Path) -> bool:
    """``AIMEM_HOOK_BACKFILL`` when set, else ``[hooks] backfill_on_start`` in ``<data_dir>/config.toml``;
    on by default (also when the file cannot be read: the server still decides "once")."""
    from aimem_cli.hookconfig import hooks_setting

    if env.get("AIMEM_HOOK_BACKFILL") is not None:
        return env["AIMEM_HOOK_BACKFILL"].strip().lower() not in _OFF
    return hooks_setting(data_dir, "backfill_on_start") is not False


def marker_path(data_dir: Path, ident: Identity, url: str) -> Path:
    """The local marker of ``ident``'s project on the stack at ``url``: present once a claim was answered."""
    key = json.dumps([url.rstrip("/"), sorted(ident.as_query().items())])
    return data_dir / "backfill" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def wanted(agent: str, ident: Identity | None, env: Any, data_dir: Path, url: str) -> bool:
    """True when a session start of ``agent`` in ``ident`` should spawn a backfill (cheap: no network)."""
    if ident is None or not ident.project or agent not in CLIENTS:
        return False
    return enabled(env, data_dir) and not marker_path(data_dir, ident, url).exists()


def spawn(agent: str, session_id: str | None, cwd: str, url: str | None) -> None:
    """Start ``python -m aimem_cli.backfill`` in its own session; never wait for it."""
    import subprocess

    argv = [sys.executable, "-m", "aimem_cli.backfill", "--agent", agent, "--cwd", cwd]
    if session_id:
        argv += ["--session", session_id]
    if url:
        argv += ["--ingress-url", url]
    subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, close_fds=True)


def project_files(agent: str, home: Path, ident: Identity) -> list[tuple[str, Path]]:
    """``agent``'s transcripts that may hold sessions of ``ident``'s repository, newest first.

    Claude Code keeps one folder per working directory (every character but letters and
    digits made ``-``): only the folders of the root and of directories below it are read.
    The other clients mix repositories in one place; all their files are candidates and the
    importer keeps the sessions whose cwd resolves to this project.
    """
    from aimem_cli.importer import discover

    files = discover(agent, home)
    if agent == "claude-code" and ident.root:
        want = _mangle(ident.root)
        files = [(c, p) for c, p in files if _mangle(p.parent.name) == want or
                 _mangle(p.parent.name).startswith(want + "-")]
    return sorted(files, key=lambda f: _mtime(f[1]), reverse=True)


def _mangle(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def bounded(files: list[tuple[str, Path]]) -> tuple[list[tuple[str, Path]], bool]:
    """The newest files within ``MAX_FILES`` and ``MAX_BYTES``; True when some were left out."""
    out, total = [], 0
    for client, path in files[:MAX_FILES]:
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if total + size > MAX_BYTES:
            return out, True
        total += size
        out.append((client, path))
    return out, len(files) > MAX_FILES


def run(agent: str, cwd: str, session_id: str | None, url: str | None, *, home: Path | None = None) -> dict:
    """The detached process (module docstring, steps 2–4); return what it did (for tests and logs).

    ``{"claimed": bool, "reason"?: str, "state"?: "done"|"failed", counts...}``. Never raises
    for a down server or unreadable files: the outcome is reported, or the claim simply fails
    and a later start asks again.
    """
    from aimem_cli.hookconfig import client_settings
    from aimem_cli.identity import resolve

    data_dir, cfg = client_settings()  # the hook client's data dir, server and token
    url = url or str(cfg["url"])
    ident = resolve(cwd)
    if not ident.project or not ident.capture:
        return {"claimed": False, "reason": "not_captured"}
    answer = _post(url, cfg["token"], "claim", ident, {"agent": agent, "session_id": session_id})
    if answer is None:
        return {"claimed": False, "reason": "no_answer"}  # no marker: the next start asks again
    marker = marker_path(data_dir, ident, url)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"at": time.time(), "answer": answer}), "utf-8")
    if not answer.get("claimed"):
        return {"claimed": False, "reason": answer.get("reason")}
    try:
        os.nice(NICE)
    except OSError:
        pass
    outcome = _import(agent, ident, url, cfg["token"], data_dir, home or Path.home())
    _post(url, cfg["token"], "finish", ident, outcome)
    return {"claimed": True, **outcome}


def _import(agent: str, ident: Identity, url: str, token: str | None, data_dir: Path, home: Path) -> dict:
    """Import ``agent``'s history of ``ident``'s repository under the import lock; the finish body."""
    import typer

    from aimem_cli.commands.importsend import ingress_sender
    from aimem_cli.importer import Importer

    deadline = time.monotonic() + MAX_SECONDS
    files, truncated = bounded(project_files(agent, home, ident))
    importer = Importer(sender=ingress_sender(url, token, patience_s=MAX_SECONDS), only=ident,
                        state_path=data_dir / "import-state.json")
    try:
        with import_lock(data_dir, wait_s=LOCK_WAIT_S) as got:
            if not got:
                return {"state": "failed", "error": "another import held the import lock", "truncated": True}
            for i in range(0, len(files), CHUNK_FILES):
                if time.monotonic() > deadline:
                    truncated = True
                    break
                importer.run(files[i:i + CHUNK_FILES])
    except typer.Exit:  # the sender printed why (server refused or stayed saturated)
        return {**_counts(importer), "state": "failed", "error": "the server refused or stayed saturated",
                "truncated": truncated}
    except Exception as exc:  # noqa: BLE001 - reported, never raised into a detached process
        return {**_counts(importer), "state": "failed", "error": f"{type(exc).__name__}: {exc}"[:500],
                "truncated": truncated}
    return {**_counts(importer), "state": "done", "truncated": truncated}


def _counts(importer: Any) -> dict[str, int]:
    s = importer.stats
    return {"files": s.files, "sessions": len(importer._seen_sessions), "events": s.events, "new_events": s.new}


def import_lock(data_dir: Path, *, wait_s: float):
    """Hold ``<data_dir>/import.lock`` (``aimem import`` and backfills: one writer of the import
    state); a context manager yielding False when another holder kept it past ``wait_s``."""
    import fcntl
    from contextlib import contextmanager

    @contextmanager
    def held():
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(data_dir / "import.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            end = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= end:
                        yield False
                        return
                    time.sleep(0.2)
            yield True
        finally:
            os.close(fd)  # closing releases the flock

    return held()


def _post(url: str, token: str | None, action: str, ident: Identity, body: dict) -> dict | None:
    """POST ``body`` to ``/hook/backfill/<action>`` with ``ident``'s query; the JSON answer or None."""
    from aimem_cli import hooknet

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    res = hooknet.post(url, f"/hook/backfill/{action}", query=ident.as_query(),
                       body=json.dumps(body).encode(), headers=headers, timeout_s=CLAIM_TIMEOUT_S)
    if not res or res[0] != 200:
        return None
    try:
        answer = json.loads(res[1])
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def main(argv: list[str]) -> int:
    """``python -m aimem_cli.backfill --agent A --cwd D [--session S] [--ingress-url U]``; exit 0."""
    args = dict(zip(argv[::2], argv[1::2]))
    agent, cwd = args.get("--agent"), args.get("--cwd")
    if agent not in CLIENTS or not cwd:
        print("usage: python -m aimem_cli.backfill --agent CLIENT --cwd DIR [--session ID] [--ingress-url URL]",
              file=sys.stderr)
        return 2
    try:
        run(agent, cwd, args.get("--session"), args.get("--ingress-url"))
    except Exception as exc:  # noqa: BLE001 - a detached helper has no one to raise to
        print(f"aimem backfill: {type(exc).__name__}: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
