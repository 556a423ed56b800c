"""The agent's view of workstreams (``read.workstreams.agent_listing`` / ``events_page``) on real SQLite."""

from __future__ import annotations

import uuid

import pytest

from aimem_common.read import workstreams as wsread


def add_workstream(seeder, scope, name: str, texts: list[tuple[str, str, str]], *, runs: int = 1) -> str:
    """A workstream of ``scope`` holding ``texts`` ((harness, role, text), seq 1..n) and ``runs`` runs."""
    c = seeder.conn
    wid = uuid.uuid4().hex
    now = seeder.tick()
    c.execute("INSERT INTO workstreams (id, workspace_id, project_id, checkout_root, name, last_seq, created_at,"
              " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
              (wid, scope.workspace_id, scope.project_id, f"/home/u/{name}", name, len(texts), now, now))
    for seq, (harness, role, text) in enumerate(texts, 1):
        c.execute("INSERT INTO workstream_events (workstream_id, workspace_id, project_id, seq, harness, run_id, role,"
                  " text, ts, segment) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                  (wid, scope.workspace_id, scope.project_id, seq, harness, "r" * 32, role, text,
                   f"2026-01-01T00:00:{seq:02d}Z", "00000001-00000009.jsonl"))
    for i, harness in enumerate(dict.fromkeys(h for h, _, _ in texts)):
        c.execute("INSERT INTO workstream_harnesses (workstream_id, harness, delivered_seq, last_run_at)"
                  " VALUES (?, ?, 0, ?)", (wid, harness, f"2026-01-0{i + 1}T00:00:00Z"))
    for i in range(runs):
        c.execute("INSERT INTO managed_runs (id, workstream_id, workspace_id, project_id, harness, state, started_at,"
                  " renewed_at, lease_expires_at) VALUES (?, ?, ?, ?, 'codex', 'released', ?, ?, ?)",
                  (uuid.uuid4().hex, wid, scope.workspace_id, scope.project_id, now, now, now))
    return wid


@pytest.fixture
def ledgers(seeder):
    app, other = seeder.scope("default", "app"), seeder.scope("default", "other")
    first = add_workstream(seeder, app, "app", [("claude-code", "user", "fix the retry test"),
                                                ("claude-code", "assistant", "done"),
                                                ("codex", "user", "now the docs")], runs=2)
    second = add_workstream(seeder, app, "app-wt", [("gemini-cli", "user", "hello")])
    foreign = add_workstream(seeder, other, "other", [("codex", "user", "other project's words")])
    return app, other, first, second, foreign


def test_the_listing_names_harnesses_runs_counts_and_last_event_time(pool, ledgers):
    app, _, first, second, _ = ledgers
    with pool.connection() as conn:
        rows = wsread.agent_listing(conn, app)
        assert [r["id"] for r in rows] == [second, first]  # newest activity first
        by = {r["id"]: r for r in rows}
        assert by[first]["harnesses"] == ["codex", "claude-code"]  # newest run first
        assert (by[first]["runs"], by[first]["events"], by[first]["last_event_at"]) == (2, 3, "2026-01-01T00:00:03Z")
        assert (by[second]["harnesses"], by[second]["runs"], by[second]["events"]) == (["gemini-cli"], 1, 1)
        assert all("checkout_root" not in r for r in rows)  # a user's paths stay local
        assert [r["id"] for r in wsread.agent_listing(conn, app, limit=1)] == [second]


def test_events_come_in_order_from_after_seq_and_page_on(pool, ledgers):
    app, _, first, _, _ = ledgers
    with pool.connection() as conn:
        page = wsread.events_page(conn, app, first, after_seq=0, limit=2)
        assert [(e["seq"], e["harness"], e["role"], e["text"]) for e in page["events"]] == [
            (1, "claude-code", "user", "fix the retry test"), (2, "claude-code", "assistant", "done")]
        assert page["next_after_seq"] == 2 and page["workstream"] == {"id": first, "name": "app", "events": 3}
        rest = wsread.events_page(conn, app, first, after_seq=page["next_after_seq"], limit=2)
        assert [e["seq"] for e in rest["events"]] == [3] and rest["next_after_seq"] is None
        past = wsread.events_page(conn, app, first, after_seq=3)
        assert past["events"] == [] and past["next_after_seq"] is None
        assert len(wsread.events_page(conn, app, first, limit=10_000)["events"]) == 3  # capped, not refused


def test_another_projects_or_an_unknown_workstream_is_none(pool, ledgers):
    app, other, _, _, foreign = ledgers
    with pool.connection() as conn:
        assert wsread.events_page(conn, app, foreign) is None
        assert wsread.events_page(conn, app, "f" * 32) is None
        assert [e["text"] for e in wsread.events_page(conn, other, foreign)["events"]] == ["other project's words"]


def test_a_page_stops_at_the_byte_budget_and_cuts_a_lone_giant(seeder, pool):
    app = seeder.scope("default", "app")
    wid = add_workstream(seeder, app, "big", [("codex", "tool", "é" * 3000)] * 5)  # 6,000 bytes each
    with pool.connection() as conn:
        page = wsread.events_page(conn, app, wid, max_bytes=13_000)
        assert [e["seq"] for e in page["events"]] == [1, 2] and page["next_after_seq"] == 2
        assert sum(len(e["text"].encode()) for e in page["events"]) == 12_000
        cut = wsread.events_page(conn, app, wid, after_seq=4, max_bytes=1_000)
        (ev,) = cut["events"]
        assert ev["seq"] == 5 and ev["cut"] is True and len(ev["text"].encode()) <= 1_000
        assert ev["text"].endswith("…") and cut["next_after_seq"] is None
