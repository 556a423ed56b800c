"""workstream.lease/append/deliver/rename on the real batch path: segments, cursors, leases."""

from __future__ import annotations

import json

from aimem_common.models import Scope
from aimem_common.read import workstreams as wsread
from aimem_common.workstreams import LEASE_SECONDS, marker

RUN_A, RUN_B, RUN_C = "a" * 32, "b" * 32, "c" * 32


def _open(wh, run, harness="claude-code", root="/w/repo", **kw):
    return wh.ok("workstream.lease", {"action": "open", "run_id": run, "harness": harness, "cwd": root + "/api", **kw},
                 root=root, origin="github.com/acme/repo")["run"]


def _scope(wh) -> Scope:
    row = wh.conn.execute("SELECT w.id, w.name, p.id, p.name FROM projects p JOIN workspaces w ON w.id = p.workspace_id"
                          " WHERE p.name = 'app'").fetchone()
    return Scope(workspace_id=row[0], workspace=row[1], project_id=row[2], project=row[3])


def test_append_writes_an_immutable_segment_and_indexes_it(wh) -> None:
    run = _open(wh, RUN_A)
    wid = run["workstream"]["id"]
    assert run["state"] == "active" and run["workstream"]["checkout_root"] == "/w/repo"
    got = wh.ok("workstream.append", {"run_id": RUN_A, "native_session_id": "s1", "events": [
        {"role": "user", "text": "Document the zebrafish retry policy", "source_key": "k1"},
        {"role": "assistant", "text": "Done, key sk-ant-api03-" + "x" * 40 + " stays out", "source_key": "k2"},
        {"role": "user", "text": marker(wid, 1, 2, "codex") + "\nold packet", "source_key": "k3"},
    ]})
    assert (got["appended"], got["first_seq"], got["last_seq"], got["rejected"]) == (2, 1, 2, [2])
    seg = wh.settings.data_dir / got["segment"]
    lines = [json.loads(x) for x in seg.read_text().splitlines()]
    assert [x["seq"] for x in lines] == [1, 2] and lines[0]["harness"] == "claude-code"
    assert "sk-ant-api03" not in seg.read_text() and "[REDACTED" in lines[1]["text"]
    # A retried import stores nothing twice and burns no sequence number.
    again = wh.ok("workstream.append", {"run_id": RUN_A, "events": [
        {"role": "user", "text": "Document the zebrafish retry policy", "source_key": "k1"},
        {"role": "tool", "text": "Bash: ls", "source_key": "k4"}]})
    assert (again["appended"], again["first_seq"], again["skipped"]) == (1, 3, 1)
    hits = wsread.search(wh.conn, _scope(wh), "zebrafish")
    assert [(h["seq"], h["role"]) for h in hits] == [(1, "user")]
    # Its own events count as seen by the harness that said them.
    assert wsread.run_with_workstream(wh.conn, RUN_A)["delivered_seq"] == 3


def test_lease_excludes_a_second_run_until_released_and_cancel_is_idempotent(wh) -> None:
    _open(wh, RUN_A)
    err = wh.err("workstream.lease", {"action": "open", "run_id": RUN_B, "harness": "codex", "cwd": "/w/repo"},
                 root="/w/repo")
    assert err["code"] == "workstream_leased" and err["data"]["run_id"] == RUN_A
    assert wh.ok("workstream.lease", {"action": "renew", "run_id": RUN_A})["run"]["state"] == "active"
    assert wh.ok("workstream.lease", {"action": "release", "run_id": RUN_A, "exit_code": 0})["run"]["state"] == "released"
    assert wh.err("workstream.lease", {"action": "renew", "run_id": RUN_A})["code"] == "lease_not_active"
    run_b = _open(wh, RUN_B, harness="codex")
    assert run_b["workstream"]["id"] == wh.conn.execute("SELECT id FROM workstreams").fetchone()[0]
    assert wh.ok("workstream.lease", {"action": "cancel", "run_id": RUN_B})["run"]["state"] == "cancelled"
    assert wh.ok("workstream.lease", {"action": "cancel", "run_id": RUN_B})["run"]["state"] == "cancelled"
    # No harness named: the newest one of the workstream.
    assert _open(wh, RUN_C, harness=None)["harness"] == "codex"


