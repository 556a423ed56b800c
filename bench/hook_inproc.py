"""Where the ingress's CPU per hook goes, in process: its ASGI app driven directly (no
sockets, no HTTP server) with a real nats-server, one stage taken away at a time.

``hook_ingest --in-process`` runs it. The app is the real one (``create_app``: every guard,
the root token on every request, the lean ``POST /hook`` route); each request is a
Claude Code ``PostToolUse`` payload as the stack bench posts. Variants, run alternately in
the same process for ``rounds`` rounds each at every concurrency asked:

* ``route``: the whole route (202 after the PubAck, as in production);
* ``no_publish``: the same route with the bus publish taken out (it answers 202 without
  publishing: what the guards, decode, normalize, scope and metrics cost);
* ``puback``: the route with the publish replaced by the bare PubAck round trip of a
  message of the envelope's size on the same connection (``Bus.acks``), without building
  the envelope: what the NATS client's round trip costs alone.

Concurrency 1 is the 500 ev/s case (each hook alone: its publish gets a write and its
PubAck a read of their own); 8 is saturation (publishes and PubAcks share writes and
reads). Reported: CPU µs per hook of this process (``os.times``: user + system, and the
system part), the hooks per wall second, and the collector's share (``gc.callbacks``).
"""

from __future__ import annotations

import asyncio
import gc
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from aimem_common import config
from aimem_common.natsserver import NatsServer

TOKEN = "bench-inproc-" + "t" * 32
VARIANTS = ("route", "no_publish", "puback")


def _scope(body: bytes) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": "/hook", "raw_path": b"/hook", "query_string": b"agent=claude-code",
            "root_path": "", "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8701), "state": {},
            "headers": [(b"host", b"127.0.0.1:8701"), (b"user-agent", b"hey/0.0.1"),
                        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                        (b"authorization", f"Bearer {TOKEN}".encode()), (b"accept-encoding", b"gzip")]}


async def _post(app, body: bytes) -> int:
    """One ``POST /hook`` through the app; its status."""
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # no disconnect while the route runs
        raise AssertionError

    status: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(_scope(body), receive, send)
    return status[0]


class _GcClock:
    """CPU seconds spent in the collector since ``reset`` (``gc.callbacks``)."""

    def __init__(self):
        self.spent, self._t = 0.0, 0.0
        gc.callbacks.append(self._cb)

    def _cb(self, phase: str, _info: dict) -> None:
        if phase == "start":
            self._t = time.process_time()
        else:
            self.spent += time.process_time() - self._t

    def close(self) -> None:
        gc.callbacks.remove(self._cb)


