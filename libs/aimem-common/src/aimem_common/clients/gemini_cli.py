"""Gemini CLI: hooks in ``settings.json``; ``BeforeAgent`` carries the user's prompt."""

from __future__ import annotations

from aimem_common.clients.base import HOOK_SPECIFIC_OUTPUT, Client, K, event_table

EVENTS = event_table({
    K.SESSION_START: "SessionStart", K.USER_PROMPT: "BeforeAgent", K.PRE_TOOL_USE: "BeforeTool",
    K.POST_TOOL_USE: "AfterTool", K.PRE_COMPACT: "PreCompress", K.NOTIFICATION: "Notification",
    K.STOP: "AfterAgent", K.SESSION_END: "SessionEnd",
    K.OTHER: "BeforeModel AfterModel BeforeToolSelection"})

CLIENT = Client(
    name="gemini-cli", aliases=("gemini",), events=EVENTS, end_event="SessionEnd",
    install_events=("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "PreCompress", "Notification",
                    "AfterAgent", "SessionEnd"),
    session_start_output=HOOK_SPECIFIC_OUTPUT, transcript_dir="/.gemini/")
