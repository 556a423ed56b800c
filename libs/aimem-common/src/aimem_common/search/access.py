"""Access bumps for page hits: throttled to once a minute per page, sent to the writer.

``memory_query`` only *reads*; the reinforcement term of the decay formula
(``access_count``/``last_accessed_at``) is written by the writer op ``page.access``. Query
and the MCP gateway each keep one ``AccessThrottle`` (on ``app.state``) and call
``publish_access`` after answering, so a burst of overlapping searches does not flood the
writer with redundant bumps (access counts feed the forget sweep's retention).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from aimem_common.errors import AimemError
from aimem_common.commands import make_envelope

if TYPE_CHECKING:
    from aimem_common.search.hits import Hit

log = logging.getLogger("aimem.search.access")

MAX_TRACKED = 100_000  # bound memory: forget the oldest entries past this many pages
MAX_IDS_PER_COMMAND = 200  # PageAccess.page_ids max_length


class AccessThrottle:
    """Remember when each page id was last bumped; let one bump per ``interval_s`` through.

    Thread-safe. ``clock`` (seconds, monotonic) is injectable for tests.
    """

    def __init__(self, interval_s: float = 60.0, *, clock: Callable[[], float] = time.monotonic):
        self.interval_s = interval_s
        self._clock = clock
        self._last: dict[int, float] = {}
        self._lock = threading.Lock()

    def due(self, page_ids: Iterable[int]) -> list[int]:
        """Return the ids not bumped within ``interval_s`` and mark them bumped now.

        Order is preserved and duplicates are dropped.
        """
        now = self._clock()
        out: list[int] = []
        with self._lock:
            for pid in page_ids:
                last = self._last.get(pid)
                if (last is None or now - last >= self.interval_s) and pid not in out:
                    self._last[pid] = now
                    out.append(pid)
            if len(self._last) > MAX_TRACKED:
                cutoff = now - self.interval_s
                self._last = {p: t for p, t in self._last.items() if t >= cutoff}
        return out


def group_hits(hits: Iterable["Hit"]) -> dict[tuple[str, str], list[int]]:
    """Group live page hits by ``(workspace, project)`` → page ids (superseded ones skipped)."""
    out: dict[tuple[str, str], list[int]] = {}
    for h in hits:
        if h.superseded:
            continue
        out.setdefault((h.workspace, h.project), []).append(h.page_id)
    return out


async def publish_access(bus: Any, throttle: AccessThrottle, hits: Iterable["Hit"], *, actor: str) -> int:
    """Publish ``page.access`` for the due page hits, one command per project.

    ``bus`` is an ``aimem_common.bus.Bus``. Best effort: a bus error is logged, never
    raised (a search must not fail because the reinforcement write could not be queued).
    Thread: event loop. Side effect: publishes to ``aimem.mut.page.access``.

    Returns the number of page ids published.
    """
    sent = 0
    for (ws, pj), ids in group_hits(hits).items():
        due = throttle.due(ids)
        for i in range(0, len(due), MAX_IDS_PER_COMMAND):
            chunk = due[i : i + MAX_IDS_PER_COMMAND]
            try:
                env = make_envelope("page.access", {"page_ids": chunk}, workspace=ws, project=pj, actor=actor)
                await bus.publish(env)
                sent += len(chunk)
            except AimemError as exc:
                log.warning("page.access not published for %s/%s: %s", ws, pj, exc.message)
    return sent
