"""What aimem knows about each agent client, one stdlib-only module per client.

A client's module holds its hook events and their kinds, where its payloads keep each field,
the events its installer subscribes to and its session-start output; this package holds the
registry and what needs all of them (``detect``, ``format_context``). The hook client
(``aimem_cli.hookclient``), the installers (``aimem_cli.installers.plans``) and ingress
(``aimem_ingress.normalize``) read them from here. Stdlib only: the hook client imports it on
every hook call.
"""

from __future__ import annotations

import json
from typing import Any

from aimem_common.clients import (antigravity, claude_code, codex, copilot_cli, crush, cursor, gemini_cli, generic,
                                  omp, opencode, openclaw, pi)
from aimem_common.clients.base import ADDITIONAL_CONTEXT, HOOK_SPECIFIC_OUTPUT, Client, K, get_path

CLIENTS: dict[str, Client] = {c.name: c for c in (
    claude_code.CLIENT, codex.CLIENT, gemini_cli.CLIENT, cursor.CLIENT, copilot_cli.CLIENT, opencode.CLIENT,
    crush.CLIENT, pi.CLIENT, omp.CLIENT, openclaw.CLIENT, antigravity.CLIENT, generic.CLIENT)}
AGENTS = tuple(CLIENTS)
ALIASES = {alias: c.name for c in CLIENTS.values() for alias in c.aliases}
INSTALLABLE = tuple(name for name, c in CLIENTS.items() if c.installable)
GENERIC = generic.CLIENT

# Native names (casefolded) of a session start / end in any client: the hook client's
# special cases (context on start, detached delivery on end).
START_EVENTS = frozenset(n for c in CLIENTS.values() for n, k in c.events.items() if k is K.SESSION_START)
END_EVENTS = frozenset(n for c in CLIENTS.values() for n, k in c.events.items() if k is K.SESSION_END)
# Top-level payload keys that hold the session id, in any client.
SESSION_ID_KEYS = ("session_id", "sessionId", "conversation_id", "sessionID", "thread-id", "conversationId")

# Tool events whose tool failed (the payload carries the error instead of a result), and
# permission events that report a denial (casefolded, any client).
FAILED_TOOL_EVENTS = frozenset({"posttoolusefailure"})
DENIED_EVENTS = frozenset({"permissiondenied"})
# Titles of notification events that say more than "Notification" (casefolded, any client).
NOTICE_LABELS = {"stopfailure": "Turn failed", "interrupt": "Turn interrupted", "elicitation": "Question",
                 "erroroccurred": "Error", "session.error": "Error"}

_GEMINI_ONLY = frozenset(n for n in gemini_cli.EVENTS if n not in claude_code.EVENTS)
_TRANSCRIPT_HINTS = tuple((c.transcript_dir, c.name) for c in (codex.CLIENT, gemini_cli.CLIENT,
                          claude_code.CLIENT, cursor.CLIENT) if c.transcript_dir)


def client(name: str) -> Client:
    """The client named ``name`` (canonical; ``ALIASES`` are ingress's to resolve); ``GENERIC``
    for a name aimem does not know."""
    return CLIENTS.get(name, GENERIC)


def detect(payload: Any) -> str:
    """Guess which client sent ``payload`` from its distinctive fields; ``generic`` if none.

    Order matters: explicit ``agent``, OpenCode envelope, Codex ``notify``, Antigravity
    (``conversationId`` + ``workspacePaths``), Cursor
    (``conversation_id`` + ``workspace_roots``/``cursor_version``), Copilot camelCase
    (``sessionId``/``toolArgs``), Gemini-only event names, transcript dir (``~/.codex``, ...),
    Codex ``turn_id``; last ``timestamp``: Gemini and Copilot PascalCase carry one, Claude
    Code (``hook_event_name`` + ``transcript_path`` + ``session_id``) does not.
    """
    if not isinstance(payload, dict):
        return "generic"
    if payload.get("agent") in AGENTS:
        return payload["agent"]
    if opencode.is_envelope(payload):
        return "opencode"
    if payload.get("type") == "agent-turn-complete" or "thread-id" in payload:
        return "codex"
    if "conversationId" in payload and "workspacePaths" in payload:
        return "antigravity"
    if "conversation_id" in payload and payload.keys() & {"workspace_roots", "cursor_version"}:
        return "cursor"
    if "sessionId" in payload or "toolArgs" in payload:
        return "copilot-cli"
    name = payload.get("hook_event_name")
    name = name.casefold() if isinstance(name, str) else ""
    if name in _GEMINI_ONLY:
        return "gemini-cli"
    transcript = payload.get("transcript_path")
    transcript = transcript.replace("\\", "/") if isinstance(transcript, str) else ""
    by_dir = next((agent for hint, agent in _TRANSCRIPT_HINTS if hint in transcript), None)
    if by_dir or "turn_id" in payload:
        return by_dir or "codex"
    if not name or "session_id" not in payload:
        return "generic"
    if isinstance(payload.get("timestamp"), str):
        gemini = "transcript_path" in payload and name in gemini_cli.EVENTS
        return "gemini-cli" if gemini else "copilot-cli"
    return "claude-code" if "transcript_path" in payload else "generic"


def ignored(agent: str, event: str | None, payload: Any) -> bool:
    """True for an event the hook client drops before any spool or network work: an
    Antigravity ``PreInvocation`` after the session's first model call (``invocationNum > 0``)."""
    return agent == "antigravity" and antigravity.ignored(event, payload)


def wants_context(agent: str) -> bool:
    """False for a client that ignores session-start output (the context is not fetched)."""
    return client(agent).session_start_output != "none"


def format_context(agent: str, context: str) -> str:
    """Render ``context`` as the session-start stdout ``agent`` understands."""
    shape = client(agent).session_start_output
    if shape == ADDITIONAL_CONTEXT:
        return json.dumps({"additional_context": context}, ensure_ascii=False)
    if shape == antigravity.INJECT_STEPS:
        return json.dumps({"injectSteps": [{"systemMessage": {"systemMessage": context}}]}, ensure_ascii=False)
    if shape == HOOK_SPECIFIC_OUTPUT:
        return json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                                  "additionalContext": context}}, ensure_ascii=False)
    return context


__all__ = ["AGENTS", "ALIASES", "CLIENTS", "DENIED_EVENTS", "END_EVENTS", "FAILED_TOOL_EVENTS", "NOTICE_LABELS", "GENERIC", "INSTALLABLE", "SESSION_ID_KEYS",
           "START_EVENTS", "Client", "client", "detect", "format_context", "get_path", "ignored", "wants_context"]
