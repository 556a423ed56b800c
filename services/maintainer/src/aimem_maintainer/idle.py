"""Finalise idle sessions: agents killed without a session end still get a page and a handoff.

A session whose last event is older than ``maintenance.session_idle_after_s`` (default one
hour) and that has no end is sent ``session.end`` with reason ``idle`` — the same op a
client's own session end uses, so the page, the automatic handoff and the ended watermark
come from one code path (``aimem_writer.ops.sessions``). ``ended_at`` is the session's last
event (when work stopped), and ``if_last_event_at`` makes the writer skip a session that got
an event after this pass read it. A later event on the session reopens it; its next end
(by the client or by this pass) re-renders the page.

Runs on the maintainer's schedule (every ``maintenance.idle_check_interval_s``) and on
demand (``aimem.maint.finalize_idle``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from aimem_common.commands.observations import SessionEnd
from aimem_common.errors import AimemError
from aimem_common.models import Scope
from aimem_common.read.sessions import idle_sessions


if TYPE_CHECKING:
    from aimem_maintainer.context import MaintContext

log = logging.getLogger("aimem.maintainer.idle")
BATCH = 200


def quiet_before(now: datetime, idle_after_s: float) -> str:
    """The ISO-8601 UTC instant before which a session's last event makes it idle."""
    return (now - timedelta(seconds=idle_after_s)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def finalize_idle(ctx: "MaintContext", *, idle_after_s: float | None = None) -> dict[str, Any]:
    """Send ``session.end`` (reason ``idle``) for every idle open session.

    Returns ``{"outcome", "finalized": [{"workspace", "project", "session_id"}], "skipped": n,
    "failed": n}``; a session that got an event meanwhile is ``skipped`` by the writer.
    """
    after = idle_after_s if idle_after_s is not None else ctx.settings.maintenance.session_idle_after_s
    cutoff = quiet_before(datetime.now(UTC), after)
    rows = await ctx.read_pool.run(idle_sessions, quiet_before=cutoff, limit=BATCH)
    finalized: list[dict[str, str]] = []
    skipped = failed = 0
    for r in rows:
        scope = Scope(r["workspace"], r["project"], "", "")  # names are what the envelope needs
        end = SessionEnd(session_id=r["session_id"], agent=r["agent"] or "generic", cwd=r["cwd"],
                         ended_at=r["last_event_at"], reason="idle", if_last_event_at=r["last_event_at"])
        key = f"idle:{r['workspace']}/{r['project']}:{r['session_id']}:{r['observation_count']}"
        try:
            res = await ctx.send("session.end", end, scope, idempotency_key=key[:200])
        except AimemError as exc:
            failed += 1
            log.warning("idle finalisation of %s in %s/%s failed: %s", r["session_id"], r["workspace"],
                        r["project"], exc.message)
            continue
        if res.get("ended"):
            finalized.append({"workspace": r["workspace"], "project": r["project"], "session_id": r["session_id"]})
        else:
            skipped += 1
    return {"outcome": "partial" if failed else "ok", "finalized": finalized, "skipped": skipped, "failed": failed}