def test_no_harness_named_takes_the_newest_one_the_launcher_can_start(wh) -> None:
    _open(wh, RUN_A)
    wh.ok("workstream.lease", {"action": "release", "run_id": RUN_A})
    _open(wh, RUN_B, harness="codex")
    wh.ok("workstream.lease", {"action": "release", "run_id": RUN_B})
    # codex is the newest, but its binary is not on this launcher's PATH: claude-code is taken.
    assert _open(wh, RUN_C, harness=None, usable=["claude-code", "gemini-cli"])["harness"] == "claude-code"
    wh.ok("workstream.lease", {"action": "release", "run_id": RUN_C})
    err = wh.err("workstream.lease", {"action": "open", "run_id": "d" * 32, "cwd": "/w/repo", "usable": ["gemini-cli"]},
                 root="/w/repo", origin="github.com/acme/repo")
    assert err["code"] == "no_harness" and err["data"]["harnesses"] == ["claude-code", "codex"]


def test_a_lapsed_lease_expires_at_the_next_open(wh) -> None:
    _open(wh, RUN_A)
    wh.conn.execute("UPDATE managed_runs SET lease_expires_at = '2000-01-01T00:00:00Z' WHERE id = ?", (RUN_A,))
    wh.conn.commit()
    run_b = _open(wh, RUN_B, harness="codex")
    assert run_b["state"] == "active"
    assert wh.conn.execute("SELECT state FROM managed_runs WHERE id = ?", (RUN_A,)).fetchone()[0] == "expired"
    started = run_b["started_at"]
    assert run_b["lease_expires_at"] > started and LEASE_SECONDS == 60


def test_delivery_cursor_moves_forward_only_and_not_past_the_ledger(wh) -> None:
    _open(wh, RUN_A)
    wh.ok("workstream.append", {"run_id": RUN_A, "events": [{"role": "user", "text": f"step {i}"} for i in range(5)]})
    wh.ok("workstream.lease", {"action": "release", "run_id": RUN_A})
    _open(wh, RUN_B, harness="codex", root="/w/repo")
    info = wsread.run_with_workstream(wh.conn, RUN_B)
    assert info["delivered_seq"] == 0
    assert [e["seq"] for e in wsread.events_after(wh.conn, info["workstream"]["id"], 0)] == [1, 2, 3, 4, 5]
    assert wh.ok("workstream.deliver", {"run_id": RUN_B, "through_seq": 5}) == {"delivered_seq": 5, "advanced": True}
    assert wh.ok("workstream.deliver", {"run_id": RUN_B, "through_seq": 2})["delivered_seq"] == 5
    assert wh.err("workstream.deliver", {"run_id": RUN_B, "through_seq": 9})["code"] == "beyond_ledger"


def test_rename_and_a_second_checkout_of_the_repository_is_a_second_workstream(wh) -> None:
    a = _open(wh, RUN_A)["workstream"]
    wh.ok("workstream.lease", {"action": "release", "run_id": RUN_A})
    b = _open(wh, RUN_B, root="/w/repo-wt2")["workstream"]
    assert a["id"] != b["id"]
    assert wh.ok("workstream.rename", {"workstream_id": a["id"], "name": "retry policy"})["previous"] == "repo"
    names = {w["id"]: w["name"] for w in wsread.list_workstreams(wh.conn, _scope(wh))}
    assert names == {a["id"]: "retry policy", b["id"]: "repo-wt2"}


def test_a_purge_refuses_while_a_run_holds_a_live_lease_and_then_takes_the_ledger(wh) -> None:
    _open(wh, RUN_A)
    wh.ok("workstream.append", {"run_id": RUN_A, "events": [{"role": "user", "text": "platypus plan"}]})
    err = wh.err("project.purge", {})
    assert err["code"] == "live_lease" and err["data"]["runs"][0]["run_id"] == RUN_A
    preview = wh.ok("project.purge", {"dry_run": True, "force": True})
    assert (preview["workstreams_deleted"], preview["workstream_events_deleted"], preview["managed_runs_deleted"]) == (1, 1, 1)
    wh.ok("workstream.lease", {"action": "release", "run_id": RUN_A})
    done = wh.ok("project.purge", {})
    assert done["workstream_events_deleted"] == 1 and done["workstreams_deleted"] == 1
    assert wh.count("SELECT count(*) FROM workstream_events_fts WHERE workstream_events_fts MATCH 'platypus'") == 0
    assert wh.count("SELECT count(*) FROM managed_runs") == 0


