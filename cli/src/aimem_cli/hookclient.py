"""``aimem hook --agent <client> --event <name>``: the native hook command (stdlib only).

Agents run this on every lifecycle event, so it must be fast and must never hurt them:

1. read the payload from stdin; drop an event that is not one (``clients.ignored``: an
   Antigravity ``PreInvocation`` after the session's first model call) before anything else;
   resolve the project identity of its working directory
   (``aimem_cli.identity``: nearest ``.aimem.toml``, else the git top level, else the cwd)
   and apply the marker's capture rules: with ``capture = false``, or when the event names
   an excluded file, stop here (nothing is spooled, sent or logged);
   apply the event caps (below), append it with its identity to the spool with a fresh
   idempotency key (``hookspool``);
2. session end: hand delivery to a detached ``--drain`` process and exit at once;
3. otherwise POST it to ``<ingress_url>/hook?…&workspace=&project=&root=&origin=&named=``
   within ``EVENT_BUDGET_S`` of process start
   (a down or hung server costs at most that), mark it done on an answer;
4. re-send a few older spooled entries with what is left of the budget (bounded drain);
5. session start: fetch ``/hook/session-start-context`` (only when the server answered
   step 3, so a dead server still costs ≤ ``EVENT_BUDGET_S``) and print it in the client's
   format (``aimem_common.clients``: each client's ``session_start_output``);
6. session start the server accepted, in a project this machine has not asked about yet:
   spawn the detached backfill of the repository's local history (``aimem_cli.backfill``;
   ``[hooks] backfill_on_start = false`` or ``AIMEM_HOOK_BACKFILL=0`` turns it off) and exit
   without waiting for it.

``AIMEM_HOOK_BUDGET_MS`` raises the 150 ms budget (a server over a slow link);
``AIMEM_HOOK_TRANSCRIPT_TAIL=1`` (or ``[hooks] transcript_tail = true``) adds the end of the
client's own transcript (final message, last tool results) to a session end;
``AIMEM_RUN_ID`` (set by ``aimem run`` for its child) is sent as ``run_id`` with every call, so
the session start of a managed run gets its workstream's unseen events;
``AIMEM_HOOK_DEBUG=1`` writes the timings to stderr; ``AIMEM_HOOK_IDENTITY=off`` skips
identity resolution and capture rules (the server then falls back to the cwd's name). Exit status is always 0 and nothing but the context JSON goes to stdout.

Configuration (data dir, ingress URL, token): ``aimem_cli.hookconfig``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from aimem_cli import hooknet
from aimem_cli.capture import capture_allowed
from aimem_cli.hookconfig import client_config, client_data_dir, hooks_setting
from aimem_cli.hookspool import Spool
from aimem_cli.identity import Identity, resolve
from aimem_cli.sessionplaces import remember_session, session_id_of, session_place
from aimem_common import clients
from aimem_common.clients import format_context
from aimem_common.text import ELLIPSIS, cap_utf8, replace_lone_surrogates

# Duplicated from aimem_ingress.normalize / aimem_common.sanitize on purpose: importing
# those would pull pydantic into every hook call. The server re-applies the same caps.
PROMPT_CAP_BYTES = 16 * 1024  # prompts, compaction summaries, assistant messages
EXCERPT_CAP_BYTES = 2 * 1024  # every other string (tool input/output, notifications)
MAX_LIST_ITEMS = 64
MAX_DEPTH = 24
MAX_STDIN_BYTES = 16 * 1024 * 1024
_PROMPT_KEYS = frozenset(
    "prompt initial_prompt initialPrompt summary compact_summary custom_instructions customInstructions"
    " last_assistant_message last-assistant-message prompt_response message text".split())

EVENT_BUDGET_S = 0.15  # from process start to the end of POST + bounded drain
POST_TIMEOUT_S = 0.2  # never more than this for one request
START_MIN_TIMEOUT_S = 0.1  # session start: floor of the event POST when start-up ate the budget
CONTEXT_TIMEOUT_S = 0.9  # the session-start context waits on a writer round trip
DRAIN_MAX_ENTRIES = 16  # per hook call
DRAIN_MIN_AGE_S = 2.0  # younger entries belong to hooks still running
DETACHED_DRAIN_S = 60.0
DETACHED_TIMEOUT_S = 5.0
_START = clients.START_EVENTS
_END = clients.END_EVENTS
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")


def main(argv: list[str]) -> int:
    """Run one hook call; always return 0 (an agent must never fail because of memory)."""
    t0 = process_start()
    try:
        _run(argv, t0)
    except BaseException as exc:  # noqa: BLE001 - the contract is "exit 0 whatever happens"
        _note(f"hook failed: {type(exc).__name__}: {exc}")
    return 0


def _run(argv: list[str], t0: float) -> None:
    args = _parse(argv)
    env = os.environ
    data_dir = client_data_dir(env)
    cfg = client_config(env, data_dir)
    if args.get("ingress-url"):  # written by install-hooks: the stack these hooks belong to
        cfg["url"] = args["ingress-url"]
    spool = Spool(data_dir / "spool")
    if "drain" in args:
        detached_drain(spool, cfg)
        return
    agent = args.get("agent") or "generic"
    payload = _read_stdin()
    if payload is None:
        return
    if clients.ignored(agent, args.get("event") or _payload_event(payload), payload):
        return  # e.g. an Antigravity PreInvocation after the first: not a session start, nothing to record
    ident = session_place(spool, payload, event_identity(payload, env))
    if ident is not None and not capture_allowed(ident, payload):
        if env.get("AIMEM_HOOK_DEBUG"):
            _note("not captured (.aimem.toml capture rules)")
        return  # never spooled, sent or logged: the marker's capture rules say so
    payload = cap_payload(payload)
    event = args.get("event") or _payload_event(payload)
    if (event or "").casefold() in _END and tail_enabled(env, data_dir):
        tail = transcript_tail(agent, payload.get("transcript_path"))
        if tail:
            payload["transcript_tail"] = tail
    entry = {"k": f"{agent}:{os.urandom(12).hex()}", "ts": time.time(), "agent": agent,
             "event": event, "ext": args.get("extension"), "cwd": _cwd(), "p": payload}
    if ident is not None:
        entry["id"] = ident.as_query()
    if args.get("ingress-url"):
        entry["u"] = args["ingress-url"]  # a later drain sends it to the same stack
    run_id = env.get("AIMEM_RUN_ID") or ""
    if _RUN_ID.match(run_id):  # a child of `aimem run`: every call names its managed run
        entry["run"] = run_id
    spool.append(entry)
    name = (event or "").casefold()
    if name in _START:
        remember_session(spool, agent, payload, entry["cwd"], ident)
    if name in _END:
        spawn_detached_drain()
        return
    budget_s = _budget_s(env)
    deadline = t0 + budget_s
    debug = bool(env.get("AIMEM_HOOK_DEBUG"))
    timeout_s = min(max(POST_TIMEOUT_S, budget_s), deadline - time.monotonic())
    if name in _START:  # the context is worth a slow start-up; a hung server still costs ≤ this
        timeout_s = max(timeout_s, START_MIN_TIMEOUT_S)
    status = send_entry(cfg, entry, timeout_s=timeout_s)
    if debug:
        _note(f"{agent}/{event}: status {status} at {time.monotonic() - t0:.3f} s after process start")
    if status is not None and final_answer(status):
        spool.mark_done([entry["k"]])
    elif status is not None:  # kept: say why (`aimem hook status`); no answer is the default reason
        spool.note_refused([entry["k"]], status)
    if status is not None:
        bounded_drain(spool, cfg, deadline=deadline, skip={entry["k"]})
    if name in _START and status is not None and status < 500 and clients.wants_context(agent):
        context = fetch_context(cfg, entry, timeout_s=CONTEXT_TIMEOUT_S)
        if debug:
            _note(f"context: {len(context)} chars at {time.monotonic() - t0:.3f} s")
        if context:
            sys.stdout.write(format_context(agent, context))
            sys.stdout.flush()
    if name in _START and status is not None and 200 <= status < 300:
        start_backfill(agent, payload, ident, entry, cfg, data_dir)


def start_backfill(agent: str, payload: dict[str, Any], ident: Identity | None, entry: dict[str, Any],
                   cfg: dict[str, str | None], data_dir: Path) -> None:
    """After an accepted session start: spawn the detached backfill of this project's local
    history when ``aimem_cli.backfill.wanted`` says so (one ``stat`` otherwise); never waits."""
    from aimem_cli import backfill

    url = str(entry.get("u") or cfg["url"])
    if not backfill.wanted(agent, ident, os.environ, data_dir, url):
        return
    sid = session_id_of(payload)
    cwd = (ident.cwd if ident is not None else None) or entry.get("cwd")
    if cwd:
        backfill.spawn(agent, sid, str(cwd), entry.get("u"))


TAIL_READ_BYTES = 256 * 1024  # how much of the transcript's end is read at session end
TAIL_FINAL_CHARS, TAIL_TOOL_CHARS, TAIL_TOOLS = 4000, 600, 3


def tail_enabled(env: Any, data_dir: Path) -> bool:
    """Opt-in: ``AIMEM_HOOK_TRANSCRIPT_TAIL=1``, or ``[hooks] transcript_tail = true`` in config.toml."""
    if env.get("AIMEM_HOOK_TRANSCRIPT_TAIL") is not None:
        return env["AIMEM_HOOK_TRANSCRIPT_TAIL"].strip().lower() in ("1", "true", "yes", "on")
    return hooks_setting(data_dir, "transcript_tail") is True


def transcript_tail(agent: str, path: Any) -> str | None:
    """Return the end of the client's own transcript as text: the final assistant message and
    the last tool results (≤ ~6 KB; ingress redacts and caps it like any hook text).

    Reads only the last ``TAIL_READ_BYTES`` of ``transcript_path`` with the same readers as
    ``aimem import`` (Claude Code, Codex); other clients, or any error, give ``None``.
    """
    from aimem_cli.transcripts import READERS
    from aimem_cli.transcripts.base import FileState, ReadStats

    if agent not in ("claude-code", "codex") or not isinstance(path, str):
        return None
    try:
        target = Path(path).expanduser()
        size = target.stat().st_size
        state = FileState(offset=max(0, size - TAIL_READ_BYTES))
        if agent == "codex" and state.offset:  # the session id and cwd live in the first line
            with open(target, "rb") as fh:
                first = json.loads(fh.readline())
            state.ctx = {"sid": (first.get("payload") or {}).get("id"), "cwd": (first.get("payload") or {}).get("cwd")}
        events = list(READERS[agent].read(target, state, ReadStats()))
    except (OSError, ValueError, AttributeError):
        return None
    final = next((e.payload.get("message") for e in reversed(events) if e.payload["hook_event_name"] == "stop"), None)
    tools = [e.payload for e in events if e.payload["hook_event_name"] == "post-tool-use"][-TAIL_TOOLS:]
    lines = []
    if final:
        lines += ["Final message:", cap_utf8(str(final), TAIL_FINAL_CHARS), ""]
    if tools:
        lines.append("Last tool results:")
        lines += [f"- {t.get('tool_name', 'tool')}: {' '.join(str(t.get('tool_response') or '').split())[:TAIL_TOOL_CHARS]}"
                  for t in tools]
    return "\n".join(lines).strip() or None


def process_start() -> float:
    """Return when this process started, on the ``time.monotonic`` clock.

    The agent times the whole process, interpreter start-up included, so the budget is
    counted from the fork (``/proc/self/stat`` start time), not from this import.
    Falls back to "now" where ``/proc`` is absent.
    """
    now = time.monotonic()
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read()
        ticks = int(stat[stat.rindex(b")") + 2:].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return now
    return now - min(max(age, 0.0), 1.0)


def _budget_s(env: Any) -> float:
    """The per-call budget: ``AIMEM_HOOK_BUDGET_MS`` (high-latency links) or ``EVENT_BUDGET_S``."""
    try:
        return max(0.01, float(env["AIMEM_HOOK_BUDGET_MS"]) / 1000)
    except (KeyError, ValueError):
        return EVENT_BUDGET_S


def _parse(argv: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--drain":
            out["drain"] = "1"
        elif arg.startswith("--") and "=" in arg:
            k, v = arg[2:].split("=", 1)
            out[k] = v
        elif arg.startswith("--") and i + 1 < len(argv):
            out[arg[2:]] = argv[i + 1]
            i += 1
        i += 1
    return out


def _read_stdin() -> dict[str, Any] | None:
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return None
        raw = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
    except (OSError, ValueError):
        return None
    if len(raw) > MAX_STDIN_BYTES or not raw.strip():
        return None
    try:
        value = json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    return replace_lone_surrogates(value, max_depth=200) if isinstance(value, dict) else None


def cap_payload(value: Any, key: str = "", depth: int = 0) -> Any:
    """Return ``value`` with every string capped (prompt-like keys 16 KiB, others 2 KiB),
    lists cut to ``MAX_LIST_ITEMS`` and nesting below ``MAX_DEPTH`` replaced by ``"…"``."""
    if isinstance(value, str):
        return cap_utf8(value, PROMPT_CAP_BYTES if key in _PROMPT_KEYS else EXCERPT_CAP_BYTES)
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            return ELLIPSIS
        return {str(k): cap_payload(v, str(k), depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        if depth >= MAX_DEPTH:
            return ELLIPSIS
        return [cap_payload(v, key, depth + 1) for v in value[:MAX_LIST_ITEMS]]
    return value


def _payload_event(payload: dict[str, Any]) -> str | None:
    for k in ("hook_event_name", "event", "type"):
        v = payload.get(k)
        if isinstance(v, str):
            return v
    return None


_CWD_KEYS = ("cwd", "directory")


def event_identity(payload: dict[str, Any], env: Any) -> Identity | None:
    """Resolve the project identity of the event's working directory (``aimem_cli.identity``).

    The directory is the payload's own (``cwd``, OpenCode ``directory``, Cursor
    ``workspace_roots[0]``), else this process's. ``AIMEM_HOOK_IDENTITY=off`` skips it
    (the server then falls back to the cwd's basename, as for clients posting directly).
    """
    if env.get("AIMEM_HOOK_IDENTITY") == "off":
        return None
    cwd = next((payload[k] for k in _CWD_KEYS if isinstance(payload.get(k), str) and payload[k]), None)
    roots = payload.get("workspace_roots") or payload.get("workspacePaths")
    if cwd is None and isinstance(roots, list) and roots and isinstance(roots[0], str):
        cwd = roots[0]
    cwd = cwd or _cwd()
    return resolve(cwd) if cwd else None


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:
        return None


def _headers(cfg: dict[str, str | None], key: str | None = None) -> dict[str, str]:
    h = {"Idempotency-Key": key} if key else {}
    if cfg.get("token"):
        h["Authorization"] = f"Bearer {cfg['token']}"
    return h


def _query(entry: dict[str, Any]) -> dict[str, str]:
    q = {"agent": entry["agent"]}
    for name, field in (("event", "event"), ("extension", "ext"), ("cwd", "cwd")):
        if entry.get(field):
            q[name] = str(entry[field])
    if isinstance(entry.get("ts"), (int, float)):
        q["ts"] = f"{entry['ts']:.3f}"  # when the hook ran: a late re-send keeps its time
    if isinstance(entry.get("run"), str):
        q["run_id"] = entry["run"]
    ident = entry.get("id")
    if isinstance(ident, dict):
        payload = entry.get("p") if isinstance(entry.get("p"), dict) else {}
        for name, value in ident.items():
            # A payload naming its own workspace/project keeps it (explicit fields win).
            if isinstance(value, str) and not isinstance(payload.get(name), str):
                q[name] = value
    return q


def send_entry(cfg: dict[str, str | None], entry: dict[str, Any], *, timeout_s: float) -> int | None:
    """POST one spooled entry to ``/hook``; return the HTTP status or None (no answer)."""
    body = json.dumps(entry["p"], ensure_ascii=False).encode("utf-8")
    url = entry.get("u") if isinstance(entry.get("u"), str) else cfg["url"]
    res = hooknet.post(str(url), "/hook", query=_query(entry), body=body,
                       headers=_headers(cfg, entry["k"]), timeout_s=timeout_s)
    return res[0] if res else None


def final_answer(status: int) -> bool:
    """True when the entry must leave the spool: accepted, or refused for good (4xx, e.g.
    ``410 purged``: its session was purged). 401/403 stay (a credential may be fixed) with
    their reason noted (``Spool.note_refused``)."""
    return 200 <= status < 300 or (400 <= status < 500 and status not in (401, 403, 408, 429))


def fetch_context(cfg: dict[str, str | None], entry: dict[str, Any], *, timeout_s: float) -> str:
    """Return the session-start context text (``""`` on any failure)."""
    body = json.dumps(entry["p"], ensure_ascii=False).encode("utf-8")
    res = hooknet.post(str(cfg["url"]), "/hook/session-start-context", query=_query(entry), body=body,
                       headers=_headers(cfg), timeout_s=timeout_s)
    if not res or res[0] != 200:
        return ""
    try:
        text = json.loads(res[1]).get("context")
    except (ValueError, AttributeError):
        return ""
    return text if isinstance(text, str) else ""


def bounded_drain(spool: Spool, cfg: dict[str, str | None], *, deadline: float, skip: set[str]) -> int:
    """Re-send older spooled entries until ``deadline``; return how many left the spool."""
    if deadline - time.monotonic() < 0.01:
        return 0
    with spool.draining() as got:
        if not got:
            return 0
        return _drain(spool, cfg, deadline=deadline, skip=skip, max_entries=DRAIN_MAX_ENTRIES,
                      min_age_s=DRAIN_MIN_AGE_S, timeout_s=POST_TIMEOUT_S)


def detached_drain(spool: Spool, cfg: dict[str, str | None]) -> int:
    """Deliver the whole spool (the ``--drain`` process); gives up after ``DETACHED_DRAIN_S``."""
    deadline = time.monotonic() + DETACHED_DRAIN_S
    with spool.draining(wait_s=5.0) as got:
        if not got:
            return 0
        return _drain(spool, cfg, deadline=deadline, skip=set(), max_entries=100_000, min_age_s=0.0,
                      timeout_s=DETACHED_TIMEOUT_S)


def _drain(spool: Spool, cfg: dict[str, str | None], *, deadline: float, skip: set[str],
           max_entries: int, min_age_s: float, timeout_s: float) -> int:
    now = time.time()
    done: list[str] = []
    try:
        for entry in spool.pending()[:max_entries]:
            if entry["k"] in skip or now - float(entry.get("ts", 0)) < min_age_s:
                continue
            left = deadline - time.monotonic()
            if left <= 0.005:
                break
            status = send_entry(cfg, entry, timeout_s=min(timeout_s, left))
            if status is None or not final_answer(status):
                spool.note_refused([entry["k"]], status)
                break  # down, saturated or failing: keep the rest for later
            done.append(entry["k"])
    finally:
        spool.mark_done(done)
    return len(done)


NOT_CAPTURED = 0


def finalize_session(agent: str, *, session_id: str | None = None, cwd: str | None = None,
                     timeout_s: float = 5.0) -> tuple[str | None, int | None]:
    """Send a synthetic session end for ``agent`` (``aimem finalize-session``).

    ``session_id`` defaults to the agent's latest session-start seen by this client.
    Returns ``(session_id, HTTP status or None)``; the event is spooled first, so an
    unreachable server gets it on a later drain. ``NOT_CAPTURED`` (0) instead of a status:
    the directory's ``.aimem.toml`` says ``capture = false``, nothing was sent.
    """
    env = os.environ
    data_dir = client_data_dir(env)
    cfg = client_config(env, data_dir)
    spool = Spool(data_dir / "spool")
    if session_id is None:
        try:
            last = json.loads((spool.dir / f"last-session.{agent}.json").read_text())
        except (OSError, ValueError):
            return None, None
        session_id, cwd = last.get("session_id"), cwd or last.get("cwd")
    cwd = cwd or _cwd()
    payload = {"session_id": session_id, "sessionID": session_id, "conversation_id": session_id,
               "conversationId": session_id,
               "cwd": cwd, "directory": cwd, "reason": "finalize-session"}
    ident = session_place(spool, payload, event_identity(payload, env))
    if ident is not None and not ident.capture:
        return session_id, NOT_CAPTURED
    entry = {"k": f"{agent}:{os.urandom(12).hex()}", "ts": time.time(), "agent": agent,
             "event": clients.client(agent).end_event, "ext": None, "cwd": cwd, "p": payload}
    if ident is not None:
        entry["id"] = ident.as_query()
    run_id = env.get("AIMEM_RUN_ID") or ""
    if _RUN_ID.match(run_id):  # a child of `aimem run`: every call names its managed run
        entry["run"] = run_id
    spool.append(entry)
    status = send_entry(cfg, entry, timeout_s=timeout_s)
    if status is not None and final_answer(status):
        spool.mark_done([entry["k"]])
    else:
        spool.note_refused([entry["k"]], status)
    return session_id, status


def spawn_detached_drain() -> None:
    """Start ``python -m aimem_cli.hookclient --drain`` in its own session; do not wait."""
    import subprocess

    subprocess.Popen(
        [sys.executable, "-m", "aimem_cli.hookclient", "--drain"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True,
    )


def _note(message: str) -> None:
    """Best effort: one line to stderr (agents show hook stderr only in debug views)."""
    try:
        sys.stderr.write(f"aimem hook: {message}\n")
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