async def _measure(n: int, concurrency: int, rounds: int, payload) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from aimem_common.service import freeze_heap
    from aimem_ingress import routes
    from aimem_ingress.app import create_app

    tmp = Path(tempfile.mkdtemp(prefix="aimem-bench-inproc-"))
    nats = NatsServer(tmp / "js").start()
    env = {"AIMEM_DATA_DIR": str(tmp / "data"), "AIMEM_BUS__NATS_URL": nats.url, "AIMEM_AUTH__TOKEN": TOKEN,
           # no writer runs here: the lag gate must not refuse what piles up in the stream
           "AIMEM_INGRESS__MAX_WRITER_DELAY_S": "1000000", "AIMEM_INGRESS__MAX_WRITER_LAG": "100000000"}
    settings = config.load(tmp / "data", environ=env)
    app = create_app(settings)
    bodies = [payload(i) for i in range(256)]
    publish = routes._publish
    envelope_size = 0

    async def no_publish(ctx, ev, scope, key):
        return "bench", False

    async def puback(ctx, ev, scope, key):
        await ctx.bus.acks.publish("aimem.mut.observation.append", b"x" * envelope_size,
                                   headers={"Nats-Msg-Id": f"bench-{time.perf_counter_ns()}"},
                                   timeout_s=settings.bus.publish_timeout_s)
        return "bench", False

    async def sized_publish(ctx, ev, scope, key):  # the first real publish gives the envelope's size
        nonlocal envelope_size
        from aimem_common.commands import make_envelope
        from aimem_common.sanitize import RawObservation, sanitize
        raw = RawObservation(session_id=ev.session_id, kind=ev.kind, agent=ev.agent, cwd=ev.cwd, title=ev.title,
                             body=ev.body, tool_name=ev.tool_name, source_event=ev.source_event,
                             extension=ev.extension, model=ev.model, occurred_at=ev.occurred_at)
        envelope_size = len(make_envelope("observation.append", sanitize(raw).to_payload(), actor="hook",
                                          **scope.envelope_kwargs()).model_dump_json())
        return await publish(ctx, ev, scope, key)

    impl = {"route": publish, "no_publish": no_publish, "puback": puback}
    rows: list[dict[str, Any]] = []
    gc_pause: dict[str, Any] = {}
    clock = _GcClock()
    try:
        async with app.router.lifespan_context(app):
            routes._publish = sized_publish
            assert await _post(app, bodies[0]) == 202, "the warm-up hook was not accepted"
            sent = 1
            # A full collection of the started app's heap, then as the service runner leaves it
            # (``service.freeze_after_startup``); the variants below run frozen, as in production.
            gc_pause["full_collection_ms"] = _full_collection_ms()
            gc_pause["frozen_objects"] = freeze_heap()
            gc_pause["full_collection_ms_frozen"] = _full_collection_ms()
            for conc in (1, concurrency) if concurrency > 1 else (1,):
                for rnd in range(rounds):
                    for variant in VARIANTS:
                        routes._publish = impl[variant]
                        gate = asyncio.Semaphore(conc)
                        codes: dict[int, int] = {}

                        async def one(i: int) -> None:
                            async with gate:
                                code = await _post(app, bodies[i % len(bodies)])
                                codes[code] = codes.get(code, 0) + 1

                        start = sent
                        sent += n
                        clock.spent = 0.0
                        t0, w0 = os.times(), time.perf_counter()
                        await asyncio.gather(*(one(start + i) for i in range(n)))
                        t1, w1 = os.times(), time.perf_counter()
                        cpu = (t1.user - t0.user) + (t1.system - t0.system)
                        rows.append({"variant": variant, "concurrency": conc, "round": rnd, "hooks": n,
                                     "accepted": codes.get(202, 0), "cpu_us_per_hook": cpu / n * 1e6,
                                     "sys_us_per_hook": (t1.system - t0.system) / n * 1e6,
                                     "gc_us_per_hook": clock.spent / n * 1e6, "hooks_per_s": n / (w1 - w0),
                                     "loadavg_1m": os.getloadavg()[0]})
    finally:
        gc.unfreeze()
        routes._publish = publish
        clock.close()
        nats.stop()
    return rows, gc_pause


def _full_collection_ms(rounds: int = 3) -> float:
    """Wall ms of one full ``gc.collect()`` (min of ``rounds``): the event loop stands still that long."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        gc.collect()
        best = min(best, (time.perf_counter() - t0) * 1000)
    return round(best, 3)


def run(payload, *, n: int = 3000, concurrency: int = 8, rounds: int = 3) -> dict[str, Any]:
    """Run the variants (module docstring); return ``{"rows": [...], "summary": [...], "gc": {...}}``.

    ``gc``: the wall ms of one full collection of the started app's heap
    (``full_collection_ms``), the objects frozen as the service runner freezes them, and the
    same collection once they are (``full_collection_ms_frozen``).

    ``summary`` has, per variant and concurrency, the minimum CPU µs per hook over the rounds
    (the least disturbed by other work on the machine) and the median hooks per second.
    """
    import uvloop

    rows, gc_pause = uvloop.run(_measure(n, concurrency, rounds, payload))
    summary = []
    for conc in sorted({r["concurrency"] for r in rows}):
        for variant in VARIANTS:
            mine = [r for r in rows if r["variant"] == variant and r["concurrency"] == conc]
            best = min(mine, key=lambda r: r["cpu_us_per_hook"])
            rates = sorted(r["hooks_per_s"] for r in mine)
            summary.append({"variant": variant, "concurrency": conc, "cpu_us_per_hook_min": round(best["cpu_us_per_hook"], 1),
                            "sys_us_per_hook": round(best["sys_us_per_hook"], 1),
                            "cpu_us_per_hook_all": [round(r["cpu_us_per_hook"], 1) for r in mine],
                            "hooks_per_s_median": round(rates[len(rates) // 2]),
                            "accepted": sum(r["accepted"] for r in mine), "hooks": sum(r["hooks"] for r in mine)})
    return {"rows": rows, "summary": summary, "gc": gc_pause}
