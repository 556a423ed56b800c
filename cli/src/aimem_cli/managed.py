"""``aimem run``: launch an agent CLI inside its checkout's managed workstream.

One run, in order:

1. resolve the checkout's identity (``aimem_cli.identity``: the same keys a hook sends);
2. open a lease through ingress (``POST /hook/workstream/lease``, ``action=open``; the harness
   named, else the writer picks the newest one of the workstream among those whose binary
   is on this PATH, ``usable``) and renew it every
   ``HEARTBEAT_SECONDS`` from a thread;
3. wire the harness's hooks and MCP server into the user's files when it has no aimem hook
   yet (``autowire``; ``--no-autowire`` skips it), note the checkout in the client's
   ``client-projects.json`` (``note_checkout``), and start the harness's binary with
   ``AIMEM_RUN_ID`` (and ``AIMEM_WORKSTREAM_ID``) in its environment, in its native session
   (``native_args``: the session its last run here appended under is resumed, else a new
   one is started, with an id aimem picks where the CLI takes one): its hooks send the run
   id, so its session start gets the workstream events it has not seen (ingress
   ``workstreams.py``; a resumed session too, without handoff or brief);
4. when it exits, read the native transcripts it wrote during the run with the readers of
   ``aimem import`` (``aimem_cli.transcripts``), keep the visible exchange (prompts, final
   messages, tool calls with a short result) of sessions inside the checkout, cut every packet
   out of the texts (the origin marker: a packet read back is never imported), and append them plus a git checkpoint
   (branch, HEAD, changed files) to the ledger;
5. release the lease with the child's exit code. A failure the launcher handles (no
   binary, the append refused) cancels it; a launcher killed outright leaves the lease to
   expire (``LEASE_SECONDS``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aimem_cli import hooknet
from aimem_cli.identity import Identity, resolve, workstream_root
from aimem_common import locations
from aimem_common.workstreams import HARNESSES, HEARTBEAT_SECONDS, LEASE_SECONDS, contains_marker, strip_injected, strip_packets

# Every managed agent's start waits on this module's imports: no more than the start needs
# (plain classes, not ``dataclasses``; ``os.urandom``, not ``uuid``; ``which`` here, not
# ``shutil``'s). ``bench/workstream_start.py`` measures what is left.
BINARIES = {"claude-code": "claude", "codex": "codex", "gemini-cli": "gemini"}
# Arguments with which the user picks a native session (or none) themselves: left as they are.
SESSION_ARGS = {
    "claude-code": ("-r", "--resume", "-c", "--continue", "--session-id", "--from-pr", "--teleport", "--fork-session"),
    "gemini-cli": ("-r", "--resume", "--session-id", "--session-file", "--list-sessions", "--delete-session"),
    "codex": ("resume", "fork", "--last"),
}
CODEX_SUBCOMMANDS = ("exec", "e", "review", "login", "logout", "mcp", "mcp-server", "app-server", "completion",
                     "sandbox", "debug", "apply", "a", "resume", "fork", "cloud", "features", "help")
CLIENT_PROJECTS = "client-projects.json"
READERS = {"claude-code": "claude_code", "codex": "codex", "gemini-cli": "gemini"}  # aimem_cli.transcripts.*
TOOL_TEXT_CHARS = 600
APPEND_BATCH = 500
MTIME_SLACK_S = 2.0


class RunError(Exception):
    """A launcher failure with a message for the user (the lease is cancelled); ``code``: the
    error code of the server's answer, when it gave one."""

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


