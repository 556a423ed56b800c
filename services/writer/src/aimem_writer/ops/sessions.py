"""``session.end``: rule-based summary page, automatic handoff, the ended watermark.

One transaction (DESIGN.md "Hook ingress"): ``sessions/<session_id>.md`` synthesised from
the observations (no LLM; how it ended, the user's prompts, commands run, files touched,
errors seen, the final stop message and the transcript tail a client sent with its session
end, each bounded, the page ≤ 16 KiB), an automatic handoff for the next agent in that
project root (else cwd), ``ended_at`` + ``ended_observation_count`` + ``end_reason``, a
consolidation job for the maintainer and a ledger line. A re-end (a resumed session ending
again, by its client or the idle finaliser) does work only when the observation count
advanced, and rewrites the page. A session with nothing but start/end events gets no page;
one without a prompt, a tool call or a finished turn opens no handoff and gives back the
handoff it claimed. A ``historical`` end (``aimem import``) keeps the transcript's own end
time and opens no handoff.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from aimem_common.errors import NotFoundError
from aimem_common.commands import Envelope
from aimem_common.commands.observations import SessionEnd
from aimem_common.sanitize import cap_utf8

from aimem_writer.ops.observations import ledger_entry, occurred
from aimem_writer.page_store import PageInput
from aimem_writer.registry import handler
from aimem_writer.tx import Tx

PAGE_CAP_BYTES = 16 * 1024
BODY_CAP_BYTES = 15 * 1024  # leaves room for the frontmatter inside PAGE_CAP_BYTES
PROMPT_CAP_BYTES = 1536
PROMPTS_BUDGET_BYTES = 6 * 1024
MAX_COMMANDS, COMMAND_CAP_BYTES = 40, 200
MAX_FILES = 50
MAX_ERRORS, ERROR_CAP_BYTES = 10, 300
COMMANDS_BUDGET_BYTES = 2560
FILES_BUDGET_BYTES = 1536
ERRORS_BUDGET_BYTES = 1536
STOP_CAP_BYTES = 1536
TAIL_CAP_BYTES = 2560
COMPACT_CAP_BYTES = 1536
HANDOFF_CAP_BYTES = 4 * 1024

BOUNDARY_KINDS = ("session-start", "session-end")
# A session did real work when one of these happened: a prompt, a tool call, a finished turn.
# Without one it leaves no handoff and gives back the one it claimed.
REAL_KINDS = frozenset(("user-prompt", "pre-tool-use", "post-tool-use", "stop"))
END_REASONS = {
    "idle": "idle: no events for the configured quiet period, finalised by aimem",
    "finalize-session": "finalised by hand (aimem finalize-session)",
    "clear": "the user cleared the conversation",
    "logout": "the user logged out",
}
SHELL_TOOLS = {"bash", "shell", "run_shell_command", "exec_command", "local_shell", "terminal", "execute",
               "run_terminal_cmd", "command", "exec"}
FILE_TOOLS = {"edit", "write", "multiedit", "read", "notebookedit", "write_file", "read_file", "replace",
              "apply_patch", "str_replace_based_edit_tool", "create"}
FILE_KEYS = ("file_path", "filePath", "path", "notebook_path", "target_file", "absolute_path", "file")
ERROR_RE = re.compile(r"(?i)\b(error|exception|traceback|failed|fatal|panic)\b|exit (?:code|status):? ?[1-9]")


def session_slug(session_id: str) -> str:
    """Return a path-safe file stem for a session id."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", session_id).strip(".-")[:200]
    return slug or "session"


def _input_of(body: str) -> str | None:
    m = re.search(r"^input: (.*?)(?=^\w+: |\Z)", body, re.MULTILINE | re.DOTALL)
    return m.group(1).strip() if m else None


def _output_of(body: str) -> str | None:
    m = re.search(r"^output: (.*)\Z", body, re.MULTILINE | re.DOTALL)
    return m.group(1).strip() if m else None


def _json_or_none(text: str | None) -> dict | None:
    if not text or not text.lstrip().startswith("{"):
        return None
    try:
        v = json.loads(text)
    except ValueError:
        return None
    return v if isinstance(v, dict) else None


def _after_colon(title: str) -> str:
    return title.split(": ", 1)[1] if ": " in title else ""


@dataclass(slots=True)
class Digest:
    """What a later search needs from one session (each list bounded)."""

    prompts: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: str | None = None
    compaction: str | None = None
    agents: list[str] = field(default_factory=list)
    tail: str | None = None  # the transcript tail the hook client sent with the session end


