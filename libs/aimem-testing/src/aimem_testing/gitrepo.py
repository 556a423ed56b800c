"""Real git repositories for tests and benchmarks (the ``git`` binary; never on a hot path)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def git(cwd: Path, *args: str) -> None:
    """Run ``git args`` in ``cwd`` (file:// submodules allowed, branch ``main``); raises on failure."""
    subprocess.run(["git", "-c", "protocol.file.allow=always", "-c", "init.defaultBranch=main", *args],
                   cwd=cwd, env={**os.environ, **GIT_ENV}, check=True, capture_output=True)


def make_repo(path: Path, origin: str | None = None) -> Path:
    """Create a repository at ``path`` with one empty commit (and ``origin`` when given)."""
    path.mkdir(parents=True)
    git(path, "init", "-q")
    if origin:
        git(path, "remote", "add", "origin", origin)
    git(path, "commit", "-q", "--allow-empty", "-m", "init")
    return path


def wait_for(fn: Callable[[], T], timeout_s: float = 60.0, what: str = "condition", poll_s: float = 0.1) -> T:
    """Poll ``fn`` until it returns something truthy (returned); AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out waiting for {what}")


async def wait_for_async(fn: Callable[[], T], timeout_s: float = 60.0, what: str = "condition",
                         poll_s: float = 0.1) -> T:
    """``wait_for`` inside an event loop: polls ``fn`` with ``asyncio.sleep`` between calls, so
    the loop's other tasks (services run in-process, bus consumers) keep running."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        await asyncio.sleep(poll_s)
    raise AssertionError(f"timed out waiting for {what}")
