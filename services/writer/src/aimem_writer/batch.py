"""Apply a batch of commands in one SQLite transaction (writer thread only).

``Applier.apply(items)``: parse envelopes, answer duplicates from ``ingest_keys``, then
``BEGIN IMMEDIATE``; each command runs through its registered handler; a typed error rolls
back that command alone and becomes its error reply. The replies are stored in
``ingest_keys`` (a replayed or re-sent command gets the same reply), the merged wiki stage
goes to ``wiki_outbox``, ``COMMIT``, then the files are flushed.

A batch is first applied without a ``SAVEPOINT`` per command: a savepoint makes SQLite copy
every page a command touches into a statement journal, which costs about as much as the
command's own inserts. When a command fails in a way that needs its own rollback (a typed
error, a handler bug), the whole attempt is rolled back and the batch is applied again with
a ``SAVEPOINT`` around each command, which gives the same outcome as if it had had one from
the start (handlers are re-runnable: a batch is re-applied after any rollback anyway).

Failures, by kind (``faults.py``):

* a store fault anywhere (disk full, I/O error at a statement, at ``COMMIT`` or while
  writing wiki files before the commit) rolls the batch back and raises
  ``StoreFaultError``: nothing is settled, the consumer holds the batch and retries it.
  Any failure of the file flush *after* ``COMMIT`` keeps the effects in ``wiki_outbox``
  and is reported as a store fault (``owed_fault``), whatever raised it: the batch is
  settled (it is stored), the writer is held and ``recover()`` re-flushes them;
* a ``RetryableError`` or another ``sqlite3.OperationalError`` aborts the transaction: the
  failing command is nak'ed (or, after ``writer.max_deliver`` deliveries, terminated and
  kept as a dead letter) and the batch is re-applied without it;
* a handler bug, or a typed error on a command nobody waits for (no ``Aimem-Reply-To``),
  is a dead letter: stored with its reason in ``dead_letters`` and not in ``ingest_keys``,
  so a replay applies it afresh.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from contextlib import nullcontext
from typing import Any, Literal

from opentelemetry import trace
from pydantic import ValidationError

from aimem_common.bus import extract_context, reply_body
from aimem_common.config import Settings
from aimem_common.errors import AimemError, BadRequestError, RetryableError, StoreFaultError
from aimem_common.commands import Envelope, parse_payload
from aimem_common.commands.envelope import first_error
from aimem_common.commands.observations import ObservationAppend

from aimem_writer import ledger, registry
from aimem_writer.commands import BatchResult, Command, Incoming, Outcome
from aimem_writer.faults import store_fault
from aimem_writer.forget import PURGE_OPS, truncate_wal
from aimem_writer.metrics import WriterMetrics
from aimem_writer.textindex import TextIndexWriter
from aimem_writer.tx import Event, ScopeCache, Tx, utc_now
from aimem_writer.wiki import WikiRepo, WikiStage, clear_outbox, replay_outbox, store_outbox

log = logging.getLogger("aimem.writer.batch")
tracer = trace.get_tracer("aimem.writer")


class _ObservationEnvelope(Envelope):
    """An ``observation.append`` envelope whose payload is validated in the same pass as the
    envelope (``parse_payload`` then takes the model as it is): the hot path parses each
    command once instead of into a dict and then again into its model."""

    op: Literal["observation.append"]
    payload: ObservationAppend


_OBSERVATION_OP = b'"op":"observation.append"'  # as pydantic and orjson write it (no spaces)


def _parse_envelope(data: bytes) -> Envelope:
    """Validate one message's JSON as an envelope; the hook path's op with its payload.

    Raises:
        ValidationError: refused; ``Applier.apply`` parses it again as a plain envelope, so
            an observation whose payload alone is bad is answered ``invalid_payload`` by its
            handler, as any other op's.
    """
    if _OBSERVATION_OP in data:
        return _ObservationEnvelope.model_validate_json(data)
    return Envelope.model_validate_json(data)


class _NeedSavepoints(Exception):
    """Internal: a command failed in a batch applied without savepoints; apply it again with them."""


class _Abort(Exception):
    """Internal: ``command`` hit a transient failure; roll back the whole batch."""

    def __init__(self, command: Command, error: AimemError):
        super().__init__(error.message)
        self.command = command
        self.error = error


# Answers to a command nobody waits for that are expected races, not lost work: the target
# is gone (404), changed (409) or a condition did not hold (412).
_EXPECTED_UNWAITED = {404, 409, 412}


def _unwaited(err: AimemError, waited: bool) -> str | None:
    """Return a dead-letter reason for an error no caller will see, or None."""
    if waited or err.status in _EXPECTED_UNWAITED:
        return None
    return f"{err.code}: {err.message}"


def owed_fault(exc: BaseException) -> StoreFaultError:
    """Return the store fault that holds the writer while ``exc`` keeps wiki files owed:
    ``store_fault(exc)`` when it is one, else ``reason`` ``io_error`` (a bug or bad text, e.g.
    ``UnicodeEncodeError``, is not the disk's, but the files must not be dropped either)."""
    return store_fault(exc) or StoreFaultError(f"wiki flush: {type(exc).__name__}: {exc}",
                                               data={"reason": "io_error", "store": "wiki"})


def _parse(cmd: Command) -> None:
    """Set ``cmd.envelope``, or, for a message that is no envelope, ``cmd.outcome`` (its error reply)."""
    item = cmd.message
    try:
        # One pass in pydantic-core (~6x cheaper than json.loads + model_validate);
        # a message it refuses is parsed again below, whose errors are the ones we reply.
        cmd.envelope = _parse_envelope(item.data)
        return
    except ValidationError:
        pass
    raw: Any = None
    try:
        raw = json.loads(item.data)
        cmd.envelope = Envelope.model_validate(raw)
    except (ValueError, ValidationError) as exc:
        msg = first_error(exc) if isinstance(exc, ValidationError) else str(exc)
        err = BadRequestError(f"invalid command envelope: {msg}", code="invalid_envelope")
        cmd_id = raw.get("cmd_id", "") if isinstance(raw, dict) else ""
        # Nobody waits for it (a hook, a line of a bundle): kept as a dead letter, visible.
        lost = None if cmd.waited else f"{err.code}: {err.message}"
        cmd.outcome = Outcome("ack", reply_body(str(cmd_id), error=err), "unknown", err.code, dead_letter=lost)


WIKI_COMMIT_KEY = "wiki_commit"


def read_wiki_commit(conn: sqlite3.Connection) -> str | None:
    """Return the wiki commit the DB last recorded (``meta.wiki_commit``), or None."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (WIKI_COMMIT_KEY,)).fetchone()
    return row[0] if row else None


def record_wiki_commit(conn: sqlite3.Connection, oid: str | None) -> None:
    """Store ``oid`` as ``meta.wiki_commit`` (the DB holds everything up to that commit)."""
    if oid:
        conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                     (WIKI_COMMIT_KEY, oid))


class Applier:
    """Owns the write connection and the wiki; every method runs on the writer thread.

    Args:
        conn: the connection from ``open_writer`` (autocommit mode).
        wiki: the wiki repository.
        settings: the writer's settings.
        metrics: counters/histograms (thread-safe prometheus objects).
        text_index: the page text index to keep up to date after each commit (None: none).
    """

    def __init__(self, conn: sqlite3.Connection, wiki: WikiRepo, settings: Settings, metrics: WriterMetrics,
                 text_index: TextIndexWriter | None = None):
        self.conn = conn
        self.text_index = text_index
        self.wiki = wiki
        self.settings = settings
        self.metrics = metrics
        self.max_deliver = settings.writer.max_deliver
        self.outbox_owed = False  # effects committed to wiki_outbox but not yet on disk

    def recover(self) -> None:
        """Flush wiki effects a failed flush left in ``wiki_outbox`` (writer thread).

        Raises:
            StoreFaultError: the flush still fails, for any reason (``owed_fault``): the
                files stay owed and the writer stays held until they are written.
        """
        if not self.outbox_owed:
            return
        try:
            replay_outbox(self.conn, self.wiki)
        except AimemError as exc:
            raise StoreFaultError(exc.message, data={"reason": "io_error", "store": "wiki"}) from exc
        except Exception as exc:  # any failure keeps the files owed and the writer held (visible)
            raise owed_fault(exc) from exc
        self.outbox_owed = False

    # -- the batch ------------------------------------------------------------------
    def apply(self, items: list[Incoming]) -> BatchResult:
        """Apply ``items`` (see module docstring); returns one outcome per item, in order.

        Raises:
            StoreFaultError: the store refused a write; nothing of the batch is committed.
            Exception: an unexpected error before the ``COMMIT`` (rolled back, nothing
                committed: the consumer applies the batch again, ``inplace.py``). Nothing
                after the ``COMMIT`` raises (file flush: ``flush_fault``; text index: logged).
        """
        t0 = time.perf_counter()
        cmds = [Command(item) for item in items]
        for cmd in cmds:
            _parse(cmd)
        self.recover()  # a previous batch's files first: they come before this batch's
        pending = [cmd for cmd in cmds if cmd.outcome is None]
        savepoints = False  # see the module docstring: the first attempt runs without them
        while True:
            try:
                result = self._apply_once(cmds, pending, savepoints)
                break
            except _NeedSavepoints:
                savepoints = True
                continue
            except _Abort as abort:
                cmd, env, n = abort.command, abort.command.envelope, abort.command.message.num_delivered
                if n >= self.max_deliver:
                    reason = f"{abort.error.code} after {n} deliveries: {abort.error.message}"
                    cmd.outcome = Outcome("term", reply_body(env.cmd_id, error=abort.error), env.op,
                                          abort.error.code, dead_letter=reason)
                    log.error("giving up %s %s (dead letter): %s", env.op, env.cmd_id, reason)
                else:
                    cmd.outcome = Outcome("nak", None, env.op, abort.error.code)
                    log.warning("transient failure on %s %s, will redeliver: %s", env.op, env.cmd_id,
                                abort.error.message)
                pending = [p for p in pending if p is not cmd]
        self.sync_text_index()  # before the replies: a caller's next search finds its pages
        result.duration_s = time.perf_counter() - t0
        return result

    def sync_text_index(self) -> int:
        """Bring the page text index up to the last COMMIT (``TextIndexWriter.drain``); returns
        the outbox rows drained. A failure is logged: the rows stay and the next call retries.
        It never raises: it runs after the COMMIT, and ``apply`` raising would read as nothing
        committed (the consumer would apply the batch again)."""
        if self.text_index is None:
            return 0
        try:
            return self.text_index.drain(self.conn)
        except Exception as exc:  # noqa: BLE001 - committed; the outbox rows stay for the next drain
            log.warning("search outbox not drained: %r", exc)
            return 0

    def give_up(self, item: Incoming, error: BaseException) -> Outcome:
        """Settle a command whose apply failed *alone* with an unexpected ``error`` (writer thread).

        Below ``writer.max_deliver`` deliveries it is ``nak``ed: JetStream redelivers it, and the
        batch it comes back in is retried the same way. At ``max_deliver`` it is kept as a dead
        letter (its own transaction) and terminated; a waiting caller gets an ``internal`` error.

        Returns:
            The command's ``Outcome``: ``nak`` (also when the dead letter could not be stored,
            or the message is no envelope), else ``term`` with ``dead_letter`` set.
        Raises:
            StoreFaultError: the store refused the dead letter (the consumer holds and retries).
        """
        try:
            env = Envelope.model_validate_json(item.data)
        except ValidationError:
            log.error("an unparsable message failed alone, will redeliver: %r", error)
            return Outcome("nak", None)
        if item.num_delivered < self.max_deliver:
            log.warning("%s %s failed alone (delivery %d), will redeliver: %r", env.op, env.cmd_id,
                        item.num_delivered, error)
            return Outcome("nak", None, env.op, "internal")
        reason = f"unexpected error after {item.num_delivered} deliveries: {type(error).__name__}: {error}"
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            if ledger.insert_dead_letter(self.conn, item, env, reason, "internal", utc_now()):
                self.metrics.dead_letters.labels(env.op).inc()
            self.conn.execute("COMMIT")
        except Exception as exc:  # noqa: BLE001 - a store fault is raised; anything else is redelivered
            self._rollback()
            fault = store_fault(exc)
            if fault is not None:
                raise fault from exc
            log.exception("dead letter of %s %s not stored, will redeliver", env.op, env.cmd_id)
            return Outcome("nak", None, env.op, "internal")
        log.error("giving up %s %s (dead letter): %s", env.op, env.cmd_id, reason)
        err = AimemError(f"internal error applying {env.op}: {type(error).__name__}")
        return Outcome("term", reply_body(env.cmd_id, error=err), env.op, err.code, dead_letter=reason)

    def _apply_once(self, cmds: list[Command], pending: list[Command], savepoints: bool = True) -> BatchResult:
        """One attempt at the batch in one transaction; outcomes are set only once it commits."""
        conn = self.conn
        now = utc_now()
        stage = WikiStage(self.wiki.root)
        scopes = ScopeCache()
        events: list[Event] = []
        decided: list[tuple[Command, Outcome]] = []
        stored = ledger.stored_replies(conn, {cmd.envelope.dedupe_id for cmd in pending})
        seen_in_batch: dict[str, dict] = {}
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._store_dead_letters(cmds, now)
            for cmd in pending:
                env = cmd.envelope
                key = env.dedupe_id
                prior = stored.get(key) or seen_in_batch.get(key)
                if prior is not None:
                    decided.append((cmd, Outcome("ack", {**prior, "cmd_id": env.cmd_id, "duplicate": True}, env.op)))
                    self.metrics.duplicates.labels(env.op).inc()
                    continue
                reply, code, dead = self._apply_one(cmd, now, stage, scopes, events, savepoints)
                decided.append((cmd, Outcome("ack", reply, env.op, code, dead_letter=dead)))
                if dead is not None:
                    # Given up, not applied: no ingest key, so a replay applies it afresh.
                    self._dead_letter(cmd.message, env, dead, code or "internal", now)
                    continue
                seen_in_batch[key] = reply
                ledger.record_reply(conn, key, env, reply, now, cmd.project_id)
                if env.op in PURGE_OPS and reply.get("ok"):
                    # It may have forgotten replies read or made earlier in this batch: a
                    # duplicate behind it is answered with what the ledger holds now.
                    stored = ledger.stored_replies(conn, {c.envelope.dedupe_id for c in pending})
                    seen_in_batch.clear()
            ops = stage.coalesced()
            if ops:
                store_outbox(conn, ops, now)
            conn.execute("COMMIT")
        except BaseException as exc:
            self._rollback()
            fault = store_fault(exc)
            if fault is not None and fault is not exc:
                raise fault from exc
            raise
        self.metrics.commits.inc()
        for op, n in stage.op_names.items():  # counted once committed (an attempt may be re-applied)
            self.metrics.commands.labels(op).inc(n)
        for cmd, outcome in decided:
            cmd.outcome = outcome
        files = 0
        flush_fault = None
        if ops:
            try:
                files = self.wiki.flush(ops)
                clear_outbox(conn)
                if self.wiki.purge_failures:
                    amended = mark_partial_failures(decided, events, self.wiki.purge_failures)
                    try:
                        ledger.amend_replies(conn, amended)
                    except sqlite3.Error as exc:  # the purge stands; only a retry's answer is poorer
                        log.warning("could not store the partial-failure replies: %r", exc)
            except Exception as exc:  # noqa: BLE001 - whatever it is, the files must stay owed
                # Committed: the batch is stored and will be settled; the files are owed (else
                # the next batch's flush would clear wiki_outbox and they would be lost).
                flush_fault = owed_fault(exc)
                self.outbox_owed = True
                log.error("wiki flush failed after commit (kept in wiki_outbox): %r", exc)
            self.wiki.note_ops(stage.op_names)
        if any(o.op in PURGE_OPS and o.reply and o.reply.get("ok") and not (o.reply.get("result") or {}).get("dry_run")
               and not o.reply.get("duplicate") for _, o in decided):
            truncate_wal(conn)  # the pre-purge page images leave with the WAL (aimem_writer.forget)
        return BatchResult([cmd.outcome or Outcome() for cmd in cmds], events, files, flush_fault=flush_fault)

    def _rollback(self) -> None:
        if self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error as exc:  # the connection rolls back on its own when it can
                log.warning("rollback failed: %s", exc)

    def _store_dead_letters(self, cmds: list[Command], now: str) -> None:
        """Insert the batch's terminated commands (decided before this attempt) as dead letters."""
        for cmd in cmds:
            o = cmd.outcome
            if o is None or not o.dead_letter:
                continue
            if cmd.envelope is None:  # unreadable: kept as received
                if ledger.insert_unreadable(self.conn, cmd.message, o, now):
                    self.metrics.dead_letters.labels("unknown").inc()
            elif o.action == "term":
                self._dead_letter(cmd.message, cmd.envelope, o.dead_letter, o.error_code or "retryable", now)

    def _dead_letter(self, item: Incoming, env: Envelope, reason: str, code: str, now: str) -> None:
        """Keep ``env`` as a dead letter (``ledger.insert_dead_letter``), counting a new row."""
        if ledger.insert_dead_letter(self.conn, item, env, reason, code, now):
            self.metrics.dead_letters.labels(env.op).inc()

    def _apply_one(self, command: Command, now: str, stage: WikiStage, scopes: ScopeCache,
                   events: list[Event], savepoint: bool = True) -> tuple[dict, str | None, str | None]:
        """Run one command (in a SAVEPOINT when ``savepoint``); return ``(reply, error_code|None, dead_letter_reason|None)``.

        Raises:
            StoreFaultError: the store refused a write (the whole batch is held).
            _Abort: a transient failure of this command (the batch is re-applied without it).
            _NeedSavepoints: without ``savepoint``, the command failed after it may have
                written (the batch is re-applied with savepoints).
        """
        item, env = command.message, command.envelope
        waited = command.waited
        conn = self.conn
        # Continue the caller's trace; untraced commands (the hot hook path without an
        # exporter) skip span bookkeeping entirely.
        if item.headers.get("traceparent"):
            span_cm = tracer.start_as_current_span(
                f"aimem.writer.apply {env.op}", context=extract_context(item.headers),
                kind=trace.SpanKind.CONSUMER,
                attributes={"messaging.system": "nats", "messaging.operation.type": "process",
                            "messaging.message.id": env.cmd_id, "aimem.op": env.op},
            )
        else:
            span_cm = nullcontext(trace.INVALID_SPAN)
        with span_cm as span:
            h = registry.get(env.op)
            try:
                if h is None:
                    raise BadRequestError(f"unknown op {env.op!r}", code="unknown_op")
                cmd = parse_payload(env.op, env.payload)
            except AimemError as err:
                self.metrics.errors.labels(env.op, err.code).inc()
                span.set_attribute("aimem.error_code", err.code)
                return reply_body(env.cmd_id, error=err), err.code, _unwaited(err, waited)
            cmd_stage = WikiStage(self.wiki.root)
            tx = Tx(conn, env, now=now, settings=self.settings, wiki=cmd_stage, scopes=scopes)
            if savepoint:
                conn.execute("SAVEPOINT cmd")
            try:
                result = h.fn(tx, env, cmd)
                if savepoint:
                    conn.execute("RELEASE cmd")
            except (RetryableError, sqlite3.OperationalError, OSError) as exc:
                fault = store_fault(exc)
                if fault is not None:
                    self.metrics.errors.labels(env.op, fault.code).inc()
                    raise fault from exc
                if isinstance(exc, OSError):
                    raise
                err = exc if isinstance(exc, RetryableError) else RetryableError(f"database error: {exc}")
                self.metrics.errors.labels(env.op, err.code).inc()
                raise _Abort(command, err) from exc
            except AimemError as err:
                if not savepoint:
                    raise _NeedSavepoints(env.cmd_id) from err
                conn.execute("ROLLBACK TO cmd")
                conn.execute("RELEASE cmd")
                self.metrics.errors.labels(env.op, err.code).inc()
                span.set_attribute("aimem.error_code", err.code)
                return reply_body(env.cmd_id, error=err), err.code, _unwaited(err, waited)
            except Exception as exc:  # a bug in a handler: answer, keep it as a dead letter
                if not savepoint:
                    raise _NeedSavepoints(env.cmd_id) from exc
                conn.execute("ROLLBACK TO cmd")
                conn.execute("RELEASE cmd")
                log.exception("handler %s failed on %s", env.op, env.cmd_id)
                span.record_exception(exc)
                err = AimemError(f"internal error applying {env.op}: {type(exc).__name__}")
                self.metrics.errors.labels(env.op, err.code).inc()
                return reply_body(env.cmd_id, error=err), err.code, f"{type(exc).__name__}: {exc}"
            stage.merge(cmd_stage)
            stage.op_names[env.op] += 1
            scopes.merge(tx.new_scopes)
            command.project_id = tx.resolved_project_id
            events.extend(tx.events)
            return reply_body(env.cmd_id, result=result), None, None

    # -- git ------------------------------------------------------------------------
    def checkpoint(self, reason: str | None = None) -> str | None:
        """Commit dirty wiki paths to git (one commit); returns the commit id or None.

        Side effect: records the commit in ``meta.wiki_commit`` (autocommit), so a copy of
        the DB (a Litestream restore) tells which wiki commit it has caught up with.
        """
        t0 = time.perf_counter()
        with tracer.start_as_current_span("aimem.writer.git_checkpoint") as span:
            oid = self.wiki.checkpoint(reason)
            if oid:
                span.set_attribute("git.commit", oid)
                self.metrics.git_commits.inc()
                self.metrics.git_seconds.observe(time.perf_counter() - t0)
        if oid or self.wiki.head() != read_wiki_commit(self.conn):
            record_wiki_commit(self.conn, self.wiki.head())
        return oid

    def open_dead_letters(self) -> int:
        """Return how many dead letters are not yet replayed."""
        return ledger.open_dead_letters(self.conn)

    def ping(self) -> bool:
        """Return True when the DB answers (health check)."""
        return self.conn.execute("SELECT 1").fetchone()[0] == 1


