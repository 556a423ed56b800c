"""Writer test helpers: the real batch path (``Applier``) on a tmp data dir, no NATS."""

from __future__ import annotations

import dataclasses
import json
import uuid
from pathlib import Path

import pytest

from aimem_common import config
from aimem_common.db.connect import open_writer
from aimem_common.commands import Envelope, ScopeRef

import aimem_writer.ops  # noqa: F401  (registers every handler)
from aimem_writer import registry
from aimem_writer.batch import Applier
from aimem_writer.commands import Incoming
from aimem_writer.metrics import WriterMetrics
from aimem_common.telemetry import Telemetry
from aimem_writer.wiki import WikiRepo


class WriterHarness:
    """Apply envelopes through ``Applier.apply`` exactly as the consumer does."""

    def __init__(self, data_dir: Path):
        self.settings = config.load(data_dir, environ={})
        self.conn = open_writer(self.settings.db_path)
        self.wiki = WikiRepo(self.settings.wiki_dir)
        self.applier = Applier(self.conn, self.wiki, self.settings, WriterMetrics.create(Telemetry("writer")))
        self.events: list = []

    def envelope(self, op: str, payload: dict, ws: str | None = "default", pj: str | None = "app",
                 key: str | None = None, actor: str = "tester", root: str | None = None,
                 origin: str | None = None, explicit: bool = False, repo_id: str | None = None):
        # Not make_envelope: bad-input tests must reach the writer unvalidated.
        ids = {"repo_id": repo_id} if repo_id else {}
        scope = ScopeRef(workspace=ws, project=pj, root=root, origin=origin, explicit=explicit, **ids) if pj else None
        return Envelope(op=op, payload=payload, scope=scope, actor=actor, idempotency_key=key)

    def batch(self, envs: list, raw: list[bytes] | None = None) -> list[dict]:
        items = [Incoming(e.model_dump_json().encode()) for e in envs] + [Incoming(r) for r in raw or []]
        result = self.applier.apply(items)
        self.events.extend(result.events)
        return [o.reply for o in result.outcomes]

    def run(self, op: str, payload: dict, ws: str | None = "default", pj: str | None = "app", **kw) -> dict:
        kw = {k: v for k, v in kw.items() if k in ("key", "actor", "root", "origin", "explicit", "repo_id")}
        """Apply one command; return its reply ``{cmd_id, ok, result|error}``."""
        return self.batch([self.envelope(op, payload, ws, pj, **kw)])[0]

    def ok(self, op: str, payload: dict, ws: str | None = "default", pj: str | None = "app", **kw) -> dict:
        reply = self.run(op, payload, ws, pj, **kw)
        assert reply["ok"], reply
        return reply["result"]

    def err(self, op: str, payload: dict, ws: str | None = "default", pj: str | None = "app", **kw) -> dict:
        reply = self.run(op, payload, ws, pj, **kw)
        assert not reply["ok"], reply
        return reply["error"]

    def obs(self, session_id: str, kind: str, title: str = "", body: str = "", ws="default", pj="app", **extra):
        scope_kw = {k: extra.pop(k) for k in ("root", "origin", "explicit", "repo_id") if k in extra}
        payload = {"session_id": session_id, "kind": kind, "title": title, "body": body, "sanitized": True,
                   "agent": extra.pop("agent", "claude-code"), **extra}
        return self.ok("observation.append", payload, ws, pj, **scope_kw)

    def count(self, sql: str, *args) -> int:
        return self.conn.execute(sql, args).fetchone()[0]

    def scope_dir(self, ws: str = "default", pj: str = "app") -> Path:
        row = self.conn.execute(
            "SELECT w.id, p.id FROM projects p JOIN workspaces w ON w.id = p.workspace_id WHERE w.name=? AND p.name=?",
            (ws, pj)).fetchone()
        return self.wiki.root / row[0] / row[1]

    def page_file(self, path: str, ws: str = "default", pj: str = "app") -> Path:
        return self.scope_dir(ws, pj) / path

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def wh(tmp_path: Path):
    h = WriterHarness(tmp_path / "data")
    try:
        yield h
    finally:
        h.close()


@pytest.fixture
def patch_handler(monkeypatch):
    """``patch_handler(op, fn)`` makes ``fn(tx, env, cmd)`` the handler of ``op`` for this test
    (the writer thread finds it in the registry too); returns the original function."""
    def patch(op: str, fn):
        h = registry.get(op)
        monkeypatch.setitem(registry._HANDLERS, op, dataclasses.replace(h, fn=fn))
        return h.fn

    return patch


def new_id() -> str:
    return uuid.uuid4().hex


def dumps(obj) -> bytes:
    return json.dumps(obj).encode()
