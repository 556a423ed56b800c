"""Store faults hold a batch (never a drop); what the writer gives up is a dead letter.

The fault is injected where SQLite or the disk would raise it: a connection whose
``COMMIT`` fails with ``SQLITE_FULL``, a wiki flush failing with ``ENOSPC`` after the
commit, a "crash" between the commit and the flush.
"""

from __future__ import annotations

import errno
import sqlite3

import pytest

from aimem_common.errors import RetryableError, StoreFaultError

from aimem_writer.commands import Incoming
from aimem_writer.faults import store_fault
from aimem_writer.wiki import replay_outbox



def _disk_full() -> sqlite3.OperationalError:
    exc = sqlite3.OperationalError("database or disk is full")
    exc.sqlite_errorcode = 13  # SQLITE_FULL, as the library sets it
    return exc


class FailingCommit:
    """A connection whose ``COMMIT`` fails with SQLITE_FULL while ``full`` is set."""

    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn
        self.full = True

    def execute(self, sql, *args):
        if self.full and sql == "COMMIT":
            raise _disk_full()
        return self._conn.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._conn, name)


def _obs(wh, i: int):
    return wh.envelope("observation.append", {"session_id": "s", "kind": "user-prompt", "body": f"event {i}",
                                              "sanitized": True, "agent": "claude-code"})


def test_store_fault_classification() -> None:
    assert store_fault(_disk_full()).data["reason"] == "disk_full"
    io = sqlite3.OperationalError("disk I/O error")
    io.sqlite_errorcode = 10 | (3 << 8)  # SQLITE_IOERR_WRITE: the primary code decides
    assert store_fault(io).data["reason"] == "io_error"
    assert store_fault(OSError(errno.ENOSPC, "No space left on device")).data["reason"] == "disk_full"
    for err in (errno.EACCES, errno.EPERM):  # a data dir whose owner or mode changed: every write fails alike
        assert store_fault(PermissionError(err, "Permission denied")).data == {"reason": "io_error", "store": "wiki"}
    perm = sqlite3.OperationalError("access permission denied")
    perm.sqlite_errorcode = 3  # SQLITE_PERM
    assert store_fault(perm).data == {"reason": "io_error", "store": "db"}
    syntax = sqlite3.OperationalError("no such column: x")
    syntax.sqlite_errorcode = 1  # SQLITE_ERROR: a bug, not the store
    assert store_fault(syntax) is None
    assert store_fault(ValueError("x")) is None
    # JetStream/NATS trouble (a leader election, a lost connection) is not the store's:
    # reporting it as a store fault would keep ingress answering 503 after the bus recovers.
    import asyncio

    import nats.errors
    import nats.js.errors
    for exc in (nats.errors.TimeoutError(), nats.errors.NoRespondersError(), nats.errors.ConnectionClosedError(),
                nats.js.errors.NoStreamResponseError(), asyncio.TimeoutError(), ConnectionResetError(errno.ECONNRESET, "reset")):
        assert store_fault(exc) is None, exc


def test_commit_on_a_full_disk_holds_the_batch_and_stores_it_once_space_returns(wh) -> None:
    envs = [_obs(wh, i) for i in range(3)]
    items = [Incoming(e.model_dump_json().encode(), {}, 7) for e in envs]  # delivered many times already
    failing = FailingCommit(wh.conn)
    wh.applier.conn = failing
    for _ in range(3):  # however often it is retried, a store fault is never a reason to give up
        with pytest.raises(StoreFaultError) as info:
            wh.applier.apply(items)
        assert info.value.data["reason"] == "disk_full"
    assert wh.count("SELECT count(*) FROM observations") == 0
    assert wh.count("SELECT count(*) FROM ingest_keys") == 0
    assert wh.count("SELECT count(*) FROM dead_letters") == 0
    failing.full = False  # space returns
    result = wh.applier.apply(items)
    assert [o.action for o in result.outcomes] == ["ack"] * 3
    assert wh.count("SELECT count(*) FROM observations") == 3
    again = wh.applier.apply(items)  # a redelivery after the fault: answered from ingest_keys
    assert all(o.reply.get("duplicate") for o in again.outcomes)
    assert wh.count("SELECT count(*) FROM observations") == 3


