"""The stack's health over the last hour: hooks per minute, writer lag, apply rate, dead letters.

``HealthSampler`` reads the services' own ``/metrics`` over loopback (ingress and writer)
and the writer's consumer lag from the bus every ``query.health_sample_s`` seconds into a
ring that holds one hour (bounded: ``3600 / interval + 1`` samples, a few KiB). With
``query.prometheus_url`` set it asks Prometheus for the same series instead
(``/api/v1/query_range``, one-minute steps) and keeps no ring.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from aimem_common.config import Settings
from aimem_common.errors import AimemError

log = logging.getLogger(__name__)

WINDOW_S = 3600
SERIES = ("hooks_per_min", "writer_lag", "applied_per_s", "dead_letters", "replication_lag_s")
PROMQL = {
    "hooks_per_min": "sum(rate(aimem_hook_events_total[2m])) * 60",
    "writer_lag": "max(aimem_writer_consumer_pending)",
    "applied_per_s": "sum(rate(aimem_writer_commands_total[2m]))",
    "dead_letters": "max(aimem_writer_dead_letters_open)",
    "replication_lag_s": "max(aimem_replication_lag_seconds)",
}


@dataclass(frozen=True, slots=True)
class Sample:
    """One reading: counters as read (totals) and gauges; ``None`` = that source did not answer."""

    t: float
    hooks_total: float | None
    applied_total: float | None
    dead_letters: float | None
    writer_lag: float | None
    replication_lag_s: float | None


def parse_metrics(text: str) -> dict[str, float]:
    """Return each metric family's samples summed over labels (``name`` → total) of a Prometheus text page."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name] = out.get(s.name, 0.0) + float(s.value)
    return out


def rates(samples: list[Sample]) -> dict[str, list[tuple[float, float | None]]]:
    """Return the five series as ``(t, value)`` lists: counters as rates between samples
    (a counter that went down — a restarted service — gives no point), gauges as read."""
    out: dict[str, list[tuple[float, float | None]]] = {k: [] for k in SERIES}
    for prev, cur in zip(samples, samples[1:]):
        dt = cur.t - prev.t
        if dt <= 0:
            continue
        for key, attr, mult in (("hooks_per_min", "hooks_total", 60.0), ("applied_per_s", "applied_total", 1.0)):
            a, b = getattr(prev, attr), getattr(cur, attr)
            out[key].append((cur.t, (b - a) / dt * mult if a is not None and b is not None and b >= a else None))
    for s in samples:
        out["writer_lag"].append((s.t, s.writer_lag))
        out["dead_letters"].append((s.t, s.dead_letters))
        out["replication_lag_s"].append((s.t, s.replication_lag_s))
    return out


class HealthSampler:
    """Sample the stack's metrics every ``interval_s`` into a one-hour ring (``start``/``stop``)."""

    def __init__(self, settings: Settings, bus: Any = None, *, interval_s: float | None = None) -> None:
        self.settings = settings
        self.bus = bus
        self.interval_s = float(interval_s or settings.query.health_sample_s)
        self.ring: deque[Sample] = deque(maxlen=int(WINDOW_S / self.interval_s) + 1)
        self._task: asyncio.Task | None = None
        host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
        self._urls = {name: f"http://{host}:{settings.port(name)}/metrics" for name in ("ingress", "writer")}
        token = settings.auth.token if settings.metrics.require_token else None
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    @property
    def prometheus(self) -> str | None:
        """The Prometheus base URL when one is configured (then the ring stays empty)."""
        return self.settings.query.prometheus_url

    def start(self) -> None:
        """Start sampling in the background (no-op with Prometheus configured or already started)."""
        if self._task is None and not self.prometheus:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="web-health-sampler")

    async def stop(self) -> None:
        """Stop sampling and wait for the task to end."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        async with httpx.AsyncClient(timeout=min(2.0, self.interval_s), verify=False, trust_env=False) as client:
            while True:
                try:
                    self.ring.append(await self.sample(client))
                except Exception:  # a sampling bug must not end the loop; the gap shows on the chart
                    log.exception("health sample failed")
                await asyncio.sleep(self.interval_s)

    async def sample(self, client: httpx.AsyncClient) -> Sample:
        """Read the ingress and writer metrics and the writer lag once."""
        async def metrics(name: str) -> dict[str, float] | None:
            try:
                r = await client.get(self._urls[name], headers=self._headers)
                return parse_metrics(r.text) if r.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                return None

        async def lag() -> float | None:
            if self.bus is None:
                return None
            try:
                return float(await self.bus.writer_lag())
            except AimemError:
                return None

        ing, wr, pending = await asyncio.gather(metrics("ingress"), metrics("writer"), lag())
        ing, wr = ing or {}, wr or {}
        return Sample(t=time.time(), hooks_total=ing.get("aimem_hook_events_total"),
                      applied_total=wr.get("aimem_writer_commands_total"),
                      dead_letters=wr.get("aimem_writer_dead_letters_open"),
                      writer_lag=pending if pending is not None else wr.get("aimem_writer_consumer_pending"),
                      replication_lag_s=wr.get("aimem_replication_lag_seconds"))

    async def series(self) -> dict[str, list[tuple[float, float | None]]]:
        """Return the last hour's five series (from Prometheus when configured, else the ring)."""
        if not self.prometheus:
            cutoff = time.time() - WINDOW_S
            return rates([s for s in self.ring if s.t >= cutoff])
        end = time.time()
        out: dict[str, list[tuple[float, float | None]]] = {k: [] for k in SERIES}
        async with httpx.AsyncClient(timeout=2.0, trust_env=False) as client:
            async def one(key: str) -> None:
                try:
                    r = await client.get(self.prometheus.rstrip("/") + "/api/v1/query_range",
                                         params={"query": PROMQL[key], "start": end - WINDOW_S, "end": end, "step": 60})
                    result = r.json()["data"]["result"]
                    out[key] = [(float(t), float(v)) for t, v in result[0]["values"]] if result else []
                except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
                    out[key] = []

            await asyncio.gather(*(one(k) for k in SERIES))
        return out
