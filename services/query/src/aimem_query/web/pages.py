"""A page: view, history (versions, checkpoints, diff, restore), edit, delete, feedback.

Every change is a writer op answered after commit (``page.write`` with
``expected_page_id`` — a concurrent write is a conflict, shown as such — ``page.restore``,
``page.delete``, ``page.feedback``); reads come from ``aimem_common.read.pages``.
"""

from __future__ import annotations

from urllib.parse import quote

import asyncio
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from aimem_common import wikifmt
from aimem_common.config import DecaySettings
from aimem_common.decay import is_cold, retention
from aimem_common.errors import AimemError, BadRequestError, PreconditionFailedError
from aimem_common.models import DbId, Scope, validate_page_path
from aimem_common.read import pages
from aimem_query.deps import ctx_of, read
from aimem_query.admin.history import list_checkpoints
from aimem_query.web.deps import UserDep, form, renderer, scope_for, send
from aimem_query.web.diff import unified
from aimem_query.web.render import page_url

router = APIRouter(prefix="/p/{workspace}/{project}")

FEEDBACK_SIGNALS = ("helpful", "not_helpful", "stale", "wrong")
NOTICES = {"saved": "Saved.", "restored": "Restored: the chosen version is the live page again.",
           "feedback": "Thank you: your feedback was recorded.", "created": "Page created."}


def _days_since(iso: str | None, now: datetime) -> float | None:
    if not iso:
        return None
    try:
        t = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, (now - (t if t.tzinfo else t.replace(tzinfo=UTC))).total_seconds() / 86400)


def decay_state(page: dict[str, Any], decay: DecaySettings) -> dict[str, Any]:
    """Return how the forget sweep sees ``page``: ``{"decays": bool, "why"?, "retention"?,
    "threshold"?, "cold"?, "salience"}`` (DESIGN.md "Decay")."""
    salience = decay.salience_default if page.get("salience") is None else page["salience"]
    if page["pinned"] or page["path"].startswith("_slots/"):
        return {"decays": False, "why": "pinned", "salience": salience}
    if page["tier"] != "episodic":
        return {"decays": False, "why": f"{page['tier']} pages do not decay", "salience": salience}
    now = datetime.now(UTC)
    score = retention(decay, salience=page.get("salience"), age_days=_days_since(page["updated_at"], now) or 0.0,
                      access_count=page["access_count"], days_since_access=_days_since(page["last_accessed_at"], now))
    return {"decays": True, "retention": score, "threshold": decay.cold_threshold, "cold": is_cold(decay, score),
            "salience": salience}


def _resolved(page: dict[str, Any], scope: Scope) -> dict[tuple, bool]:
    return {(link["to_workspace"] or scope.workspace, link["to_project"] or scope.project, link["to_path"]):
            link["resolved"] for link in page["links"]}


@router.get("/page/{path:path}")
async def view(request: Request, user: UserDep, workspace: str, project: str, path: str,
               v: DbId | None = None, notice: str | None = None) -> Response:
    """One page (live, or version ``v``): rendered body, frontmatter, links, backlinks, decay."""
    scope = await scope_for(request, user, workspace, project)
    if v is not None:
        page = await read(request, pages.get_page, scope, page_id=v, reader=user.principal)
    else:
        page = await read(request, pages.get_page, scope, path=validate_page_path(path), reader=user.principal)
    r = renderer(request)
    html = r.markdown(page["body"], workspace=scope.workspace, project=scope.project, resolved=_resolved(page, scope))
    return r.page(request, "page.html", scope=scope, page=page, html=html, live=True,
                  decay=decay_state(page, ctx_of(request).settings.decay), signals=FEEDBACK_SIGNALS,
                  can_write=user.principal.can_write(workspace, project), notice=NOTICES.get(notice or ""))


@router.post("/feedback/{path:path}")
async def feedback(request: Request, user: UserDep, workspace: str, project: str, path: str) -> Response:
    """Record ``signal`` (helpful, not_helpful, stale, wrong) on the live page; 303 back."""
    scope = await scope_for(request, user, workspace, project, write=True)
    fields = await form(request, user)
    payload = {"path": validate_page_path(path), "signal": fields.get("signal", ""),
               "reason": fields.get("reason") or None}
    await send(request, user, "page.feedback", payload, workspace=scope.workspace, project=scope.project)
    return RedirectResponse(page_url(workspace, project, path) + "?notice=feedback", status_code=303)


@router.get("/history/{path:path}")
async def history(request: Request, user: UserDep, workspace: str, project: str, path: str,
                  a: DbId | None = None, b: DbId | None = None, git: bool = False) -> Response:
    """Versions of ``path``; with ``a`` and ``b`` (version ids) their diff; with ``git`` also
    the wiki's git checkpoints that changed the file (among its newest 5,000 commits, from the
    process's ``CheckpointLog``: the first such request after a start walks that history)."""
    scope = await scope_for(request, user, workspace, project)
    path = validate_page_path(path)
    versions = await read(request, pages.versions, scope, path)
    if not versions:
        await read(request, pages.get_page, scope, path=path)  # the 404 of a path that never existed
    checkpoints = None
    if git:
        prefix = f"{scope.workspace_id}/{scope.project_id}/{path}"
        checkpoints = await asyncio.to_thread(list_checkpoints, ctx_of(request).settings.wiki_dir, limit=30,
                                              prefix=prefix)
    diff = None
    if a is not None and b is not None:
        old, new = await read(request, lambda c: (pages.version_body(c, scope, a), pages.version_body(c, scope, b)))
        diff = {"a": old, "b": new, "lines": unified(old["body"], new["body"], old_name=f"#{a}", new_name=f"#{b}")}
    return renderer(request).page(request, "history.html", scope=scope, path=path, versions=versions,
                                  checkpoints=checkpoints, diff=diff, a=a, b=b,
                                  can_write=user.principal.can_write(workspace, project))


