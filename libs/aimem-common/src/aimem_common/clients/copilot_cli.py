"""Copilot CLI: github/docs ``cli-hooks-reference.md``, camelCase and VS Code PascalCase shapes."""

from __future__ import annotations

from typing import Any

from aimem_common.clients.base import NO_OUTPUT, Client, K, event_table

# camelCase names + the PascalCase ones that differ beyond case
EVENTS = event_table({
    K.SESSION_START: "sessionStart", K.USER_PROMPT: "userPromptSubmitted UserPromptSubmit",
    K.PRE_TOOL_USE: "preToolUse", K.POST_TOOL_USE: "postToolUse postToolUseFailure",
    K.PERMISSION_REQUEST: "permissionRequest", K.PRE_COMPACT: "preCompact",
    K.NOTIFICATION: "notification errorOccurred", K.SUBAGENT_START: "subagentStart",
    K.SUBAGENT_STOP: "subagentStop", K.STOP: "agentStop Stop", K.SESSION_END: "sessionEnd"})

# camelCase payloads carry no event name: required fields -> event, first match wins.
SHAPES = (
    ({"toolResult"}, "postToolUse"), ({"toolName", "error"}, "postToolUseFailure"),
    ({"toolName"}, "preToolUse"), ({"error"}, "errorOccurred"),
    ({"prompt"}, "userPromptSubmitted"), ({"trigger"}, "preCompact"),
    ({"agentName", "stopReason"}, "subagentStop"), ({"agentName"}, "subagentStart"),
    ({"stopReason"}, "agentStop"), ({"source"}, "sessionStart"), ({"reason"}, "sessionEnd"))


def event_from_shape(payload: dict[str, Any]) -> str | None:
    """The event a camelCase payload (no event name) is, from the fields it carries."""
    return next((name for keys, name in SHAPES if keys <= payload.keys()), None)


CLIENT = Client(
    name="copilot-cli", aliases=("copilot",), events=EVENTS, end_event="sessionEnd",
    install_events=("sessionStart", "userPromptSubmitted", "preToolUse", "permissionRequest", "postToolUse",
                    "postToolUseFailure", "preCompact", "subagentStart", "subagentStop", "notification",
                    "agentStop", "errorOccurred", "sessionEnd"),
    session_start_output=NO_OUTPUT)  # Copilot CLI ignores sessionStart output