def _managed_start(wh, through_seq: int, run: str = RUN_B) -> dict:
    """A managed start's claim: the handoff and the packet in one handoff.accept."""
    return wh.run("handoff.accept", {"cwd": "/w/repo", "agent": "codex", "session_id": "codex-1",
                                     "only_new_session": True, "run_id": run, "through_seq": through_seq},
                  "default", "app", root="/w/repo", origin="github.com/acme/repo")


def _ledger_and_handoff(wh) -> int:
    _open(wh, RUN_A)
    wh.ok("workstream.append", {"run_id": RUN_A, "events": [{"role": "user", "text": f"step {i}"} for i in range(3)]})
    wh.ok("workstream.lease", {"action": "release", "run_id": RUN_A})
    _open(wh, RUN_B, harness="codex")
    return wh.ok("handoff.begin", {"body": "carry on with the retry work", "cwd": "/w/repo"},
                 root="/w/repo", origin="github.com/acme/repo")["handoff"]["id"]


def test_a_managed_start_claims_the_handoff_and_the_packet_together(wh) -> None:
    hid = _ledger_and_handoff(wh)
    reply = _managed_start(wh, 3)
    assert reply["ok"], reply
    assert reply["result"]["handoff"]["id"] == hid
    assert reply["result"]["delivered"] == {"delivered_seq": 3, "advanced": True}
    assert wsread.run_with_workstream(wh.conn, RUN_B)["delivered_seq"] == 3
    assert wh.conn.execute("SELECT status FROM handoffs WHERE id = ?", (hid,)).fetchone()[0] == "accepted"


def test_a_packet_claim_that_fails_leaves_the_handoff_open(wh) -> None:
    hid = _ledger_and_handoff(wh)
    reply = _managed_start(wh, 9)  # past the ledger's end: the delivery fails after the handoff was claimed
    assert not reply["ok"] and reply["error"]["code"] == "beyond_ledger"
    assert wh.conn.execute("SELECT status FROM handoffs WHERE id = ?", (hid,)).fetchone()[0] == "open"
    assert wsread.run_with_workstream(wh.conn, RUN_B)["delivered_seq"] == 0


def test_a_failure_injected_between_the_two_claims_rolls_both_back(wh, monkeypatch) -> None:
    from aimem_writer.ops import workstreams as ops

    hid = _ledger_and_handoff(wh)
    real = ops.deliver

    def broken(tx, run_id, through_seq):
        real(tx, run_id, through_seq)  # the cursor moved, the handoff is claimed ...
        raise RuntimeError("the writer broke here")  # ... and the command dies before it returns

    monkeypatch.setattr(ops, "deliver", broken)
    reply = _managed_start(wh, 3)
    assert not reply["ok"]
    assert wh.conn.execute("SELECT status FROM handoffs WHERE id = ?", (hid,)).fetchone()[0] == "open"
    assert wsread.run_with_workstream(wh.conn, RUN_B)["delivered_seq"] == 0
    monkeypatch.setattr(ops, "deliver", real)
    again = _managed_start(wh, 3)  # the next start gets both
    assert again["ok"] and again["result"]["handoff"]["id"] == hid and again["result"]["delivered"]["advanced"]


def test_run_id_and_through_seq_go_together(wh) -> None:
    _ledger_and_handoff(wh)
    err = wh.err("handoff.accept", {"run_id": RUN_B}, root="/w/repo", origin="github.com/acme/repo")
    assert err["code"] in ("invalid_payload", "bad_request", "validation_error"), err