def digest(rows) -> Digest:
    """Extract prompts, commands, files, errors, the last stop message from observations."""
    d = Digest()
    for r in rows:
        kind, title, body, tool = r["kind"], r["title"] or "", r["body"] or "", (r["tool_name"] or "")
        if r["agent"] and r["agent"] not in d.agents:
            d.agents.append(r["agent"])
        if kind == "user-prompt":
            text = body.strip() or _after_colon(title)
            if text:
                d.prompts.append(text)
        elif kind in ("pre-tool-use", "post-tool-use"):
            raw_in = _input_of(body)
            args = _json_or_none(raw_in) or {}
            if tool.casefold() in SHELL_TOOLS:
                cmd = args.get("command") or args.get("cmd") or _after_colon(title) or raw_in or ""
                if isinstance(cmd, list):
                    cmd = " ".join(str(c) for c in cmd)
                cmd = cap_utf8(" ".join(str(cmd).split()), COMMAND_CAP_BYTES)
                if cmd and cmd not in d.commands and len(d.commands) < MAX_COMMANDS:
                    d.commands.append(cmd)
            else:
                path = next((args[k] for k in FILE_KEYS if isinstance(args.get(k), str) and args[k]), None)
                if path is None and tool.casefold() in FILE_TOOLS:
                    path = _after_colon(title) or None
                path = cap_utf8(path, 300) if path else None
                if path and path not in d.files and len(d.files) < MAX_FILES:
                    d.files.append(path)
            if kind == "post-tool-use":
                out = _output_of(body) or ""
                if out and ERROR_RE.search(out) and len(d.errors) < MAX_ERRORS:
                    line = next((ln for ln in out.splitlines() if ERROR_RE.search(ln)), out)
                    d.errors.append(cap_utf8(f"{tool or 'tool'}: {' '.join(line.split())}", ERROR_CAP_BYTES))
        elif kind == "notification":
            if ERROR_RE.search(body or title) and len(d.errors) < MAX_ERRORS:
                d.errors.append(cap_utf8(" ".join((body or title).split()), ERROR_CAP_BYTES))
        elif kind == "stop":
            text = body.strip() or _after_colon(title)
            if text:
                d.stop = text
        elif kind in ("pre-compact", "post-compaction"):
            if body.strip():
                d.compaction = body.strip()
    return d


def how_it_ended(reason: str | None) -> str:
    """One line saying how a session ended (``None``: the client's own session end event)."""
    if not reason:
        return "the client's session end"
    return END_REASONS.get(reason, f"the client's session end ({reason})")


def render_summary(session_id: str, row, d: Digest, ended_at: str, count: int,
                   reason: str | None = None) -> tuple[str, str]:
    """Return ``(title, body)`` of the session page; the body is ≤ ``BODY_CAP_BYTES``."""
    first = " ".join(d.prompts[0].split()) if d.prompts else ""
    title = f"Session {session_id[:12]}: {first[:80]}" if first else f"Session {session_id[:12]}"
    out = [f"# {title}", "",
           f"Agent {', '.join(d.agents) or row['agent']} in `{row['cwd'] or '?'}`, "
           f"{row['started_at']} → {ended_at}, {count} events.", "",
           f"Ended: {how_it_ended(reason)}.", ""]
    if d.prompts:
        out += ["## Prompts", ""]
        used, shown = 0, 0
        for p in d.prompts:
            chunk = cap_utf8(p.strip(), PROMPT_CAP_BYTES)
            size = len(chunk.encode())
            if used + size > PROMPTS_BUDGET_BYTES and shown:
                break
            out += [f"- {chunk.replace(chr(10), chr(10) + '  ')}"]
            used += size
            shown += 1
        if shown < len(d.prompts):
            last = cap_utf8(d.prompts[-1].strip(), 512)
            out += [f"- … {len(d.prompts) - shown} more prompts; the last: {' '.join(last.split())}"]
        out.append("")
    if d.commands:
        out += ["## Commands", ""] + _bounded(["- `" + c.replace("`", "'") + "`" for c in d.commands],
                                             COMMANDS_BUDGET_BYTES) + [""]
    if d.files:
        out += ["## Files touched", ""] + _bounded([f"- {f}" for f in d.files], FILES_BUDGET_BYTES) + [""]
    if d.errors:
        out += ["## Errors", ""] + _bounded([f"- {e}" for e in d.errors], ERRORS_BUDGET_BYTES) + [""]
    if d.compaction:
        out += ["## Compaction summary", "", cap_utf8(d.compaction, COMPACT_CAP_BYTES), ""]
    if d.stop:
        out += ["## Final message", "", cap_utf8(d.stop, STOP_CAP_BYTES), ""]
    if d.tail:
        out += ["## From the transcript", "", cap_utf8(d.tail, TAIL_CAP_BYTES), ""]
    return title, cap_utf8("\n".join(out), BODY_CAP_BYTES)


