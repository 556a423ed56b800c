"""The git-versioned wiki on disk: staged file effects, atomic writes, debounced checkpoints.

Layout (DESIGN.md "Data directory"): one pygit2 repository at ``<data_dir>/wiki``; files are
keyed ``<workspace_id>/<project_id>/<path>`` (UUIDs, so a rename moves nothing), each scope
directory carries a ``_meta.md`` manifest, and the hook ledgers ``log-YYYY-MM.md`` sit in
the project directory, appended but never committed (``.gitignore`` + never staged).

Flow (writer thread only):

1. A handler stages effects on its ``WikiStage`` (``tx.wiki``) inside the SQLite
   transaction; a command that fails discards its stage with its SAVEPOINT.
2. The batch stores the merged stage in ``wiki_outbox`` in the same transaction, commits,
   then ``WikiRepo.flush`` applies it: atomic writes (tmp + fsync + rename), unlinks, ledger
   appends. A crash between commit and flush is repaired at start by ``replay_outbox``.
3. ``WikiRepo.checkpoint`` (debounced by the consumer) commits every dirty path in one git
   commit whose message names the ops. A delete of a page with uncommitted changes first
   checkpoints, so the last text is always in history.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from aimem_common.errors import BadRequestError, UnavailableError
from aimem_common.models import Scope
from aimem_common.wikifmt import is_ledger_name

log = logging.getLogger("aimem.writer.wiki")

GITIGNORE = """\
# Hook event ledgers are append-only and can grow large: kept out of git.
/*/*/log.md
/*/*/log-[0-9][0-9][0-9][0-9]-[0-9][0-9].md
.aimem-tmp-*
"""
TMP_PREFIX = ".aimem-tmp-"
GC_EVERY_CHECKPOINTS = 200
SIGNATURE = ("aimem-writer", "writer@aimem.local")


@dataclass(slots=True)
class FileOp:
    """One staged file effect: ``write`` (whole text), ``delete``, ``append`` (ledger),
    ``scrub`` (``text`` = a session id whose entries leave the ledgers of dir ``rel``) or
    ``purge`` (a purge's removal, best effort: ``text`` = the purging command's ``cmd_id``) or
    ``delete_raw`` (``rel`` under ``<data_dir>/raw``: workstream segments)."""

    rel: str
    action: str
    text: str | None = None


@dataclass(slots=True)
class WikiStage:
    """File effects staged by one command (or merged for a batch); nothing touches disk.

    ``rel`` keys are ``<workspace_id>/<project_id>/<path>`` or ``<workspace_id>/_meta.md``.
    """

    root: Path
    ops: list[FileOp] = field(default_factory=list)
    op_names: Counter = field(default_factory=Counter)

    @staticmethod
    def rel(scope: Scope, path: str) -> str:
        """Return the repository-relative key of ``path`` in ``scope``."""
        return f"{scope.workspace_id}/{scope.project_id}/{path}"

    def check(self, rel: str) -> None:
        """Refuse a target whose existing parent chain leaves the wiki through a symlink.

        Raises:
            BadRequestError: code ``invalid_path`` (symlink in the path, or not a regular file).
        """
        check_inside(self.root, rel)

    def write(self, scope: Scope, path: str, text: str) -> str:
        """Stage the whole new text of page ``path``; returns its rel key."""
        rel = self.rel(scope, path)
        self.check(rel)
        self.ops.append(FileOp(rel, "write", text))
        return rel

    def write_rel(self, rel: str, text: str) -> None:
        """Stage a write by rel key (scope manifests)."""
        self.check(rel)
        self.ops.append(FileOp(rel, "write", text))

    def delete(self, scope: Scope, path: str) -> str:
        """Stage the removal of page ``path`` (a missing file is fine)."""
        rel = self.rel(scope, path)
        self.check(rel)
        self.ops.append(FileOp(rel, "delete"))
        return rel

    def delete_rel(self, rel: str) -> None:
        """Stage the removal of a file or a whole directory tree by rel key (purges)."""
        self.check(rel)
        self.ops.append(FileOp(rel, "delete"))

    def purge_rel(self, rel: str, cmd_id: str) -> None:
        """Stage a purge's removal of a file or a directory tree by rel key.

        Unlike ``delete``, a failure to remove (permissions, a read-only mount) does not hold
        the writer: the purged rows are gone, the file stays, and the purge's reply and event
        say so (``partial_failure``, ``files_failed``), see ``WikiRepo.purge_failures``.
        """
        self.check(rel)
        self.ops.append(FileOp(rel, "purge", cmd_id))

    def delete_raw(self, rel: str) -> None:
        """Stage the removal of a file or directory tree under ``<data_dir>/raw`` (``rel``
        relative to it, e.g. ``workstreams/<id>``): a purge of the ledger's segments, applied
        after the commit like every other effect (never versioned in git)."""
        check_inside(self.root.parent / "raw", rel)
        self.ops.append(FileOp(rel, "delete_raw"))

    def append_rel(self, rel: str, text: str) -> None:
        """Stage appending ``text`` to the file ``rel`` (versioned in git, unlike ledgers)."""
        self.check(rel)
        self.ops.append(FileOp(rel, "append", text))

    def append_ledger(self, scope: Scope, month: str, text: str) -> None:
        """Stage appending ``text`` to ``log-<month>.md`` (``month`` = ``YYYY-MM``)."""
        self.ops.append(FileOp(self.rel(scope, f"log-{month}.md"), "append", text))

    def scrub_ledgers(self, workspace_id: str, project_id: str, session_id: str) -> None:
        """Stage removing every entry of ``session_id`` from the project's ``log-*.md`` ledgers
        (a purge: the ledger keeps excerpts of each event)."""
        rel = f"{workspace_id}/{project_id}"
        self.check(rel)
        self.ops.append(FileOp(rel, "scrub", session_id))

    def merge(self, other: "WikiStage") -> None:
        """Append ``other``'s effects (a committed command's) to this batch stage."""
        self.ops.extend(other.ops)
        self.op_names.update(other.op_names)

    def coalesced(self) -> list[FileOp]:
        """Return the effects with ledger appends merged per file (order otherwise kept)."""
        out: list[FileOp] = []
        appends: dict[str, tuple[FileOp, list[str]]] = {}  # rel → (merged op, its texts)
        for op in self.ops:
            if op.action == "append":
                if op.rel in appends:
                    appends[op.rel][1].append(op.text or "")
                    continue
                op = FileOp(op.rel, "append", op.text)
                appends[op.rel] = (op, [op.text or ""])
            out.append(op)
        for op, texts in appends.values():  # joined once: a batch appends thousands of entries
            if len(texts) > 1:
                op.text = "".join(texts)
        return out


def without_session(ledger: str, session_id: str) -> str:
    """Return ``ledger`` without the entries (``## [at] kind · agent · session <id>`` + text) of
    ``session_id``; everything else byte for byte."""
    tail = f" · session {session_id}"
    out, keep = [], True
    for line in ledger.splitlines(keepends=True):
        if line.startswith("## ["):
            keep = line.rstrip("\n") != "" and not line.rstrip("\n").endswith(tail)
        if keep:
            out.append(line)
    return "".join(out)


def check_inside(root: Path, rel: str) -> None:
    """Raise ``invalid_path`` unless every existing component of ``root/rel`` is a real dir/file."""
    cur = root
    parts = rel.split("/")
    for i, part in enumerate(parts):
        if part in ("", ".", "..") or "\x00" in part:
            raise BadRequestError(f"invalid wiki path {rel!r}", code="invalid_path")
        cur = cur / part
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            return
        except NotADirectoryError as exc:
            raise BadRequestError(f"invalid page path {rel!r}: a parent is a file", code="invalid_path") from exc
        import stat as _stat

        if _stat.S_ISLNK(st.st_mode):
            raise BadRequestError(
                f"invalid page path {rel!r}: {'/'.join(parts[: i + 1])} is a symlink", code="invalid_path"
            )
        if i < len(parts) - 1 and not _stat.S_ISDIR(st.st_mode):
            raise BadRequestError(f"invalid page path {rel!r}: a parent is not a directory", code="invalid_path")
        if i == len(parts) - 1 and not (_stat.S_ISREG(st.st_mode) or _stat.S_ISDIR(st.st_mode)):
            raise BadRequestError(f"invalid page path {rel!r}: not a regular file", code="invalid_path")


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via tmp + fsync + rename (never a torn file); no symlinks."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{TMP_PREFIX}{path.name}.{os.getpid()}.{time.monotonic_ns()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8", "surrogatepass"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename in it survives power loss (best effort)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class WikiRepo:
    """The wiki directory and its git repository. Use from the writer thread only.

    Args:
        root: ``<data_dir>/wiki`` (created, with ``git init`` and ``.gitignore``, if missing).
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        if (self.root / ".git").exists():
            self.repo = pygit2.Repository(str(self.root))
        else:
            self.repo = pygit2.init_repository(str(self.root), bare=False, initial_head="main")
        gi = self.root / ".gitignore"
        if not gi.exists() or gi.read_text() != GITIGNORE:
            atomic_write(gi, GITIGNORE)
        self.dirty: set[str] = set()
        # The last flush's purge removals that failed: [{cmd_id, rel, error}] (best effort).
        self.purge_failures: list[dict[str, str]] = []
        self.pending_ops: Counter = Counter()
        self.checkpoints = 0
        self._first_commit_needed = self.repo.head_is_unborn
        self._head: str | None = None if self.repo.head_is_unborn else str(self.repo.head.target)
        # A crash between a flush and its debounced checkpoint leaves files on disk that git
        # has not seen; the first checkpoint after start picks them up.
        for path, flags in self.repo.status().items():
            if not flags & pygit2.GIT_STATUS_IGNORED and not path.startswith(".git/"):
                self.dirty.add(path)
        if self.dirty:
            self.pending_ops["recovery"] += len(self.dirty)

    # -- applying effects --------------------------------------------------------
    def flush(self, ops: list[FileOp]) -> int:
        """Apply staged effects to disk in order; returns how many files changed.

        A delete of a path with uncommitted changes checkpoints first ("git checkpoint
        first", so the deleted text is in history). Ledger appends are not marked dirty.
        """
        dirs: set[Path] = set()
        n = 0
        self.purge_failures = []
        for op in ops:
            if op.action == "delete_raw":
                n += self._delete_raw(op.rel, dirs)
                continue
            abs_path = self.root / op.rel
            try:
                check_inside(self.root, op.rel)  # re-checked: a symlink may appear after staging
            except BadRequestError as exc:
                log.error("wiki effect on %s skipped: %s", op.rel, exc.message)
                continue
            name = op.rel.rsplit("/", 1)[-1]
            if op.action == "write":
                atomic_write(abs_path, op.text or "")
                dirs.add(abs_path.parent)
                self.dirty.add(op.rel)
            elif op.action == "delete":
                if op.rel in self.dirty:
                    self.checkpoint(reason="pre-delete checkpoint")
                if abs_path.is_dir():
                    import shutil

                    shutil.rmtree(abs_path)
                    self.dirty.add(op.rel + "/")
                else:
                    try:
                        abs_path.unlink()
                    except FileNotFoundError:
                        pass
                    self.dirty.add(op.rel)
                dirs.add(abs_path.parent)
            elif op.action == "purge":
                if op.rel in self.dirty:
                    self.checkpoint(reason="pre-delete checkpoint")
                was_dir = abs_path.is_dir() and not abs_path.is_symlink()
                try:
                    _remove(abs_path)
                except OSError as exc:
                    self.purge_failures.append({"cmd_id": op.text or "", "rel": op.rel,
                                                "error": exc.strerror or type(exc).__name__})
                    log.error("purge left %s on disk: %s", op.rel, exc)
                self.dirty.add(op.rel + "/" if was_dir else op.rel)
                dirs.add(abs_path.parent)
            elif op.action == "scrub":
                for ledger in sorted(abs_path.glob("log-*.md")) if abs_path.is_dir() else []:
                    if is_ledger_name(ledger.name):
                        text = ledger.read_text("utf-8", "surrogatepass")
                        kept = without_session(text, op.text or "")
                        if kept != text:
                            atomic_write(ledger, kept)
                            dirs.add(ledger.parent)
            elif op.action == "append":
                abs_path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(abs_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
                try:
                    os.write(fd, (op.text or "").encode("utf-8", "surrogatepass"))
                finally:
                    os.close(fd)
                if not is_ledger_name(name):
                    self.dirty.add(op.rel)
            n += 1
        for d in dirs:
            fsync_dir(d)
        return n

    def _delete_raw(self, rel: str, dirs: set[Path]) -> int:
        raw = self.root.parent / "raw"
        try:
            check_inside(raw, rel)  # re-checked: a symlink may appear after staging
        except BadRequestError as exc:
            log.error("raw effect on %s skipped: %s", rel, exc.message)
            return 0
        path = raw / rel
        if path.is_dir():
            shutil.rmtree(path)
        else:
            try:
                path.unlink()
            except FileNotFoundError:
                return 0
        dirs.add(path.parent)
        return 1

    def note_ops(self, names: Counter) -> None:
        """Remember op names for the next checkpoint message."""
        self.pending_ops.update(names)

    def mark_dirty(self, rel: str) -> None:
        """Mark a path changed outside ``flush`` (hand edits picked up by the watcher)."""
        self.dirty.add(rel)

    # -- git ------------------------------------------------------------------
    def checkpoint(self, reason: str | None = None) -> str | None:
        """Commit every dirty path in one commit; returns the commit id hex or None.

        The message names the ops since the last checkpoint (``page.write×3, session.end×1``).
        Ledgers are never staged; one that an older commit tracked is dropped from the index.
        """
        if not self.dirty and not self._first_commit_needed:
            return None
        index = self.repo.index
        index.read()
        for rel in sorted(self.dirty):
            if rel.endswith("/"):
                prefix = rel
                for entry in [e.path for e in index if e.path.startswith(prefix)]:
                    index.remove(entry)
                continue
            name = rel.rsplit("/", 1)[-1]
            abs_path = self.root / rel
            if is_ledger_name(name) and rel.count("/") == 2:
                try:
                    index.remove(rel)
                except (KeyError, OSError, pygit2.GitError):
                    pass
                continue
            if abs_path.is_file() and not abs_path.is_symlink():
                index.add(rel)
            else:
                try:
                    index.remove(rel)
                except (KeyError, OSError, pygit2.GitError):
                    pass
        if self._first_commit_needed and (self.root / ".gitignore").exists():
            index.add(".gitignore")
        tree = index.write_tree()
        parents = [] if self.repo.head_is_unborn else [self.repo.head.target]
        if parents and self.repo[parents[0]].tree_id == tree:
            self.dirty.clear()
            self.pending_ops.clear()
            index.write()
            return None
        index.write()
        ops = ", ".join(f"{op}×{n}" for op, n in sorted(self.pending_ops.items())) or "wiki sync"
        paths = sorted(self.dirty)
        summary = f"aimem: {reason + ': ' if reason else ''}{ops}"
        body = "\n".join(paths[:50]) + (f"\n… and {len(paths) - 50} more" if len(paths) > 50 else "")
        sig = pygit2.Signature(*SIGNATURE)
        oid = self.repo.create_commit("HEAD", sig, sig, f"{summary}\n\n{body}\n", tree, parents)
        self._head = str(oid)
        self.dirty.clear()
        self.pending_ops.clear()
        self._first_commit_needed = False
        self.checkpoints += 1
        if self.checkpoints % GC_EVERY_CHECKPOINTS == 0:
            self.gc_auto()
        return str(oid)

    def gc_auto(self) -> None:
        """Run ``git gc --auto`` in the background (pygit2 has no gc); never raises."""
        try:
            subprocess.Popen(
                ["git", "-C", str(self.root), "gc", "--auto", "--quiet"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )
        except OSError as exc:
            log.warning("git gc --auto failed to start: %s", exc)

    def head(self) -> str | None:
        """Return HEAD's commit id hex, or None while the repository has no commit.

        A cached string set by ``checkpoint``: safe to read from another thread (the
        replicator on the event loop) while the writer thread commits.
        """
        return self._head

    def healthy(self) -> bool:
        """Return True when the repository opens and HEAD resolves (or is unborn)."""
        try:
            repo = pygit2.Repository(str(self.root))
            return repo.head_is_unborn or repo.head.target is not None
        except (pygit2.GitError, KeyError, OSError):
            return False

    def head_tree_paths(self) -> set[str]:
        """Return every file path in HEAD's tree (tests, consistency checks)."""
        if self.repo.head_is_unborn:
            return set()
        out: set[str] = set()

        def walk(tree: pygit2.Tree, prefix: str) -> None:
            for e in tree:
                if e.type_str == "tree":
                    walk(self.repo[e.id], prefix + e.name + "/")
                else:
                    out.add(prefix + e.name)

        walk(self.repo.head.peel(pygit2.Tree), "")
        return out


# -- the durable outbox between SQLite commit and disk ---------------------------------------
def store_outbox(conn: sqlite3.Connection, ops: list[FileOp], now: str) -> None:
    """Insert the batch's file effects into ``wiki_outbox`` (inside the batch transaction)."""
    conn.executemany(
        "INSERT INTO wiki_outbox(rel, action, text, created_at) VALUES (?, ?, ?, ?)",
        [(op.rel, op.action, op.text, now) for op in ops],
    )


def clear_outbox(conn: sqlite3.Connection) -> None:
    """Delete flushed effects (autocommit, after ``WikiRepo.flush``)."""
    conn.execute("DELETE FROM wiki_outbox")


def _remove(path: Path) -> None:
    """Remove a file or a directory tree; a missing one is fine."""
    if path.is_dir() and not path.is_symlink():
        import shutil

        shutil.rmtree(path)
    else:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def replay_outbox(conn: sqlite3.Connection, wiki: WikiRepo) -> int:
    """Re-apply effects committed to SQLite but maybe not to disk (crash after COMMIT).

    Writes and deletes are idempotent; a ledger append may repeat its lines once.
    Returns the number of effects replayed.

    Raises:
        UnavailableError: the wiki cannot be written.
    """
    rows = conn.execute("SELECT rel, action, text FROM wiki_outbox ORDER BY id").fetchall()
    if not rows:
        return 0
    try:
        wiki.flush([FileOp(r[0], r[1], r[2]) for r in rows])
    except OSError as exc:
        raise UnavailableError(f"cannot replay wiki outbox: {exc}", code="wiki_unavailable") from exc
    wiki.note_ops(Counter({"recovery": len(rows)}))
    clear_outbox(conn)
    log.warning("replayed %d wiki effects committed before a crash", len(rows))
    return len(rows)