def test_a_handler_bug_is_a_dead_letter_and_a_replay_applies_it(wh, patch_handler) -> None:
    def broken(tx, env, cmd):
        raise RuntimeError("boom")

    original = patch_handler("observation.append", broken)
    env = _obs(wh, 1)
    raw = env.model_dump_json().encode()
    result = wh.applier.apply([Incoming(raw)])
    assert result.outcomes[0].dead_letter == "RuntimeError: boom"
    row = wh.conn.execute("SELECT cmd_id, op, envelope, reason, replayed_at FROM dead_letters").fetchone()
    assert row[:2] == (env.cmd_id, "observation.append") and row[3] == "RuntimeError: boom" and row[4] is None
    assert wh.count("SELECT count(*) FROM ingest_keys") == 0  # not applied: a replay must apply it
    assert wh.applier.open_dead_letters() == 1

    patch_handler("observation.append", original)
    replayed = wh.applier.apply([Incoming(row[2].encode())])  # what /admin/dead-letters/replay publishes
    assert replayed.outcomes[0].reply["ok"] is True
    assert wh.count("SELECT count(*) FROM observations") == 1
    assert wh.ok("dead_letter.resolve", {"ids": [1]}, pj=None) == {"resolved": [1]}
    assert wh.applier.open_dead_letters() == 0


def test_a_transient_failure_past_max_deliver_is_a_dead_letter(wh, patch_handler) -> None:
    def flaky(tx, env, cmd):
        raise RetryableError("upstream busy")

    patch_handler("observation.append", flaky)
    env = _obs(wh, 2)
    early = wh.applier.apply([Incoming(env.model_dump_json().encode(), {}, 1)])
    assert early.outcomes[0].action == "nak" and wh.applier.open_dead_letters() == 0
    late = wh.applier.apply([Incoming(env.model_dump_json().encode(), {}, wh.applier.max_deliver)])
    assert late.outcomes[0].action == "term"
    assert "upstream busy" in wh.conn.execute("SELECT reason FROM dead_letters").fetchone()[0]


def test_permission_denied_in_a_handler_holds_the_batch(wh, patch_handler) -> None:
    """EACCES on the wiki is the store's fault, not the command's: the batch is held and
    retried (``StoreFaultError``), never given up, and applies once the store takes it."""
    def denied(tx, env, cmd):
        raise PermissionError(errno.EACCES, "Permission denied", "/data/wiki/default")

    original = patch_handler("observation.append", denied)
    items = [Incoming(_obs(wh, i).model_dump_json().encode(), {}, 9) for i in range(2)]
    with pytest.raises(StoreFaultError) as info:
        wh.applier.apply(items)
    assert info.value.data == {"reason": "io_error", "store": "wiki"}
    assert wh.count("SELECT count(*) FROM dead_letters") == 0
    patch_handler("observation.append", original)
    assert [o.action for o in wh.applier.apply(items).outcomes] == ["ack", "ack"]
    assert wh.count("SELECT count(*) FROM observations") == 2


def test_an_error_nobody_waits_for_is_a_dead_letter_but_a_waited_one_is_a_reply(wh) -> None:
    bad = wh.envelope("page.write", {"path": "../escape.md", "body": "x"})
    waited = wh.applier.apply([Incoming(bad.model_dump_json().encode(), {"Aimem-Reply-To": "_INBOX.x"})])
    assert waited.outcomes[0].reply["error"]["code"] == "invalid_path" and waited.outcomes[0].dead_letter is None
    bad2 = wh.envelope("page.write", {"path": "../escape.md", "body": "x"})
    unwaited = wh.applier.apply([Incoming(bad2.model_dump_json().encode())])
    assert unwaited.outcomes[0].dead_letter.startswith("invalid_path")
    assert wh.applier.open_dead_letters() == 1


