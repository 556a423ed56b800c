"""Antigravity CLI (``agy``): named command hooks in ``hooks.json`` of a customization root.

``~/.gemini/config/hooks.json`` (user) or ``.agents/hooks.json`` (project) maps a hook
*name* to its events: ``PreToolUse``/``PostToolUse`` take ``{matcher, hooks: [handler]}``
groups, ``PreInvocation``/``PostInvocation``/``Stop``/``SessionStart`` a flat list of
``{"type": "command", "command", "timeout"}`` handlers. Payloads are camelCase::

    {"conversationId": "...", "workspacePaths": ["/repo"], "transcriptPath": "...",
     "invocationNum": 0, "modelName": "...",                  # PreInvocation / PostInvocation
     "toolCall": {"name": "run_command", "args": {...}},      # PreToolUse / PostToolUse
     "terminationReason": "NO_TOOL_CALL"}                     # Stop

``PreInvocation`` fires before *every* model call: only ``invocationNum = 0`` is the session
start (``ignored`` drops the others before any spool or network work). It has no session
end: ``aimem finalize-session --agent antigravity`` closes the newest open session. A
``PreInvocation`` hook injects text through ``{"injectSteps": [{"systemMessage":
{"systemMessage": text}}]}`` on stdout.
"""

from __future__ import annotations

from typing import Any

from aimem_common.clients.base import Client, K, event_table

EVENTS = event_table({
    K.SESSION_START: "PreInvocation SessionStart", K.PRE_TOOL_USE: "PreToolUse", K.POST_TOOL_USE: "PostToolUse",
    K.STOP: "Stop", K.OTHER: "PostInvocation",
    K.SESSION_END: "SessionEnd"})  # not an agy event: the name `aimem finalize-session` sends

INJECT_STEPS = "injectSteps"  # session_start_output: {"injectSteps": [{"systemMessage": {"systemMessage": text}}]}


def ignored(event: str | None, payload: Any) -> bool:
    """True for a ``PreInvocation`` that is not the session's first model call (or names none)."""
    if (event or "").casefold() != "preinvocation":
        return False
    num = payload.get("invocationNum") if isinstance(payload, dict) else None
    return not (isinstance(num, int) and not isinstance(num, bool) and num == 0)


CLIENT = Client(
    name="antigravity", aliases=("agy", "antigravity-cli"), events=EVENTS, end_event="SessionEnd",
    paths={"session_id": ("conversationId", "session_id"), "cwd": ("cwd", "workspacePaths.0"),
           "tool_name": ("toolCall.name", "tool_name"), "tool_input": ("toolCall.args", "tool_input"),
           "tool_output": ("toolCall.result", "toolResult", "output", "tool_response"),
           "error": ("toolCall.error", "error"),
           "text": ("terminationReason", "message"), "model": ("modelName", "model"),
           "prompt": ("prompt", "userPrompt")},
    # SessionStart is documented for newer agy builds; installing both would start twice.
    install_events=("PreInvocation", "PreToolUse", "PostToolUse", "Stop"),
    session_start_output=INJECT_STEPS)
