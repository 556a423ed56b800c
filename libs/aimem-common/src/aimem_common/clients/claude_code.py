"""Claude Code: hooks in ``settings.json`` (Claude Agent SDK 0.3.332 ``HookInput`` = Claude Code 2.1.332)."""

from __future__ import annotations

from aimem_common.clients.base import HOOK_SPECIFIC_OUTPUT, Client, K, event_table

EVENTS = event_table({
    K.SESSION_START: "SessionStart", K.USER_PROMPT: "UserPromptSubmit",
    K.PRE_TOOL_USE: "PreToolUse PreSkillShellCommand", K.POST_TOOL_USE: "PostToolUse PostToolUseFailure",
    K.PERMISSION_REQUEST: "PermissionRequest PermissionDenied", K.PRE_COMPACT: "PreCompact",
    K.POST_COMPACTION: "PostCompact", K.NOTIFICATION: "Notification StopFailure Elicitation",
    K.SUBAGENT_START: "SubagentStart", K.SUBAGENT_STOP: "SubagentStop", K.STOP: "Stop",
    K.SESSION_END: "SessionEnd",
    K.OTHER: "PostToolBatch UserPromptExpansion Setup TeammateIdle TaskCreated TaskCompleted"
             " ElicitationResult ConfigChange InstructionsLoaded WorktreeCreate WorktreeRemove"
             " CwdChanged FileChanged DirectoryAdded PreModelSwitch PostModelSwitch MessageDisplay"})

CLIENT = Client(
    name="claude-code", aliases=("claude",), events=EVENTS, end_event="SessionEnd",
    install_events=("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
                    "PermissionRequest", "PermissionDenied", "PreCompact", "PostCompact", "Notification",
                    "SubagentStart", "SubagentStop", "Stop", "StopFailure", "SessionEnd"),
    session_start_output=HOOK_SPECIFIC_OUTPUT, transcript_dir="/.claude/")
