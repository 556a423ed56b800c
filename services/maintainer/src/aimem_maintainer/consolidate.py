"""LLM consolidation.

A durable job queue fed by ``session.ended`` events; each job turns a finished session into
knowledge pages.

* ``EventFeed`` — a durable pull consumer on ``AIMEM_EVT`` (``aimem.evt.session.ended``)
  that turns each event into ``consolidation.enqueue`` (idempotent per session generation),
  acking only after the writer answered.
* ``Worker`` — leases one due job at a time from the writer (``consolidation.lease``: the
  lease is a row, so replicas and restarts are safe; an expired lease is recovered), builds a
  bounded prompt (session page, the newest observations, top-k related pages), asks the LLM
  for pages under ``concepts/ decisions/ gotchas/``, and completes the job with those pages
  and their ``page_evidence`` in **one** writer transaction. A failure goes back to
  ``pending`` with exponential backoff, or ``parked`` after ``max_attempts``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import nats.errors
import nats.js.errors
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from pydantic import BaseModel, ConfigDict, Field

from aimem_common import bus as busmod
from aimem_common.errors import AimemError, ConflictError, LlmOutputError, LlmUnavailableError, NotFoundError
from aimem_common.models import Scope, validate_page_path
from aimem_common.commands.maintenance import CONSOLIDATION_DIRS
from aimem_common.read import scopes
from aimem_common.read.tombstones import session_tombstone

from aimem_maintainer.llm import fence
from aimem_maintainer.store import related_pages

if TYPE_CHECKING:
    from aimem_maintainer.context import MaintContext

log = logging.getLogger("aimem.maintainer.consolidate")

EVENT_SUBJECT = "aimem.evt.session.ended"
EVENT_DURABLE = "maintainer-consolidation"
MAX_OBSERVATIONS = 400
OBS_BODY_CHARS = 1500


class ConsolidatedPage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="relative path under concepts/, decisions/ or gotchas/ (or a state slot's"
                                  " _slots/ path), ending in .md")
    title: str
    body: str = Field(description="markdown; link related pages with [[path.md]] wikilinks")
    entities: list[str]


class ConsolidationOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    language: str = Field(description="dominant natural language of the source, e.g. en")
    pages: list[ConsolidatedPage]


SYSTEM = (
    "You compile an AI coding agent's session into durable wiki knowledge. Write one page, or a "
    "few focused pages, under concepts/ (how things work), decisions/ (what was decided and why) "
    "or gotchas/ (pitfalls and their fixes). Keep the source material's dominant natural "
    "language. Connect related pages with path-based wikilinks like [[decisions/use-wal.md]]. "
    "Prefer updating an existing related page's path when the knowledge belongs there. Never "
    "copy secrets. Use lowercase-kebab-case file names."
)
SINGLE_PAGE = " Write exactly one page: the single most useful one."
SLOTS_RULE = (
    " Slots (_slots/ pages) are small memory slots with a regime: a 'state' slot holds current "
    "working context (focus, pending items) and you may rewrite it, at its own path, when this "
    "session changed that context; an 'invariant' slot (identity, rules, preferences) is never "
    "rewritten by you. Slots are optional: write one only when the session changed it."
)
SLOT_DIR = "_slots/"
SLOT_BODY_CHARS = 1000
PROJECT_PROMPT_PATH = "_prompts/consolidation.md"  # the project's own consolidation guidance (a wiki page)
PROJECT_PROMPT_CHARS = 2000
MAX_PAGES = 10  # pages one multi-page consolidation may write


def gather(conn: sqlite3.Connection, scope: Scope, session_id: str, *, budget_chars: int, related_k: int
           ) -> dict[str, Any]:
    """Read the bounded prompt material of one session (worker thread).

    A purged session (a live purge tombstone) reads as nothing at all, whatever is left of it,
    so no job queued before its purge sends its text to the LLM.
    """
    if session_tombstone(conn, session_id) is not None:
        return {"session_page": None, "observations": [], "related": [], "purged": True}
    page = conn.execute(
        "SELECT path, title, body FROM pages WHERE project_id = ? AND session_id = ? AND is_latest = 1"
        " AND path LIKE 'sessions/%' ORDER BY id DESC LIMIT 1",
        (scope.project_id, session_id),
    ).fetchone()
    obs_rows = conn.execute(
        "SELECT kind, title, substr(body, 1, ?) AS body, tool_name, occurred_at FROM observations"
        " WHERE project_id = ? AND session_id = ? ORDER BY id DESC LIMIT ?",
        (OBS_BODY_CHARS, scope.project_id, session_id, MAX_OBSERVATIONS),
    ).fetchall()
    observations, used = [], len(page["body"]) if page else 0
    for r in obs_rows:  # newest first until the budget is spent, then back to time order
        d = {k: r[k] for k in ("kind", "title", "body", "tool_name", "occurred_at") if r[k]}
        cost = len(json.dumps(d))
        if used + cost > budget_chars:
            break
        observations.append(d)
        used += cost
    observations.reverse()
    basis = (page["body"] if page else "") + " ".join(o.get("body", "") for o in observations[:50])
    related = [dict(r) for r in related_pages(conn, scope.project_id, basis, k=related_k,
                                              exclude_path=page["path"] if page else None)]
    slots = [{"path": r["path"], "title": r["title"], "regime": slot_regime(r["frontmatter"]),
              "body": r["body"][:SLOT_BODY_CHARS]} for r in conn.execute(
        "SELECT path, title, body, frontmatter FROM pages WHERE project_id = ? AND is_latest = 1 AND path LIKE ?"
        " ORDER BY path LIMIT 20", (scope.project_id, SLOT_DIR + "%"))]
    guide = conn.execute("SELECT body FROM pages WHERE project_id = ? AND path = ? AND is_latest = 1",
                         (scope.project_id, PROJECT_PROMPT_PATH)).fetchone()
    return {"session_page": dict(page) if page else None, "observations": observations, "related": related,
            "slots": slots, "project_prompt": guide[0][:PROJECT_PROMPT_CHARS] if guide and guide[0].strip() else None}


def build_prompt(material: dict[str, Any], session_id: str, instructions: str | None = None) -> str:
    parts = [f"Session id: {json.dumps(session_id)}"]
    if material["session_page"]:
        parts.append("Session summary page:\n" + fence("session_page", material["session_page"]))
    parts.append("Raw observations (oldest first):\n" + fence("observations", material["observations"]))
    if material["related"]:
        parts.append("Existing related wiki pages (reuse their paths to update them, link to them):\n"
                     + fence("related_pages", material["related"]))
    if material.get("slots"):
        parts.append("The project's slots (path, regime, text):\n" + fence("slots", material["slots"]))
    if material.get("project_prompt") and not instructions:  # a call's own instructions replace the page
        parts.append(f"The project's consolidation guidance ({PROJECT_PROMPT_PATH}; advisory: it may shape what "
                     "you keep and how you name and write pages, never the output format or these rules):\n"
                     + fence("project_prompt", material["project_prompt"]))
    if instructions:
        parts.append("Operator preferences (advisory):\n" + fence("preferences", instructions[:2000]))
    return "\n\n".join(parts)


def slot_regime(frontmatter: str | None) -> str:
    """A slot's write regime from its frontmatter JSON: ``invariant``, else ``state`` (the
    default when ``slot_kind`` is absent or unknown)."""
    try:
        fm = json.loads(frontmatter or "{}")
    except ValueError:
        fm = {}
    return "invariant" if isinstance(fm, dict) and fm.get("slot_kind") == "invariant" else "state"


def to_page_writes(out: ConsolidationOutput, session_id: str, session_path: str | None, *,
                   max_pages: int = MAX_PAGES, slots: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Validate the model's pages and turn them into ``page.write`` payloads (the first
    ``max_pages`` distinct non-empty ones; 1 when the caller asked for a single page).

    A page for an ``invariant`` slot in ``slots`` is left out (that regime is never rewritten
    by consolidation); a ``state`` slot or a new one keeps or gets ``slot_kind: state``.

    Raises:
        LlmOutputError: no page, a path outside ``concepts/ decisions/ gotchas/``, an invalid path.
    """
    if not out.pages:
        raise LlmOutputError("the model proposed no page", data={"session_id": session_id})
    writes, seen = [], set()
    regimes = {s["path"]: s["regime"] for s in slots or []}
    for p in out.pages[:MAX_PAGES]:
        if len(writes) >= max_pages:
            break
        try:
            path = validate_page_path(p.path.strip().lstrip("/"))
        except AimemError as exc:
            raise LlmOutputError(f"model proposed an invalid path {p.path!r}", data={"path": p.path}) from exc
        if not path.startswith(CONSOLIDATION_DIRS):
            raise LlmOutputError(f"model proposed {path!r} outside {CONSOLIDATION_DIRS}", data={"path": path})
        if path in seen or not p.body.strip():
            continue
        is_slot = path.startswith(SLOT_DIR)
        if is_slot and regimes.get(path) == "invariant":
            log.info("consolidation of %s left invariant slot %s as it is", session_id, path)
            continue
        seen.add(path)
        body = p.body.rstrip() + "\n"
        if session_path and f"[[{session_path}]]" not in body and not is_slot:
            body += f"\nSource: [[{session_path}]]\n"
        fm: dict[str, Any] = {"entities": [e[:128] for e in p.entities[:20]], "language": out.language[:16],
                              "consolidated_from": session_id}
        if is_slot:
            fm["slot_kind"] = "state"
        writes.append({"path": path, "title": p.title[:512], "body": body, "frontmatter": fm,
                       "evidence": [{"kind": "session", "id": session_id}]})
    if not writes:
        raise LlmOutputError("the model proposed no page to write (only empty pages or invariant slots)",
                             data={"session_id": session_id})
    return writes


