"""Crush (charmbracelet/crush): Claude Code-compatible command hooks in ``crush.json``.

Each hook gets ``{"event", "session_id", "cwd", "tool_name", "tool_input", ...}`` on stdin
(Crush's ``docs/hooks/README.md`` and its built-in ``crush-hooks`` skill); the event's name
is under ``event``, not ``hook_event_name``. Entries are flat ``{matcher?, command,
timeout}``; only the five tool events accept a ``matcher``. Crush also reads Claude Code's
``hookSpecificOutput`` envelope, which is how the session-start context is printed.
"""

from __future__ import annotations

from aimem_common.clients.base import HOOK_SPECIFIC_OUTPUT, Client, K, event_table

EVENTS = event_table({  # the 13 events of the `crush-hooks` skill (case-insensitive)
    K.SESSION_START: "SessionStart", K.USER_PROMPT: "TurnStart",
    K.PRE_TOOL_USE: "PreToolUse", K.POST_TOOL_USE: "PostToolUse PostToolUseFailure",
    K.PERMISSION_REQUEST: "PermissionRequest PermissionResult",
    K.PRE_COMPACT: "PreCompact", K.POST_COMPACTION: "PostCompact",
    K.NOTIFICATION: "StopFailure Interrupt", K.STOP: "TurnEnd", K.SESSION_END: "SessionEnd"})

TOOL_EVENTS = frozenset({"pretooluse", "posttooluse", "posttoolusefailure", "permissionrequest", "permissionresult"})

CLIENT = Client(
    name="crush", events=EVENTS, end_event="SessionEnd",
    paths={"event": ("event", "hook_event_name"),
           "prompt": ("prompt", "user_prompt", "message"),
           "text": ("last_assistant_message", "response", "message", "reason", "error.message")},
    install_events=("SessionStart", "TurnStart", "PreToolUse", "PostToolUse", "PostToolUseFailure",
                    "PreCompact", "PostCompact", "StopFailure", "Interrupt", "TurnEnd", "SessionEnd"),
    session_start_output=HOOK_SPECIFIC_OUTPUT)

# Part types of a message in Crush's own ``crush.db`` (what ``aimem import`` reads; not hook
# events, though Pi's events share the first name).
PART_TOOL_CALL = "tool_call"
PART_TOOL_RESULT = "tool_result"
