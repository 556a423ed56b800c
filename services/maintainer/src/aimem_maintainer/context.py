"""``MaintContext``: everything a maintainer job needs, built once in the lifespan."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aimem_common.commands import make_envelope
from aimem_common.embed import Embedder
from aimem_common.errors import LlmNotConfiguredError
from aimem_common.models import Scope
from aimem_common.readpool import ReaderPool
from aimem_common.rerank import LLM_MAX_IN_FLIGHT
from aimem_common.service import ServiceContext

from aimem_maintainer.llm import LlmClient
from aimem_maintainer.metrics import MaintMetrics


@dataclass(slots=True, kw_only=True)
class MaintContext(ServiceContext):
    """Dependencies of every job (no module-level state: DESIGN.md invariant 12), on
    ``app.state.ctx``: the shared parts (``read_pool`` required) plus metrics, the optional
    LLM client and embedder."""

    read_pool: ReaderPool
    metrics: MaintMetrics
    llm: LlmClient | None = None
    embedder: Embedder | None = None
    owner: str = field(default_factory=lambda: f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}")
    actor: str = "maintainer"
    last_runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    mirrors: list[Any] = field(default_factory=list)  # aimem_maintainer.mirrors.MirrorSender
    # reranker = "llm": at most this many rerank calls at once (aimem_maintainer.llm_rerank)
    rerank_slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(LLM_MAX_IN_FLIGHT))

    def require_llm(self, job: str) -> LlmClient:
        """Return the LLM client or raise ``llm_not_configured`` (zero-LLM default)."""
        if self.llm is None:
            raise LlmNotConfiguredError(
                f"{job} needs an LLM provider: set [llm] provider/model (AIMEM_LLM__PROVIDER) and restart the maintainer",
                data={"job": job},
            )
        return self.llm

    async def send(self, op: str, payload: Any, scope: Scope | None = None, *, actor: str | None = None,
                   idempotency_key: str | None = None, timeout_s: float | None = None) -> dict[str, Any]:
        """Send one command to the writer and wait for its result (raises its typed error)."""
        env = make_envelope(
            op, payload, workspace=scope.workspace if scope else None, project=scope.project if scope else None,
            actor=actor or self.actor, idempotency_key=idempotency_key,
        )
        return await self.bus.request(env, timeout_s=timeout_s or max(self.settings.bus.request_timeout_s, 30.0))

    @asynccontextmanager
    async def job(self, name: str) -> AsyncIterator[dict[str, Any]]:
        """Time a job run and count its outcome (``ok`` unless it raises)."""
        t0 = time.perf_counter()
        info: dict[str, Any] = {"outcome": "ok"}
        try:
            yield info
        except BaseException as exc:
            info["outcome"] = "error"
            info["error"] = type(exc).__name__
            raise
        finally:
            dt = time.perf_counter() - t0
            self.metrics.job_runs.labels(name, info["outcome"]).inc()
            self.metrics.job_duration.labels(name).observe(dt)
            self.last_runs[name] = {"at": time.time(), "outcome": info["outcome"], "duration_s": round(dt, 3)}
