"""The engine of ``aimem import``: transcripts → batches on ``POST /hook/import``.

``Importer.run(files)`` reads each ``(client, path)`` with its reader from
``aimem_cli.transcripts`` starting at the saved ``FileState``, resolves every session's
project through ``project_identity`` (``aimem_cli.identity``, exactly as the hook client:
marker, git top level and origin, capture rules), drops sessions whose repository says
``capture = false`` and events naming a file the marker excludes (both counted, never
sent), batches the events (≤ ``BATCH_EVENTS`` events and ``BATCH_BYTES`` per request, one
project identity — names, ``root``, ``origin``, ``named`` — per batch), and
after each file adds one historical session end per session that got new events. A
file's state is saved only after the server accepted everything read from it, so an
interrupted run resumes where the server stopped acknowledging, and the idempotency keys
make any overlap free. Streaming: memory holds one line and one batch, never a corpus.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterator

from aimem_cli.capture import capture_allowed
from aimem_cli.identity import Identity, resolve
from aimem_cli.transcripts import READERS
from aimem_cli.transcripts.base import Event, FileState, ReadStats
from aimem_cli.transcripts.gemini import project_hash

# Live first: ingress parses and validates a batch's body in one go on the event loop that
# also answers live hooks, so a batch is kept small enough (a few ms of that work) not to
# hold a hook up; well under ingress's 10 MiB body cap, it bounds the client's memory too.
BATCH_EVENTS = 200
BATCH_BYTES = 512 * 1024

Sender = Callable[[bytes], dict[str, Any]]  # one encoded batch body -> the JSON answer


def project_identity(cwd: str | None) -> Identity | None:
    """Resolve the project of a session's ``cwd`` exactly as the hook client does.

    ``aimem_cli.identity.resolve``: the nearest ``.aimem.toml`` marker (``workspace``,
    ``project``, ``capture``, ``exclude``), else the git top level (a linked worktree seen
    from its main repository, a submodule its own project) with its ``origin``, else the
    cwd's basename made name-safe. ``None`` when there is no cwd or no usable name. The
    path need not exist (a transcript copied from another machine): then only the
    basename counts, as for a live hook in a directory that is not a repository.
    """
    if not cwd:
        return None
    ident = resolve(cwd)
    return ident if ident.project else None


MAX_LOCATED = 5  # malformed lines named file:line in a run; the rest are counted
MAX_REJECTED = 5  # server rejections kept with their reason


def batch_head(client: str, query: dict[str, str]) -> dict[str, Any]:
    """The ``POST /hook/import`` batch fields (everything but ``events``) for ``client``'s
    events resolved to ``query`` (``Identity.as_query()``, the hook client's ``/hook`` query:
    ``project``, and ``workspace``, ``root``, ``origin``, ``repo_id``, ``named`` when known):
    an imported session carries the same identity keys as its live hooks, the repository id
    (``.git/aimem-id``) included, so it lands in, and follows, the same project."""
    return {"agent": client, "workspace": query.get("workspace") or "default", "project": query["project"],
            "root": query.get("root"), "origin": query.get("origin"), "named": query.get("named") == "1",
            "repo_id": query.get("repo_id")}


@dataclass(slots=True)
class ImportStats:
    """What one run did; ``sessions_skipped_capture`` sessions and ``events_excluded``
    events (a file the marker's ``exclude`` globs match) were never sent.

    Of the ``events`` sent, the server says (``POST /hook/import``, as the store stood when each
    batch arrived): ``new``, ``already`` there, ``captured_live`` (their session was captured by
    hooks: live capture wins), and ``rejected_events`` (could not be normalised). ``accepted``
    and ``duplicates`` count every acknowledged item, session ends included.
    """

    files: int = 0
    files_unchanged: int = 0
    sessions: int = 0
    lines: int = 0
    events: int = 0
    accepted: int = 0
    duplicates: int = 0
    new: int = 0
    already: int = 0
    captured_live: int = 0
    malformed_lines: int = 0
    malformed_at: list[str] = field(default_factory=list)  # "path:line" (or "path"), the first MAX_LOCATED
    rejected: list[str] = field(default_factory=list)  # "code: message", the first MAX_REJECTED
    truncated_files: int = 0
    rejected_events: int = 0
    events_excluded: int = 0
    sessions_skipped_capture: int = 0
    sessions_skipped_filter: int = 0
    sessions_without_project: int = 0
    batches: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The counters as a JSON-ready dict (``aimem import --json``)."""
        return asdict(self)

    @property
    def failed(self) -> bool:
        """True when something read could not be imported: malformed lines, events the server rejected."""
        return bool(self.malformed_lines or self.rejected_events)


@dataclass(slots=True)
class _Session:
    identity: Identity
    cwd: str | None
    last_ts: Any = None


@dataclass(slots=True)
class Importer:
    """Read transcripts and send them; ``sender=None`` is a dry run (nothing sent or saved).

    Args:
        sender: posts one batch body to ``/hook/import`` and returns its JSON answer.
        state_path: the JSON file of per-file ``FileState`` (``None``: no state kept).
        since: only events at or after this time (and files modified since).
        project: only sessions of this project name.
        only: only sessions whose project identity (``as_query()``: names, root, origin,
            repository id) is this one; sessions without a cwd are left out (backfill on
            start: one repository's history, nothing attributed to it by guess).
        on_file: progress callback, called after each file.
    """

    sender: Sender | None
    state_path: Path | None = None
    since: datetime | None = None
    project: str | None = None
    only: Identity | None = None
    on_file: Callable[[], None] | None = None
    stats: ImportStats = field(default_factory=ImportStats)
    _state: dict[str, Any] = field(default_factory=dict)
    _batch: list[bytes] = field(default_factory=list)
    _batch_bytes: int = 0
    _batch_scope: tuple[Any, ...] | None = None
    _pending_state: dict[str, dict[str, Any]] = field(default_factory=dict)
    _identities: dict[str | None, Identity | None] = field(default_factory=dict)
    _seen_sessions: set[tuple[str, str]] = field(default_factory=set)
    _skipped: set[tuple[str, str, str]] = field(default_factory=set)
    hints: dict[str, str] = field(default_factory=dict)

    def run(self, files: list[tuple[str, Path]]) -> ImportStats:
        """Import every ``(client, path)``; return the counters. Raises what ``sender`` raises."""
        t0 = time.monotonic()
        self._state = _load_state(self.state_path)
        self.hints = {project_hash(os.getcwd()): os.getcwd()}
        for client, path in files:
            self._file(client, path)
            if self.on_file:
                self.on_file()
        self._flush()
        self.stats.sessions = len(self._seen_sessions)
        self.stats.seconds = round(time.monotonic() - t0, 3)
        return self.stats

    def _file(self, client: str, path: Path) -> None:
        self.stats.files += 1
        key = f"{client}:{path.resolve()}"
        try:
            st = path.stat()
        except OSError:
            return
        if self.since and st.st_mtime < self.since.timestamp():
            self.stats.files_unchanged += 1
            return
        state = FileState.from_json(self._state.get(key))
        if st.st_size < state.offset:  # rewritten or replaced: read again (the keys dedupe)
            state = FileState()
        reader = READERS[client]
        if st.st_size == state.offset and not getattr(reader, "ALWAYS_READ", False):
            self.stats.files_unchanged += 1
            return
        rs = ReadStats()
        sessions: dict[str, _Session] = {}
        filtered = False
        events: Iterator[Event] = (reader.read(path, state, rs, self.hints) if client == "gemini-cli"
                                   else reader.read(path, state, rs))
        for ev in events:
            if ev.cwd and client != "gemini-cli":
                self.hints.setdefault(project_hash(ev.cwd), ev.cwd)
            sess = self._session(client, ev, sessions)
            if sess is None:
                filtered = filtered or self.project is not None or self.only is not None
                continue
            if self.since and not _at_or_after(ev.payload.get("timestamp"), self.since):
                filtered = True
                continue
            if not capture_allowed(sess.identity, ev.payload):
                self.stats.events_excluded += 1  # a file the marker excludes: never sent
                continue
            sess.last_ts = ev.payload.get("timestamp") or sess.last_ts
            self._add(client, sess.identity, ev)
            sess_key = (client, ev.session_id)
            self._seen_sessions.add(sess_key)
            sessions[ev.session_id] = sess
        for sid, sess in sessions.items():  # sessions that got events in this run
            end = Event(key=f"{client}:{sid}:end:{state.offset}"[:200], end=True,
                        payload={k: v for k, v in {"session_id": sid, "cwd": sess.cwd,
                                                    "timestamp": sess.last_ts}.items() if v is not None})
            self._add(client, sess.identity, end)
        self.stats.lines += rs.lines
        self.stats.malformed_lines += rs.malformed
        for line in rs.malformed_at:
            if len(self.stats.malformed_at) < MAX_LOCATED:
                self.stats.malformed_at.append(f"{path}:{line}" if line else
                                               f"{path} ({rs.why})" if rs.why else str(path))
        self.stats.truncated_files += rs.truncated
        if not filtered:
            self._pending_state[key] = state.to_json()
            if not self._batch:
                self._commit_state()

    def _session(self, client: str, ev: Event, sessions: dict[str, _Session]) -> _Session | None:
        """The session's identity, or None (and counted) when it must not be sent."""
        if ev.session_id in sessions:
            return sessions[ev.session_id]
        if ev.cwd not in self._identities:
            self._identities[ev.cwd] = project_identity(ev.cwd)
        ident = self._identities[ev.cwd]
        mark = (client, ev.session_id)
        if self.only is not None and (ident is None or ident.as_query() != self.only.as_query()):
            self._count_skip(mark, "sessions_skipped_filter")
            return None
        if ident is None and self.project:
            ident = Identity(self.project, explicit=True)  # named on the command line
        if ident is None:
            self._count_skip(mark, "sessions_without_project")
            return None
        if not ident.capture:
            self._count_skip(mark, "sessions_skipped_capture")
            return None
        if self.project and ident.project != self.project:
            self._count_skip(mark, "sessions_skipped_filter")
            return None
        return _Session(ident, ev.cwd)

    def _count_skip(self, mark: tuple[str, str], counter: str) -> None:
        if (mark[0], mark[1], counter) not in self._skipped:
            self._skipped.add((mark[0], mark[1], counter))
            setattr(self.stats, counter, getattr(self.stats, counter) + 1)

    def _add(self, client: str, ident: Identity, ev: Event) -> None:
        scope = (client, *sorted(ident.as_query().items()))
        item: dict[str, Any] = {"key": ev.key, "payload": ev.payload}
        if ev.end:
            item["end"] = True
        else:
            self.stats.events += 1
        raw = json.dumps(item, ensure_ascii=False).encode("utf-8")
        if (self._batch_scope != scope or len(self._batch) >= BATCH_EVENTS
                or self._batch_bytes + len(raw) > BATCH_BYTES):
            self._flush()
            self._batch_scope = scope
        self._batch.append(raw)
        self._batch_bytes += len(raw) + 1

    def _flush(self) -> None:
        """Send the current batch; then the states of the files it completed are saved."""
        if self._batch and self._batch_scope and self.sender is not None:
            client, *query = self._batch_scope
            head = json.dumps(batch_head(client, dict(query)))
            answer = self.sender(head[:-1].encode() + b', "events": [' + b",".join(self._batch) + b"]}")
            self.stats.batches += 1
            self.stats.accepted += int(answer.get("accepted", 0))
            self.stats.duplicates += int(answer.get("duplicates", 0))
            rejected = answer.get("rejected") or []
            self.stats.rejected_events += len(rejected)
            self.stats.new += int(answer.get("new", 0))
            self.stats.already += int(answer.get("already", 0))
            self.stats.captured_live += int(answer.get("captured_live", 0))
            for r in rejected[:max(0, MAX_REJECTED - len(self.stats.rejected))]:
                self.stats.rejected.append(f"{r.get('code')}: {r.get('message')}")
        self._batch = []
        self._batch_bytes = 0
        self._commit_state()

    def _commit_state(self) -> None:
        if not self._pending_state or self.sender is None or self.state_path is None:
            self._pending_state.clear()
            return
        self._state.update(self._pending_state)
        self._pending_state.clear()
        _save_state(self.state_path, self._state)


def _at_or_after(ts: Any, since: datetime) -> bool:
    if ts is None:
        return True
    try:
        if isinstance(ts, (int, float)):
            return ts / (1000 if ts > 1e11 else 1) >= since.timestamp()
        dt = datetime.fromisoformat(str(ts).replace("Z", "+00:00"))
    except (ValueError, OverflowError):
        return True
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=since.tzinfo)
    return dt >= since