def _bounded(lines: list[str], budget: int) -> list[str]:
    """Keep lines in order while they fit ``budget`` bytes; then one "… N more" line."""
    out, used = [], 0
    for i, line in enumerate(lines):
        size = len(line.encode()) + 1
        if used + size > budget:
            out.append(f"- … {len(lines) - i} more")
            break
        out.append(line)
        used += size
    return out


def handoff_text(session_id: str, row, d: Digest, page_path: str) -> tuple[str, str]:
    """Return ``(title, body)`` of the automatic handoff for the next agent in this cwd."""
    last = " ".join(d.prompts[-1].split()) if d.prompts else ""
    title = f"Continue: {last[:100]}" if last else f"Continue session {session_id[:12]}"
    lines = [f"Previous session {session_id} ({row['agent']}) in {row['cwd'] or '?'} ended.",
             f"Summary page: {page_path}"]
    if last:
        lines.append(f"Last request: {cap_utf8(last, 1024)}")
    if d.files:
        lines.append("Files touched: " + ", ".join(d.files[:10]))
    if d.errors:
        lines.append("Errors seen: " + " | ".join(d.errors[:3]))
    if d.stop:
        lines.append(f"Final message: {cap_utf8(' '.join(d.stop.split()), 1536)}")
    return title[:512], cap_utf8("\n".join(lines), HANDOFF_CAP_BYTES)


@handler("session.end")
def session_end(tx: Tx, env: Envelope, cmd: SessionEnd) -> dict:
    """End a session. Result ``{ended, changed, observation_count, page_id, path, handoff_id,
    returned_handoffs, reason}``.

    ``cmd.if_last_event_at`` (the idle finaliser's precondition): when the session has seen
    an event since, nothing happens (``{ended: false, skipped: "active"}``). A session with
    no real event (``REAL_KINDS``) opens no handoff and returns the handoffs it claimed to
    ``open`` (with the ones that claim had superseded).
    """
    scope = tx.scope(create=True)
    row = tx.conn.execute(
        "SELECT * FROM sessions WHERE project_id = ? AND session_id = ?", (scope.project_id, cmd.session_id)
    ).fetchone()
    if row is None:
        raise NotFoundError(f"session {cmd.session_id!r} has no observations in {scope.workspace}/{scope.project}",
                            code="session_not_found", data={"session_id": cmd.session_id})
    count = row["observation_count"]
    if cmd.if_last_event_at is not None and (row["last_event_at"] != cmd.if_last_event_at
                                             or row["ended_at"] is not None):
        return {"ended": False, "changed": False, "skipped": "active" if row["ended_at"] is None else "ended",
                "observation_count": count}
    if row["ended_observation_count"] is not None and count <= row["ended_observation_count"]:
        if row["ended_at"] is None:  # resumed without new events: just close it again
            tx.conn.execute("UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ?",
                            (occurred(tx, cmd.ended_at), cmd.reason, row["id"]))
        return {"ended": True, "changed": False, "observation_count": count,
                "page_id": row["summary_page_id"], "path": None, "handoff_id": None}
    ended_at = occurred(tx, cmd.ended_at)
    rows = tx.conn.execute(
        "SELECT kind, agent, title, body, tool_name FROM observations WHERE project_id = ? AND session_id = ?"
        " ORDER BY id", (scope.project_id, cmd.session_id),
    ).fetchall()
    substantive = [r for r in rows if r["kind"] not in BOUNDARY_KINDS]
    tail = next((r["body"] for r in reversed(rows)  # a bare session end's body is its title
                 if r["kind"] == "session-end" and r["body"] and r["body"] != r["title"]), None)
    real = any(r["kind"] in REAL_KINDS for r in rows)
    page_id = handoff_id = path = None
    if substantive or tail:
        d = digest(substantive)
        d.tail = tail
        path = f"sessions/{session_slug(cmd.session_id)}.md"
        title, body = render_summary(cmd.session_id, row, d, ended_at, count, cmd.reason)
        fm = {"session_id": cmd.session_id, "agent": row["agent"], "cwd": row["cwd"],
              "started_at": row["started_at"], "ended_at": ended_at, "end_reason": cmd.reason or "session-end",
              "observation_count": count, "tags": ["session"]}
        if cmd.historical:
            fm["imported"] = True
        res = tx.pages.write(scope, PageInput(path=path, body=body, title=title, frontmatter=fm),
                             evidence=[{"kind": "session", "id": cmd.session_id}], session_id=cmd.session_id)
        page_id = res["page_id"]
        if real and not cmd.historical:  # an imported old session is history, not work to continue
            handoff_id = _automatic_handoff(tx, scope, cmd, row, d, path)
    returned = [] if real or cmd.historical else give_back_handoffs(tx, scope, cmd.session_id)
    tx.conn.execute(
        "UPDATE sessions SET ended_at = ?, ended_observation_count = ?, summary_page_id = coalesce(?, summary_page_id),"
        " end_reason = ? WHERE id = ?", (ended_at, count, page_id, cmd.reason, row["id"]),
    )
    if substantive or tail:
        tx.conn.execute(
            "INSERT OR IGNORE INTO session_consolidation_jobs(workspace_id, project_id, session_id, generation,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
            (scope.workspace_id, scope.project_id, cmd.session_id, count, tx.now, tx.now),
        )
    tx.wiki.append_ledger(scope, ended_at[:7], ledger_entry(
        ended_at, "session-end", cmd.agent, cmd.session_id,
        f"ended after {count} events" + (f"; summary {path}" if path else "")))
    tx.audit("session.end", cmd.session_id, {"observation_count": count, "page_id": page_id,
                                             "handoff_id": handoff_id, "reason": cmd.reason,
                                             "returned_handoffs": returned}, scope=scope)
    tx.emit("session.ended", {"workspace_id": scope.workspace_id, "project_id": scope.project_id,
                              "session_id": cmd.session_id, "generation": count, "page_id": page_id,
                              "path": path, "handoff_id": handoff_id, "reason": cmd.reason})
    return {"ended": True, "changed": True, "observation_count": count, "page_id": page_id, "path": path,
            "handoff_id": handoff_id, "returned_handoffs": returned, "reason": cmd.reason}


