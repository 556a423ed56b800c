"""Web-login ops (``user.passwd``, ``websession.*``) and the coalesced observation events."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

from aimem_common.auth import hash_key, web_session
from aimem_common.errors import AimemError
from aimem_writer.settlement import coalesce_events
from aimem_writer.tx import Event

_spec = importlib.util.spec_from_file_location("aimem_test_admin_ops", Path(__file__).with_name("test_admin_ops.py"))
_admin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_admin)
Harness = _admin.Harness  # the op harness: real migrated SQLite + real git wiki

ARGON = "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaA"
LATER = "2999-01-01T00:00:00Z"
NOW = "2026-12-01T00:00:00Z"


def th(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    yield harness
    harness.conn.close()


def test_password_sets_the_hash_and_ends_the_users_sessions(h):
    h.run("user.create", {"name": "ann"})
    h.run("websession.create", {"token_hash": th(1), "user": "ann", "expires_at": LATER})
    assert web_session(h.conn, th(1), root_token=None, now=NOW).name == "user:ann"
    out = h.run("user.passwd", {"name": "ann", "password_hash": ARGON})
    assert out["sessions_ended"] == 1
    assert h.conn.execute("SELECT password_hash FROM users WHERE name = 'ann'").fetchone()[0] == ARGON
    assert web_session(h.conn, th(1), root_token=None, now=NOW) is None
    assert h.count("SELECT count(*) FROM audit_log WHERE op IN ('web.login', 'user.passwd')") == 2
    with pytest.raises(AimemError):  # only argon2id hashes are stored, never a plaintext
        h.run("user.passwd", {"name": "ann", "password_hash": "hunter2"})


def test_session_ends_with_expiry_user_key_or_root_token(h):
    h.run("user.create", {"name": "bob"})
    h.run("grant.set", {"user": "bob", "workspace": "default", "project": "app"})
    key = h.run("apikey.create", {"user": "bob", "key_hash": hash_key("aim_k"), "prefix": "aim_k"})
    h.run("websession.create", {"token_hash": th(2), "user": "bob", "api_key_id": key["id"], "expires_at": LATER})
    h.run("websession.create", {"token_hash": th(3), "user": "bob", "expires_at": "2998-01-01T00:00:00Z"})
    h.run("websession.create", {"token_hash": th(4), "root_fp": hash_key("root-1"), "expires_at": LATER})
    p = web_session(h.conn, th(2), root_token=None, now=NOW)
    assert p.kind == "user" and p.can_read("default", "app") and not p.can_read("default", "other")
    assert web_session(h.conn, th(3), root_token=None, now=NOW) is not None
    assert web_session(h.conn, th(3), root_token=None, now="2998-01-01T00:00:01Z") is None  # expired
    assert web_session(h.conn, th(4), root_token="root-1", now=NOW).is_real_root
    assert web_session(h.conn, th(4), root_token="root-2", now=NOW) is None  # the token was rotated
    h.run("apikey.revoke", {"key_id": key["id"]})
    assert web_session(h.conn, th(2), root_token=None, now=NOW) is None
    h.run("user.delete", {"name": "bob"})
    assert h.count("SELECT count(*) FROM web_sessions WHERE user_id IS NOT NULL") == 0  # cascade
    assert h.run("websession.delete", {"token_hash": th(4)}) == {"deleted": True}
    assert h.run("websession.delete", {"token_hash": th(4)}) == {"deleted": False}


def test_a_session_needs_exactly_one_subject_and_an_enabled_user(h):
    with pytest.raises(AimemError):
        h.run("websession.create", {"token_hash": th(5), "expires_at": LATER})
    with pytest.raises(AimemError):
        h.run("websession.create", {"token_hash": th(5), "user": "nobody", "expires_at": LATER})


def test_observation_events_coalesce_per_session():
    def obs(sid: str, oid: int, kind: str) -> Event:
        return Event("observations.appended", {"workspace": "default", "project": "app", "session_id": sid,
                                               "count": 1, "last_observation_id": oid, "kinds": [kind]})

    page = Event("page.changed", {"path": "a.md"})
    out = coalesce_events([obs("s1", 1, "user-prompt"), page, obs("s2", 2, "stop"), obs("s1", 3, "pre-tool-use"),
                           obs("s1", 4, "user-prompt")])
    assert [e.kind for e in out] == ["observations.appended", "page.changed", "observations.appended"]
    assert out[0].data["count"] == 3 and out[0].data["last_observation_id"] == 4
    assert out[0].data["kinds"] == ["user-prompt", "pre-tool-use"]
    assert out[2].data["session_id"] == "s2" and out[2].data["count"] == 1
