"""Pi (``@mariozechner/pi-coding-agent``): no command hooks; aimem generates an extension.

Pi loads TypeScript extensions from ``~/.pi/agent/extensions/`` (``.pi/extensions/`` in a
project) and calls ``pi.on(event, handler)`` (its ``docs/extensions.md``). aimem's extension
(``aimem_cli.installers.extension``) pipes one Claude-shaped payload per event into
``aimem hook --agent pi --event <pi event>``, so identity, capture rules and the spool apply
exactly as for command hooks::

    {"hook_event_name": "tool_result", "session_id": "<SessionManager.getSessionId()>",
     "cwd": "<ctx.cwd>", "timestamp": "<ISO 8601>", "model": "<ctx.model.id>",
     "source": "startup|resume",            # session_start (from event.reason)
     "prompt": "...",                        # before_agent_start
     "tool_name": "bash", "tool_input": {...}, "tool_response": "...", "error": "...",
     "last_assistant_message": "...",        # agent_end
     "summary": "..."}                       # session_compact

The session-start context comes back on stdout as plain text; the extension appends it to
the system prompt of the session's first prompt (``before_agent_start``).
"""

from __future__ import annotations

from aimem_common.clients.base import PLAIN_TEXT, Client, K, event_table

# Every event of Pi's extension API (docs/extensions.md "Events"); the kinds aimem records.
EVENTS = event_table({
    K.SESSION_START: "session_start", K.USER_PROMPT: "before_agent_start",
    K.PRE_TOOL_USE: "tool_call", K.POST_TOOL_USE: "tool_result",
    K.PRE_COMPACT: "session_before_compact", K.POST_COMPACTION: "session_compact",
    K.STOP: "agent_end", K.SESSION_END: "session_shutdown",
    K.OTHER: "resources_discover session_before_switch session_before_fork session_before_tree session_tree"
             " agent_start turn_start turn_end message_start message_update message_end tool_execution_start"
             " tool_execution_update tool_execution_end context before_provider_request after_provider_response"
             " model_select thinking_level_select user_bash input"})

# The events the generated extension subscribes to (the rest carry nothing a session page uses).
SUBSCRIBED = ("session_start", "before_agent_start", "tool_call", "tool_result", "agent_end",
              "session_before_compact", "session_compact", "session_shutdown")

CLIENT = Client(name="pi", events=EVENTS, end_event="session_shutdown", session_start_output=PLAIN_TEXT)
