"""Ops of the hook path: ``observation.append`` and ``session.end``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from aimem_common.models import ObservationKind
from aimem_common.commands.envelope import OpPayload, register
from aimem_common.commands.freetext import FreeText


@register("observation.append", creates_scope=True)
class ObservationAppend(OpPayload):
    """One sanitized hook observation (built only from ``sanitize()`` output).

    ``sanitized`` must be true; the writer re-checks the text with the redactor and refuses
    a command that still carries a secret (DESIGN.md invariant 6). ``imported`` marks an
    observation read from a client's transcript by ``aimem import``. ``run_id`` names the
    managed run whose child sent the hook.
    """

    session_id: str = Field(min_length=1, max_length=256)
    kind: ObservationKind
    agent: str = Field("generic", max_length=64)
    cwd: str | None = Field(None, max_length=4096)
    title: str = Field("", max_length=512)
    body: str = Field("", max_length=16 * 1024)
    tool_name: str | None = Field(None, max_length=256)
    source_event: str | None = Field(None, max_length=128)
    extension: str | None = Field(None, max_length=64)
    model: str | None = Field(None, max_length=128)
    occurred_at: str | None = None
    sanitized: Literal[True]
    redactions: list[str] = []
    imported: bool = False  # from a transcript import; skipped when hooks captured the session
    # The session this one was spawned from (OpenCode ``parentID``): a child session never
    # claims a handoff and never opens one (docs/lifecycle.md "Children and subagents").
    parent_session_id: str | None = Field(None, max_length=256)
    # The managed run (``aimem run``, its child's ``AIMEM_RUN_ID``) that captured it; stored as is.
    run_id: str | None = Field(None, pattern=r"^[0-9a-f]{32}$")


@register("session.end", creates_scope=True)
class SessionEnd(OpPayload):
    """Close a session: summary page, automatic handoff, ended count (DESIGN.md "Hook ingress").

    Sent by ingress after the ``session-end`` observation itself (``reason`` from the
    client: ``exit``, ``clear``, ``logout``, ``finalize-session``, …), by
    ``aimem finalize-session``, and by the
    maintainer for a session idle past ``maintenance.session_idle_after_s`` (``reason``
    ``idle``, with ``if_last_event_at`` = the last event time it saw: a session that got an
    event since is left alone). Re-ending only does work when the count advanced; the page
    records the reason. ``historical`` (transcript imports) writes the page with the
    original times and opens no handoff: an old session is not work in progress.
    """

    session_id: str = Field(min_length=1, max_length=256)
    agent: str = Field("generic", max_length=64)
    cwd: str | None = Field(None, max_length=4096)
    ended_at: str | None = None
    historical: bool = False  # an imported session: page and counts, but no handoff
    reason: FreeText | None = Field(None, max_length=64)  # the client's text: it reaches the session page
    if_last_event_at: str | None = Field(None, max_length=64)