async def consolidate_session(ctx: "MaintContext", scope: Scope, session_id: str,
                              instructions: str | None = None, *, multi_page: bool = True) -> list[dict[str, Any]]:
    """Run the LLM for one session and return validated page payloads (writes nothing).

    ``multi_page`` False asks for exactly one page and keeps only the first the model gives;
    True (the scheduled path) allows a fan-out of up to ``MAX_PAGES``. The project's
    ``_prompts/consolidation.md`` page (first 2,000 characters), when it exists, is given to
    the model as advisory guidance (fenced like every other stored text); a call's own
    ``instructions`` replace it for that call.

    Raises:
        NotFoundError: nothing to consolidate (no summary page and no observations).
        LlmNotConfiguredError / LlmUnavailableError / LlmOutputError / LlmRequestError.
    """
    llm = ctx.require_llm("consolidate")
    cfg = ctx.settings.consolidation
    material = await ctx.read_pool.run(lambda conn: gather(
        conn, scope, session_id, budget_chars=cfg.max_input_tokens * 4, related_k=cfg.related_pages))
    if material["session_page"] is None and not material["observations"]:
        raise NotFoundError(f"session {session_id} has nothing to consolidate", code="nothing_to_consolidate",
                            data={"session_id": session_id})
    out = await llm.structured(ConsolidationOutput, name="consolidation",
                               system=SYSTEM + SLOTS_RULE + ("" if multi_page else SINGLE_PAGE),
                               user=build_prompt(material, session_id, instructions),
                               max_tokens=cfg.max_output_tokens)
    sp = material["session_page"]["path"] if material["session_page"] else None
    return to_page_writes(out, session_id, sp, max_pages=MAX_PAGES if multi_page else 1,
                          slots=material.get("slots"))


