"""OpenCode: no command hooks; aimem generates a plugin that pipes its envelope into ``aimem hook``.

OpenCode loads every ``plugin/*.{ts,js}`` and ``plugins/*.{ts,js}`` of its config folders
(``~/.config/opencode/``, a project's ``.opencode/``), calls each exported function with its
``PluginInput`` and keeps the hooks it returns. aimem's plugin
(``aimem_cli.installers.extension``) writes one envelope per hook call on the stdin of
``aimem hook --agent opencode --event <name>`` (``input``/``output`` are the hook's two
arguments, verbatim)::

    {"agent": "opencode",
     "event": "tool.execute.after",    # hook name; for the `event` hook: event.type
     "sessionID": "ses_...",           # optional; REQUIRED for file.edited (last seen one)
     "directory": "/home/dev/projects/acme-api",   # PluginInput.directory
     "timestamp": 1773479615004,       # optional, epoch ms
     "input": {...},                   # 1st argument; `event` hook: {"event": {type, properties}}
     "output": {...} | null,           # 2nd argument (null for `event`)
     "last_assistant_message": "..."}  # session.idle: the assistant's latest text part

OpenCode never ends a session it does not delete, so the plugin's ``dispose`` hook (the
instance going away: the process exiting) sends ``dispose`` for every session it saw that had
no end. The bare ``event`` hook argument (``{"event": {"type": ..., "properties": ...}}``)
works too, as does the same envelope POSTed to ``/hook?agent=opencode``.
"""

from __future__ import annotations

from typing import Any

from aimem_common.clients.base import PLAIN_TEXT, Client, K, event_table, get_path

EVENTS = event_table({  # plugin hook names and bus event types
    K.SESSION_START: "session.created", K.USER_PROMPT: "chat.message",
    K.PRE_TOOL_USE: "tool.execute.before", K.POST_TOOL_USE: "tool.execute.after file.edited",
    K.PERMISSION_REQUEST: "permission.ask permission.updated permission.asked",
    K.PRE_COMPACT: "experimental.session.compacting", K.POST_COMPACTION: "session.compacted",
    K.NOTIFICATION: "session.error", K.STOP: "session.idle", K.SESSION_END: "session.deleted dispose",
    K.OTHER: "command.execute.before todo.updated"})

GENERIC_HOOK = "event"  # the plugin hook that carries a bus event: its name is event.type
# The bus events the generated plugin forwards (the rest carry nothing a session page uses).
BUS_EVENTS = ("session.created", "session.idle", "session.deleted", "session.compacted", "session.error",
              "file.edited", "permission.updated", "permission.asked", "todo.updated")


def view(payload: dict[str, Any]) -> dict[str, Any]:
    """Return the envelope with its bus event (``event`` or ``input.event``) lifted to ``bus``."""
    raw = payload.get("event")
    bus = raw if isinstance(raw, dict) else get_path(payload, "input.event")
    out = {k: v for k, v in payload.items() if not (k == "event" and isinstance(v, dict))}
    return {**out, "bus": bus if isinstance(bus, dict) else {}}


def is_envelope(payload: dict[str, Any]) -> bool:
    """True for the plugin's envelope or a bare bus event."""
    return isinstance(payload.get("event"), dict) or isinstance(get_path(payload, "input.sessionID"), str)


CLIENT = Client(
    name="opencode", events=EVENTS, end_event="session.deleted",
    paths={  # `view` lifts the bus event to `bus`
        "event": ("event", "bus.type"),
        "session_id": ("sessionID", "input.sessionID", "output.message.sessionID",
                       "bus.properties.sessionID", "bus.properties.info.id"),
        "cwd": ("directory", "cwd", "bus.properties.info.directory"),
        "prompt": ("output.parts",), "tool_name": ("input.tool", "input.type", "bus.properties.type"),
        "tool_input": ("output.args", "input.args", "bus.properties.file", "input.metadata",
                       "bus.properties.metadata"),
        "tool_output": ("output.output",),
        "text": ("last_assistant_message", "bus.properties.error.data.message"),
        "summary": (), "error": ("bus.properties.error.data.message", "bus.properties.error.name"),
        "parent": ("bus.properties.info.parentID", "parent_session_id"),  # Session.parentID: a child
        "model": ("input.model", "output.message.model"),
        "timestamp": ("timestamp", "output.message.time.created", "bus.properties.info.time.updated")},
    implied_tools={"file.edited": "edit"},
    session_start_output=PLAIN_TEXT)  # hooked by a generated plugin (aimem_cli.installers.extension)
