"""Profile memory on the web: the signed-in user's standing preferences (list, add, remove).

The profile is per person, not per project (``aimem_common.read.profile``): a user sees and
changes only their own, under the same rule as the ``memory_profile`` tool (a user without
any grant has none: 403; changing it needs a write grant). A root login also gets a picker
of users and acts on ``?user=NAME``'s profile, as ``/admin/profile`` does. Forms carry the
CSRF token; the entries are agent/user text, rendered autoescaped and never as markup.
"""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response

from aimem_common.commands.profile import MAX_ENTRY_CHARS
from aimem_common.errors import BadRequestError, ForbiddenError, NotFoundError
from aimem_common.read import profile
from aimem_query.deps import read
from aimem_query.web.deps import UserDep, form, renderer, send
from aimem_query.web.session import WebUser

router = APIRouter()

NOTICES = {"added": "Preference added: every later session of this profile sees it.",
           "removed": "Preference removed."}


async def _owner(request: Request, user: WebUser, name: str | None, *, write: bool) -> int | None:
    """The profile owner the request acts on: ``name``'s (root only), else the user's own.

    Raises:
        ForbiddenError: ``name`` from a non-root login; a user without the grant to hold
            (``write``: change) a profile.
        NotFoundError: no user named ``name``.
    """
    if name:
        if not user.principal.is_root:
            raise ForbiddenError("only an admin may see another user's profile", code="forbidden")
        uid = await read(request, profile.user_id_of, name)
        if uid is None:
            raise NotFoundError(f"user {name!r} not found", code="not_found", data={"user": name})
        return uid
    return profile.require_profile(user.principal, write=write)


def _back(name: str | None, notice: str) -> RedirectResponse:
    query = urlencode({**({"user": name} if name else {}), "notice": notice})
    return RedirectResponse(f"/web/profile?{query}", status_code=303)


@router.get("/profile")
async def profile_screen(request: Request, user: UserDep, name: str | None = Query(None, alias="user", max_length=128),
                         notice: str | None = Query(None, max_length=32)) -> Response:
    """The profile's entries, oldest first, with a form to add one and a button to remove
    each; a root login also gets a picker of users (``?user=NAME``)."""
    owner = await _owner(request, user, name, write=False)
    entries = await read(request, profile.entries, owner)
    users = await read(request, profile.user_names) if user.principal.is_root else []
    return renderer(request).page(request, "profile.html", entries=entries, users=users, selected=name or "",
                                  notice=NOTICES.get(notice or ""), max_chars=MAX_ENTRY_CHARS)


@router.post("/profile/add")
async def profile_add(request: Request, user: UserDep) -> Response:
    """Add one preference (``profile.add``; secrets redacted, an identical entry kept once); 303 back."""
    data = await form(request, user)
    name = data.get("user") or None
    owner = await _owner(request, user, name, write=True)
    text = (data.get("text") or "").strip()
    if not text:
        raise BadRequestError("a preference needs some text", code="bad_request")
    if len(text) > MAX_ENTRY_CHARS:  # said in the form's words, before the writer's payload check
        raise BadRequestError(f"a preference is at most {MAX_ENTRY_CHARS} characters; this one has {len(text)}",
                              code="too_long", data={"max_chars": MAX_ENTRY_CHARS, "chars": len(text)})
    await send(request, user, "profile.add", {"user_id": owner, "body": text})
    return _back(name, "added")


@router.post("/profile/remove")
async def profile_remove(request: Request, user: UserDep) -> Response:
    """Remove one preference of the profile (``profile.remove``; 404 when it has no such entry); 303 back."""
    data = await form(request, user)
    name = data.get("user") or None
    owner = await _owner(request, user, name, write=True)
    try:
        entry_id = int(data.get("entry_id") or "")
    except ValueError:
        raise BadRequestError("entry_id must be a number", code="bad_request") from None
    await send(request, user, "profile.remove", {"user_id": owner, "entry_id": entry_id})
    return _back(name, "removed")