@pytest.mark.parametrize("error, reason", [
    (OSError(errno.ENOSPC, "No space left on device"), "disk_full"),
    # not the file system's: a bug or text the flush cannot encode; the files are owed all the same
    (UnicodeEncodeError("utf-8", "\udc80", 0, 1, "surrogates not allowed"), "io_error"),
], ids=["enospc", "unicode"])
def test_a_failed_flush_after_commit_is_owed_and_recovered(wh, monkeypatch, error, reason) -> None:
    flush = wh.wiki.flush

    def failing(ops):
        raise error

    monkeypatch.setattr(wh.wiki, "flush", failing)
    env = wh.envelope("page.write", {"path": "notes/a.md", "body": "kept"})
    result = wh.applier.apply([Incoming(env.model_dump_json().encode())])
    assert result.outcomes[0].reply["ok"] is True  # committed: it will be acked
    assert result.flush_fault is not None and result.flush_fault.data == {"reason": reason, "store": "wiki"}
    owed = wh.count("SELECT count(*) FROM wiki_outbox")
    assert owed > 0 and wh.applier.outbox_owed
    with pytest.raises(StoreFaultError):
        wh.applier.recover()  # still failing: the writer stays held (a store fault, visible)
    later = wh.envelope("page.write", {"path": "notes/b.md", "body": "later"})
    with pytest.raises(StoreFaultError):  # the next batch waits for the owed files, never clears them
        wh.applier.apply([Incoming(later.model_dump_json().encode())])
    assert wh.count("SELECT count(*) FROM wiki_outbox") == owed
    monkeypatch.setattr(wh.wiki, "flush", flush)
    wh.applier.recover()
    assert wh.page_file("notes/a.md").read_text().rstrip().endswith("kept")
    assert wh.count("SELECT count(*) FROM wiki_outbox") == 0 and not wh.applier.outbox_owed
    assert wh.applier.apply([Incoming(later.model_dump_json().encode())]).outcomes[0].reply["ok"] is True
    assert wh.page_file("notes/b.md").read_text().rstrip().endswith("later")


class _Died(BaseException):
    """The process dying between COMMIT and the file flush."""


def test_a_crash_between_commit_and_flush_is_replayed_at_start(wh, monkeypatch, tmp_path) -> None:
    def die(ops):
        raise _Died()

    monkeypatch.setattr(wh.wiki, "flush", die)
    env = wh.envelope("page.write", {"path": "notes/b.md", "body": "survives the crash"})
    with pytest.raises(_Died):
        wh.applier.apply([Incoming(env.model_dump_json().encode())])
    wh.close()
    restarted = type(wh)(tmp_path / "data")  # a new writer process: the lifespan replays first
    try:
        assert replay_outbox(restarted.conn, restarted.wiki) >= 1
        assert "survives the crash" in restarted.page_file("notes/b.md").read_text()
        assert restarted.count("SELECT count(*) FROM wiki_outbox") == 0
        # the redelivered command is answered from ingest_keys, not applied twice
        again = restarted.applier.apply([Incoming(env.model_dump_json().encode())])
        assert again.outcomes[0].reply.get("duplicate") is True
        assert restarted.count("SELECT count(*) FROM pages WHERE path = 'notes/b.md'") == 1
    finally:
        restarted.close()


def test_a_command_failing_alone_is_redelivered_then_a_dead_letter(wh) -> None:
    """``Applier.give_up``: below ``max_deliver`` deliveries a nak (no dead letter); at it a
    dead letter in its own transaction, the message terminated and a waiting caller told."""
    env = _obs(wh, 3)
    error = FileNotFoundError(errno.ENOENT, "No such file or directory", "/gone")
    early = wh.applier.give_up(Incoming(env.model_dump_json().encode(), {}, wh.applier.max_deliver - 1), error)
    assert (early.action, early.reply, early.dead_letter) == ("nak", None, None)
    assert wh.applier.open_dead_letters() == 0
    waited = {"Aimem-Reply-To": "_INBOX.x"}
    late = wh.applier.give_up(Incoming(env.model_dump_json().encode(), waited, wh.applier.max_deliver), error)
    assert late.action == "term" and late.reply["ok"] is False and late.reply["error"]["code"] == "internal"
    row = tuple(wh.conn.execute("SELECT cmd_id, reason, error_code, deliveries FROM dead_letters").fetchone())
    assert row == (env.cmd_id, late.dead_letter, "internal", wh.applier.max_deliver)
    assert late.dead_letter == (f"unexpected error after {wh.applier.max_deliver} deliveries: "
                                "FileNotFoundError: [Errno 2] No such file or directory: '/gone'")
    assert not wh.conn.in_transaction
