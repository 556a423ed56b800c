"""Cursor: ``hooks.json`` (cursor hook docs); events in camelCase, session id ``conversation_id``."""

from __future__ import annotations

from aimem_common.clients.base import ADDITIONAL_CONTEXT, Client, K, event_table

EVENTS = event_table({
    K.SESSION_START: "sessionStart", K.USER_PROMPT: "beforeSubmitPrompt",
    K.PRE_TOOL_USE: "preToolUse beforeShellExecution beforeMCPExecution beforeReadFile",
    K.POST_TOOL_USE: "postToolUse postToolUseFailure afterShellExecution afterMCPExecution"
                     " afterFileEdit afterTabFileEdit",
    K.PRE_COMPACT: "preCompact", K.SUBAGENT_START: "subagentStart", K.SUBAGENT_STOP: "subagentStop",
    K.STOP: "afterAgentResponse stop", K.SESSION_END: "sessionEnd",
    K.OTHER: "afterAgentThought beforeTabFileRead"})

CLIENT = Client(
    name="cursor", events=EVENTS, end_event="sessionEnd",
    paths={"session_id": ("conversation_id", "session_id"), "cwd": ("cwd", "workspace_roots.0"),
           "tool_input": ("tool_input", "command", "file_path"),
           "tool_output": ("tool_output", "output", "result_json", "edits"),
           "text": ("text", "message", "summary", "task")},
    implied_tools={"beforeshellexecution": "Shell", "aftershellexecution": "Shell", "afterfileedit": "Edit",
                   "aftertabfileedit": "TabEdit", "beforereadfile": "Read", "beforemcpexecution": "MCP",
                   "aftermcpexecution": "MCP"},
    # afterAgentResponse carries the assistant's text; `stop` would duplicate it as a second stop.
    install_events=("sessionStart", "beforeSubmitPrompt", "preToolUse", "postToolUse", "postToolUseFailure",
                    "subagentStart", "subagentStop", "preCompact", "afterAgentResponse", "sessionEnd"),
    session_start_output=ADDITIONAL_CONTEXT, transcript_dir="/.cursor/")
