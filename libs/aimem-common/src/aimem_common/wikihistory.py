"""The wiki's git checkpoints, read with pygit2 without writing anything, newest first.

No index, no lock, no ref update: the whole history, or the commits that changed one file (a
``CheckpointLog`` kept by the process, extended as the writer's checkpoints move HEAD). Used by
query's ``/admin/checkpoints`` and the web, and by mcp-gateway's memory_restore_page.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

MAX_CHECKPOINTS = 1000
MAX_WALK = 5000  # newest commits a file's checkpoint list covers (the CheckpointLog window)


def list_checkpoints(wiki_dir: Path, *, limit: int, prefix: str | None) -> list[dict[str, Any]]:
    """Return up to ``limit`` commits of the wiki repo, newest first (read-only).

    With ``prefix`` (``<ws_id>/<pj_id>/<path>``), only commits among the newest ``MAX_WALK``
    that changed that file (including the one that deleted it); these come from the
    process's ``CheckpointLog`` of ``wiki_dir``, so a request does not walk the history.
    Blocking; run off the event loop.
    """
    repo = _open(wiki_dir)
    if repo is None:
        return []
    if prefix is not None:
        return _log_of(wiki_dir).changes(repo, prefix, limit)
    out: list[dict[str, Any]] = []
    for commit in repo.walk(repo.head.target, _newest_first()):
        out.append(_entry(commit))
        if len(out) >= limit:
            break
    return out


def _newest_first():
    """Newest first, a commit always before its parents (the writer can commit twice a second)."""
    import pygit2

    return pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME


def _open(wiki_dir: Path):
    """The wiki's ``pygit2.Repository``, or None when it has no commit yet."""
    import pygit2

    if not (wiki_dir / ".git").exists():
        return None
    try:
        repo = pygit2.Repository(str(wiki_dir))
    except pygit2.GitError:
        return None
    return None if repo.head_is_unborn else repo


def _entry(commit) -> dict[str, Any]:
    return {
        "oid": str(commit.id),
        "short": str(commit.id)[:10],
        "message": commit.message.strip(),
        "time": datetime.fromtimestamp(commit.commit_time, UTC).isoformat(),
        "author": commit.author.name,
    }


class CheckpointLog:
    """Which of the newest ``MAX_WALK`` wiki commits changed each file, kept between requests.

    Built by one walk (a tree diff per commit against its first parent, ~70 µs a commit)
    and extended by walking only the commits added since the HEAD it last saw; a HEAD it
    cannot reach that way (history rewritten) rebuilds it. Thread-safe.
    """

    def __init__(self, max_walk: int = MAX_WALK):
        self.max_walk = max_walk
        self._lock = threading.Lock()
        self._head: str | None = None
        self._seq: dict[str, int] = {}  # commit id -> position (oldest indexed = 0)
        self._entries: list[dict[str, Any]] = []  # oldest first
        self._by_path: dict[str, list[int]] = {}  # file path -> positions, oldest first
        self.walked = 0  # commits diffed so far (for tests and benchmarks)

    def changes(self, repo, path: str, limit: int) -> list[dict[str, Any]]:
        """Return up to ``limit`` commits that changed ``path``, newest first."""
        with self._lock:
            self._refresh(repo)
            first = len(self._entries) - self.max_walk  # only the newest max_walk commits count
            out = []
            for pos in reversed(self._by_path.get(path, [])):
                if pos < first or len(out) >= limit:
                    break
                out.append(dict(self._entries[pos]))
            return out

    def _refresh(self, repo) -> None:
        head = str(repo.head.target)
        if head == self._head:
            return
        new, met = self._walk(repo)
        if met != self._head or len(self._entries) + len(new) > 2 * self.max_walk:
            # The first build, a history that moved (rewritten, or HEAD back on an older
            # commit), or time to drop the commits past the window: start again.
            self._reset()
            if met is not None:
                new, _ = self._walk(repo)
        for commit in reversed(new):  # oldest first
            self._add(repo, commit)
        self._head = head

    def _walk(self, repo) -> tuple[list, str | None]:
        """Commits newer than the indexed ones, newest first, and the indexed one met (or None)."""
        new = []
        for commit in repo.walk(repo.head.target, _newest_first()):
            cid = str(commit.id)
            if cid in self._seq:
                return new, cid
            new.append(commit)
            if len(new) >= self.max_walk:
                break
        return new, None

    def _reset(self) -> None:
        self._seq, self._entries, self._by_path = {}, [], {}

    def _add(self, repo, commit) -> None:
        parents = commit.parents
        diff = repo.diff(parents[0].tree, commit.tree) if parents else commit.tree.diff_to_tree(swap=True)
        pos = len(self._entries)
        self._entries.append(_entry(commit))
        self._seq[str(commit.id)] = pos
        for delta in diff.deltas:
            for p in {delta.old_file.path, delta.new_file.path}:
                self._by_path.setdefault(p, []).append(pos)
        self.walked += 1


_LOGS: dict[Path, CheckpointLog] = {}
_LOGS_LOCK = threading.Lock()


def _log_of(wiki_dir: Path) -> CheckpointLog:
    """The process's ``CheckpointLog`` of ``wiki_dir`` (one per wiki; a few at most)."""
    key = wiki_dir.resolve()
    with _LOGS_LOCK:
        log = _LOGS.pop(key, None) or CheckpointLog()
        _LOGS[key] = log  # most recently used last
        while len(_LOGS) > 4:
            _LOGS.pop(next(iter(_LOGS)))
        return log
