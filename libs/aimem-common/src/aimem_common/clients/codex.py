"""Codex: ``hooks.json`` (codex-rs/hooks schemas); ``agent-turn-complete`` is its ``notify`` payload."""

from __future__ import annotations

from aimem_common.clients.base import HOOK_SPECIFIC_OUTPUT, Client, K, event_table

EVENTS = event_table({
    K.SESSION_START: "SessionStart", K.USER_PROMPT: "UserPromptSubmit",
    K.PRE_TOOL_USE: "PreToolUse", K.POST_TOOL_USE: "PostToolUse",
    K.PERMISSION_REQUEST: "PermissionRequest", K.PRE_COMPACT: "PreCompact",
    K.POST_COMPACTION: "PostCompact", K.NOTIFICATION: "StopFailure Interrupt",
    K.SUBAGENT_START: "SubagentStart", K.SUBAGENT_STOP: "SubagentStop",
    K.STOP: "Stop agent-turn-complete", K.SESSION_END: "SessionEnd"})

# Codex's hook_event_key_label: the event's snake_case name in trust keys and hashes
# (aimem_cli.installers.codex trusts each installed hook by hash).
TRUST_LABELS = {"PreToolUse": "pre_tool_use", "PermissionRequest": "permission_request",
                "PostToolUse": "post_tool_use", "PreCompact": "pre_compact", "PostCompact": "post_compact",
                "SessionStart": "session_start", "SessionEnd": "session_end",
                "UserPromptSubmit": "user_prompt_submit", "SubagentStart": "subagent_start",
                "SubagentStop": "subagent_stop", "Stop": "stop", "StopFailure": "stop_failure",
                "Interrupt": "interrupt"}
NO_MATCHER_EVENTS = frozenset({"UserPromptSubmit", "Stop"})  # Codex drops `matcher` from their hash

CLIENT = Client(
    name="codex", events=EVENTS, end_event="SessionEnd",
    paths={"event": ("hook_event_name", "type"), "session_id": ("session_id", "thread-id"),
           "text": ("last_assistant_message", "last-assistant-message")},
    install_events=("SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
                    "PreCompact", "PostCompact", "SubagentStart", "SubagentStop", "Stop", "StopFailure",
                    "Interrupt", "SessionEnd"),
    session_start_output=HOOK_SPECIFIC_OUTPUT, transcript_dir="/.codex/",
    short_timeout_events=frozenset({"SessionEnd", "Interrupt"}))  # Codex clamps these to 1-3 s