@router.post("/restore/{path:path}")
async def restore(request: Request, user: UserDep, workspace: str, project: str, path: str) -> Response:
    """Make a retained version (``page_id``) or a checkpoint's file (``rev``) the live page."""
    scope = await scope_for(request, user, workspace, project, write=True)
    fields = await form(request, user)
    path = validate_page_path(path)
    payload: dict[str, Any] = {"path": path}
    if fields.get("page_id"):
        payload["page_id"] = _int(fields["page_id"], "page_id")
    else:
        payload["rev"] = fields.get("rev") or None
    await send(request, user, "page.restore", payload, workspace=scope.workspace, project=scope.project)
    return RedirectResponse(page_url(workspace, project, path) + "?notice=restored", status_code=303)


def _int(value: str, name: str) -> int:
    try:
        return int(value)
    except ValueError as exc:
        raise BadRequestError(f"{name} must be an integer", code="bad_request") from exc


def _file_text(page: dict[str, Any]) -> str:
    fm = {k: v for k, v in page["frontmatter"].items() if k not in wikifmt.WRITER_KEYS}
    return wikifmt.render(fm, page["body"]) if fm else page["body"]


@router.get("/edit/{path:path}")
async def edit_form(request: Request, user: UserDep, workspace: str, project: str, path: str) -> Response:
    """The editor: the page file (frontmatter + markdown), preview and save buttons."""
    scope = await scope_for(request, user, workspace, project, write=True)
    page = await read(request, pages.get_page, scope, path=validate_page_path(path))
    return renderer(request).page(request, "edit.html", scope=scope, path=page["path"], text=_file_text(page),
                                  expected=page["page_id"], new=False, preview=None, conflict=None, error=None)


@router.get("/new")
async def new_form(request: Request, user: UserDep, workspace: str, project: str, path: str = "") -> Response:
    """The editor for a page that does not exist yet (``create_only``)."""
    scope = await scope_for(request, user, workspace, project, write=True)
    return renderer(request).page(request, "edit.html", scope=scope, path=path, text="", expected=0, new=True,
                                  preview=None, conflict=None, error=None)


@router.post("/edit")
async def edit_submit(request: Request, user: UserDep, workspace: str, project: str) -> Response:
    """Preview (``action=preview``) or save (``action=save``) the editor's text.

    Saving is conditional: ``expected_page_id`` is the version the editor started from
    (0 = must not exist). When another write landed first the writer refuses with
    ``precondition_failed`` and this answers 409 with the conflict: the other version, the
    diff to your text, and your text kept (saving again overwrites deliberately).
    """
    scope = await scope_for(request, user, workspace, project, write=True)
    fields = await form(request, user)
    text = fields.get("text", "").replace("\r\n", "\n")
    expected = _int(fields.get("expected_page_id", "0") or "0", "expected_page_id")
    new = fields.get("new") == "1"
    r = renderer(request)
    ctx: dict[str, Any] = {"scope": scope, "text": text, "expected": expected, "new": new, "preview": None,
                           "conflict": None, "error": None, "path": fields.get("path", "")}
    try:
        path = validate_page_path(fields.get("path", ""))
        ctx["path"] = path
        parsed = wikifmt.parse(text)
    except BadRequestError as exc:
        return r.page(request, "edit.html", http_status=400, **{**ctx, "error": exc.message})
    if fields.get("action") != "save":
        ctx["preview"] = {"frontmatter": parsed.frontmatter,
                          "html": r.markdown(parsed.body, workspace=scope.workspace, project=scope.project,
                                             resolved={})}
        return r.page(request, "edit.html", **ctx)
    payload = {"path": path, "body": text, "expected_page_id": expected}
    try:
        await send(request, user, "page.write", payload, workspace=scope.workspace, project=scope.project)
    except PreconditionFailedError as exc:
        current_id = (exc.data or {}).get("current_page_id")
        theirs = await read(request, pages.get_page, scope, page_id=current_id) if current_id else None
        ctx["expected"] = current_id or 0
        ctx["conflict"] = {"theirs": theirs,
                           "lines": unified(_file_text(theirs) if theirs else "", text, old_name="theirs",
                                            new_name="yours")}
        return r.page(request, "edit.html", http_status=409, **ctx)
    except AimemError as exc:
        if exc.status >= 500:
            raise
        return r.page(request, "edit.html", http_status=exc.status, **{**ctx, "error": exc.message})
    return RedirectResponse(page_url(workspace, project, path) + f"?notice={'created' if new else 'saved'}",
                            status_code=303)


@router.get("/delete/{path:path}")
async def delete_confirm(request: Request, user: UserDep, workspace: str, project: str, path: str) -> Response:
    """Ask before deleting (the file and its indexed versions; git keeps history)."""
    scope = await scope_for(request, user, workspace, project, write=True)
    page = await read(request, pages.get_page, scope, path=validate_page_path(path))
    return renderer(request).page(request, "delete.html", scope=scope, page=page)


@router.post("/delete/{path:path}")
async def delete(request: Request, user: UserDep, workspace: str, project: str, path: str) -> Response:
    """Delete the live page (``page.delete``); 303 to its folder."""
    scope = await scope_for(request, user, workspace, project, write=True)
    await form(request, user)
    path = validate_page_path(path)
    await send(request, user, "page.delete", {"path": path}, workspace=scope.workspace, project=scope.project)
    folder = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
    return RedirectResponse(page_url(workspace, project, screen="tree") + f"?folder={folder}&deleted={quote(path, safe='')}",
                            status_code=303)
