"""Model-based test of the session/handoff lifecycle over random interleavings (issue 26).

A hypothesis ``RuleBasedStateMachine`` drives sessions of four clients (Claude Code, Codex,
Gemini CLI, OpenCode) in real ``git init`` repositories (subdirectories, a linked worktree)
through the real stack: the real hook client (``aimem_cli.hookclient.main``, the entry
``aimem hook`` runs, payload on stdin and the SessionStart context on stdout) → ingress →
nats-server → writer, the maintainer's idle finalisation on demand
(``aimem.maint.finalize_idle``, the RPC of ``aimem finalize-idle``), ``POST /hook/import``
and ``/admin/purge-session``. After every step it compares the store with the reference
model ``aimem_testing.lifecycle_model`` (written from DESIGN.md "Session lifecycle is a
state machine" and issue 26, not from the code):

* deliveries (what the agent actually receives in its SessionStart context): at most once,
  only to a new, non-resumed, non-child session of the same place that started after the
  handoff was opened, and the newest one by event time;
* per session: exactly the model's open automatic handoff (one after a real end, none for
  a session without real work, a child, an import), the model's claimer;
* per project: the open handoffs listed equal the model's, and the open counts of the
  handoff list, the project status and the open sessions agree (``memory_briefing`` counts
  too, at the end of every example); nothing crosses repositories.

One stack per run; each example gets fresh repositories (fresh project names). Rules that
exercise a class of issue 26 not fixed on this branch are switched off by ``KNOWN_GAPS``;
``AIMEM_MODEL_GAPS`` overrides it (``none`` = check everything). ``AIMEM_MODEL_EXAMPLES`` and
``AIMEM_MODEL_STEPS`` size the run (``make model-check`` runs a long one); the figures are
printed at the end and written to ``AIMEM_MODEL_REPORT`` when set; ``AIMEM_MODEL_RANDOM=1``
draws a fresh seed (long runs repeated until a time is up), ``AIMEM_MODEL_SHRINK=0`` skips
shrinking a failure (its steps are still logged); ``AIMEM_MODEL_CEX`` names
a file that collects every failing sequence (readable steps; the last of a kind is the most
shrunk). ``test_counterexample`` replays the shortest known sequence of each class: a strict
xfail while its class is a known gap, so the run says when a fix has landed.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from aimem_cli import hookclient
from aimem_cli.hookspool import Spool
from aimem_cli.identity import resolve
from aimem_cli.importer import batch_head
from aimem_testing.gitrepo import git, make_repo
from aimem_testing.lifecycle_model import Model
from aimem_testing.stack import LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

# Classes of issue 26 whose fix is not on this branch: the rules (or model variants) that
# exercise them are off. Empty: all are fixed. The names, for AIMEM_MODEL_GAPS (a rule switched
# back to the old behaviour): idle_owner, windows_paths, event_time_order, children,
# start_no_source, checkout_alias, no_cwd, ancestor_marker, parallel_chain, idle_same_second,
# give_back_stale, import_live, alias_under_marker, born_superseded, import_repo_id.
KNOWN_GAPS: frozenset[str] = frozenset()  # every class of issue 26 and those the model found are fixed


def _gaps() -> frozenset[str]:
    raw = os.environ.get("AIMEM_MODEL_GAPS")
    if raw is None:
        return KNOWN_GAPS
    return frozenset() if raw.strip() in ("", "none") else frozenset(x.strip() for x in raw.split(",") if x.strip())


GAPS = _gaps()
EXAMPLES = int(os.environ.get("AIMEM_MODEL_EXAMPLES", "20"))
STEPS = int(os.environ.get("AIMEM_MODEL_STEPS", "20"))
CLIENTS = ("claude-code", "codex", "gemini-cli", "opencode")
# The `source` values each client sends on a session start (None: the field is absent).
SOURCES = {"claude-code": ("startup", "resume", "clear", "compact", None), "codex": ("startup", "resume", None),
           "gemini-cli": ("startup", "resume", "clear", None), "opencode": (None,)}
EVENTS = {  # kind -> event name per client
    "start": {"claude-code": "SessionStart", "codex": "SessionStart", "gemini-cli": "SessionStart",
              "opencode": "session.created"},
    "prompt": {"claude-code": "UserPromptSubmit", "codex": "UserPromptSubmit", "gemini-cli": "BeforeAgent",
               "opencode": "chat.message"},
    "tool": {"claude-code": "PostToolUse", "codex": "PostToolUse", "gemini-cli": "AfterTool",
             "opencode": "tool.execute.after"},
    "end": {"claude-code": "SessionEnd", "codex": "SessionEnd", "gemini-cli": "SessionEnd",
            "opencode": "session.deleted"},
}
DEAD_URL = "http://127.0.0.1:9"  # nothing listens: the hook client spools (an outage)
_HANDOFF = re.compile(r"## Handoff from [^\n]*?\(session ([^,)\s]+)")
STATS: dict[str, Any] = {"examples": 0, "steps": 0, "invariant_checks": 0, "deliveries": 0, "lost_injections": 0,
                         "rules": {}}


# -- the real parts ------------------------------------------------------------------------------

def windows_spellings(folder: str) -> list[str]:
    """Four spellings of one synthetic Windows folder ``<drive>:\\<WIN_PARENT>\\<folder>`` (drive
    letter case, ``\\`` vs ``/``, a trailing separator, the folders' own case — the last folder's
    too, which names the project): what different Windows clients send for it.
    Nothing on this machine is at that path; the server only ever sees it as text."""
    parent = WIN_PARENT
    return [f"Q:\\{parent}\\{folder}", f"q:\\{parent}\\{folder}\\", f"Q:/{parent}/{folder}",
            f"q:/{parent.upper()}/{folder.upper()}"]


WIN_PARENT = "aimem-model-repos"


class HookClient:
    """One developer machine: the real hook client in this process (``aimem hook``'s entry),
    its own spool, pointed at ``url`` (``DEAD_URL`` for a machine that is offline)."""

    def __init__(self, data_dir: Path, url: str, token: str | None):
        self.data_dir, self.url, self.token = data_dir, url, token
        data_dir.mkdir(parents=True, exist_ok=True)

    def run(self, agent: str, event: str, payload: dict[str, Any] | None, cwd: Path | str,
            url: str | None = None) -> str:
        """Run ``aimem hook --agent <agent> --event <event>`` with ``payload`` on stdin in
        ``cwd``; return its stdout (the SessionStart context, else ``""``)."""
        env = {"AIMEM_INGRESS_URL": url or self.url, "AIMEM_DATA_DIR": str(self.data_dir),
               "AIMEM_HOOK_BUDGET_MS": "8000", "AIMEM_AUTH__TOKEN": self.token or ""}
        saved_env = {k: os.environ.get(k) for k in env}
        saved = sys.stdin, sys.stdout, os.getcwd()
        out = io.StringIO()
        try:
            os.environ.update(env)
            os.chdir(cwd if Path(str(cwd)).is_dir() else self.data_dir)
            data = json.dumps(payload or {}).encode()
            sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
            sys.stdout = out
            argv = ["--drain"] if payload is None else ["--agent", agent, "--event", event]
            hookclient.main(argv)
        finally:
            sys.stdin, sys.stdout = saved[0], saved[1]
            os.chdir(saved[2])
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return out.getvalue()

    def drain(self, url: str | None = None) -> None:
        """Deliver the whole spool (``aimem_cli.hookclient --drain``, what a session end spawns)."""
        self.run("", "", None, self.data_dir, url=url)

    def pending(self) -> list[dict[str, Any]]:
        """The spool's undelivered entries, oldest first."""
        return Spool(self.data_dir / "spool").pending()


def context_text(agent: str, stdout: str) -> str:
    """The text the agent receives from the SessionStart hook's stdout."""
    if not stdout.strip():
        return ""
    if agent in ("claude-code", "codex", "gemini-cli"):
        return json.loads(stdout)["hookSpecificOutput"]["additionalContext"]
    return stdout


def delivered_from(text: str) -> str | None:
    """The session id of the handoff injected in ``text`` (None: no handoff)."""
    m = _HANDOFF.search(text)
    return m.group(1) if m else None


class Api:
    """Reads of the running stack (query service) and its admin/maintainer calls."""

    def __init__(self, stack: LocalStack):
        self.stack = stack
        self.http = httpx.Client(base_url=stack.url("query"), headers=stack.headers, timeout=30)

    def wait_applied(self, timeout_s: float = 60.0) -> None:
        """Wait until the writer has applied every published command, live and imported
        (``writer_lag`` and ``import_lag`` 0)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            st_ = self.http.get("/api/v1/status").json()
            # Imports ride the bulk lane (``import_lag``), applied after live commands.
            if st_.get("writer_lag") == 0 and not st_.get("import_lag"):
                return
            time.sleep(0.05)
        raise AssertionError("the writer did not catch up")

    def handoffs(self, project: str) -> list[dict[str, Any]]:
        """Every handoff of ``project`` in any status (``[]`` before the project exists)."""
        r = self.http.get(f"/api/v1/workspaces/default/projects/{project}/handoffs",
                          params={"status": "any", "limit": 200, "include_body": False})
        if r.status_code == 404:
            return []
        r.raise_for_status()
        return r.json()

    def project_status(self, project: str) -> dict[str, Any] | None:
        """The project's status (``counts``), None before it exists."""
        r = self.http.get(f"/api/v1/workspaces/default/projects/{project}/status")
        if r.status_code == 404:
            return None
        r.raise_for_status()
        return r.json()

    def projects(self) -> list[str]:
        """The project names of workspace ``default``."""
        return [p["project"] for ws in self.http.get("/api/v1/workspaces").json() if ws["workspace"] == "default"
                for p in ws["projects"]]

    def purge_session(self, project: str, sid: str) -> dict[str, Any]:
        """Purge session ``sid`` of ``project`` through the admin API."""
        r = self.http.post("/admin/purge-session", json={"workspace": "default", "project": project,
                                                         "session_id": sid, "confirm": True})
        r.raise_for_status()
        return r.json()

    def finalize_idle(self) -> dict[str, Any]:
        """The maintainer's idle finalisation now, with a tiny quiet period (``aimem finalize-idle``)."""
        from aimem_common import config, maint_rpc
        from aimem_common.bus import connect

        cfg = config.load(self.stack.data_dir, environ={}, check_writable=False).bus
        cfg = cfg.model_copy(update={"nats_url": self.stack.nats_url})

        async def run() -> dict[str, Any]:
            nc = await connect(cfg, name="lifecycle-model", reconnect=False)
            try:
                return await maint_rpc.call(nc, "finalize_idle", workspace="default", project=None, actor="cli",
                                            args={"idle_after_s": 0.001})
            finally:
                await nc.close()

        return asyncio.run(run())

    def briefing_counts(self, project: str) -> dict[str, Any]:
        """``memory_briefing``'s counts through the official MCP client."""
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        async def run() -> Any:
            async with create_mcp_http_client(headers=self.stack.headers) as http:
                async with Client(streamable_http_client(self.stack.url("mcp-gateway") + "/mcp",
                                                         http_client=http)) as client:
                    res = await client.call_tool("memory_briefing", {"workspace": "default", "project": project})
                    structured = getattr(res, "structured_content", None) or getattr(res, "structuredContent", None)
                    if structured is not None:
                        return structured.get("result", structured)
                    return json.loads("".join(getattr(b, "text", "") for b in res.content))

        return asyncio.run(run())["counts"]

    def import_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        """Post one ``/hook/import`` batch; asserts the 202."""
        r = httpx.post(self.stack.url("ingress") + "/hook/import", json=body, headers=self.stack.headers, timeout=30)
        assert r.status_code == 202, r.text
        return r.json()

    def post_hook(self, agent: str, event: str, payload: dict[str, Any]) -> int:
        """A client posting directly (no hook client): no ``cwd`` query, no identity."""
        r = httpx.post(self.stack.url("ingress") + "/hook", params={"agent": agent, "event": event},
                       json=payload, headers=self.stack.headers, timeout=30)
        return r.status_code


# -- payloads ------------------------------------------------------------------------------------
def payload(client: str, kind: str, sid: str, cwd: str | None, t: float, *, source: str | None = None,
            text: str = "", parent: str | None = None) -> dict[str, Any]:
    """The client's native hook payload for ``kind`` (start|prompt|tool|end), stamped ``t``."""
    event = EVENTS[kind][client]
    if client == "opencode":
        p: dict[str, Any] = {"agent": "opencode", "event": event, "sessionID": sid, "timestamp": int(t * 1000)}
        if cwd is not None:
            p["directory"] = cwd
        if kind == "start":
            info = {"id": sid, "directory": cwd, "title": "New session", "time": {"created": int(t * 1000)}}
            if parent:
                info["parentID"] = parent
            p["input"] = {"event": {"type": event, "properties": {"info": info}}}
        elif kind == "prompt":
            p["input"] = {"sessionID": sid, "agent": "build", "messageID": f"msg_{uuid.uuid4().hex[:6]}"}
            p["output"] = {"message": {"sessionID": sid, "role": "user", "time": {"created": int(t * 1000)}},
                           "parts": [{"type": "text", "text": text}]}
        elif kind == "tool":
            p["input"] = {"tool": "bash", "sessionID": sid, "callID": f"call_{uuid.uuid4().hex[:6]}",
                          "args": {"command": "make test"}}
            p["output"] = {"title": "make test", "output": "ok", "metadata": {}}
        else:
            p["input"] = {"event": {"type": event, "properties": {"info": {"id": sid, "directory": cwd}}}}
        return p
    p = {"session_id": sid, "hook_event_name": event}
    if cwd is not None:
        p["cwd"] = cwd
    if client == "gemini-cli":
        p["timestamp"] = datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if kind == "start" and source is not None:
        p["source"] = source
    elif kind == "prompt":
        p["prompt"] = text
    elif kind == "tool":
        p.update(tool_name="Bash" if client != "gemini-cli" else "run_shell_command",
                 tool_input={"command": "make test"}, tool_response={"stdout": "ok", "exit_code": 0})
    elif kind == "end":
        p["reason"] = "exit"
    return p


# -- the state machine ---------------------------------------------------------------------------
class Env:
    """What every example shares: the stack, its API, a scratch directory, the run counter."""

    stack: LocalStack
    api: Api
    root: Path
    run = 0
    log: list[str] = []


class Place:
    """One repository (or a Windows place): its project name and the directories sessions use."""

    def __init__(self, key: str, project: str, dirs: list[str]):
        self.key, self.project, self.dirs = key, project, dirs


ACTIONS: list[tuple[str, int, Any, dict[str, Any]]] = []


def action(weight: int, pre: Any = None, **strategies: Any) -> Any:
    """Register a step of the machine: drawn ``weight`` times as often, when ``pre(self)`` holds."""
    def deco(fn: Any) -> Any:
        ACTIONS.append((fn.__name__, weight, pre, strategies))
        return fn
    return deco


class LifecycleMachine(RuleBasedStateMachine):
    """Random interleavings of sessions, checked against ``aimem_testing.lifecycle_model``."""

    gaps: frozenset[str] = GAPS  # the classes whose rules are off (a replay turns one on)

    def __init__(self) -> None:
        super().__init__()
        Env.run += 1
        STATS["examples"] += 1
        self.uid = f"{Env.run}{uuid.uuid4().hex[:4]}"
        base = Env.root / f"ex{self.uid}"
        base.mkdir(parents=True)
        self.base = base
        self.model = Model(gaps=self.gaps)
        a = make_repo(base / f"ra-{self.uid}", f"git@example.com:acme/ra-{self.uid}.git")
        (a / "src" / "pkg").mkdir(parents=True)
        git(a, "worktree", "add", "-q", str(base / f"ra-{self.uid}-wt"))
        b = make_repo(base / f"rb-{self.uid}")
        (b / "docs").mkdir()
        self.places = {
            "A": Place("A", f"ra-{self.uid}", [str(a), str(a / "src" / "pkg"), str(base / f"ra-{self.uid}-wt")]),
            "B": Place("B", f"rb-{self.uid}", [str(b), str(b / "docs")]),
        }
        if "checkout_alias" not in self.gaps:
            (base / f"ra-{self.uid}-link").symlink_to(a)
            self.places["A"].dirs.append(str(base / f"ra-{self.uid}-link"))
        if "windows_paths" not in self.gaps:
            w = f"rw-{self.uid}"
            # Spellings of one Windows folder. Not a subfolder: a Windows path seen by a Linux hook
            # client has no root, its project is its last folder (docs/lifecycle.md "Which project").
            self.places["W"] = Place("W", w, windows_spellings(w))
        self.online = HookClient(base / "client", Env.stack.url("ingress"), Env.stack.token)
        self.offline = HookClient(base / "laptop", DEAD_URL, Env.stack.token)
        self.n = 0
        self.steps: list[str] = []
        self.cwds: dict[str, str] = {}
        self.marker = False

    # -- bookkeeping -----------------------------------------------------------------------
    def _sid(self, client: str) -> str:
        """A fresh session id (``<client prefix><example id>x<n>``)."""
        self.n += 1
        return f"{client[:2]}{self.uid}x{self.n}"

    def _note(self, text: str) -> None:
        """Record one step (readable) for the failure report and the figures."""
        STATS["steps"] += 1
        name = text.split("(")[0]
        STATS["rules"][name] = STATS["rules"].get(name, 0) + 1
        self.steps.append(text)

    def _pick(self, sids: list[str], i: int) -> str:
        """``sids[i]`` (modulo); a negative ``i`` names session number ``-i`` (replays)."""
        if i < 0:
            return next(x for x in sids if x.endswith(f"x{-i}"))
        return sids[i % len(sids)]

    def _cwd_of(self, sid: str) -> str:
        """The directory session ``sid`` runs in."""
        return self.cwds[sid]

    def _live(self, *, open_only: bool = True, client: str | None = None, children: bool = False) -> list[str]:
        """Session ids the rules may pick (online, not imported or purged), sorted."""
        out = []
        for s in self.model.sessions.values():
            if s.offline or s.imported or s.state == "purged" or (s.parent is not None and not children):
                continue
            if open_only and s.state != "open":
                continue
            if client and s.client != client:
                continue
            out.append(s.sid)
        return sorted(out)

    def _hook(self, client: str, kind: str, sid: str, *, source: str | None = None, text: str = "",
              parent: str | None = None, offline: bool = False, t: float | None = None) -> tuple[float, str]:
        """Run one hook of session ``sid``; returns ``(event time, stdout)``; an end is drained."""
        cwd = self._cwd_of(sid)
        t = time.time() if t is None else t
        p = payload(client, kind, sid, cwd, t, source=source, text=text, parent=parent)
        hook = self.offline if offline else self.online
        out = hook.run(client, EVENTS[kind][client], p, cwd)
        if kind == "end" and not offline:
            hook.drain()  # what the detached drain the hook spawned does, waited for here
            assert not hook.pending(), f"the hook client kept undelivered entries: {hook.pending()}"
        return t, out

    def _check_delivery(self, sid: str, client: str, out: str, expected) -> None:
        """Assert the agent received exactly the handoff the model expects (or none)."""
        got = delivered_from(context_text(client, out))
        want = expected.sid if expected is not None else None
        if got is not None:
            STATS["deliveries"] += 1
        if got is None and want is not None and self._claimed_in_store(want, sid):
            # The claim went through but the hook client's context fetch (0.9 s, not scaled by
            # AIMEM_HOOK_BUDGET_MS) gave up on a loaded box: counted and reported, not failed.
            STATS["lost_injections"] = STATS.get("lost_injections", 0) + 1
            self.steps.append(f"  (context of {sid} timed out; the store shows the claim of {want})")
            return
        assert got == want, (
            f"delivery to {sid}: got the handoff of {got}, the model says {want}\n"
            f"model open handoffs: {[(h.sid, h.at, h.status) for h in self.model.handoffs.values()]}")

    def _claimed_in_store(self, author: str, sid: str) -> bool:
        """True when the store shows ``author``'s handoff accepted by session ``sid``."""
        Env.api.wait_applied()
        project = self.places[self.model.sessions[sid].place].project
        return any(h["from_session_id"] == author and h["status"] == "accepted" and h["accepted_session_id"] == sid
                   for h in Env.api.handoffs(project))

    # -- rules -----------------------------------------------------------------------------
    @action(4, None, client=st.sampled_from(CLIENTS), place=st.sampled_from(("A", "A", "B", "W")), d=st.integers(0, 4),
          pick=st.integers(0, 4))
    def start_new(self, client: str, place: str, d: int, pick: int) -> None:
        """A new session id starts in a place (every client, every `source` it sends)."""
        if place not in self.places:
            place = "A"
        dirs = self.places[place].dirs
        sid = self._sid(client)
        self.cwds[sid] = dirs[d % len(dirs)]
        source = SOURCES[client][pick % len(SOURCES[client])]
        self._note(f"start_new({client}, {place}, {self.cwds[sid]!r}, source={source}) -> {sid}")
        t, out = self._hook(client, "start", sid, source=source)
        expected = self.model.start(sid, client, place, t, source)
        self._check_delivery(sid, client, out, expected)

    @action(2, lambda self: bool(self._live(open_only=False)), i=st.integers(0, 50), pick=st.integers(0, 4))
    def restart_known(self, i: int, pick: int) -> None:
        """A known session starts again (resume / compact / no source) and does work."""
        sids = self._live(open_only=False)
        sid = self._pick(sids, i)
        s = self.model.sessions[sid]
        choices = [x for x in SOURCES[s.client] if x in ("resume", "compact")]
        if "start_no_source" not in self.gaps:
            choices.append(None)
        if not choices:
            return
        source = choices[pick % len(choices)]
        self._note(f"restart_known({sid}, source={source})")
        t, out = self._hook(s.client, "start", sid, source=source)
        expected = self.model.start(sid, s.client, s.place, t, source)
        self._check_delivery(sid, s.client, out, expected)
        t, _ = self._hook(s.client, "prompt", sid, text=f"continue {sid}")
        self.model.event(sid, t, real=True)

    def _workable(self) -> list[str]:
        """Sessions a prompt or tool use may come from: open ones, and idle-ended ones (their agent
        was only quiet)."""
        return [x for x in self._live(open_only=False)
                if self.model.sessions[x].state == "open" or self.model.sessions[x].end_by == "idle"]

    @action(6, lambda self: bool(self._workable()), i=st.integers(0, 50), tool=st.booleans())
    def work(self, i: int, tool: bool) -> None:
        """A prompt or a tool use in a session (an ended one resumes by it, as after idle)."""
        sids = self._workable()
        sid = self._pick(sids, i)
        s = self.model.sessions[sid]
        self._note(f"work({sid}, {'tool' if tool else 'prompt'})")
        t, _ = self._hook(s.client, "tool" if tool else "prompt", sid, text=f"task of {sid}")
        self.model.event(sid, t, real=True)

    @action(6, lambda self: bool(self._live(children=True)), i=st.integers(0, 50))
    def end(self, i: int) -> None:
        """The client ends an open session (its SessionEnd / session.deleted)."""
        sids = self._live(children=True)
        sid = self._pick(sids, i)
        s = self.model.sessions[sid]
        self._note(f"end({sid})")
        t, _ = self._hook(s.client, "end", sid)
        self.model.end(sid, t, "client")

    @action(2, None)
    def idle_finalise(self) -> None:
        """The maintainer's idle finalisation (tiny quiet period): every open session ends."""
        self._note("idle_finalise()")
        Env.api.wait_applied()
        if "idle_same_second" in self.gaps:  # let the cutoff fall in a later second than every event
            time.sleep(1.02 - time.time() % 1)
        ended: set[str] = set()
        passes = []
        for _ in range(20):  # one pass ends at most 200 sessions store-wide (earlier examples leave some open)
            res = Env.api.finalize_idle()
            ended |= {f["session_id"] for f in res["finalized"] if f["project"] in self._projects()}
            passes.append((len(res["finalized"]), res.get("skipped"), res.get("failed")))
            if not res["finalized"] and not res.get("skipped"):
                break
            if not res["finalized"]:  # "active again" without a new event: the pass read an old snapshot
                STATS["idle_skipped"] = STATS.get("idle_skipped", 0) + res["skipped"]
        expected = set(self.model.idle())
        rows = []
        if ended != expected:  # what the store holds for the sessions the pass left alone
            for p in self.places.values():
                r = Env.api.http.get(f"/api/v1/workspaces/default/projects/{p.project}/sessions",
                                     params={"limit": 200})
                rows += [x for x in (r.json() if r.status_code == 200 else []) if x.get("session_id") in expected - ended]
        assert ended == expected, (f"idle finalised {sorted(ended)}, the model says {sorted(expected)} "
                                   f"(passes: finalised/skipped/failed {passes}; left alone: {rows}; "
                                   f"now {datetime.now(UTC).isoformat()})")

    @action(2, lambda self: "event_time_order" not in self.gaps,
            client=st.sampled_from(CLIENTS), place=st.sampled_from(("A", "B")), ends=st.booleans())
    def offline_session(self, client: str, place: str, ends: bool) -> None:
        """A session on a machine whose server is unreachable: every event waits in the spool."""
        sid = self._sid(client)
        self.cwds[sid] = self.places[place].dirs[0]
        self._note(f"offline_session({client}, {place}, ends={ends}) -> {sid}")
        t, out = self._hook(client, "start", sid, source=SOURCES[client][0], offline=True)
        assert out == "", "an offline start got a context"
        self.model.start(sid, client, place, t, SOURCES[client][0], offline=True)
        t, _ = self._hook(client, "prompt", sid, text=f"offline work {sid}", offline=True)
        self.model.event(sid, t, real=True)
        if ends:
            t, _ = self._hook(client, "end", sid, offline=True)
            self.model.end(sid, t, "client")

    @action(1, lambda self: any(s.offline for s in self.model.sessions.values()))
    def drain_offline(self) -> None:
        """The offline machine is back: its spool drains late, with the events' old times."""
        self._note("drain_offline()")
        self.offline.drain(url=Env.stack.url("ingress"))
        assert not self.offline.pending(), "the late drain kept entries"
        self.model.drained()

    @action(2, lambda self: "children" not in self.gaps and bool(self._live(client="opencode")),
            i=st.integers(0, 50), work=st.booleans())
    def opencode_child(self, i: int, work: bool) -> None:
        """An OpenCode child session (``parentID``) is created under an open session."""
        parents = self._live(client="opencode")
        parent = self._pick(parents, i)
        sid = self._sid("opencode")
        self.cwds[sid] = self.cwds[parent]
        self._note(f"opencode_child({parent}, work={work}) -> {sid}")
        t, out = self._hook("opencode", "start", sid, parent=parent)
        self.model.start(sid, "opencode", self.model.sessions[parent].place, t, None, parent=parent)
        self._check_delivery(sid, "opencode", out, None)
        if work:
            t, _ = self._hook("opencode", "tool", sid)
            self.model.event(sid, t, real=True)

    @action(1, lambda self: bool(self._live(client="claude-code")), i=st.integers(0, 50))
    def claude_subagent(self, i: int) -> None:
        """A Claude Code subagent runs inside an open session (SubagentStart / SubagentStop)."""
        sids = self._live(client="claude-code")
        sid = self._pick(sids, i)
        self._note(f"claude_subagent({sid})")
        cwd = self.cwds[sid]
        for event in ("SubagentStart", "SubagentStop"):
            t = time.time()
            self.online.run("claude-code", event, {"session_id": sid, "cwd": cwd, "hook_event_name": event,
                                                   "agent_id": uuid.uuid4().hex[:8], "agent_type": "Explore"}, cwd)
            self.model.event(sid, t, real=False)

    @action(1, None, client=st.sampled_from(CLIENTS), place=st.sampled_from(("A", "B")))
    def import_session(self, client: str, place: str) -> None:
        """An old session from the client's transcripts (``POST /hook/import``): history only."""
        sid = self._sid(client)
        cwd = self.places[place].dirs[0]
        self.cwds[sid] = cwd
        self._note(f"import_session({client}, {place}) -> {sid}")
        t = time.time() - 86400
        self._import(client, sid, cwd, t)
        self.model.imported_session(sid, client, place, t)

    @action(1, lambda self: "import_live" not in self.gaps and bool(self._live(open_only=False)), i=st.integers(0, 50))
    def import_live(self, i: int) -> None:
        """``aimem import`` re-reads the transcript of a session hooks captured: live capture wins."""
        sids = self._live(open_only=False)
        sid = self._pick(sids, i)
        s = self.model.sessions[sid]
        self._note(f"import_live({sid})")
        self._import(s.client, sid, self.cwds[sid], s.started_at)

    def _import(self, client: str, sid: str, cwd: str, t: float) -> None:
        """Import a start, a prompt and a historical end of ``sid`` at time ``t``."""
        ident = resolve(cwd)
        iso = datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")
        query = ident.as_query()
        if "import_repo_id" in self.gaps:  # the batch as it was before it carried the repository id
            query.pop("repo_id", None)
        body = {**batch_head(client, query), "events": [
                    {"key": f"{client}:{sid}:0", "payload": {"hook_event_name": "session-start", "session_id": sid,
                                                              "cwd": cwd, "timestamp": iso}},
                    {"key": f"{client}:{sid}:1", "payload": {"hook_event_name": "user-prompt", "session_id": sid,
                                                              "cwd": cwd, "timestamp": iso,
                                                              "prompt": f"imported work {sid}"}},
                    {"key": f"{client}:{sid}:end", "end": True,
                     "payload": {"session_id": sid, "cwd": cwd, "timestamp": iso}}]}
        res = Env.api.import_batch(body)
        assert not res["rejected"], res

    @action(1, lambda self: any(s.state == "ended" and not s.offline for s in self.model.sessions.values()),
            i=st.integers(0, 50))
    def purge(self, i: int) -> None:
        """An operator purges an ended session (``/admin/purge-session``)."""
        sids = sorted(s.sid for s in self.model.sessions.values() if s.state == "ended" and not s.offline
                      and s.parent is None)
        if not sids:
            return
        sid = self._pick(sids, i)
        self._note(f"purge({sid})")
        Env.api.wait_applied()
        Env.api.purge_session(self.places[self.model.sessions[sid].place].project, sid)
        self.model.purge(sid)

    @action(1, lambda self: "no_cwd" not in self.gaps and bool(self._live()), i=st.integers(0, 50))
    def no_cwd_event(self, i: int) -> None:
        """A client posts a prompt with its session id but no location: it joins its session."""
        sids = [x for x in self._live() if self.model.sessions[x].client != "opencode"]
        if not sids:
            return
        sid = self._pick(sids, i)
        s = self.model.sessions[sid]
        self._note(f"no_cwd_event({sid})")
        t = time.time()
        status = Env.api.post_hook(s.client, EVENTS["prompt"][s.client],
                                   payload(s.client, "prompt", sid, None, t, text=f"no cwd {sid}"))
        assert status == 202, f"an event of known session {sid} without a cwd got {status}"
        self.model.event(sid, t, real=True)

    @action(1, lambda self: "ancestor_marker" not in self.gaps and not self.marker)
    def ancestor_marker(self) -> None:
        """A ``.aimem.toml`` appears in a folder above every repository (a home directory's)."""
        self._note("ancestor_marker()")
        (self.base / ".aimem.toml").write_text(f'project = "home-{self.uid}"\n')
        self.marker = True

    @action(1, lambda self: "checkout_alias" not in self.gaps
            and ("alias_under_marker" not in self.gaps or not self.marker) and not any(
        s.place == "B" and s.state == "open" for s in self.model.sessions.values()))
    def rename_checkout(self) -> None:
        """Repository B is renamed (moved) while no session runs in it: it keeps its memory."""
        old = Path(self.places["B"].dirs[0])
        new = old.with_name(old.name + "-renamed")
        if new.exists():
            return
        Env.api.wait_applied()
        if Env.api.project_status(self.places["B"].project) is None:
            return  # never seen under its old name: after a move it is simply a project of its new name
        self._note("rename_checkout(B)")
        old.rename(new)
        self.places["B"].dirs = [str(new), str(new / "docs")]

    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        """One step: an action drawn by weight among those whose precondition holds."""
        # Heaviest first: hypothesis often draws the first choice (its simplest), which would
        # otherwise always be a new session (starts were 82% of a long run's steps).
        names = [n for n, w, pre, _ in sorted(ACTIONS, key=lambda a: -a[1]) if pre is None or pre(self)
                 for _ in range(w)]
        name = data.draw(st.sampled_from(names), label="action")
        strategies = next(a[3] for a in ACTIONS if a[0] == name)
        with self._explained():
            getattr(self, name)(**{k: data.draw(v, label=k) for k, v in strategies.items()})

    @contextmanager
    def _explained(self) -> Iterator[None]:
        """Add the example's steps (readable) to a failure, and log it to ``AIMEM_MODEL_CEX``."""
        try:
            yield
        except AssertionError as exc:
            text = f"{str(exc).splitlines()[0]}\n  steps:\n    " + "\n    ".join(self.steps)
            if os.environ.get("AIMEM_MODEL_CEX"):
                with open(os.environ["AIMEM_MODEL_CEX"], "a") as fh:
                    fh.write(text + "\n\n")
            raise AssertionError(f"{exc}\n  steps:\n    " + "\n    ".join(self.steps)) from None

    # -- invariants ------------------------------------------------------------------------
    def _projects(self) -> set[str]:
        """This example's project names."""
        return {p.project for p in self.places.values()}

    @invariant()
    def store_agrees_with_the_model(self) -> None:
        """After every step: handoffs per session and per place, claimers, counts, no crossing."""
        STATS["invariant_checks"] += 1
        with self._explained():
            self._compare()

    def _compare(self) -> None:
        """Compare the store (list API, project status) with the model; AssertionError on a difference."""
        Env.api.wait_applied()
        place_of_project = {p.project: k for k, p in self.places.items()}
        real: dict[str, list[dict[str, Any]]] = {}
        for project, key in place_of_project.items():
            rows = Env.api.handoffs(project)
            for h in rows:
                s = self.model.sessions.get(h["from_session_id"] or "")
                assert s is not None, f"{project} lists a handoff of a session the model never ran: {h}"
                assert s.place == key, (f"handoff of {s.sid} (place {s.place}) is listed in {project} "
                                        f"(place {key}): it crossed repositories")
                assert h["automatic"], h
                real.setdefault(s.sid, []).append(h)
            opened = {h["from_session_id"] for h in rows if h["status"] == "open"}
            if "give_back_stale" not in self.gaps:
                assert len(opened) == sum(h["status"] == "open" for h in rows), (
                    f"two open handoffs of one session: {rows}")
            assert opened == self.model.open_sids(key), (
                f"{project}: open handoffs of {sorted(opened)}, the model says {sorted(self.model.open_sids(key))}")
            status = Env.api.project_status(project)
            n_open = status["counts"]["handoffs_open"] if status else 0
            n_listed = sum(h["status"] == "open" for h in rows)
            assert n_open == n_listed, f"{project}: status says {n_open} open handoffs, the list {n_listed}"
            sessions_open = status["counts"]["sessions_open"] if status else 0
            want = self.model.open_sessions(key)
            assert sessions_open == len(want), (
                f"{project}: {sessions_open} open sessions, the model says {len(want)} ({sorted(want)})")
        for sid, s in self.model.sessions.items():
            rows = real.get(sid, [])
            if s.imported or s.parent is not None or s.state == "purged":
                why = "import" if s.imported else "child" if s.parent else "purged"
                assert not rows, f"{sid} ({why}) has handoffs {rows}"
                continue
            want = sum(h.sid == sid and self.model.delivered(h) for h in self.model.handoffs.values())
            assert len(rows) == want, (
                f"{sid}: {len(rows)} automatic handoffs {[(r['id'], r['status']) for r in rows]}, the model says "
                f"{want} ({s.generations} real end(s), state {s.state})")
            claimed = [h for h in self.model.handoffs.values() if h.sid == sid and h.status == "claimed"]
            for mh in claimed:
                assert any(r["status"] == "accepted" and r["accepted_session_id"] == mh.claimed_by for r in rows), (
                    f"the handoff of {sid} should be accepted by {mh.claimed_by}: {rows}")

    def teardown(self) -> None:
        """End of an example: ``memory_briefing`` agrees with the list; the steps are logged."""
        try:
            if self.model.sessions:
                Env.api.wait_applied()
                for p in self.places.values():
                    if Env.api.project_status(p.project) is None:
                        continue
                    counts = Env.api.briefing_counts(p.project)
                    opened = sum(h["status"] == "open" for h in Env.api.handoffs(p.project))
                    assert counts["handoffs_open"] == opened, (
                        f"{p.project}: memory_briefing says {counts['handoffs_open']} open handoffs, the list {opened}")
        finally:
            Env.log.append(" ; ".join(self.steps))


# -- the tests -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lifecycle_stack(tmp_path_factory):
    """One stack for the whole run (examples reset by using fresh repositories)."""
    tmp = tmp_path_factory.mktemp("lifecycle")
    stack = LocalStack(tmp / "data", tmp / "logs").start()
    Env.stack, Env.api, Env.root = stack, Api(stack), tmp / "work"
    Env.root.mkdir()
    try:
        yield stack
    finally:
        stack.stop()


@pytest.mark.timeout(3600)
def test_lifecycle_matches_the_model(lifecycle_stack) -> None:
    """Random interleavings (fixed seed) through the real stack agree with the reference model."""
    t0 = time.monotonic()
    STATS.update(examples=0, steps=0, invariant_checks=0, deliveries=0, lost_injections=0, idle_skipped=0, rules={})
    try:
        run_state_machine_as_test(LifecycleMachine, settings=settings(
            max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, database=None,
            derandomize=os.environ.get("AIMEM_MODEL_RANDOM") != "1",
            phases=[Phase.generate, Phase.shrink] if os.environ.get("AIMEM_MODEL_SHRINK", "1") == "1"
            else [Phase.generate],
            suppress_health_check=list(HealthCheck)))
    finally:
        line = (f"lifecycle model: {STATS['examples']} examples, {STATS['steps']} steps, "
                f"{STATS['invariant_checks']} invariant checks, {STATS['deliveries']} deliveries "
                f"({STATS.get('lost_injections', 0)} claimed but not injected: context fetch timed out), "
                f"{STATS.get('idle_skipped', 0)} idle sessions skipped as active by a pass, "
                f"{time.monotonic() - t0:.0f} s, gaps off: {sorted(GAPS) or 'none'}; rules {STATS['rules']}")
        print("\n" + line)
        if os.environ.get("AIMEM_MODEL_REPORT"):
            Path(os.environ["AIMEM_MODEL_REPORT"]).write_text(line + "\n")


# -- the counterexamples, replayed -----------------------------------------------------------------
# Short sequences (hand-shrunk from what the machine found, see the report of issue 26) that
# broke one class each: regression tests now that every class is fixed. ``i=-n`` names session
# number n of the example. A class switched off through AIMEM_MODEL_GAPS makes its replay a
# strict xfail (it must still fail with the old behaviour).
A_ROOT, A_SUB, A_WT, A_LINK = 0, 1, 2, 3
COUNTEREXAMPLES: dict[str, tuple[str, list[tuple[str, dict[str, Any]]]]] = {
    "idle handoff is claimed by the next session": ("idle_owner", [
        ("start_new", dict(client="claude-code", place="A", d=A_ROOT, pick=0)),
        ("work", dict(i=-1, tool=False)),
        ("idle_finalise", {}),
        ("start_new", dict(client="codex", place="A", d=A_SUB, pick=0))]),
    "parallel sessions are not one chain": ("parallel_chain", [
        ("start_new", dict(client="claude-code", place="A", d=A_ROOT, pick=0)),
        ("start_new", dict(client="codex", place="A", d=A_SUB, pick=0)),
        ("work", dict(i=-1, tool=False)),
        ("work", dict(i=-2, tool=True)),
        ("end", dict(i=-1)),
        ("end", dict(i=-2)),
        ("start_new", dict(client="gemini-cli", place="A", d=A_ROOT, pick=0))]),
    "a late spool drain does not beat newer work": ("event_time_order", [
        ("offline_session", dict(client="claude-code", place="A", ends=True)),
        ("start_new", dict(client="codex", place="A", d=A_ROOT, pick=0)),
        ("work", dict(i=-2, tool=False)),
        ("end", dict(i=-2)),
        ("drain_offline", {}),
        ("start_new", dict(client="gemini-cli", place="A", d=A_ROOT, pick=0))]),
    "an OpenCode child claims nothing": ("children", [
        ("start_new", dict(client="claude-code", place="A", d=A_ROOT, pick=0)),
        ("work", dict(i=-1, tool=False)),
        ("start_new", dict(client="opencode", place="A", d=A_ROOT, pick=0)),
        ("end", dict(i=-1)),
        ("opencode_child", dict(i=-2, work=True))]),
    "an OpenCode child leaves no handoff": ("children", [
        ("start_new", dict(client="opencode", place="A", d=A_ROOT, pick=0)),
        ("opencode_child", dict(i=-1, work=True)),
        ("idle_finalise", {})]),
    "a start without source of an open session claims nothing": ("start_no_source", [
        ("start_new", dict(client="claude-code", place="A", d=A_ROOT, pick=0)),
        ("start_new", dict(client="codex", place="A", d=A_SUB, pick=0)),
        ("work", dict(i=-2, tool=False)),
        ("end", dict(i=-2)),
        ("restart_known", dict(i=-1, pick=2))]),
    "an event without cwd joins its session": ("no_cwd", [
        ("start_new", dict(client="claude-code", place="A", d=A_ROOT, pick=0)),
        ("no_cwd_event", dict(i=-1))]),
    "an ancestor marker merges no repositories": ("ancestor_marker", [
        ("ancestor_marker", {}),
        ("start_new", dict(client="claude-code", place="A", d=A_ROOT, pick=0)),
        ("work", dict(i=-1, tool=False)),
        ("end", dict(i=-1)),
        ("start_new", dict(client="codex", place="B", d=0, pick=0))]),
    "Windows spellings of one folder are one place": ("windows_paths", [
        ("start_new", dict(client="claude-code", place="W", d=0, pick=0)),
        ("work", dict(i=-1, tool=False)),
        ("end", dict(i=-1)),
        ("start_new", dict(client="codex", place="W", d=1, pick=0))]),
    "a symlinked checkout keeps its handoff": ("checkout_alias", [
        ("start_new", dict(client="claude-code", place="A", d=A_LINK, pick=0)),
        ("work", dict(i=-1, tool=False)),
        ("end", dict(i=-1)),
        ("start_new", dict(client="codex", place="A", d=A_ROOT, pick=0))]),
    "a renamed checkout keeps its handoff": ("checkout_alias", [
        ("start_new", dict(client="claude-code", place="B", d=0, pick=0)),
        ("work", dict(i=-1, tool=False)),
        ("end", dict(i=-1)),
        ("rename_checkout", {}),
        ("start_new", dict(client="codex", place="B", d=0, pick=0))]),
    "importing a live session's transcript leaves it open": ("import_live", [
        ("start_new", dict(client="claude-code", place="A", d=A_ROOT, pick=0)),
        ("work", dict(i=-1, tool=False)),
        ("import_live", dict(i=-1)),
        ("idle_finalise", {})]),
    "a give-back leaves one open handoff per session": ("give_back_stale", [
        ("start_new", dict(client="claude-code", place="A", d=A_ROOT, pick=0)),
        ("work", dict(i=-1, tool=False)),
        ("end", dict(i=-1)),
        ("restart_known", dict(i=-1, pick=0)),
        ("start_new", dict(client="codex", place="A", d=A_SUB, pick=0)),
        ("idle_finalise", {})]),
    "a renamed checkout below an ancestor marker keeps its session": ("alias_under_marker", [
        ("ancestor_marker", {}),
        ("start_new", dict(client="claude-code", place="B", d=0, pick=0)),
        ("idle_finalise", {}),
        ("rename_checkout", {}),
        ("restart_known", dict(i=-1, pick=0))]),
    "a late-drained session ended by idle is born superseded": ("born_superseded", [
        ("offline_session", dict(client="claude-code", place="A", ends=False)),
        ("start_new", dict(client="codex", place="A", d=A_ROOT, pick=0)),
        ("work", dict(i=-2, tool=False)),
        ("end", dict(i=-2)),
        ("start_new", dict(client="gemini-cli", place="A", d=A_SUB, pick=0)),
        ("work", dict(i=-3, tool=True)),
        ("drain_offline", {}),
        ("idle_finalise", {})]),
    "a late-drained end is born superseded": ("born_superseded", [
        ("offline_session", dict(client="opencode", place="B", ends=True)),
        ("start_new", dict(client="codex", place="B", d=0, pick=0)),
        ("work", dict(i=-2, tool=False)),
        ("end", dict(i=-2)),
        ("start_new", dict(client="claude-code", place="B", d=1, pick=0)),
        ("drain_offline", {})]),
    "a repository known only through an import follows a rename": ("import_repo_id", [
        ("import_session", dict(client="claude-code", place="B")),
        ("rename_checkout", {}),
        ("start_new", dict(client="codex", place="B", d=0, pick=0)),
        ("work", dict(i=-2, tool=False)),
        ("end", dict(i=-2)),
        ("start_new", dict(client="gemini-cli", place="B", d=1, pick=0))]),
    "an idle session whose last event is in the cutoff's second is finalised": ("idle_same_second", [
        ("start_at_whole_second", {})]),
}


def start_at_whole_second(machine: LifecycleMachine) -> None:
    """Start an OpenCode session whose event time is a whole second (``timestamp`` ms % 1000 == 0,
    1 in 1000 events) just after that second began, and finalise idle sessions in the same second."""
    time.sleep(1.01 - time.time() % 1)
    sid = machine._sid("opencode")
    machine.cwds[sid] = machine.places["A"].dirs[0]
    t = float(int(time.time()))
    machine._note(f"start_new(opencode, A, at a whole second) -> {sid}")
    _, out = machine._hook("opencode", "start", sid, t=t)
    machine.model.start(sid, "opencode", "A", t, None)
    machine.idle_finalise()  # at once: the cutoff falls in the same second


def replay(gaps: frozenset[str], steps: list[tuple[str, dict[str, Any]]]) -> None:
    """Run ``steps`` on a fresh machine with ``gaps`` off, checking the invariant after each."""
    machine = type("Replay", (LifecycleMachine,), {"gaps": gaps})()
    try:
        machine.store_agrees_with_the_model()
        for name, kwargs in steps:
            with machine._explained():
                if name == "start_at_whole_second":
                    start_at_whole_second(machine)
                    continue
                getattr(machine, name)(**kwargs)
            machine.store_agrees_with_the_model()
    finally:
        machine.teardown()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", list(COUNTEREXAMPLES))
def test_counterexample(lifecycle_stack, name: str, request) -> None:
    """Each issue-26 class's shortest known counterexample holds (regression tests)."""
    gap, steps = COUNTEREXAMPLES[name]
    if gap in GAPS:
        request.applymarker(pytest.mark.xfail(reason=f"known gap {gap!r} (issue 26)", raises=AssertionError,
                                              strict=gap != "idle_same_second"))  # that one depends on timing
    replay(GAPS - {gap}, steps)
