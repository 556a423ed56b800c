"""Off-node replication, writer side: push the wiki to its git remote, watch both lags.

``Replicator.run()`` (an event-loop task of the writer) every ``POLL_S``:

* pushes ``HEAD`` to ``replication.git_remote`` (libgit2, so no git binary in the image:
  a bare repository path, ``file://``, ssh with the agent's key, https with
  ``user:token@`` in the URL) when the last checkpoint moved it; a failed push is retried with backoff up to ``git_push_retry_max_s`` and the
  wiki's lag keeps growing meanwhile;
* every ``lag_poll_s`` asks Litestream's control socket when it last synced the DB;
* exports ``aimem_replication_lag_seconds{target="db"|"wiki"}`` and writes
  ``db/replication.json`` for ``/admin/status``.

The push never runs on the writer thread: commits go on while a slow remote answers.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pygit2

from aimem_common.config import Settings
from aimem_common.replication import litestream_last_sync, write_status

from aimem_writer.metrics import WriterMetrics

log = logging.getLogger("aimem.writer.replicate")

POLL_S = 0.5
PUSH_TIMEOUT_S = 120.0


class Replicator:
    """Pushes the wiki and measures replication lag until cancelled.

    Args:
        settings: ``replication`` section and the data dir.
        head: callable returning the wiki's HEAD commit id (``WikiRepo.head``: a cached
            string, safe to read from the event loop).
        metrics: the writer's metrics (``replication_lag``, ``wiki_pushes``).
    """

    def __init__(self, settings: Settings, head, metrics: WriterMetrics):
        self.settings = settings
        self.r = settings.replication
        self.head = head
        self.lag = metrics.replication_lag
        self.pushes = metrics.wiki_pushes
        self.pushed: str | None = None
        self.behind_since: float | None = None  # first moment HEAD differed from the remote
        self.push_error: str | None = None
        self.db_last_sync: float | None = None
        self.started = time.time()
        self._next_push = 0.0
        self._backoff = 1.0
        self._next_poll = 0.0

    async def run(self) -> None:
        """Loop until cancelled; never raises on a remote or Litestream failure."""
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - replication must not take the writer down
                log.exception("replication tick failed")
            await asyncio.sleep(POLL_S)

    async def tick(self) -> None:
        """One round: push if HEAD moved (and the backoff allows), refresh lags and status."""
        now = time.time()
        head = self.head()
        if self.r.git_remote and head and head != self.pushed:
            if self.behind_since is None:
                self.behind_since = now
            if now >= self._next_push:
                await self.push(head)
        if self.r.s3_bucket and now >= self._next_poll:
            self._next_poll = now + self.r.lag_poll_s
            last = await litestream_last_sync(self.settings.litestream_socket)
            if last is not None:
                self.db_last_sync = last
        self.publish(time.time())

    async def push(self, head: str) -> bool:
        """Push commit ``head`` to the remote branch (a worker thread); returns True on success."""
        try:
            await asyncio.wait_for(asyncio.to_thread(push_commit, self.settings.wiki_dir, self.r.git_remote,
                                                     head, self.r.git_branch), PUSH_TIMEOUT_S)
        except (pygit2.GitError, ValueError, OSError, asyncio.TimeoutError) as exc:
            self.push_error = (str(exc) or type(exc).__name__)[-300:]
            self._next_push = time.time() + self._backoff
            self._backoff = min(self._backoff * 2, self.r.git_push_retry_max_s)
            self.pushes.labels("error").inc()
            log.warning("wiki push to %s failed (retry in %.0f s): %s", _redact_url(self.r.git_remote),
                        self._backoff, self.push_error)
            return False
        self.pushed, self.push_error, self._backoff = head, None, 1.0
        self.behind_since = None if self.head() == head else time.time()
        self.pushes.labels("ok").inc()
        return True

    def publish(self, now: float) -> None:
        """Set the lag gauges and write ``db/replication.json``."""
        db_since = self.db_last_sync if self.db_last_sync is not None else self.started
        wiki_lag = 0.0 if self.behind_since is None else now - self.behind_since
        if self.r.s3_bucket:
            self.lag.labels("db").set(max(0.0, now - db_since))
        if self.r.git_remote:
            self.lag.labels("wiki").set(wiki_lag)
        write_status(self.settings, {
            "updated_at": now,
            "db": {"enabled": bool(self.r.s3_bucket), "bucket": self.r.s3_bucket, "path": self.r.s3_path,
                   "last_sync_at": self.db_last_sync, "behind_since": db_since if self.r.s3_bucket else None},
            "wiki": {"enabled": bool(self.r.git_remote), "remote": _redact_url(self.r.git_remote),
                     "head": self.head(), "pushed": self.pushed, "behind_since": self.behind_since,
                     "error": self.push_error},
        })

    async def flush(self, timeout_s: float = 10.0) -> None:
        """Push the final HEAD at shutdown (best effort, bounded)."""
        head = self.head()
        if self.r.git_remote and head and head != self.pushed:
            try:
                await asyncio.wait_for(self.push(head), timeout_s)
            except asyncio.TimeoutError:
                log.warning("final wiki push did not finish in %.0f s", timeout_s)


class RemoteCallbacks(pygit2.RemoteCallbacks):
    """libgit2 callbacks for the wiki remote: credentials and rejected ref updates.

    Credentials: the URL's ``user:password@`` part (https with a token), else the ssh agent.
    """

    def __init__(self, url: str):
        super().__init__()
        from urllib.parse import unquote, urlsplit

        parts = urlsplit(url)
        self._user = unquote(parts.username or "")
        self._password = unquote(parts.password) if parts.password else None
        self.rejected: list[str] = []

    def credentials(self, _url, username_from_url, allowed):
        if self._password is not None and allowed & pygit2.enums.CredentialType.USERPASS_PLAINTEXT:
            return pygit2.UserPass(self._user, self._password)
        return pygit2.KeypairFromAgent(username_from_url or "git")

    def push_update_reference(self, refname, message):
        if message:
            self.rejected.append(f"{refname}: {message}")


def push_commit(wiki_dir, url: str, commit: str, branch: str) -> None:
    """Push ``commit`` to ``refs/heads/<branch>`` of ``url`` (libgit2: no git binary needed).

    Opens its own ``Repository`` (never the writer thread's object).

    Raises:
        pygit2.GitError: unreachable remote, or the update was rejected (the remote moved on
            without this node: not a fast-forward).
    """
    repo = pygit2.Repository(str(wiki_dir))
    callbacks = RemoteCallbacks(url)
    repo.remotes.create_anonymous(url).push([f"{commit}:refs/heads/{branch}"], callbacks=callbacks)
    if callbacks.rejected:
        raise pygit2.GitError("push rejected: " + "; ".join(callbacks.rejected))


def _redact_url(url: str) -> str:
    """Drop a password from ``https://user:pass@host/...`` before it is shown anywhere."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return url
