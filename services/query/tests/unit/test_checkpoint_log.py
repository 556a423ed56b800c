"""The per-file checkpoint list (``admin.history``) kept between requests against a real git
repository: it must equal a walk that compares the file's blob in every commit with its
parent's, after new commits, after a rewritten history and past its window."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pygit2
import pytest

from aimem_query.admin import history
from aimem_query.admin.history import CheckpointLog, list_checkpoints

PREFIX = "ws1/pj1"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def commit(repo: Path, changes: dict[str, str | None], msg: str) -> None:
    """One commit writing (or, for None, deleting) the given files under ``PREFIX``."""
    for rel, text in changes.items():
        f = repo / PREFIX / rel
        if text is None:
            git(repo, "rm", "-q", f"{PREFIX}/{rel}")
        else:
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text)
            git(repo, "add", f"{PREFIX}/{rel}")
    git(repo, "commit", "-q", "-m", msg)


def naive(repo_dir: Path, path: str, limit: int, max_walk: int) -> list[str]:
    """Messages of the commits (newest first) whose blob of ``path`` differs from the parent's."""
    repo = pygit2.Repository(str(repo_dir))

    def blob(tree):
        try:
            return tree[path].id
        except KeyError:
            return None

    out = []
    for i, c in enumerate(repo.walk(repo.head.target, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME)):
        if i >= max_walk or len(out) >= limit:
            break
        if blob(c.tree) != (blob(c.parents[0].tree) if c.parents else None):
            out.append(c.message.strip())
    return out


@pytest.fixture
def wiki(tmp_path: Path) -> Path:
    repo = tmp_path / "wiki"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "aimem")
    git(repo, "config", "user.email", "aimem@localhost")
    return repo


def listed(log: CheckpointLog, wiki: Path, rel: str, limit: int = 50) -> list[str]:
    return [e["message"] for e in log.changes(pygit2.Repository(str(wiki)), f"{PREFIX}/{rel}", limit)]


def test_matches_a_full_walk_and_follows_new_commits(wiki: Path) -> None:
    files = ["a.md", "b.md", "dir/c.md"]
    for i in range(12):
        commit(wiki, {files[i % 3]: f"v{i}", **({"b.md": f"also {i}"} if i % 4 == 0 else {})}, f"c{i}")
    log = CheckpointLog(max_walk=100)
    for rel in files:
        assert listed(log, wiki, rel) == naive(wiki, f"{PREFIX}/{rel}", 50, 100)
    assert listed(log, wiki, "a.md")[:2] == ["c9", "c6"]
    assert log.walked == 12
    # New commits (a delete among them) are picked up, walking only them.
    commit(wiki, {"a.md": None}, "delete a")
    commit(wiki, {"dir/c.md": "new"}, "c again")
    assert listed(log, wiki, "a.md", limit=2) == ["delete a", "c9"]
    assert listed(log, wiki, "dir/c.md") == naive(wiki, f"{PREFIX}/dir/c.md", 50, 100)
    assert log.walked == 14
    assert listed(log, wiki, "never.md") == []


def test_a_rewritten_history_is_walked_again(wiki: Path) -> None:
    for i in range(6):
        commit(wiki, {"a.md": f"v{i}"}, f"c{i}")
    log = CheckpointLog(max_walk=100)
    assert listed(log, wiki, "a.md")[0] == "c5"
    git(wiki, "reset", "-q", "--hard", "HEAD~3")  # HEAD back on a commit the log has seen
    assert listed(log, wiki, "a.md") == ["c2", "c1", "c0"]
    commit(wiki, {"a.md": "other"}, "c3'")  # and a new branch of history from there
    assert listed(log, wiki, "a.md") == ["c3'", "c2", "c1", "c0"]


def test_only_the_newest_commits_of_the_window_count(wiki: Path) -> None:
    for i in range(10):
        commit(wiki, {"a.md" if i < 3 else "b.md": f"v{i}"}, f"c{i}")
    log = CheckpointLog(max_walk=8)
    assert listed(log, wiki, "a.md") == naive(wiki, f"{PREFIX}/a.md", 50, 8) == ["c2"]
    for i in range(10, 20):  # past 2 windows: the log drops what it no longer needs
        commit(wiki, {"b.md": f"v{i}"}, f"c{i}")
        assert listed(log, wiki, "a.md") == naive(wiki, f"{PREFIX}/a.md", 50, 8)
        assert listed(log, wiki, "b.md") == naive(wiki, f"{PREFIX}/b.md", 50, 8)
    assert len(log._entries) <= 16


def test_list_checkpoints_uses_one_log_per_wiki(wiki: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert list_checkpoints(wiki, limit=5, prefix=f"{PREFIX}/a.md") == []  # no commit yet
    for i in range(4):
        commit(wiki, {"a.md": f"v{i}"}, f"c{i}")
    first = list_checkpoints(wiki, limit=2, prefix=f"{PREFIX}/a.md")
    assert [e["message"] for e in first] == ["c3", "c2"]
    assert first[0]["oid"] == git(wiki, "rev-parse", "HEAD").strip()
    log = history._log_of(wiki)
    walked = log.walked
    list_checkpoints(wiki, limit=2, prefix=f"{PREFIX}/a.md")
    assert log.walked == walked  # the same HEAD: nothing walked again
    assert [e["message"] for e in list_checkpoints(wiki, limit=10, prefix=None)] == ["c3", "c2", "c1", "c0"]
