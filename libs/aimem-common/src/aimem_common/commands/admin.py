"""Lifecycle/admin ops.

Purges, renames, moves, restores, users and keys. The query service's ``/admin`` API sends
these.

Conventions shared by every destructive op here:

* ``dry_run`` always wins: a payload with ``dry_run: true`` only counts, whatever else it
  says, and the writer answers with the same counts a confirmed run reports (the preview
  and the real run share one counting function).
* Scope: project-scoped ops carry the source ``(workspace, project)`` names in the envelope
  ``scope``; ops that are not project-scoped (``workspace.rename``, ``session.move``,
  users, keys, grants) carry every name in the payload and send no scope.
* Every confirmed mutation writes one ``audit_log`` row (the writer does it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from aimem_common.models import validate_name, validate_page_path
from aimem_common.commands.envelope import OpPayload, register
from aimem_common.models import DbId

OnConflict = Literal["block", "overwrite", "duplicate"]
DEDUP_FROM_TOKEN = "-from-"  # duplicate policy: <stem>-from-<src_workspace>.md, then -2, -3, ...
API_KEY_PREFIX = "aim_"


def _name(v: str | None, what: str) -> str | None:
    return None if v is None else validate_name(v, what)


@register("session.purge")
class SessionPurge(OpPayload):
    """Delete one session of the envelope's project: its row, observations (in any project),
    the handoffs it authored, its ``sessions/<id>.md`` page with every version, and its
    consolidation/auto-improve rows. Handoffs it only accepted keep their text and lose the
    session pointer. A session outside the named scope is ``not_found``.
    """

    session_id: str = Field(min_length=1, max_length=256)
    dry_run: bool = False
    compact: bool = False
    force: bool = False  # purge although one of its managed runs holds a live lease (409 ``live_lease``)


@register("project.purge")
class ProjectPurge(OpPayload):
    """Delete the envelope's project and everything it owns (one cascade), then its wiki dir.

    ``force`` overrides the live-session guard (a session with an event in the last
    ``live_window_s`` and no end); ``compact`` rebuilds the FTS indexes and VACUUMs.
    """

    dry_run: bool = False
    compact: bool = False
    force: bool = False


@register("workspace.purge")
class WorkspacePurge(OpPayload):
    """Delete workspace ``workspace`` and every project in it (each as ``project.purge``
    would), then its wiki dir; ``dry_run`` reports the same counts and deletes nothing.
    ``force`` overrides the live-session guard of every project. Leaves a workspace
    tombstone (and one per project and session) like the other purges.
    """

    workspace: str = Field(min_length=1, max_length=128)
    dry_run: bool = False
    compact: bool = False
    force: bool = False

    @field_validator("workspace")
    @classmethod
    def _ws(cls, v: str) -> str:
        return validate_name(v, "workspace")


@register("handoff.expire_all")
class HandoffExpireAll(OpPayload):
    """Expire every open handoff of the envelope's project (``older_than_days``: only those
    opened at least that many days ago); ``dry_run`` reports the same ids, changes nothing."""

    older_than_days: int | None = Field(None, ge=0, le=36500)
    dry_run: bool = False


@register("project.rename")
class ProjectRename(OpPayload):
    """Rename the envelope's project within its workspace (a column update; no file moves).

    ``to`` is checked by the writer: invalid or taken is ``unprocessable`` (422): the request is well-formed
    but names something the store cannot accept.
    """

    to: str = Field(max_length=256)
    force: bool = False  # rename although a managed run holds a live lease (409 ``live_lease``)


@register("workspace.rename")
class WorkspaceRename(OpPayload):
    """Rename workspace ``workspace`` to ``to`` (a column update; ``_meta.md`` refreshed).

    ``to`` is checked by the writer: invalid or taken is ``unprocessable`` (422).
    """

    workspace: str
    to: str = Field(max_length=256)

    @field_validator("workspace")
    @classmethod
    def _ws(cls, v: str) -> str:
        return validate_name(v, "workspace")


@register("project.move")
class ProjectMove(OpPayload):
    """Move the envelope's project into workspace ``to_workspace``.

    Fresh destination (no same-named project): a lossless true move (same project id, the
    directory renamed, every row re-stamped). Otherwise a copy-purge merge of the latest
    pages, with same-path conflicts decided by ``on_conflict``.
    """

    to_workspace: str
    on_conflict: OnConflict = "block"
    force: bool = False
    dry_run: bool = False

    @field_validator("to_workspace")
    @classmethod
    def _ws(cls, v: str) -> str:
        return validate_name(v, "workspace")


@register("session.move")
class SessionMove(OpPayload):
    """Re-stamp one session (``session_id``) or every session touching ``from_project`` into
    ``to_workspace``/``to_project`` (exactly one form). Dry run unless ``dry_run`` is false
    (then one transaction per session). A session id present in several projects is
    ``ambiguous_session`` (409).
    """

    session_id: str | None = Field(None, min_length=1, max_length=256)
    from_workspace: str = "default"
    from_project: str | None = None
    to_workspace: str | None = None  # default: the source workspace
    to_project: str
    pages: Literal["move", "regenerate"] = "move"
    dry_run: bool = True
    force: bool = False
    create: bool = False

    @field_validator("from_workspace", "to_workspace")
    @classmethod
    def _ws(cls, v: str | None) -> str | None:
        return _name(v, "workspace")

    @field_validator("from_project", "to_project")
    @classmethod
    def _pj(cls, v: str | None) -> str | None:
        return _name(v, "project")

    @model_validator(mode="after")
    def _form(self) -> "SessionMove":
        if (self.session_id is None) == (self.from_project is None):
            raise ValueError("give exactly one of session_id or from_project")
        return self


class ReorgLocation(BaseModel):
    """Where the sessions run in ``cwd`` belong now: the identity the hook client resolves
    for that directory today (``workspace`` None: the default workspace)."""

    model_config = ConfigDict(extra="forbid")
    cwd: str = Field(min_length=1, max_length=4096)
    workspace: str | None = None
    project: str = Field(min_length=1, max_length=128)
    root: str | None = Field(None, max_length=4096)
    origin: str | None = Field(None, max_length=1024)
    repo_id: str | None = Field(None, max_length=64)
    explicit: bool = False

    @field_validator("workspace", "project")
    @classmethod
    def _names(cls, v: str | None, info: ValidationInfo) -> str | None:
        return _name(v, info.field_name)


@register("session.reorg")
class SessionReorg(OpPayload):
    """Re-derive the project of every session run in one of ``locations`` (its ``cwd``) and
    move the sessions whose project differs (``session.move``'s per-session re-stamp), in
    one transaction. Only sessions now in ``from_workspace``/``from_project`` when given.
    A dry run (the default) executes inside a SAVEPOINT and rolls back: its counts are the
    run's. A session that cannot move (still open without ``force``, a page clash) is
    reported as skipped and stays where it is.
    """

    locations: list[ReorgLocation] = Field(max_length=10_000)
    from_workspace: str | None = None
    from_project: str | None = None
    pages: Literal["move", "regenerate"] = "move"
    dry_run: bool = True
    force: bool = False

    @field_validator("from_workspace", "from_project")
    @classmethod
    def _names(cls, v: str | None, info: ValidationInfo) -> str | None:
        return _name(v, info.field_name.removeprefix("from_"))


@register("page.restore")
class PageRestore(OpPayload):
    """Write back one page of the envelope's project as its new latest version, from the
    wiki's git history (``rev``: a commit id or unique prefix) or from a retained page
    version (``page_id``). Exactly one source.
    """

    path: str | None = None
    rev: str | None = Field(None, min_length=4, max_length=64)
    page_id: DbId | None = None

    @field_validator("path")
    @classmethod
    def _path(cls, v: str | None) -> str | None:
        return None if v is None else validate_page_path(v)

    @field_validator("rev")
    @classmethod
    def _rev(cls, v: str | None) -> str | None:
        if v is not None and not all(c in "0123456789abcdefABCDEF" for c in v):
            raise ValueError("rev must be a hex commit id")
        return v.lower() if v else v

    @model_validator(mode="after")
    def _one_source(self) -> "PageRestore":
        if (self.rev is None) == (self.page_id is None):
            raise ValueError("give exactly one of rev or page_id")
        if self.rev is not None and self.path is None:
            raise ValueError("path is required with rev")
        return self


class _UserName(OpPayload):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_][A-Za-z0-9._@-]*$")


@register("user.create")
class UserCreate(_UserName):
    """Create a user (``is_root`` users may call ``/admin``)."""

    is_root: bool = False


@register("user.delete")
class UserDelete(_UserName):
    """Delete a user with its API keys and grants."""


@register("apikey.create")
class ApiKeyCreate(OpPayload):
    """Store an API key for ``user``: only its sha256 ``key_hash`` and display ``prefix``
    travel on the bus; the caller shows the plaintext key once.
    """

    user: str = Field(min_length=1, max_length=64)
    name: str | None = Field(None, max_length=128)
    key_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    prefix: str = Field(min_length=4, max_length=16)


@register("apikey.revoke")
class ApiKeyRevoke(OpPayload):
    """Revoke one API key by id (idempotent: revoking a revoked key is ``revoked: false``)."""

    key_id: DbId


@register("grant.set")
class GrantSet(OpPayload):
    """Set (or with ``remove`` delete) ``user``'s grant on ``workspace``/``project``
    (names or ``*``)."""

    user: str = Field(min_length=1, max_length=64)
    workspace: str = "*"
    project: str = "*"
    can_read: bool = True
    can_write: bool = False
    remove: bool = False

    @field_validator("workspace", "project")
    @classmethod
    def _scope(cls, v: str) -> str:
        return v if v == "*" else validate_name(v, "scope")


@register("wiki.checkpoint")
class WikiCheckpoint(OpPayload):
    """Commit the wiki's pending (debounced) git checkpoint now; the reply comes after it.

    Sent by ``/admin/backup`` first, so the archived repository has no uncommitted files
    and a restore reproduces the git history exactly, and by ``/admin/checkpoint``
    (``aimem commit``) with a ``message`` for the commit's subject. Result ``{"commit":
    oid|null}`` (null: nothing to commit).
    """

    message: str | None = Field(None, min_length=1, max_length=200, pattern=r"^[^\r\n]+$")


@register("db.compact")
class DbCompact(OpPayload):
    """Rebuild the text indexes (FTS5 and trigram tables) in a transaction, then VACUUM and
    checkpoint the WAL to zero after COMMIT (``aimem compact``). Result ``{fts_rebuilt,
    vacuum}``."""


@register("dead_letter.resolve")
class DeadLetterResolve(OpPayload):
    """Mark dead letters as replayed (``/admin/dead-letters/replay`` sends them again first).

    Result ``{"resolved": [ids]}``: the ids that were open; unknown or already replayed ids
    are left out.
    """

    ids: list[DbId] = Field(min_length=1, max_length=10_000)


@register("purge.lift")
class PurgeLift(OpPayload):
    """Lift purge tombstones so a purged id or name may be used again on purpose.

    ``session_id`` lifts that session's tombstones; without it the envelope's scope names
    the project (or, with ``workspace_only``, its workspace) whose tombstone is lifted. What
    was purged stays purged; only later events are stored again.
    """

    session_id: str | None = Field(default=None, min_length=1, max_length=256)
    workspace_only: bool = False


@register("purge.refused")
class PurgeRefused(OpPayload):
    """Count late events another service refused for a purged session (ingress's 410s).

    Only ids and counts travel: the refused text never leaves the service that refused it.
    """

    session_id: str = Field(min_length=1, max_length=256)
    op: str = Field(default="observation.append", max_length=64)
    count: int = Field(default=1, ge=1, le=1_000_000)
