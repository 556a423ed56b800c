"""OMP, Oh My Pi (``@oh-my-pi/pi-coding-agent``): Pi's extension API, more events.

OMP keeps Pi's ``pi.on(event, handler)`` extension API (``src/extensibility/extensions/
types.ts`` of the package) and loads extensions from ``~/.omp/agent/extensions/`` (``.omp/
extensions/`` in a project). aimem generates the same extension as for Pi
(``aimem_common.clients.pi`` documents the payload) with ``--agent omp``.
"""

from __future__ import annotations

from aimem_common.clients import pi
from aimem_common.clients.base import PLAIN_TEXT, Client, K, event_table

# OMP 18.3.4 `ExtensionAPI.on` overloads: Pi's events plus its own.
EVENTS = {**pi.EVENTS, **event_table({
    K.PRE_COMPACT: "session.compacting auto_compaction_start", K.POST_COMPACTION: "auto_compaction_end",
    K.PERMISSION_REQUEST: "tool_approval_requested tool_approval_resolved",
    K.SUBAGENT_START: "before_subagent_spawn", K.STOP: "session_stop",
    K.OTHER: "session_switch session_before_branch session_branch auto_retry_start auto_retry_end"
             " retry_fallback_applied retry_fallback_succeeded ttsr_triggered todo_reminder goal_updated"
             " credential_disabled user_python mcp_notification"})}
for _gone in ("session_before_fork", "model_select", "thinking_level_select"):  # not in OMP's API
    EVENTS.pop(_gone, None)

CLIENT = Client(name="omp", events=EVENTS, end_event="session_shutdown", session_start_output=PLAIN_TEXT)