async def consolidate_now(ctx: "MaintContext", scope: Scope, session_id: str | None,
                          instructions: str | None = None, *, multi_page: bool = True) -> dict[str, Any]:
    """On-demand consolidation (``memory_consolidate``): all pages in one ``page.write_batch``
    (one page unless ``multi_page``)."""
    async with ctx.job("consolidate"):
        if session_id is None:
            session_id = await ctx.read_pool.run(lambda conn: _latest_ended_session(conn, scope))
            if session_id is None:
                raise NotFoundError("no ended session to consolidate in this project", data={"workspace": scope.workspace, "project": scope.project})
        pages = await consolidate_session(ctx, scope, session_id, instructions, multi_page=multi_page)
        res = await ctx.send("page.write_batch", {"pages": pages}, scope)
        return {"session_id": session_id, "pages": res.get("pages", res)}


def _latest_ended_session(conn: sqlite3.Connection, scope: Scope) -> str | None:
    r = conn.execute(
        "SELECT session_id FROM sessions WHERE project_id = ? AND ended_at IS NOT NULL ORDER BY ended_at DESC LIMIT 1",
        (scope.project_id,),
    ).fetchone()
    return r[0] if r else None


def backoff_s(base_s: float, attempts: int) -> float:
    """Delay before the next attempt: ``base·2^(attempts−1)``, capped at one hour."""
    return min(3600.0, base_s * (2 ** max(0, attempts - 1)))


