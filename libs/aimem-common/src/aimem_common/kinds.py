"""``ObservationKind``: the closed hook vocabulary (stdlib only: the hook client imports it)."""

from __future__ import annotations

from enum import StrEnum


class ObservationKind(StrEnum):
    """The closed hook vocabulary every client's events map to (DESIGN.md "Hook ingress").

    ``post-tool-use`` covers failed tool calls too (their body carries an ``error:`` line);
    ``permission-request`` covers asks and denials; ``other`` keeps a documented event's
    raw fields when no kind fits.
    """

    SESSION_START = "session-start"
    USER_PROMPT = "user-prompt"
    PRE_TOOL_USE = "pre-tool-use"
    POST_TOOL_USE = "post-tool-use"
    PERMISSION_REQUEST = "permission-request"
    PRE_COMPACT = "pre-compact"
    POST_COMPACTION = "post-compaction"
    NOTIFICATION = "notification"
    SUBAGENT_START = "subagent-start"
    SUBAGENT_STOP = "subagent-stop"
    STOP = "stop"
    SESSION_END = "session-end"
    OTHER = "other"


__all__ = ["ObservationKind"]
