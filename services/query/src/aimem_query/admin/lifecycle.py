"""Lifecycle routes.

Purge-session, purge-project, purge-workspace, workstream-delete, rename-project, rename-workspace, move-project,
move-session, reorg (and its input, session-locations).

Each route checks the request shape, then sends one writer op and returns the writer's
report. Every semantic check (scope lookup, guards, conflicts) happens in the writer, in
the same transaction that mutates, so a preview and a confirmed run can never disagree.

Confirmation rules:

* purge-session / purge-project / purge-workspace / workstream-delete / move-project: ``dry_run: true`` always wins and only
  previews; otherwise ``confirm: true`` is required (400 ``confirm_required``).
* move-session and reorg: a dry run unless ``confirm: true`` (and ``dry_run`` still wins).
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from aimem_common.errors import BadRequestError, NotFoundError
from aimem_common.read import scopes
from aimem_common.read.sessions import session_locations as locations
from aimem_query.deps import ctx_of, read, send

router = APIRouter()


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class PurgeSessionBody(_Body):
    workspace: str = "default"
    project: str
    session_id: str = Field(min_length=1, max_length=256)
    confirm: bool = False
    dry_run: bool = False
    compact: bool = False
    force: bool = False  # purge although one of its managed runs holds a live lease


class PurgeProjectBody(_Body):
    workspace: str = "default"
    project: str
    confirm: bool = False
    dry_run: bool = False
    compact: bool = False
    force: bool = False


class PurgeWorkspaceBody(_Body):
    workspace: str
    confirm: bool = False
    dry_run: bool = False
    compact: bool = False
    force: bool = False


class WorkstreamDeleteBody(_Body):
    workspace: str = "default"
    project: str
    workstream_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    confirm: bool = False
    dry_run: bool = False
    force: bool = False  # delete although a managed run holds a live lease


class RenameProjectBody(_Body):
    workspace: str = "default"
    from_: str = Field(alias="from")
    to: str
    force: bool = False  # rename although a managed run (aimem run) holds a live lease


class RenameWorkspaceBody(_Body):
    from_: str = Field(alias="from")
    to: str


class MoveProjectBody(_Body):
    from_workspace: str = "default"
    project: str
    to_workspace: str
    on_conflict: Literal["block", "overwrite", "duplicate"] = "block"
    confirm: bool = False
    dry_run: bool = False
    force: bool = False


class MoveSessionBody(_Body):
    session_id: str | None = None
    from_workspace: str = "default"
    from_project: str | None = None
    workspace: str | None = None  # destination; default = the source workspace
    project: str
    pages: Literal["move", "regenerate"] = "move"
    confirm: bool = False
    dry_run: bool = False
    force: bool = False
    create: bool = False


def _require_confirm(confirm: bool, dry_run: bool, what: str) -> None:
    if not dry_run and not confirm:
        raise BadRequestError(
            f"{what} is destructive and irreversible: pass confirm=true (or dry_run=true to preview)",
            code="confirm_required",
        )


@router.post("/purge-session")
async def purge_session(body: PurgeSessionBody, request: Request) -> dict:
    """Delete one session of a project (preview with ``dry_run``)."""
    _require_confirm(body.confirm, body.dry_run, "purge-session")
    return await send(
        request,
        "session.purge",
        {"session_id": body.session_id, "dry_run": body.dry_run, "compact": body.compact, "force": body.force},
        workspace=body.workspace,
        project=body.project,
    )


@router.post("/purge-project")
async def purge_project(body: PurgeProjectBody, request: Request) -> dict:
    """Delete a project and everything it owns (preview with ``dry_run``)."""
    _require_confirm(body.confirm, body.dry_run, "purge-project")
    return await send(
        request,
        "project.purge",
        {"dry_run": body.dry_run, "compact": body.compact, "force": body.force},
        workspace=body.workspace,
        project=body.project,
    )


@router.post("/purge-workspace")
async def purge_workspace(body: PurgeWorkspaceBody, request: Request) -> dict:
    """Delete a workspace and every project in it (preview with ``dry_run``)."""
    _require_confirm(body.confirm, body.dry_run, "purge-workspace")
    return await send(request, "workspace.purge", body.model_dump(exclude={"confirm"}))


@router.post("/workstream-delete")
async def workstream_delete(body: WorkstreamDeleteBody, request: Request) -> dict:
    """Delete one workstream of a project and its whole ledger (preview with ``dry_run``).

    Body ``{workspace, project, workstream_id (32 hex), confirm, dry_run, force}``; answers
    writer op ``workstream.delete``'s ``{workstream_id, name, workstream_events_deleted,
    managed_runs_deleted, dry_run}``. Errors: 400 ``confirm_required``, 404 ``not_found``,
    409 ``live_lease`` (a run holds it; ``force`` overrides), 409 ``admission_refused``
    (an ``[admission]`` webhook for ``delete_ledger`` said no; nothing changed).
    """
    _require_confirm(body.confirm, body.dry_run, "workstream-delete")
    return await send(request, "workstream.delete",
                      {"workstream_id": body.workstream_id, "dry_run": body.dry_run, "force": body.force},
                      workspace=body.workspace, project=body.project)


@router.post("/rename-project")
async def rename_project(body: RenameProjectBody, request: Request) -> dict:
    """Rename a project within its workspace (no file moves); 409 ``live_lease`` while a
    managed run holds a live lease on it, unless ``force``."""
    return await send(request, "project.rename", {"to": body.to, "force": body.force}, workspace=body.workspace,
                      project=body.from_)


@router.post("/rename-workspace")
async def rename_workspace(body: RenameWorkspaceBody, request: Request) -> dict:
    """Rename a workspace (no file moves; ``_meta.md`` manifests refreshed)."""
    return await send(request, "workspace.rename", {"workspace": body.from_, "to": body.to})


@router.post("/move-project")
async def move_project(body: MoveProjectBody, request: Request) -> dict:
    """Move a project into another workspace: true move, or copy-purge merge."""
    _require_confirm(body.confirm, body.dry_run, "move-project")
    return await send(
        request,
        "project.move",
        {
            "to_workspace": body.to_workspace,
            "on_conflict": body.on_conflict,
            "force": body.force,
            "dry_run": body.dry_run,
        },
        workspace=body.from_workspace,
        project=body.project,
    )


@router.post("/move-session")
async def move_session(body: MoveSessionBody, request: Request) -> dict:
    """Re-stamp one session (or every session of ``from_project``) into another project."""
    if (body.session_id is None) == (body.from_project is None):
        raise BadRequestError("give exactly one of session_id or from_project", code="bad_request")
    payload = {
        "session_id": body.session_id,
        "from_workspace": body.from_workspace,
        "from_project": body.from_project,
        "to_workspace": body.workspace,
        "to_project": body.project,
        "pages": body.pages,
        "dry_run": body.dry_run or not body.confirm,
        "force": body.force,
        "create": body.create,
    }
    return await send(request, "session.move", payload)


class DeleteWorkspaceBody(_Body):
    workspace: str = Field(min_length=1, max_length=128)
    confirm: bool = False
    dry_run: bool = False
    force: bool = False


@router.post("/delete-workspace")
async def delete_workspace(body: DeleteWorkspaceBody, request: Request) -> dict:
    """Delete a workspace, every project in it and its wiki directory (preview with ``dry_run``;
    the preview's counts are the confirmed run's)."""
    _require_confirm(body.confirm, body.dry_run, "delete-workspace")
    return await send(request, "workspace.purge",
                      {"workspace": body.workspace, "dry_run": body.dry_run, "force": body.force})


class ExpireHandoffsBody(_Body):
    workspace: str = "default"
    project: str
    older_than_days: int | None = Field(None, ge=0, le=36500)
    confirm: bool = False
    dry_run: bool = False


@router.post("/handoffs/expire-all")
async def expire_handoffs(body: ExpireHandoffsBody, request: Request) -> dict:
    """Expire every open handoff of a project (``older_than_days``: only older ones); preview
    with ``dry_run`` (the same ids the confirmed run expires)."""
    _require_confirm(body.confirm, body.dry_run, "handoffs --expire-all")
    return await send(request, "handoff.expire_all",
                      {"older_than_days": body.older_than_days, "dry_run": body.dry_run},
                      workspace=body.workspace, project=body.project)


@router.get("/session-locations")
async def session_locations(request: Request, workspace: str | None = Query(None, max_length=128),
                            project: str | None = Query(None, max_length=128)) -> dict:
    """Every directory sessions ran in, with their count and the projects holding them now:
    ``{"locations": [{"cwd", "sessions", "projects": ["ws/project"]}]}`` (what ``aimem
    reorg`` resolves again). ``project`` (in ``workspace``, else the default one) or
    ``workspace`` narrows it; an unknown one is 404."""
    wid = pid = None
    if project is not None:
        ws = workspace or ctx_of(request).settings.workspace_default
        scope = await read(request, lambda c: scopes.resolve(c, ws, project))
        wid, pid = scope.workspace_id, scope.project_id
    elif workspace is not None:
        wid = await read(request, lambda c: scopes.workspace_id(c, workspace))
        if wid is None:
            raise NotFoundError(f"workspace {workspace!r} not found", code="workspace_not_found")
    return {"locations": await read(request, lambda c: locations(c, workspace_id=wid, project_id=pid))}


class ReorgLocationBody(_Body):
    cwd: str = Field(min_length=1, max_length=4096)
    workspace: str | None = Field(None, max_length=128)
    project: str = Field(min_length=1, max_length=128)
    root: str | None = Field(None, max_length=4096)
    origin: str | None = Field(None, max_length=1024)
    repo_id: str | None = Field(None, max_length=64)
    explicit: bool = False


class ReorgBody(_Body):
    locations: list[ReorgLocationBody] = Field(max_length=10_000)
    from_workspace: str | None = Field(None, max_length=128)
    from_project: str | None = Field(None, max_length=128)
    pages: Literal["move", "regenerate"] = "move"
    confirm: bool = False
    dry_run: bool = False
    force: bool = False


@router.post("/reorg")
async def reorg(body: ReorgBody, request: Request) -> dict:
    """Move every session run in one of ``locations`` (a ``cwd`` from ``/admin/session-locations``
    with the identity that directory resolves to today) to that project, when it is not
    there already. A dry run unless ``confirm: true``; the preview's counts are the run's
    (one writer transaction each). Returns ``{dry_run, moved, unchanged, skipped: [{session_id,
    reason, message, ...}], created_projects, sessions: [per-session move report], summary}``."""
    payload = body.model_dump(exclude={"confirm"})
    payload["dry_run"] = body.dry_run or not body.confirm
    return await send(request, "session.reorg", payload)