def _segments(wh, wid: str) -> list[str]:
    folder = wh.settings.data_dir / "raw" / "workstreams" / wid
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_a_project_purge_removes_the_segments_after_the_commit(wh) -> None:
    wid = _open(wh, RUN_A)["workstream"]["id"]
    wh.ok("workstream.append", {"run_id": RUN_A, "events": [{"role": "user", "text": "okapi notes"}]})
    wh.ok("workstream.lease", {"action": "release", "run_id": RUN_A})
    assert _segments(wh, wid) == ["0000000001-0000000001.jsonl"]
    assert wh.ok("project.purge", {"dry_run": True})["workstream_events_deleted"] == 1
    assert _segments(wh, wid) == ["0000000001-0000000001.jsonl"]  # a dry run removes nothing
    wh.ok("project.purge", {})
    assert not (wh.settings.data_dir / "raw" / "workstreams" / wid).exists()
    assert wh.count("SELECT count(*) FROM workstream_events") == 0


def test_a_session_purge_takes_its_runs_ledger_events_and_segments_only(wh) -> None:
    wid = _open(wh, RUN_A)["workstream"]["id"]
    wh.obs("claude-1", "user-prompt", "start", root="/w/repo", origin="github.com/acme/repo")
    wh.ok("workstream.append", {"run_id": RUN_A, "native_session_id": "claude-1",
                                "events": [{"role": "user", "text": "narwhal secret plan"}]})
    wh.ok("workstream.lease", {"action": "release", "run_id": RUN_A})
    _open(wh, RUN_B, harness="codex")
    wh.ok("workstream.append", {"run_id": RUN_B, "native_session_id": "codex-1",
                                "events": [{"role": "user", "text": "codex keeps this"}]})
    # A live lease of the session's own run refuses; RUN_B's lease is not the session's.
    wh.ok("workstream.lease", {"action": "release", "run_id": RUN_B})
    preview = wh.ok("session.purge", {"session_id": "claude-1", "dry_run": True},
                    root="/w/repo", origin="github.com/acme/repo")
    assert preview["workstream_events_deleted"] == 1
    done = wh.ok("session.purge", {"session_id": "claude-1"}, root="/w/repo", origin="github.com/acme/repo")
    assert done["workstream_events_deleted"] == 1
    assert _segments(wh, wid) == ["0000000002-0000000002.jsonl"]
    assert [r[0] for r in wh.conn.execute("SELECT text FROM workstream_events")] == ["codex keeps this"]
    assert wh.count("SELECT count(*) FROM workstream_events_fts WHERE workstream_events_fts MATCH 'narwhal'") == 0


def test_a_session_purge_refuses_while_its_run_holds_a_live_lease(wh) -> None:
    _open(wh, RUN_A)
    wh.obs("claude-1", "user-prompt", "start", root="/w/repo", origin="github.com/acme/repo")
    wh.ok("workstream.append", {"run_id": RUN_A, "native_session_id": "claude-1",
                                "events": [{"role": "user", "text": "still running"}]})
    err = wh.err("session.purge", {"session_id": "claude-1"}, root="/w/repo", origin="github.com/acme/repo")
    assert err["code"] == "live_lease" and err["data"]["runs"][0]["run_id"] == RUN_A
    forced = wh.ok("session.purge", {"session_id": "claude-1", "force": True}, root="/w/repo",
                   origin="github.com/acme/repo")
    assert forced["workstream_events_deleted"] == 1


def test_move_and_rename_refuse_while_a_run_holds_a_live_lease(wh) -> None:
    wid = _open(wh, RUN_A)["workstream"]["id"]
    for op, payload in (("project.rename", {"to": "app2"}), ("project.move", {"to_workspace": "other"}),
                        ("workstream.rename", {"workstream_id": wid, "name": "renamed"})):
        err = wh.err(op, payload)
        assert (err["code"], err["status"] if "status" in err else 409) == ("live_lease", 409), (op, err)
        assert err["data"]["runs"][0]["run_id"] == RUN_A
    assert wh.ok("workstream.rename", {"workstream_id": wid, "name": "renamed", "force": True})["name"] == "renamed"
    wh.ok("workstream.lease", {"action": "release", "run_id": RUN_A})
    assert wh.ok("project.rename", {"to": "app2"})["to"] == "app2"