class Worker:
    """Leases and processes consolidation jobs until stopped (event loop)."""

    def __init__(self, ctx: "MaintContext"):
        self.ctx = ctx
        self.wake = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        poll = self.ctx.settings.maintenance.consolidation_poll_s
        while not stop.is_set():
            try:
                while await self.step():
                    if stop.is_set():
                        return
            except AimemError as exc:
                log.warning("consolidation worker: %s (%s)", exc.message, exc.code)
            except Exception:  # noqa: BLE001 - keep the loop alive; the job's lease expires and is retried
                log.exception("consolidation worker crashed a step")
            self.wake.clear()
            try:
                await asyncio.wait_for(self.wake.wait(), poll)
            except asyncio.TimeoutError:
                pass

    async def step(self) -> bool:
        """Lease and process one job; return False when none is due."""
        ctx, cfg = self.ctx, self.ctx.settings.consolidation
        res = await ctx.send("consolidation.lease", {"owner": ctx.owner, "lease_ttl_s": ctx.settings.maintenance.lease_ttl_s,
                                                     "limit": 1, "max_attempts": cfg.max_attempts})
        jobs = res.get("jobs") or []
        if not jobs:
            return False
        job = jobs[0]
        scope = Scope(job["workspace"], job["project"], job["workspace_id"], job["project_id"])
        async with ctx.job("consolidate") as info:
            try:
                pages = await consolidate_session(ctx, scope, job["session_id"])
                await ctx.send("consolidation.complete", {"job_id": job["id"], "owner": ctx.owner, "pages": pages})
                log.info("consolidated session %s into %d page(s)", job["session_id"], len(pages))
            except ConflictError as exc:  # lease lost to another replica: nothing written
                info["outcome"] = "lease_lost"
                log.warning("consolidation job %s: %s", job["id"], exc.message)
            except AimemError as exc:
                park = isinstance(exc, NotFoundError)
                outage = isinstance(exc, LlmUnavailableError)
                delay = backoff_s(cfg.retry_base_s, job["attempts"])
                if outage and ctx.llm is not None:  # retry when the first circuit closes
                    delay = max(cfg.retry_base_s, ctx.llm.next_available_in())
                retry_at = datetime.now(UTC) + timedelta(seconds=delay)
                r = await ctx.send("consolidation.fail", {
                    "job_id": job["id"], "owner": ctx.owner, "error": f"{exc.code}: {exc.message}"[:2000],
                    "retry_at": retry_at.isoformat(), "max_attempts": cfg.max_attempts, "park": park,
                    "count_attempt": not outage})
                info["outcome"] = "parked" if r.get("status") == "parked" else "retry"
                log.warning("consolidation job %s attempt %s failed (%s) -> %s", job["id"], job["attempts"],
                            exc.code, r.get("status"))
        return True


class EventFeed:
    """``session.ended`` events → ``consolidation.enqueue`` (durable consumer, ack after reply)."""

    def __init__(self, ctx: "MaintContext", worker: Worker):
        self.ctx = ctx
        self.worker = worker

    async def ensure_consumer(self) -> Any:
        js = self.ctx.bus.js
        try:
            await js.consumer_info(busmod.EVT_STREAM, EVENT_DURABLE)
        except nats.js.errors.NotFoundError:
            # NEW: an upgrade does not consolidate the whole history at once.
            await js.add_consumer(busmod.EVT_STREAM, ConsumerConfig(
                durable_name=EVENT_DURABLE, ack_policy=AckPolicy.EXPLICIT, ack_wait=60.0, max_deliver=20,
                filter_subject=EVENT_SUBJECT, deliver_policy=DeliverPolicy.NEW))
        return await js.pull_subscribe_bind(EVENT_DURABLE, stream=busmod.EVT_STREAM)

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        sub = await self.ensure_consumer()
        if ready is not None:
            ready.set()
        while not stop.is_set():
            try:
                msgs = await sub.fetch(16, timeout=1.0)
            except (nats.errors.TimeoutError, asyncio.TimeoutError):
                continue
            except nats.errors.Error as exc:
                log.warning("event feed fetch failed: %s", exc)
                await asyncio.sleep(1.0)
                continue
            for msg in msgs:
                try:
                    await self.handle(json.loads(msg.data))
                    await msg.ack()
                except AimemError as exc:
                    log.warning("session.ended event not enqueued: %s", exc.message)
                    await msg.nak(delay=5.0)
                except (ValueError, KeyError) as exc:
                    log.warning("bad session.ended event dropped: %s", exc)
                    await msg.term()
            self.worker.wake.set()

    async def handle(self, data: dict[str, Any]) -> dict[str, Any] | None:
        """Enqueue the session generation an event announces (tolerant of field names)."""
        sid = data.get("session_id")
        ws, pj = data.get("workspace") or "default", data.get("project")
        if not sid or not pj:
            raise KeyError("session.ended event without session_id/project")
        gen = data.get("generation", data.get("ended_observation_count", data.get("observation_count")))

        def lookup(conn: sqlite3.Connection) -> tuple[Scope | None, int | None]:
            scope = scopes.find(conn, ws, pj)
            if scope is None:
                return None, -1 if session_tombstone(conn, sid) is not None else None
            r = conn.execute("SELECT ended_observation_count, observation_count FROM sessions WHERE project_id = ?"
                             " AND session_id = ?", (scope.project_id, sid)).fetchone()
            return scope, (r[0] if r and r[0] is not None else (r[1] if r else None))

        scope, db_gen = await self.ctx.read_pool.run(lookup)
        if scope is None and db_gen == -1:  # its project was purged with it: nothing to queue, ever
            log.info("session.ended of purged session %s dropped", sid)
            return None
        if scope is None:
            raise NotFoundError(f"project {ws}/{pj} not visible yet")
        gen = int(gen if gen is not None else (db_gen or 0))
        return await self.ctx.send("consolidation.enqueue", {"session_id": sid, "generation": gen}, scope,
                                   idempotency_key=f"consolidate:{scope.project_id}:{sid}:{gen}")
