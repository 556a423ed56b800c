"""``[[mirrors]]``: a signed JSON notification per committed change, from a durable outbox.

The writer publishes what it committed on ``AIMEM_EVT`` (``aimem.evt.<kind>``) after
COMMIT. Each configured mirror gets its own durable JetStream pull consumer on that stream
(``mirror-<name>``): that consumer **is** the outbox. A ``MirrorSender`` takes one event at
a time (``max_ack_pending = 1``: receivers see changes in commit order), POSTs it and acks
only after the receiver answered 2xx; any other outcome naks it with a delay that doubles
per delivery (1 s, 2 s, 4 s … ``max_backoff_s``), so a receiver that is down gets every
change once it is back, and a maintainer restart resumes where the consumer stands.

Request::

    POST <url>
    Content-Type: application/json
    X-Aimem-Event-Id: evt-<stream sequence>        (stable across retries: dedupe on it)
    X-Aimem-Event: <kind>                          (e.g. page.changed, session.purged)
    X-Aimem-Signature: sha256=<hex HMAC-SHA256(secret, raw body)>   (when a secret is set)

    {"id": "evt-42", "kind": "page.changed", "workspace": "...", "project": "...",
     "at": "...", "data": {...the event...}}

Delivery is at least once: a receiver that stored a notification but whose 2xx never
reached the maintainer (timeout, crash before the ack) gets it again, with the same id.
Guarantees end where ``AIMEM_EVT``'s limits retention does (``bus.evt_max_age_s``): an
event older than that is gone for a receiver still down, and an event the writer failed to
publish after its commit (logged by the writer, rare) is never sent. A mirror's consumer is
created at the stream's tail (``DeliverPolicy.NEW``): no history replay on first start.
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import hmac
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx
import nats.errors
import nats.js.errors
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from aimem_common import bus as busmod
from aimem_common.config import MirrorSettings

if TYPE_CHECKING:
    from aimem_maintainer.context import MaintContext

log = logging.getLogger("aimem.maintainer.mirrors")

DEFAULT_EXCLUDED = ("observations.appended",)
BASE_BACKOFF_S = 1.0
SIGNATURE_HEADER = "X-Aimem-Signature"


def durable_name(m: MirrorSettings) -> str:
    return "mirror-" + (m.name or hashlib.sha256(m.url.encode()).hexdigest()[:12])


def sign(secret: str, body: bytes) -> str:
    """``sha256=<hex>``: the value of ``X-Aimem-Signature`` for ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def wanted(m: MirrorSettings, kind: str) -> bool:
    if not m.events:
        return kind not in DEFAULT_EXCLUDED
    return any(fnmatch.fnmatchcase(kind, pat) for pat in m.events)