def test_an_observation_of_a_managed_run_keeps_its_run_id(wh) -> None:
    _open(wh, RUN_A)
    wh.obs("claude-1", "user-prompt", "managed", root="/w/repo", origin="github.com/acme/repo", run_id=RUN_A)
    wh.obs("claude-2", "user-prompt", "plain", root="/w/repo", origin="github.com/acme/repo")
    rows = dict(wh.conn.execute("SELECT session_id, run_id FROM observations").fetchall())
    assert rows == {"claude-1": RUN_A, "claude-2": None}


def test_open_names_the_native_session_the_harness_last_appended_under(wh) -> None:
    assert _open(wh, RUN_A)["resume_session_id"] is None
    wh.ok("workstream.append", {"run_id": RUN_A, "native_session_id": "claude-1",
                                "events": [{"role": "user", "text": "hello"}]})
    wh.ok("workstream.lease", {"action": "release", "run_id": RUN_A})
    assert _open(wh, RUN_B, harness="codex")["resume_session_id"] is None  # a harness new here starts fresh
    wh.ok("workstream.lease", {"action": "release", "run_id": RUN_B})
    assert _open(wh, RUN_C)["resume_session_id"] == "claude-1"


def test_a_workstream_delete_takes_its_ledger_runs_and_segments_and_leaves_the_other(wh) -> None:
    wid = _open(wh, RUN_A)["workstream"]["id"]
    wh.ok("workstream.append", {"run_id": RUN_A, "events": [{"role": "user", "text": "quokka rollout plan"}]})
    other = _open(wh, RUN_B, root="/w/repo-wt2")["workstream"]["id"]
    wh.ok("workstream.append", {"run_id": RUN_B, "events": [{"role": "user", "text": "wombat stays"}]})
    wh.ok("workstream.lease", {"action": "release", "run_id": RUN_B})
    preview = wh.ok("workstream.delete", {"workstream_id": wid, "dry_run": True})
    assert (preview["workstream_events_deleted"], preview["managed_runs_deleted"], preview["name"]) == (1, 1, "repo")
    assert _segments(wh, wid) == ["0000000001-0000000001.jsonl"]  # a preview removes nothing
    err = wh.err("workstream.delete", {"workstream_id": wid})
    assert err["code"] == "live_lease" and err["data"]["runs"][0]["run_id"] == RUN_A
    assert wh.count("SELECT count(*) FROM workstream_events") == 2  # the refusal changed nothing
    done = wh.ok("workstream.delete", {"workstream_id": wid, "force": True})
    assert done["workstream_events_deleted"] == 1 and done["dry_run"] is False
    assert not (wh.settings.data_dir / "raw" / "workstreams" / wid).exists()
    assert len(_segments(wh, other)) == 1  # the other checkout's workstream keeps its segment
    assert [r[0] for r in wh.conn.execute("SELECT text FROM workstream_events")] == ["wombat stays"]
    assert wh.count("SELECT count(*) FROM workstream_events_fts WHERE workstream_events_fts MATCH 'quokka'") == 0
    assert wh.count("SELECT count(*) FROM managed_runs") == 1
    assert wh.conn.execute("SELECT count(*) FROM workstream_harnesses WHERE workstream_id = ?",
                           (wid,)).fetchone()[0] == 0
    assert wh.err("workstream.delete", {"workstream_id": wid})["code"] in ("not_found", "workstream_not_found")
    assert any(e.kind == "workstream.deleted" for e in wh.events)


def test_a_run_of_a_deleted_workstream_appends_nothing_and_is_told_so(wh) -> None:
    _open(wh, RUN_A)
    wid = _open(wh, RUN_A.replace("a", "d"), root="/w/other")["workstream"]["id"]
    wh.ok("workstream.lease", {"action": "release", "run_id": RUN_A.replace("a", "d")})
    own = wsread.run_with_workstream(wh.conn, RUN_A)["workstream"]["id"]
    wh.ok("workstream.delete", {"workstream_id": own, "force": True})
    err = wh.err("workstream.append", {"run_id": RUN_A, "events": [{"role": "checkpoint", "text": "Git checkpoint"}]})
    assert err["code"] == "run_not_found"
    assert wh.count("SELECT count(*) FROM workstream_events") == 0
    assert wid != own
