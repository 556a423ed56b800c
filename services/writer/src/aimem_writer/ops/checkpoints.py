"""Checkpoint op handlers.

``page.restore`` (a page back from a git checkpoint or a retained version, written as a new
latest version) and ``wiki.checkpoint`` (an immediate commit).
"""

from __future__ import annotations

import json

from aimem_common.commands import Envelope
from aimem_common.commands.admin import DbCompact, PageRestore, WikiCheckpoint
from aimem_common.errors import AimemError, NotFoundError, UnprocessableError

from aimem_writer.page_store import PageInput
from aimem_writer.registry import handler
from aimem_writer.tx import Tx


def _git_blob_text(tx: Tx, rev: str, rel: str) -> tuple[str, str]:
    """Return ``(text, commit_id)`` of ``rel`` at checkpoint ``rev`` (read-only git access).

    Raises:
        AimemError: 500 ``git_error`` — unknown checkpoint, file absent there, or non-UTF-8.
    """
    import pygit2

    def fail(msg: str) -> AimemError:
        e = AimemError(msg, code="git_error", data={"rev": rev, "status": 500})
        e.status = 500
        return e

    try:
        repo = pygit2.Repository(str(tx.settings.wiki_dir))
        commit = repo.revparse_single(rev).peel(pygit2.Commit)
    except (pygit2.GitError, KeyError, ValueError, TypeError) as exc:
        raise fail(f"checkpoint {rev!r} not found: {exc}") from exc
    try:
        blob = commit.tree[rel]
    except KeyError as exc:
        raise fail(f"{rel.split('/', 2)[-1]!r} is not in checkpoint {str(commit.id)[:10]}") from exc
    if blob.type_str != "blob":
        raise fail(f"{rel!r} is not a file in checkpoint {str(commit.id)[:10]}")
    try:
        return blob.data.decode("utf-8"), str(commit.id)
    except UnicodeDecodeError as exc:
        raise fail(f"{rel!r} at {str(commit.id)[:10]} is not UTF-8") from exc


@handler("page.restore")
def page_restore(tx: Tx, env: Envelope, cmd: PageRestore) -> dict:
    scope = tx.scope()
    if cmd.page_id is not None:
        row = tx.conn.execute(
            "SELECT * FROM pages WHERE id = ? AND project_id = ?", (cmd.page_id, scope.project_id)).fetchone()
        if row is None:
            raise NotFoundError(f"page version {cmd.page_id} not found in {scope.workspace}/{scope.project}",
                                data={"page_id": cmd.page_id})
        if cmd.path is not None and cmd.path != row["path"]:
            raise UnprocessableError(f"page version {cmd.page_id} is {row['path']!r}, not {cmd.path!r}")
        fm = json.loads(row["frontmatter"] or "{}")
        page = PageInput(path=row["path"], body=row["body"], title=row["title"], frontmatter=fm)
        source = {"page_id": cmd.page_id}
    else:
        text, commit_id = _git_blob_text(tx, cmd.rev or "", f"{scope.workspace_id}/{scope.project_id}/{cmd.path}")
        try:
            page = PageInput(path=cmd.path or "", body=text)
            source = {"rev": commit_id}
            result = tx.pages.write(scope, page)
        except AimemError as exc:
            if exc.status >= 500 or exc.code == "purged":
                raise
            e = AimemError(f"checkpoint {commit_id[:10]} holds malformed markdown: {exc.message}",
                           code="git_error", data={"rev": commit_id, "status": 500})
            e.status = 500
            raise e from exc
        tx.audit("page.restore", page.path, {**source, "page_id": result["page_id"]}, scope=scope)
        return {**result, "restored_from": source}
    result = tx.pages.write(scope, page)
    tx.audit("page.restore", page.path, {**source, "page_id": result["page_id"]}, scope=scope)
    return {**result, "restored_from": source}


@handler("wiki.checkpoint")
def wiki_checkpoint(tx: Tx, env: Envelope, cmd: WikiCheckpoint) -> dict:
    """Ask for an immediate git checkpoint: the consumer flushes it after COMMIT and puts
    the commit id (or null when nothing was dirty) in ``commit`` before replying."""
    return {"commit": None, "message": cmd.message}


@handler("db.compact")
def db_compact(tx: Tx, env: Envelope, cmd: DbCompact) -> dict:
    """Rebuild the text indexes now; VACUUM + ``wal_checkpoint(TRUNCATE)`` run after COMMIT."""
    from aimem_writer.ops.projects import compact

    return compact(tx)
