"""Chaos fixtures: small filesystems (tmpfs mounts made and removed here), a paced hook
poster, and reads of what was stored.

Mounting needs root (CI runs as root); without it these tests are skipped with a reason.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest


class Tmpfs:
    """A tmpfs mounted at ``path`` with ``size`` (e.g. ``"2m"``); ``resize()`` gives space back."""

    def __init__(self, path: Path, size: str):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(self.path)], check=True)
        self.mounted = True

    def resize(self, size: str) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True)

    def fill(self, leave_bytes: int) -> None:
        """Write a filler file so that only about ``leave_bytes`` stay free."""
        size = max(0, self.free_bytes() - leave_bytes)
        with open(self.path / "filler", "wb") as f:
            f.write(b"\0" * size)

    def unfill(self) -> None:
        (self.path / "filler").unlink(missing_ok=True)

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def umount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=False)
            self.mounted = False


@pytest.fixture
def tmpfs():
    """Factory ``tmpfs(path, size)``; every mount is removed after the test (lazily if busy)."""
    if os.geteuid() != 0:
        pytest.skip("chaos tests mount tmpfs filesystems: run as root (CI does)")
    mounts: list[Tmpfs] = []

    def make(path: Path, size: str) -> Tmpfs:
        m = Tmpfs(path, size)
        mounts.append(m)
        return m

    try:
        yield make
    finally:
        for m in reversed(mounts):
            m.umount()


PROMPT = {"session_id": "chaos-1", "hook_event_name": "UserPromptSubmit", "cwd": "/home/dev/chaos-proj"}


@dataclass
class PostLog:
    """What a paced poster saw: accepted cmd_ids and every refusal (status, Retry-After, t)."""

    accepted: dict[int, str] = field(default_factory=dict)  # event index -> cmd_id
    refused: list[tuple[int, str | None, float]] = field(default_factory=list)
    errors: int = 0

    def statuses(self) -> set[int]:
        return {s for s, _, _ in self.refused}


async def post_paced(ingress_url: str, *, rate: float, seconds: float, log: PostLog, filler: int = 2000,
                     start: int = 0, token: str | None = None, stop: asyncio.Event | None = None) -> None:
    """POST ``rate`` hooks per second for ``seconds`` (each a unique prompt), recording outcomes."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    t0 = time.monotonic()
    async with httpx.AsyncClient(base_url=ingress_url, timeout=5.0, headers=headers) as client:
        tasks = []

        async def one(i: int) -> None:
            body = {**PROMPT, "prompt": f"chaos event {i} " + "x" * filler}
            try:
                r = await client.post("/hook?agent=claude-code", json=body)
            except httpx.HTTPError:
                log.errors += 1
                return
            if r.status_code == 202:
                log.accepted[i] = r.json()["accepted"]
            else:
                log.refused.append((r.status_code, r.headers.get("retry-after"), time.monotonic() - t0))

        i = start
        while time.monotonic() - t0 < seconds and not (stop and stop.is_set()):
            tasks.append(asyncio.create_task(one(i)))
            i += 1
            await asyncio.sleep(max(0.0, t0 + (i - start) / rate - time.monotonic()))
        await asyncio.gather(*tasks)


def stored_cmd_ids(db_path: Path) -> list[str]:
    """Every observation's cmd_id in the DB (read-only), duplicates kept."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10)
    try:
        return [r[0] for r in conn.execute("SELECT cmd_id FROM observations WHERE session_id = 'chaos-1'")]
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def wait_stored(db_path: Path, expected: set[str], timeout_s: float) -> tuple[list[str], float]:
    """Poll until every ``expected`` cmd_id is stored; return (stored ids, seconds waited)."""
    t0 = time.monotonic()
    ids: list[str] = []
    while time.monotonic() - t0 < timeout_s:
        ids = stored_cmd_ids(db_path)
        if expected <= set(ids):
            break
        time.sleep(0.25)
    return ids, time.monotonic() - t0


def child_pid(parent: int, needle: str) -> int:
    """Return the pid of ``parent``'s child whose command line contains ``needle``."""
    for task in Path(f"/proc/{parent}/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if needle in cmd:
                return int(pid)
    raise LookupError(f"no child of {parent} runs {needle}")


def health(url: str) -> tuple[int, dict]:
    try:
        r = httpx.get(url + "/healthz", timeout=2.0)
        return r.status_code, r.json()
    except (httpx.HTTPError, ValueError):
        return 0, {}
