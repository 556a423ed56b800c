"""Any other client posting to ``/hook``: Claude Code's event names or the kind names themselves."""

from __future__ import annotations

from aimem_common.clients import claude_code
from aimem_common.clients.base import PLAIN_TEXT, Client, K

EVENTS = {**claude_code.EVENTS, **{k.value: k for k in K}}

CLIENT = Client(
    name="generic", events=EVENTS, end_event="session-end",
    paths={"event": ("hook_event_name", "event", "kind"),
           "text": ("message", "text", "body", "last_assistant_message")},
    session_start_output=PLAIN_TEXT, installable=False)