def backoff_s(m: MirrorSettings, delivered: int) -> float:
    return min(m.max_backoff_s, BASE_BACKOFF_S * 2 ** max(0, delivered - 1))


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(slots=True)
class MirrorSender:
    """One mirror's delivery loop and its status (for ``/admin/status`` and metrics)."""

    ctx: "MaintContext"
    cfg: MirrorSettings
    secret: str | None = None
    delivered: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    last_success_at: str | None = None
    last_error_at: str | None = None
    last_error: str | None = None
    pending: int | None = None
    _sub: Any = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return durable_name(self.cfg)

    def status(self) -> dict[str, Any]:
        """No URL path or query (it may carry a token), no secret."""
        url = httpx.URL(self.cfg.url)
        return {"name": self.name, "target": f"{url.scheme}://{url.host}:{url.port or ''}".rstrip(":"),
                "delivered": self.delivered, "failures": self.failures,
                "consecutive_failures": self.consecutive_failures, "pending": self.pending,
                "last_success_at": self.last_success_at, "last_error_at": self.last_error_at,
                "last_error": self.last_error}

    async def ensure_consumer(self) -> Any:
        js = self.ctx.bus.js
        try:
            await js.consumer_info(busmod.EVT_STREAM, self.name)
        except nats.js.errors.NotFoundError:
            await js.add_consumer(busmod.EVT_STREAM, ConsumerConfig(
                durable_name=self.name, ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.NEW,
                ack_wait=max(30.0, self.cfg.timeout_s * 3), max_deliver=-1, max_ack_pending=1,
                filter_subject=busmod.EVT_SUBJECTS))
        return await js.pull_subscribe_bind(self.name, stream=busmod.EVT_STREAM)

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        self._sub = await self.ensure_consumer()
        if ready is not None:
            ready.set()
        metrics = self.ctx.metrics
        async with httpx.AsyncClient(timeout=self.cfg.timeout_s, follow_redirects=False) as http:
            while not stop.is_set():
                try:
                    msgs = await self._sub.fetch(1, timeout=1.0)
                except (nats.errors.TimeoutError, asyncio.TimeoutError):
                    await self._refresh_pending()
                    continue
                except nats.errors.Error as exc:
                    log.warning("mirror %s: fetch failed: %s", self.name, exc)
                    await asyncio.sleep(1.0)
                    continue
                for msg in msgs:
                    outcome = await self._deliver(http, msg)
                    if metrics is not None:
                        metrics.mirror_deliveries.labels(self.name, outcome).inc()
                await self._refresh_pending()

    async def _refresh_pending(self) -> None:
        try:
            info = await self._sub.consumer_info()
            self.pending = int(info.num_pending or 0) + int(info.num_ack_pending or 0)
        except Exception:  # noqa: BLE001 - status only
            return
        if self.ctx.metrics is not None:
            self.ctx.metrics.mirror_pending.labels(self.name).set(self.pending)

    async def _deliver(self, http: httpx.AsyncClient, msg: Any) -> str:
        kind = msg.subject.removeprefix("aimem.evt.")
        if not wanted(self.cfg, kind):
            await msg.ack()
            return "skipped"
        seq, delivered = msg.metadata.sequence.stream, msg.metadata.num_delivered
        try:
            data = json.loads(msg.data)
        except ValueError:
            data = {"raw": msg.data.decode("utf-8", "replace")}
        event_id = f"evt-{seq}"
        body = json.dumps({"id": event_id, "kind": kind, "workspace": data.get("workspace"),
                           "project": data.get("project"), "at": data.get("at"), "data": data},
                          ensure_ascii=False, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", "User-Agent": "aimem-mirror",
                   "X-Aimem-Event-Id": event_id, "X-Aimem-Event": kind, "X-Aimem-Delivery": str(delivered)}
        if self.secret:
            headers[SIGNATURE_HEADER] = sign(self.secret, body)
        t0 = time.perf_counter()
        try:
            resp = await http.post(self.cfg.url, content=body, headers=headers)
            error = None if 200 <= resp.status_code < 300 else f"HTTP {resp.status_code}"
        except httpx.HTTPError as exc:
            error = type(exc).__name__
        if error is None:
            await msg.ack()
            self.delivered += 1
            self.consecutive_failures = 0
            self.last_success_at = _now_iso()
            if self.ctx.metrics is not None:
                self.ctx.metrics.mirror_last_success.labels(self.name).set(time.time())
            return "ok"
        delay = backoff_s(self.cfg, delivered)
        self.failures += 1
        self.consecutive_failures += 1
        self.last_error_at, self.last_error = _now_iso(), error
        log.warning("mirror %s: %s %s not delivered (%s, attempt %d, %.2fs); retry in %.0f s", self.name, kind,
                    event_id, error, delivered, time.perf_counter() - t0, delay)
        await msg.nak(delay=delay)
        return "failed"


def build_senders(ctx: "MaintContext") -> list[MirrorSender]:
    out = []
    for m in ctx.settings.mirrors:
        secret = m.secret or (ctx.settings.resolved_env.get(m.secret_env) if m.secret_env else None)
        out.append(MirrorSender(ctx, m, secret))
    return out