def give_back_handoffs(tx: Tx, scope, session_id: str) -> list[int]:
    """Return to ``open`` the handoffs ``session_id`` claimed (it did nothing with them), and
    the automatic ones each claim had superseded. Returns the reopened claimed ids."""
    ids = [r["id"] for r in tx.conn.execute(
        "SELECT id FROM handoffs WHERE project_id = ? AND accepted_session_id = ? AND status = 'accepted'",
        (scope.project_id, session_id))]
    for hid in ids:
        tx.conn.execute("UPDATE handoffs SET status = 'open', closed_at = NULL, accepted_by = NULL,"
                        " accepted_session_id = NULL WHERE id = ?", (hid,))
        tx.conn.execute("UPDATE handoffs SET status = 'open', closed_at = NULL, superseded_by = NULL"
                        " WHERE superseded_by = ? AND status = 'superseded'", (hid,))
        tx.emit("handoff.returned", {"handoff_id": hid, "session_id": session_id})
    return ids


def _automatic_handoff(tx: Tx, scope, cmd: SessionEnd, row, d: Digest, page_path: str) -> int:
    """Open (or refresh, on a re-end) this session's automatic handoff; returns its id."""
    from aimem_writer.ops.handoffs import norm_cwd

    title, body = handoff_text(cmd.session_id, row, d, page_path)
    cwd = norm_cwd(cmd.cwd or row["cwd"])
    root = norm_cwd((tx.env.scope.root if tx.env.scope else None) or row["root"])
    existing = tx.conn.execute(
        "SELECT id FROM handoffs WHERE project_id = ? AND from_session_id = ? AND automatic = 1 AND status = 'open'",
        (scope.project_id, cmd.session_id),
    ).fetchone()
    if existing:
        tx.conn.execute("UPDATE handoffs SET title = ?, body = ?, cwd = ?, root = coalesce(?, root), created_at = ?"
                        " WHERE id = ?", (title, body, cwd, root, tx.now, existing["id"]))
        return existing["id"]
    hid = tx.conn.execute(
        "INSERT INTO handoffs(workspace_id, project_id, automatic, shared, owner, from_agent, from_session_id, cwd,"
        " root, title, body, status, created_at) VALUES (?, ?, 1, 0, ?, ?, ?, ?, ?, ?, ?, 'open', ?)",
        (scope.workspace_id, scope.project_id, tx.actor, cmd.agent or row["agent"], cmd.session_id, cwd, root,
         title, body, tx.now),
    ).lastrowid
    tx.emit("handoff.opened", {"handoff_id": hid, "automatic": True, "cwd": cwd, "root": root})
    return hid