class Ingress:
    """The launcher's HTTP client to ingress (the hook client's URL and token)."""

    def __init__(self, url: str, token: str | None, ident: Identity, timeout_s: float = 10.0):
        self.url, self.token, self.ident, self.timeout_s = url, token, ident, timeout_s

    def post(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``route`` with the checkout's identity; return the JSON answer.

        Raises:
            RunError: no answer, or an error answer (its code and message).
        """
        q = {k: v for k, v in self.ident.as_query().items() if v}
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        res = hooknet.post(self.url, route, query=q, body=json.dumps(body).encode(), headers=headers,
                           timeout_s=self.timeout_s)
        if res is None:
            raise RunError(f"cannot reach ingress at {self.url}")
        status, raw = res
        try:
            data = json.loads(raw or b"{}")
        except ValueError:
            data = {}
        if status >= 400:
            err = data.get("error", data) if isinstance(data, dict) else {}
            raise RunError(f"{route}: {status} {err.get('code', '')}: {err.get('message', raw[:300])}",
                           code=err.get("code"))
        return data


class Lease:
    """A held run lease, renewed every ``every_s`` seconds from a daemon thread until ``stop``."""

    def __init__(self, ingress: Ingress, run_id: str, lease_s: int = LEASE_SECONDS,
                 every_s: float = HEARTBEAT_SECONDS):
        self.ingress, self.run_id, self.lease_s, self.every_s = ingress, run_id, lease_s, every_s
        self.renewals = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._beat, name="aimem-lease", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.ingress.post("/hook/workstream/lease", {"action": "renew", "run_id": self.run_id,
                                                             "lease_s": self.lease_s})
                self.renewals += 1
            except RunError as exc:
                self.failures.append(str(exc))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.ingress.timeout_s + 1)


def new_session_id() -> str:
    """A random (version 4) UUID in its usual text form: the native session id aimem picks."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def which(name: str, path: str | None) -> str | None:
    """The first executable file ``name`` on ``path`` (``os.pathsep``-separated), or None."""
    for folder in (path or os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or os.curdir, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def native_args(harness: str, args: list[str], resume_id: str | None) -> tuple[list[str], str | None]:
    """Return ``(arguments after the binary, the session id aimem chose)`` that put the harness
    in its native session of this workstream.

    ``resume_id`` (the session its last run here appended under) is resumed: Claude Code
    ``--resume ID``, Gemini CLI ``--resume ID``, Codex ``resume ID`` (interactive) or ``exec
    [OPTIONS] resume ID PROMPT``. Without one a new session starts: Claude Code and Gemini CLI
    get ``--session-id <new uuid>`` (returned); Codex picks its own id. Arguments that already
    pick a session (``--resume``, ``--continue``, ``codex resume``, …) or a Codex subcommand
    other than ``exec`` are left alone.
    """
    picks = SESSION_ARGS[harness]
    if any(a in picks or a.split("=", 1)[0] in picks for a in args):
        return args, None
    if harness == "codex":
        if not resume_id:
            return args, None
        if not args or (args[0].startswith("-") and args[0] not in ("-h", "--help", "-V", "--version")) \
                or args[0] not in CODEX_SUBCOMMANDS:
            return ["resume", resume_id, *args], None
        if args[0] in ("exec", "e") and len(args) > 1 and not args[-1].startswith("-"):
            return [*args[:-1], "resume", resume_id, args[-1]], None  # exec's options, then its subcommand
        return args, None
    if resume_id:
        return ["--resume", resume_id, *args], None
    fresh = new_session_id()
    return ["--session-id", fresh, *args], fresh


def autowire(harness: str, home: Path, cwd: Path, url: str, token: str | None,
             codex_home: Path | None = None) -> list[Path]:
    """Install the harness's aimem hooks and MCP server in the user's files when its hook file
    holds no aimem hook yet (the installers of ``aimem setup-agent``, user scope; merged,
    never clobbered). Returns the files written (none when it was wired already).

    Raises:
        RunError: a settings file cannot be merged safely (the user wires it by hand).
    """
    from aimem_cli.installers.base import InstallError, apply
    from aimem_cli.installers.plans import Target, hooks_installed, plan_hooks, plan_mcp

    target = Target(scope="user", home=home, project_dir=cwd, ingress_url=url.rstrip("/"), codex_home=codex_home,
                    token=token)
    try:
        if hooks_installed(harness, target):
            return []
        return apply(plan_hooks(harness, target) + plan_mcp(harness, target, _mcp_url()))
    except InstallError as exc:
        raise RunError(f"cannot wire {harness} (aimem setup-agent --client {harness} shows why, "
                       f"--no-autowire skips it): {exc}") from None


def _mcp_url() -> str:
    from aimem_common import config

    try:
        settings = config.load(None, check_writable=False)
    except config.ConfigError as exc:
        raise RunError(exc.message) from None
    return f"http://127.0.0.1:{settings.port('mcp-gateway')}/mcp"


def note_checkout(client_dir: Path | None, run: dict[str, Any], ident: Identity, native_session: str | None,
                  *, wired: Path | None = None) -> None:
    """Record this machine's checkout of the run's workstream in ``<client dir>/client-projects.json``
    (``{"version": 1, "workstreams": {id: {checkout_root, workspace, project, name, harnesses:
    {harness: native session id}, last_run_at}}, "wired": {harness: HOME}}``): ``aimem show``
    reads it; no server API exposes it. ``wired``: the HOME whose files ``autowire`` checked
    for the run's harness (later runs skip the check). Written atomically; an unwritable file
    is skipped (a run never fails on it)."""
    if client_dir is None:
        return
    path = client_dir / CLIENT_PROJECTS
    doc = read_checkouts(client_dir)
    if wired is not None:
        doc.setdefault("wired", {})[run["harness"]] = str(wired)
    ws = run["workstream"]
    entry = doc["workstreams"].setdefault(ws["id"], {})
    harnesses = entry.get("harnesses") if isinstance(entry.get("harnesses"), dict) else {}
    if native_session:
        harnesses[run["harness"]] = native_session
    entry.update({"checkout_root": ws["checkout_root"], "workspace": ident.workspace, "project": ident.project,
                  "name": ws["name"], "harnesses": harnesses, "last_run_at": run["started_at"]})
    try:
        client_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{CLIENT_PROJECTS}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


def was_wired(client_dir: Path | None, harness: str, home: Path) -> bool:
    """Whether ``autowire`` already checked ``harness`` in ``home`` (``client-projects.json``)."""
    if client_dir is None:
        return False
    wired = read_checkouts(client_dir).get("wired")
    return isinstance(wired, dict) and wired.get(harness) == str(home)


def read_checkouts(client_dir: Path) -> dict[str, Any]:
    """The client's ``client-projects.json`` (an empty registry when missing or unreadable)."""
    try:
        doc = json.loads((client_dir / CLIENT_PROJECTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = {}
    if not isinstance(doc, dict) or not isinstance(doc.get("workstreams"), dict):
        doc = {"version": 1, "workstreams": {}}
    if not isinstance(doc.get("wired", {}), dict):
        doc["wired"] = {}
    return doc


def transcript_events(harness: str, home: Path, root: str, since: float) -> tuple[list[dict[str, Any]], str | None, int]:
    """Return ``(ledger events, native session id, dropped marked texts)`` of the harness's
    transcripts written since ``since`` (epoch seconds) by sessions inside ``root``."""
    import importlib

    from aimem_cli.transcripts import gemini  # imported after the child exits: not on the start path
    from aimem_cli.transcripts.base import FileState, ReadStats

    reader = importlib.import_module(f"aimem_cli.transcripts.{READERS[harness]}")
    files = [p for p in reader.discover(home) if _mtime(p) >= since - MTIME_SLACK_S]
    files.sort(key=_mtime)
    out: list[dict[str, Any]] = []
    session, dropped = None, 0
    for path in files:
        extra = ({gemini.project_hash(root): root, gemini.project_hash(os.path.realpath(root)): root},) \
            if harness == "gemini-cli" else ()
        for ev in reader.read(path, FileState(), ReadStats(), *extra):
            if not _inside(ev.cwd, root):
                continue
            item = _ledger_event(harness, ev.key, ev.payload)
            if item is None:
                continue
            if contains_marker(item["text"]):
                dropped += 1  # aimem's own packet, persisted by the harness: never imported back
            if item["role"] == "user":
                item["text"] = strip_injected(item["text"])  # packets, handoffs, briefs the harness echoed
            else:
                item["text"] = strip_packets(item["text"])
            if contains_marker(item["text"]) or not item["text"].strip():
                continue  # nothing of the user's own around it
            session = ev.session_id
            out.append(item)
    return out, session, dropped


def _codex_home(env: dict[str, str]) -> Path | None:
    value = env.get("CODEX_HOME")
    return Path(value).expanduser() if value else None


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


def _inside(cwd: str | None, root: str) -> bool:
    if not cwd:
        return True  # a reader without a cwd: the file was picked by time, keep it
    c = locations.normalize(os.path.realpath(cwd)) or ""
    r = locations.normalize(os.path.realpath(root)) or root
    return c == r or c.startswith(r.rstrip("/") + "/")


def _ledger_event(harness: str, key: str, p: dict[str, Any]) -> dict[str, Any] | None:
    kind = p.get("hook_event_name")
    if kind == "user-prompt":
        role, text = "user", p.get("prompt")
    elif kind == "stop":
        role, text = "assistant", p.get("message")
    elif kind == "post-tool-use":
        role = "tool"
        args = p.get("tool_input")
        shown = args.get("command") or args.get("file_path") or args if isinstance(args, dict) else args
        out = str(p.get("tool_response") or "")
        text = f"{p.get('tool_name') or 'tool'}: {_short(shown)}" + (f"\n→ {_short(out)}" if out.strip() else "")
    else:
        return None
    if not isinstance(text, str) or not text.strip():
        return None
    return {"role": role, "text": text, "ts": p.get("timestamp") if isinstance(p.get("timestamp"), str) else None,
            "source_key": f"{harness}:{key}"[:256]}


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= TOOL_TEXT_CHARS else text[: TOOL_TEXT_CHARS - 1] + "…"


def git_checkpoint(root: str, harness: str) -> dict[str, Any] | None:
    """Return the checkpoint event of the checkout (branch, HEAD, changed files), None outside git.

    One ``git status --porcelain=v2 --branch -z`` gives all three (its ``# branch.oid`` and
    ``# branch.head`` headers, then one entry per changed or untracked file; a rename names
    its new path): the launcher's exit waits on it.
    """
    try:
        proc = subprocess.run(["git", "-C", root, "status", "--porcelain=v2", "--branch", "-z",
                               "--untracked-files=all"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None  # not a work tree (or git is missing)
    head, branch, changed = "(no commit yet)", "(detached)", []
    entries = iter(proc.stdout.decode("utf-8", "replace").split("\0"))
    for entry in entries:
        if entry.startswith("# branch.oid "):
            oid = entry[len("# branch.oid "):]
            head = oid[:12] if oid != "(initial)" else head
        elif entry.startswith("# branch.head "):
            branch = entry[len("# branch.head "):]
        elif entry[:2] in ("1 ", "2 ", "u ", "? "):
            fields = {"1": 8, "2": 9, "u": 10, "?": 1}[entry[0]]
            parts = entry.split(" ", fields)
            if len(parts) > fields:
                changed.append(parts[fields])
            if entry[0] == "2":
                next(entries, None)  # a rename's original path comes as its own entry
    shown = ", ".join(changed[:50]) + (f" and {len(changed) - 50} more" if len(changed) > 50 else "")
    text = f"Git checkpoint after the {harness} run: branch {branch}, HEAD {head}, changed files: {shown or 'none'}"
    return {"role": "checkpoint", "text": text, "ts": None, "source_key": None}


def batches(items: list[dict[str, Any]], n: int = APPEND_BATCH) -> Iterator[list[dict[str, Any]]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


class RunResult:
    """What one ``aimem run`` did (printed on stderr at the end)."""

    def __init__(self, run_id: str, workstream_id: str, harness: str, exit_code: int, appended: int = 0,
                 dropped_marked: int = 0, state: str = "released"):
        self.run_id, self.workstream_id, self.harness, self.exit_code = run_id, workstream_id, harness, exit_code
        self.appended, self.dropped_marked, self.state = appended, dropped_marked, state


def run(harness: str | None, args: list[str], *, cwd: Path, url: str, token: str | None,
        home: Path | None = None, lease_s: int = LEASE_SECONDS, heartbeat_s: float = HEARTBEAT_SECONDS,
        env: dict[str, str] | None = None, wire: bool = True, client_dir: Path | None = None) -> RunResult:
    """Run one harness in the checkout's workstream (see the module docstring).

    Raises:
        RunError: the lease could not be opened, the binary is missing, or importing the
            transcript failed (the lease is cancelled first when it was open).
    """
    if harness is not None and harness not in HARNESSES:
        raise RunError(f"unknown harness {harness!r} (one of {', '.join(HARNESSES)})")
    ident = resolve(cwd)
    root = workstream_root(cwd, ident) or str(cwd)  # a linked worktree is its own workstream
    ingress = Ingress(url, token, ident)
    run_id = os.urandom(16).hex()
    base_env = dict(os.environ if env is None else env)
    body: dict[str, Any] = {"action": "open", "run_id": run_id, "harness": harness, "cwd": str(cwd),
                            "checkout_root": root, "lease_s": lease_s}
    home = home or Path(base_env.get("HOME") or Path.home())

    def prepare(name: str) -> tuple[str, Path | None]:
        """The harness's binary, wired when it never was (raises RunError: not on PATH, not wirable)."""
        binary = which(BINARIES[name], base_env.get("PATH"))
        if binary is None:
            raise RunError(f"{BINARIES[name]} ({name}) is not on PATH")
        if not wire or was_wired(client_dir, name, home):  # checked once per harness and HOME
            return binary, None
        for path in autowire(name, home, cwd, url, token, _codex_home(base_env)):
            print(f"aimem: wired {name} into {path}", file=sys.stderr)
        return binary, home

    # A named harness that cannot start fails before the lease is opened: nothing is created or
    # recorded as the workstream's harness (a later bare `aimem run` would pick it).
    ready = prepare(harness) if harness is not None else None
    if harness is None:  # the newest harness of the workstream that can start on this machine
        body["usable"] = [h for h in HARNESSES if which(BINARIES[h], base_env.get("PATH"))]
    opened = ingress.post("/hook/workstream/lease", body)["run"]
    harness = opened["harness"]
    lease = Lease(ingress, run_id, lease_s=lease_s, every_s=heartbeat_s)
    try:
        binary, wired = ready or prepare(harness)
        argv, created = native_args(harness, args, opened.get("resume_session_id"))
        lease.start()
        started = time.time()
        child_env = {**base_env, "AIMEM_RUN_ID": run_id, "AIMEM_WORKSTREAM_ID": opened["workstream"]["id"]}
        proc = subprocess.Popen([binary, *argv], cwd=cwd, env=child_env)
        # The local registry is noted while the child starts (nothing of the child reads it).
        note_checkout(client_dir, opened, ident, created or opened.get("resume_session_id"), wired=wired)
        while True:
            try:
                code = proc.wait()
                break
            except KeyboardInterrupt:  # Ctrl-C reaches the child too; wait for it to finish
                continue
        check: list[dict[str, Any] | None] = []  # git runs while the transcripts are read
        git = threading.Thread(target=lambda: check.append(git_checkpoint(root, harness)), name="aimem-git")
        git.start()
        try:
            events, session, dropped = transcript_events(harness, home, root, started)
        finally:
            git.join()
        if check and check[0]:
            events.append(check[0])
        appended = 0
        try:
            for chunk in batches(events):
                got = ingress.post("/hook/workstream/append", {"run_id": run_id, "native_session_id": session,
                                                               "events": chunk})
                appended += got.get("appended", 0)
            lease.stop()
            ingress.post("/hook/workstream/lease", {"action": "release", "run_id": run_id, "exit_code": code})
        except RunError as exc:
            if exc.code != "run_not_found":
                raise
            # The workstream was deleted under the run (workstream-delete --force): never report
            # events as added to a ledger that no longer exists.
            raise RunError(f"workstream {opened['workstream']['id']} was deleted while run {run_id} held it: "
                           f"none of its {len(events)} event(s) are stored (the harness exited {code})",
                           code="run_not_found") from None
        if session:
            note_checkout(client_dir, opened, ident, session)
        return RunResult(run_id, opened["workstream"]["id"], harness, code, appended, dropped)
    except BaseException:
        lease.stop()
        try:
            ingress.post("/hook/workstream/lease", {"action": "cancel", "run_id": run_id})
        except RunError:
            pass  # the lease expires on its own
        raise


USAGE = "usage: aimem run [HARNESS] [--no-autowire] [--lease-seconds N] [--heartbeat-seconds S] [-- HARNESS ARGS]"


def main(argv: list[str]) -> int:
    """``aimem run``/``aimem continue`` before typer is imported (the start of every managed
    agent waits on it); ``--help`` goes through typer. Returns the child's exit status."""
    from aimem_cli.hookconfig import client_settings

    verb, rest = argv[0], argv[1:]
    harness, args, lease_s, beat_s, wire = None, [], LEASE_SECONDS, float(HEARTBEAT_SECONDS), True
    i = 0
    try:
        while i < len(rest):
            a = rest[i]
            if a == "--":
                args = rest[i + 1:]
                break
            if a == "--no-autowire":
                wire = False
                i += 1
                continue
            if a in ("--lease-seconds", "--heartbeat-seconds"):
                value = rest[i + 1]
                lease_s, beat_s = (int(value), beat_s) if a == "--lease-seconds" else (lease_s, float(value))
                i += 2
                continue
            if a.startswith("-") or verb == "continue" or harness is not None:
                args = rest[i:]
                break
            harness = a
            i += 1
    except (IndexError, ValueError):
        print(USAGE, file=sys.stderr)
        return 2
    if not 5 <= lease_s <= 600 or beat_s < 0.5:
        print("aimem: --lease-seconds must be 5..600 and --heartbeat-seconds ≥ 0.5", file=sys.stderr)
        return 2
    client_dir, cfg = client_settings()
    try:
        result = run(harness, args, cwd=Path.cwd(), url=str(cfg["url"]), token=cfg.get("token"), lease_s=lease_s,
                     heartbeat_s=beat_s, wire=wire, client_dir=client_dir)
    except RunError as exc:
        print(f"aimem: {exc}", file=sys.stderr)
        return 1
    print(f"aimem: run {result.run_id} ({result.harness}) exited {result.exit_code}; {result.appended} event(s) "
          f"added to workstream {result.workstream_id}"
          + (f"; {result.dropped_marked} injected packet(s) not re-imported" if result.dropped_marked else ""),
          file=sys.stderr)
    return result.exit_code