def mark_partial_failures(decided: list[tuple[Command, Outcome]], events: list[Event],
                          failures: list[dict[str, str]]) -> list[tuple[str, dict[str, Any]]]:
    """Say in a purge's reply and events that some of its files stayed on disk; return the
    ``(idempotency key, amended reply)`` of each purge it marked.

    The purge's rows are committed and stay gone (never rolled back for a file); its reply
    gets ``partial_failure: true`` and ``files_failed: [{file, error}]`` (those files leave
    ``files_deleted``), and its events the same two fields, so mirrors and other observers
    learn it. The caller stores the amended replies in ``ingest_keys``
    (``ledger.amend_replies``), so a re-sent purge is answered with the same outcome.
    """
    amended: list[tuple[str, dict[str, Any]]] = []
    by_cmd: dict[str, list[dict[str, str]]] = {}
    for f in failures:
        by_cmd.setdefault(f["cmd_id"], []).append({"file": f["rel"], "error": f["error"]})
    for cmd, outcome in decided:
        env, reply = cmd.envelope, outcome.reply
        failed = by_cmd.get(env.cmd_id) if env is not None else None
        if not failed or not reply or not reply.get("ok") or not isinstance(reply.get("result"), dict):
            continue
        result = reply["result"]
        gone = {f["file"] for f in failed}
        result["files_deleted"] = [d for d in result.get("files_deleted", [])
                                   if not any(g == d or g.endswith("/" + d) for g in gone)]
        result["files_failed"] = [*result.get("files_failed", []), *failed]
        result["partial_failure"] = True
        amended.append((env.dedupe_id, reply))
    for ev in events:
        failed = by_cmd.get(ev.data.get("cmd_id"))
        if failed:
            ev.data["partial_failure"] = True
            ev.data["files_failed"] = failed
    return amended