def _load_state(path: Path | None) -> dict[str, Any]:
    if path is None or not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data.get("files", {}) if isinstance(data, dict) else {}


def _save_state(path: Path, files: dict[str, Any]) -> None:
    """Write the state atomically (tmp + fsync + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"v": 1, "files": files}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def discover(client: str, home: Path) -> list[tuple[str, Path]]:
    """Every transcript of ``client`` (``all``: every client) under ``home``, as ``(client, path)``."""
    clients = list(READERS) if client == "all" else [client]
    return [(c, p) for c in clients for p in READERS[c].discover(home)]


def classify(path: Path) -> str | None:
    """Guess which client wrote a transcript file from its name (``--path``)."""
    name = path.name
    if name.startswith("rollout-") and name.endswith(".jsonl"):
        return "codex"
    if name.startswith("session-") and name.endswith(".json"):
        return "gemini-cli"
    if name.endswith(".json") and path.parent.parent.name == "session":
        return "opencode"
    if name == "crush.db":
        return "crush"
    if name.endswith(".jsonl"):
        found = _sniff(path)
        if found == "pi":  # one format, three clients: the folder they keep it in says which
            parts = set(path.parts)
            return "omp" if ".omp" in parts else "openclaw" if ".openclaw" in parts else "pi"
        return found
    return None


def _sniff(path: Path) -> str | None:
    """Tell a Codex rollout (``{"timestamp", "type", "payload"}`` lines), a Claude Code
    transcript (lines with ``sessionId``), a Copilot CLI event log (``{"type", "data"}``) and
    a Pi-format session (a ``{"type": "session", "cwd"}`` header) apart by the first parseable line."""
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                try:
                    obj = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(obj, dict) and "payload" in obj and "type" in obj:
                    return "codex"
                if isinstance(obj, dict) and "sessionId" in obj:
                    return "claude-code"
                if isinstance(obj, dict) and "data" in obj and "type" in obj:
                    return "copilot-cli"
                if isinstance(obj, dict) and obj.get("type") == "session" and "cwd" in obj:
                    return "pi"  # Pi's session header (also OMP's and OpenClaw's)
    except OSError:
        return None
    return None


def files_under(path: Path, client: str) -> list[tuple[str, Path]]:
    """The transcripts in a copied folder (or one file), each with its client."""
    candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    out = []
    for p in candidates:
        c = classify(p)
        if c and (client == "all" or c == client):
            out.append((c, p))
    return out
