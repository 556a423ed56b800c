"""``POST /hook`` and ``POST /hook/session-start-context``.

``POST /hook?agent=&event=&extension=&workspace=&project=&cwd=&ts=`` takes a client's native
payload (``normalize.py``), sanitizes it, publishes ``observation.append`` (and, for a
session end, ``session.end``) to JetStream with the idempotency key as ``Nats-Msg-Id``, and
answers ``202 {"accepted": cmd_id}`` after the PubAck. Hooks published at the same moment
share one message and its PubAck (``aimem_common.bundles``); ``"duplicate": true`` is added
when JetStream recognised a retry travelling alone (a gathered retry is applied once by the
writer all the same). 429 + ``Retry-After`` when the
stream is full or the writer lags; 503 when NATS is unreachable; 4xx JSON for bad input;
410 ``purged`` for an event of a session ``aimem purge-session`` removed (``purged.py``; the
hook client drops it from its spool for good, and the writer drops any it did not see).
``cwd`` in the query is a fallback for payloads that carry none (the hook client sends its
own working directory), ``ts`` (epoch seconds, when the hook ran) is the event time for
payloads that carry none. ``root``/``origin`` (the repository top level and its normalised
``origin`` URL) and ``named=1`` (the project name comes from a ``.aimem.toml`` marker) are
the project identity the hook client resolved where the files are; the writer keys the
project by them (``ScopeRef``). Without them (clients posting directly) the project is
the query/body ``project``, else the cwd's basename, as before.

Credentials (``Authorization: Bearer``, checked before the body is read): the root token,
or a user API key with a write grant on the event's project (``require_hook_write``: 401
for a missing or unknown credential, 403 without the grant or when the event would create a
project under another name than the one asked for, on all three hook routes); with
no root token configured anyone on loopback.

``POST /hook/session-start-context`` (same query, same native session-start payload)
claims the pending handoff for that project root (else cwd) through the writer
(``handoff.accept``, exactly once) and answers ``200 {"context": str, "handoff_id":
int|null}`` — the fenced, bounded text of ``brief.render_context`` (the handoff, then the
caller's own profile memory — the preferences its credential's user stated once, for every
project —, then the project brief), ``""`` when there is nothing relevant. It does not store the event: the hook client posts that to ``/hook``
first. The start's ``source`` decides (``START_SOURCES``): a ``resume`` continues the same
session and gets nothing (its transcript already holds what was injected), a ``compact``
claims nothing and gets the project brief again (bounded), a ``clear`` begins a new task
but claims nothing (the handoff just left by the cleared session would re-inject what the
user cleared) and gets the brief; any other start claims the handoff and gets the brief —
when the session is new (``only_new_session``: a start without ``source`` for a session
that already has events is no new session: it claims nothing and, like a resume, gets
nothing injected mid-conversation) and not a child session (``parent_session_id``: no
claim, the brief).

An event with a session id but no location (no cwd, no project) joins its known session
(``_place``); an unknown session without a location stays 400 ``missing_project``.

With ``run_id`` (a child of ``aimem run``, also on a ``resume``: ``aimem run`` resumes the
harness's native session, and its delivery cursor says what that session never saw) the brief is held to
``MANAGED_BRIEF_CHARS`` and the run's workstream packet follows it (``workstreams.py``:
the events its harness has not seen, origin marker, fenced, read first with room kept for
the bounded brief); the handoff and the packet are claimed in one writer command
(``handoff.accept`` with ``run_id``/``through_seq``; ``workstream.deliver`` alone on a start
that claims no handoff): both are delivered or neither, and the answer of a managed start
adds ``delivered_seq`` (null when nothing was delivered).
See docs/lifecycle.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from dataclasses import dataclass, replace
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from aimem_common import locations
from aimem_common.auth import Principal, authenticate_from_loop
from aimem_common.errors import (
    AimemError,
    BackPressureError,
    BadRequestError,
    BusTimeoutError,
    ForbiddenError,
    GoneError,
    UnavailableError,
)
from aimem_common.models import ObservationKind, validate_name
from aimem_common.read import profile, scopes
from aimem_common.read.sessions import locate_session
from aimem_common.redact import redact
from aimem_common.commands import make_envelope
from aimem_common.commands.handoffs import HandoffAccept
from aimem_common.commands.observations import SessionEnd
from aimem_common.sanitize import RawObservation, sanitize, storable
from aimem_common.text import iso_from_epoch
from aimem_ingress.body import decode_json, read_capped
from aimem_ingress.brief import HARD_CAP_CHARS, budget_chars, read_brief, render_context
from aimem_ingress.context import IngressContext
from aimem_ingress.deps import CtxDep, ctx_of
from aimem_ingress.normalize import NormalizedEvent, check_identity, normalize
from aimem_ingress import workstreams as managed

log = logging.getLogger("aimem.ingress")

router = APIRouter()
MAX_KEY_CHARS = 200
# One actor for every hook command, whatever the client (the client is in `agent`). Automatic
# handoffs belong to their place, not to an actor (docs/lifecycle.md): the next session may
# run in another client, and the maintainer's idle finaliser writes them too.
HOOK_ACTOR = "hook"
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
MAX_ROOT_CHARS, MAX_ORIGIN_CHARS = scopes.MAX_ROOT_CHARS, scopes.MAX_ORIGIN_CHARS
_RUN_ID = scopes.REPO_ID  # a managed run's id (AIMEM_RUN_ID): 32 lower-case hex digits
MANAGED_BRIEF_CHARS = 2_500  # a managed start keeps most of the hook output for the workstream packet
# What a session start gets, by its `source`: (claim a handoff, inject the project brief).
START_SOURCES = {"resume": (False, False), "compact": (False, True), "clear": (False, True)}
DEFAULT_START = (True, True)
# An event without a location waits this long for its session to be known (its first event
# may be a few writer batches away), polling every SESSION_POLL_S.
SESSION_WAIT_S, SESSION_POLL_S = 1.0, 0.1


@dataclass(frozen=True, slots=True)
class HookScope:
    """Where one hook event belongs: names plus the identity keys the hook client sent."""

    workspace: str
    project: str
    root: str | None = None
    origin: str | None = None
    explicit: bool = False
    repo_id: str | None = None

    def envelope_kwargs(self) -> dict[str, Any]:
        """The ``make_envelope`` scope fields of this event."""
        return {"workspace": self.workspace, "project": self.project, "root": self.root,
                "origin": self.origin, "explicit": self.explicit, "repo_id": self.repo_id}


async def post_hook(request: Request) -> Response:
    """Accept one hook event; see the module docstring for the contract.

    A lean route (``app.add_lean_route`` in ``app.py``), not a FastAPI endpoint: it takes
    nothing FastAPI would validate, and passes the service's guards without FastAPI's and
    Starlette's own per-request layers (``aimem_common.http.ServiceApp``).
    """
    t0 = time.perf_counter()
    status = 500
    ctx = await ctx_of(request)
    try:
        principal = await _authorize(ctx, request)
        ev, payload = await _read_event(ctx, request)
        scope, ev = await _place(ctx, request, payload, ev)
        await require_hook_write(ctx, principal, scope)
        refuse_purged(ctx, ev.session_id, "hook")
        key = caller_key(principal, scope, _idempotency_key(request, payload))
        _check_ready(ctx)
        ctx.gate.check()
        run_id = request.query_params.get("run_id") or ""
        cmd_id, duplicate = await _publish(ctx, ev, scope, key, run_id if _RUN_ID.match(run_id) else None)
        ctx.metrics.events.labels(ev.agent, ev.kind.value).inc()
        status = 202
        body: dict[str, Any] = {"accepted": cmd_id}
        if duplicate:
            body["duplicate"] = True
        return Response(orjson.dumps(body), status_code=202, media_type="application/json")
    except AimemError as exc:
        status = exc.status
        raise
    finally:
        ctx.metrics.responses.labels(str(status)).inc()
        ctx.metrics.latency.labels(str(status)).observe(time.perf_counter() - t0)



@router.post("/hook/session-start-context")
async def session_start_context(request: Request, ctx: CtxDep) -> JSONResponse:
    """Claim the pending handoff for the caller's project and return the fenced context
    (a user API key needs a write grant on that project: claiming is a write)."""
    principal = await _authorize(ctx, request)
    ev, payload = await _read_event(ctx, request)
    scope, ev = await _place(ctx, request, payload, ev)
    await require_hook_write(ctx, principal, scope)
    source = str(ev.extra.get("source") or "").casefold()
    claim, brief = START_SOURCES.get(source, DEFAULT_START)
    if ctx.purged.is_purged(ev.session_id):  # a purged session claims nothing (no link back to it)
        claim = False
    run_id = request.query_params.get("run_id") or ""
    # A managed run's resumed native session gets its packet too: its cursor says what it never saw.
    is_managed = bool(_RUN_ID.match(run_id))
    # A managed start reads its packet first (room for the bounded brief is kept), then claims
    # the handoff and the packet in ONE writer command: both are delivered or neither is.
    packet = await managed.start_packet(ctx, run_id, scope, room=HARD_CAP_CHARS - MANAGED_BRIEF_CHARS - 2) \
        if is_managed else None
    deliver = (run_id, packet[1]) if packet else None
    delivered = None
    # A child session (OpenCode `parentID`) continues its parent's task: its parent holds the
    # handoff, so it claims none (it still gets the project's rules).
    if claim and not ev.parent_session_id:
        handoff, skipped, delivered = await _claim_handoff(ctx, ev, scope, deliver)
    else:
        handoff, skipped = None, None
        if deliver and await managed.claim(ctx, run_id, deliver[1], scope):
            delivered = deliver[1]
    if skipped == "session_known":  # a start inside a session already open: inject nothing mid-conversation
        brief = False
    got = await ctx.read(lambda conn: _brief(conn, scope, principal)) if brief else None
    pages, name, profile = got or ([], scope.project, [])  # None: no database yet
    budget = budget_chars(ctx.settings.ingress.context_max_tokens)
    text = render_context(handoff, pages, project=name, profile=profile,
                          max_chars=min(budget, MANAGED_BRIEF_CHARS) if is_managed else budget)
    if packet and delivered is not None:  # after the handoff and brief: the events this harness has not seen
        text = f"{text}\n\n{packet[0]}" if text else packet[0]
    ctx.metrics.contexts.labels("handoff" if handoff else ("brief" if text else "empty")).inc()
    body: dict[str, Any] = {"context": text, "handoff_id": (handoff or {}).get("id")}
    if is_managed:
        body["delivered_seq"] = delivered
    return JSONResponse(body)


def refuse_purged(ctx: IngressContext, session_id: str | None, route: str) -> None:
    """Answer 410 ``purged`` for an event of a purged session ingress can see (counted).

    Checked after the credential and the grant, so the answer tells a caller nothing about
    projects it may not write.

    Raises:
        GoneError: the session has a live purge tombstone (``aimem purge-session``).
    """
    if ctx.purged.is_purged(session_id):
        ctx.purged.note_refused(session_id)
        ctx.metrics.purged.labels(route).inc()
        raise GoneError(f"session {session_id} was purged; its events are not stored (lift with "
                        "`aimem purge-session --forget-tombstone` to reuse the id)",
                        data={"session_id": session_id})


async def _authorize(ctx: IngressContext, request: Request) -> Principal:
    """Authenticate a hook request before its body is read (``aimem_common.auth``): the root
    token, a user API key (``aim_…``, looked up on the read pool; 503 ``db_not_ready``
    before the writer created the database), or, with no root token configured, anyone.

    Raises:
        UnauthorizedError: 401 for a missing, wrong or revoked credential while auth is on.
    """
    cached = getattr(request.state, "principal", None)  # the request gate already looked the key up
    if cached is not None:
        return cached
    return await authenticate_from_loop(ctx.read_pool, request.headers.get("authorization"),
                                        root_token=ctx.settings.auth.token)


async def require_hook_write(ctx: IngressContext, principal: Principal, scope: HookScope) -> None:
    """Allow a user API key only with a write grant on the project the event lands in: the
    existing project ``scopes.lookup`` finds for the scope's identity keys or name (as the
    writer resolves it), else the project the writer would create. Root and anonymous
    callers pass.

    A user key never creates a project under a name other than the one it asked for: when
    the event's identity keys (``root``/``origin``) find no project and the requested name
    already belongs to another repository, the writer would create ``name-2`` keyed to these
    keys — a project no grant names, which would then hold that repository's identity for
    good. That is refused; an admin (root) resolves it by granting or naming a project.

    Raises:
        ForbiddenError: 403 ``forbidden`` without that grant, or when the event would
            create a project under another name (``data.would_create`` holds it).
    """
    if principal.is_root:
        return
    workspace, project, created = await ctx.read_pool.run(_target_names, scope)
    if created and project != scope.project:
        raise ForbiddenError(
            f"project {workspace}/{scope.project} belongs to another repository; ask an admin to grant "
            f"this key a project for this repository (or post it under a name the key may write)",
            data={"workspace": workspace, "project": scope.project, "would_create": project})
    principal.require_write(workspace, project)


def _target_names(conn, scope: HookScope) -> tuple[str, str, bool]:
    """``(workspace, project, created)``: where the writer puts this event — the existing
    project, else the name it would create (``created`` True)."""
    found = scopes.lookup(conn, scope.workspace, scope.project, root=scope.root, origin=scope.origin,
                          explicit=scope.explicit, repo_id=scope.repo_id)
    if found is not None:
        return found.workspace, found.project, False
    keyed = not scope.explicit and bool(scope.root or scope.origin or scope.repo_id)
    return scope.workspace, scopes.new_project_name(conn, scope.workspace, scope.project, keyed=keyed), True


async def _read_event(ctx: IngressContext, request: Request) -> tuple[NormalizedEvent, dict[str, Any]]:
    cfg = ctx.settings.ingress
    raw = await read_capped(request, cfg.max_body_bytes)
    payload = decode_json(raw, max_depth=cfg.max_json_depth)
    q = request.query_params
    ev = normalize(q.get("agent") or None, payload, event=q.get("event") or None,
                   extension=q.get("extension") or None)
    if ev.cwd is None and q.get("cwd"):
        cwd = check_identity(q["cwd"][:4096], "cwd")
        project = ev.project or locations.name(cwd)
        ev = replace(ev, cwd=cwd, project=project)
    if q.get("ts"):
        ts = _epoch_iso(q["ts"])
        if ev.occurred_at is None:
            ev = replace(ev, occurred_at=ts)
    return ev, payload


def _epoch_iso(value: str) -> str:
    """``ts`` (epoch seconds, when the hook client ran) as ISO-8601 UTC.

    Raises:
        BadRequestError: 400 ``invalid_field`` when ``value`` is not a finite number of seconds
        naming a date between the years 1 and 9999 (``abc``, ``nan``, ``1e308``, ``-99999999999``).
    """
    try:
        iso = iso_from_epoch(float(value))
    except ValueError:
        iso = None
    if iso is None:
        raise BadRequestError(f"ts {value[:40]!r} is not a time: send epoch seconds (a finite number, "
                              "years 1-9999)", code="invalid_field")
    return iso


def _brief(conn, scope: HookScope, principal: Principal) -> tuple[list, str, list[str]]:
    """``(brief pages, actual project name, profile entry texts)`` of the project this event
    belongs to (a keyed scope named ``api`` may be ``api-2``; ``([], requested name, …)``
    before it exists) and of the caller: the profile is the calling principal's own
    (``read.profile``), whatever project the session runs in."""
    mine = [e["body"] for e in profile.entries(conn, profile.owner_of(principal))] \
        if profile.holds_profile(principal) else []
    found = scopes.lookup(conn, scope.workspace, scope.project, root=scope.root, origin=scope.origin,
                          explicit=scope.explicit, repo_id=scope.repo_id)
    if found is None:
        return [], scope.project, mine
    return read_brief(conn, workspace=found.workspace, project=found.project), found.project, mine


async def _place(ctx: IngressContext, request: Request, payload: dict[str, Any],
                 ev: NormalizedEvent) -> tuple[HookScope, NormalizedEvent]:
    """Resolve the event's scope (``_scope``); an event with no location at all (no cwd, no
    project) joins its session when the session id is known: the project it ran in, its
    cwd filled in (docs/lifecycle.md "Events without a location").

    The session's first event may still be on its way to the writer (a client posting
    without waiting): the lookup is retried for up to ``SESSION_WAIT_S``.

    Raises:
        BadRequestError: 400 ``missing_project`` when the session is unknown too.
    """
    q = request.query_params
    located = ev.project or q.get("project") or isinstance(payload.get("project"), str)
    if located:
        return _scope(request, payload, ev), ev
    workspace = q.get("workspace") or ev.workspace
    deadline = time.monotonic() + SESSION_WAIT_S
    while True:
        found = await ctx.read(locate_session, ev.session_id, workspace)
        if found is not None or time.monotonic() >= deadline:
            break
        await asyncio.sleep(SESSION_POLL_S)
    if found is None:
        raise BadRequestError("no project: send `cwd` or `project` (the session id is not known yet)",
                              code="missing_project", data={"session_id": ev.session_id})
    where, cwd = found
    return HookScope(where.workspace, where.project, explicit=True), replace(ev, cwd=ev.cwd or cwd)


def _scope(request: Request, payload: dict[str, Any], ev: NormalizedEvent) -> HookScope:
    """Resolve the event's scope: names query > body > basename of cwd, plus identity keys.

    An explicit name must be valid (400 ``invalid_name``); a cwd basename is made safe
    instead (``My Repo`` → ``My-Repo``) because the user never chose it as a name.
    ``root``/``origin`` must be printable strings (≤ 4096 / 1024 chars, else 400
    ``invalid_field``); secrets in them are redacted; ``root`` is normalised
    (``aimem_common.locations``). ``repo_id`` (the repository's stable id) must be 32
    lower-case hex digits (else 400 ``invalid_field``). ``named=1`` or a body ``project``
    marks the name explicit (resolved by name, never renamed).
    """
    q = request.query_params
    workspace = q.get("workspace") or ev.workspace or "default"
    validate_name(workspace, "workspace")
    root = locations.normalize(_key_field(q.get("root"), "root", MAX_ROOT_CHARS))
    origin = _key_field(q.get("origin"), "origin", MAX_ORIGIN_CHARS)
    repo_id = scopes.repo_id_field(q.get("repo_id"))
    body_project = payload.get("project") if isinstance(payload.get("project"), str) else None
    named = q.get("named") == "1" or bool(body_project and not q.get("project"))
    explicit = q.get("project") or body_project
    if explicit:
        return HookScope(workspace, validate_name(explicit, "project"), root, origin, named, repo_id)
    derived = _UNSAFE_NAME.sub("-", ev.project or "").strip(".-")[:128]
    if not derived:
        raise BadRequestError("no project: send `project` or a payload with a cwd", code="missing_project")
    return HookScope(workspace, derived, root, origin, False, repo_id)


_key_field = scopes.key_field  # one check of the identity keys for every route that takes them


def _idempotency_key(request: Request, payload: dict[str, Any]) -> str | None:
    key = request.headers.get("idempotency-key") or payload.get("idempotency_key")
    if key is None:
        return None
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS or not key.isprintable():
        raise BadRequestError(f"Idempotency-Key must be 1-{MAX_KEY_CHARS} printable chars",
                              code="invalid_idempotency_key")
    return key


def caller_key(principal: Principal, scope: HookScope, key: str | None) -> str | None:
    """The client's idempotency key made the caller's own: ``<12 hex>:<key>`` (≤ MAX_KEY_CHARS).

    The prefix hashes who sends (root, or which user) and where the event goes (workspace,
    project, root, origin). A client's retry of its own event (the spool, an import re-run)
    carries the same key and still dedupes; someone else's event with a key they guessed
    (import keys are predictable: ``<client>:<session>:<offset>``) no longer reads as a
    duplicate of it — which answered 202 while the victim's event was never stored.
    """
    if key is None:
        return None
    who = f"user:{principal.user_id}" if principal.kind == "user" else "root"  # auth on or off: one namespace
    where = "\0".join((who, scope.workspace, scope.project, scope.root or "", scope.origin or ""))
    return f"{hashlib.sha256(where.encode()).hexdigest()[:12]}:{key}"[:MAX_KEY_CHARS]


def _check_ready(ctx: IngressContext) -> None:
    if not ctx.nc.is_connected:
        raise UnavailableError("NATS is unreachable; retry later", code="nats_unavailable")


async def _publish(ctx: IngressContext, ev: NormalizedEvent, scope: HookScope,
                   key: str | None, run_id: str | None = None) -> tuple[str, bool]:
    """Publish the observation (and ``session.end``); return ``(cmd_id, duplicate)``.
    ``run_id`` (the query's, a child of ``aimem run``) is stored on the observation.

    Raises:
        BackPressureError / UnavailableError: from ``Bus.publish``.
    """
    raw = RawObservation(
        session_id=ev.session_id, kind=ev.kind, agent=ev.agent, cwd=ev.cwd, title=ev.title,
        body=ev.body, tool_name=ev.tool_name, source_event=ev.source_event,
        extension=ev.extension, model=ev.model, occurred_at=ev.occurred_at,
        parent_session_id=ev.parent_session_id,
    )
    actor = HOOK_ACTOR
    payload = sanitize(raw).to_payload()
    payload.run_id = run_id
    env = make_envelope("observation.append", payload, actor=actor, idempotency_key=key,
                        **scope.envelope_kwargs())
    result = await ctx.hooks.publish(env)
    if ev.kind is ObservationKind.SESSION_END:
        reason = ev.extra.get("reason")
        end = SessionEnd(session_id=ev.session_id, agent=ev.agent, cwd=ev.cwd, ended_at=ev.occurred_at,
                         reason=redact(storable(str(reason))).text[:64] or None if reason else None)  # redacted before the cut
        end_key = f"{key}:session.end" if key else f"{env.cmd_id}:session.end"
        await ctx.hooks.publish(make_envelope("session.end", end, actor=actor,
                                            idempotency_key=end_key[:MAX_KEY_CHARS], **scope.envelope_kwargs()))
    return env.cmd_id, result.duplicate


async def _claim_handoff(ctx: IngressContext, ev: NormalizedEvent, scope: HookScope,
                         deliver: tuple[str, int] | None = None) -> tuple[dict[str, Any] | None, str | None, int | None]:
    """Ask the writer to claim the best open handoff for the project root (else ``ev.cwd``)
    for a new session (``only_new_session``); return ``(handoff | None, skipped | None,
    delivered seq | None)`` (``skipped``: why the writer claimed nothing for this session,
    e.g. ``session_known``).

    ``deliver`` (``(run_id, through_seq)``, a managed start) claims the run's workstream packet
    in the same writer command: the third value is ``through_seq`` when it was claimed.

    Waits at most ``CLAIM_TIMEOUT_S``; a timeout, a saturated bus or an unknown project is
    "no handoff" and no packet (logged), never an error to the agent.
    """
    if not ctx.nc.is_connected:
        return None, None, None
    run_id, through = deliver if deliver else (None, None)
    env = make_envelope(
        "handoff.accept",
        HandoffAccept(cwd=ev.cwd, agent=ev.agent, session_id=ev.session_id, only_new_session=True,
                      run_id=run_id, through_seq=through),
        actor=HOOK_ACTOR, **scope.envelope_kwargs(),
    )
    try:
        result = await ctx.bus.request(env, timeout_s=ctx.claim_timeout_s)
    except (BusTimeoutError, BackPressureError, UnavailableError) as exc:
        log.warning("handoff claim for %s/%s skipped: %s", scope.workspace, scope.project, exc.message)
        return None, None, None
    except AimemError as exc:  # not_found (no such project yet) and other typed answers
        log.info("no handoff for %s/%s: %s", scope.workspace, scope.project, exc.code)
        return None, None, None
    delivered = through if isinstance(result.get("delivered"), dict) else None
    handoff, skipped = result.get("handoff"), result.get("skipped")
    return (handoff if isinstance(handoff, dict) else None), (skipped if isinstance(skipped, str) else None), delivered
