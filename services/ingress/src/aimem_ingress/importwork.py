"""Import batches are read off the live event loop: a worker process parses them.

Live first: the hooks' ``POST /hook`` and ``POST /hook/import`` share ingress's event loop.
Reading an import batch — JSON decoding of up to ``ingress.max_body_bytes``, validating up to
``MAX_EVENTS`` items, ``normalize``, the UTF-8 caps and ``sanitize()`` (secret redaction) of
every event, building its envelope — is pure CPU: run on the loop, a live hook arriving
meanwhile waits for it (measured: live ``/hook`` p95 6.7× its quiet value during a 150k-line
import). ``ImportWorkers`` runs that reading in ``IMPORT_WORKERS`` separate process(es), at a
lower OS priority (``os.nice(IMPORT_NICE)``), so on a machine with few cores the kernel
schedules live hooks (and the writer) first. The loop only reads the body's bytes, awaits the
worker, and publishes the envelopes it returns (PubAcks: the 202 still means every accepted
event is stored in JetStream).

``parse_batch`` is the reading itself: a plain function of bytes, so it runs the same in the
worker and in a test. Errors cross the process boundary as ``Refusal`` values and are raised
again, unchanged, in ingress (``Refusal.raise_again``).

The worker processes are started with ``spawn`` (never ``fork`` from a threaded asyncio
process), get ``SIGTERM`` when ingress dies (``die_with_parent``), and are started by the
first batch (an ingress that never imports runs none; that batch waits about a second more)
and then kept.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aimem_common import clients, locations
from aimem_common.auth import Principal
from aimem_common.commands import Envelope, make_envelope
from aimem_common.commands.envelope import first_error
from aimem_common.commands.observations import SessionEnd
from aimem_common.errors import AimemError, BadRequestError, UnavailableError
from aimem_common.models import validate_name
from aimem_common.natsserver import die_with_parent
from aimem_common.sanitize import RawObservation, sanitize
from aimem_ingress.body import decode_json
from aimem_ingress.normalize import HookPayloadError, normalize
from aimem_ingress.routes import HOOK_ACTOR, MAX_KEY_CHARS, MAX_ORIGIN_CHARS, MAX_ROOT_CHARS, HookScope, _key_field, caller_key

MAX_EVENTS = 1000
IMPORT_WORKERS = 1  # one process: an import is one client posting batches in order
IMPORT_NICE = 10  # added to the worker's niceness: the live loop and the writer run first


class ImportItem(BaseModel):
    """One event of a batch: its idempotency key and a ``generic`` hook payload."""

    model_config = ConfigDict(extra="forbid")
    key: str = Field(min_length=1, max_length=MAX_KEY_CHARS)
    end: bool = False
    payload: dict[str, Any]


class ImportBatch(BaseModel):
    """The ``POST /hook/import`` body (see ``aimem_ingress.imports``)."""

    model_config = ConfigDict(extra="forbid")
    agent: str
    workspace: str = "default"
    project: str
    root: str | None = None
    origin: str | None = None
    named: bool = False
    repo_id: str | None = Field(None, pattern=r"^[0-9a-f]{32}$")  # the repository's stable id (identity)
    events: list[ImportItem] = Field(max_length=MAX_EVENTS)


class Encoded(NamedTuple):
    """One command of a batch, ready to publish: ``data`` is its envelope's JSON. Plain values,
    so that handing a batch back from the worker costs the event loop next to nothing."""

    op: str
    data: bytes
    dedupe_id: str  # the Nats-Msg-Id
    cmd_id: str
    idempotency_key: str | None
    session_id: str
    kind: str | None  # an observation's kind; None for a session end

    @classmethod
    def of(cls, env: Envelope) -> Encoded:
        """Encode ``env``."""
        return cls(env.op, env.model_dump_json().encode(), env.dedupe_id, env.cmd_id, env.idempotency_key,
                   env.payload["session_id"], env.payload.get("kind") if env.op == "observation.append" else None)


Segment = tuple[list[Encoded], Encoded | None]  # a session's observations, then its end (or None)


@dataclass(slots=True)
class ParsedBatch:
    """A batch read: its ``agent`` (alias resolved), ``scope``, ``segments`` in order, the
    ``rejected`` items (``{"index", "code", "message"}``) and the pid of the process that read it."""

    agent: str
    scope: HookScope
    segments: list[Segment]
    rejected: list[dict[str, Any]]
    pid: int = field(default_factory=os.getpid)


@dataclass(frozen=True, slots=True)
class Refusal:
    """An ``AimemError`` raised while reading a batch, as a value that crosses processes."""

    kind: type[AimemError]
    message: str
    code: str
    data: dict[str, Any] | None

    def raise_again(self) -> None:
        """Raise the error as it was raised in the worker (same class, code, message, data)."""
        raise self.kind(self.message, code=self.code, data=self.data)


def parse_batch(raw: bytes, *, max_depth: int, principal: Principal) -> ParsedBatch | Refusal:
    """Read one ``/hook/import`` body: decode, validate, normalise and sanitise every item.

    Returns a ``ParsedBatch``, or a ``Refusal`` for a batch that is bad as a whole (400
    ``invalid_json``/``too_deep``/``invalid_batch``/``unknown_agent``/``invalid_name``/
    ``invalid_field``). An item that cannot be normalised is only listed in ``rejected``.
    Pure CPU, no I/O: the same in the worker process and in-process.
    """
    try:
        body = decode_json(raw, max_depth=max_depth)
        try:
            batch = ImportBatch.model_validate(body)
        except ValidationError as exc:
            raise BadRequestError(f"invalid import batch: {first_error(exc)}", code="invalid_batch") from None
        agent = clients.ALIASES.get(batch.agent, batch.agent)
        if agent not in clients.AGENTS:
            raise BadRequestError(f"unknown agent {batch.agent!r}; expected {clients.AGENTS}", code="unknown_agent")
        scope = HookScope(validate_name(batch.workspace, "workspace"), validate_name(batch.project, "project"),
                          locations.normalize(_key_field(batch.root, "root", MAX_ROOT_CHARS)),
                          _key_field(batch.origin, "origin", MAX_ORIGIN_CHARS), batch.named, batch.repo_id)
    except AimemError as exc:
        return Refusal(type(exc), exc.message, exc.code, exc.data)
    segments, rejected = _envelopes(batch, agent, scope, principal)
    return ParsedBatch(agent, scope, segments, rejected)


def _envelopes(batch: ImportBatch, agent: str, scope: HookScope, principal: Principal
               ) -> tuple[list[Segment], list[dict[str, Any]]]:
    """Normalise and sanitise every item; return ``([(observations, end|None)], rejected)``."""
    segments: list[Segment] = []
    current: list[Encoded] = []
    rejected: list[dict[str, Any]] = []
    for index, item in enumerate(batch.events):
        try:
            ev = normalize("generic", item.payload)
        except HookPayloadError as exc:
            rejected.append({"index": index, "code": exc.code, "message": exc.message})
            continue
        key = caller_key(principal, scope, item.key)
        if item.end:
            end = SessionEnd(session_id=ev.session_id, agent=agent, cwd=ev.cwd,
                             ended_at=ev.occurred_at, historical=True)
            segments.append((current, Encoded.of(make_envelope("session.end", end, actor=HOOK_ACTOR,
                                                                idempotency_key=key, **scope.envelope_kwargs()))))
            current = []
            continue
        raw = RawObservation(
            session_id=ev.session_id, kind=ev.kind, agent=agent, cwd=ev.cwd, title=ev.title, body=ev.body,
            tool_name=ev.tool_name, source_event=None, extension=None, model=ev.model,
            occurred_at=ev.occurred_at,
        )
        payload = sanitize(raw).to_payload().model_copy(update={"imported": True})
        current.append(Encoded.of(make_envelope("observation.append", payload, actor=HOOK_ACTOR,
                                                idempotency_key=key, **scope.envelope_kwargs())))
    if current:
        segments.append((current, None))
    return segments, rejected


def _start_worker(nice: int) -> None:
    """Initializer of a worker process: die with ingress, and yield the CPU to live work."""
    die_with_parent()
    if nice:
        os.nice(nice)


class ImportWorkers:
    """The process pool that reads import batches (see the module docstring).

    ``await parse(raw, ...)`` per batch (the first starts the worker), ``close()`` at shutdown.
    Batches beyond ``workers`` wait in the pool's queue.
    """

    def __init__(self, workers: int = IMPORT_WORKERS, nice: int = IMPORT_NICE):
        self._workers, self._nice = workers, nice
        self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=self._workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_start_worker, initargs=(self._nice,))

    @property
    def pids(self) -> list[int]:
        """The worker processes' pids (empty before the first batch, or after a worker died)."""
        return list(self._pool._processes or {})  # the pool's own map of pid → process

    async def parse(self, raw: bytes, *, max_depth: int, principal: Principal) -> ParsedBatch:
        """``parse_batch`` in a worker process.

        Raises:
            AimemError: the batch is bad as a whole (the worker's ``Refusal``, raised again).
            UnavailableError: the worker process died (killed, out of memory) while reading it
                (503 ``import_worker_unavailable``; a new worker serves the retry).
        """
        loop = asyncio.get_running_loop()
        pool = self._pool
        try:
            out = await loop.run_in_executor(pool, _parse_in_worker, raw, max_depth, principal)
        except BrokenProcessPool:
            if self._pool is pool:  # the first request to see it replaces the pool
                pool.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new_pool()
            raise UnavailableError("the import worker stopped; retry the batch",
                                   code="import_worker_unavailable") from None
        if isinstance(out, Refusal):
            out.raise_again()
        return out

    def close(self) -> None:
        """Stop the workers (a batch being read is abandoned: it was never acknowledged)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def _parse_in_worker(raw: bytes, max_depth: int, principal: Principal) -> ParsedBatch | Refusal:
    return parse_batch(raw, max_depth=max_depth, principal=principal)
