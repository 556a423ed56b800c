"""The lease and delivery rules of docs/workstreams.md as a model, checked against the real
writer (``Applier`` on a tmp store) by a hypothesis state machine: opens, renewals, releases,
cancels, lapsed leases, appends, deliveries and managed-start claims in any order."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import io
import unittest

import pytest
from hypothesis import seed, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

SEED = 1  # with 25 examples it reaches a renew after a take-over (checked: the guard removed, it fails)
HARNESSES = ("claude-code", "codex", "gemini-cli")
ROOT = "/w/repo"
PAST = "2000-01-01T00:00:00Z"


class LeaseModel(RuleBasedStateMachine):
    """Model: each run's state, which one holds the workstream, the ledger length and cursors."""

    harness_class: type = object  # the conftest's WriterHarness (set by the test)

    @initialize()
    def start(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="aimem-lease-model-"))
        self.wh = self.harness_class(self.tmp / "data")
        self.runs: dict[str, dict] = {}  # id -> {harness, state, lapsed}
        self.last_seq = 0
        self.cursor = {h: 0 for h in HARNESSES}
        self.n = 0

    def teardown(self) -> None:
        if hasattr(self, "wh"):
            self.wh.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _run(self, op: str, payload: dict) -> dict:
        return self.wh.run(op, payload, "default", "app", root=ROOT)

    def _holder(self) -> str | None:
        live = [r for r, v in self.runs.items() if v["state"] == "active" and not v["lapsed"]]
        assert len(live) <= 1
        return live[0] if live else None

    @rule(harness=st.sampled_from(HARNESSES))
    def open(self, harness: str) -> None:
        self.n += 1
        run_id = f"{self.n:032x}"
        reply = self._run("workstream.lease", {"action": "open", "run_id": run_id, "harness": harness, "cwd": ROOT})
        holder = self._holder()
        if holder is not None:
            assert not reply["ok"] and reply["error"]["code"] == "workstream_leased"
            assert reply["error"]["data"]["run_id"] == holder
            return
        assert reply["ok"], reply
        for v in self.runs.values():
            if v["state"] == "active" and v["lapsed"]:
                v["state"] = "expired"
        self.runs[run_id] = {"harness": harness, "state": "active", "lapsed": False}

    def _pick(self, data, states) -> str | None:
        ids = sorted(r for r, v in self.runs.items() if v["state"] in states)
        return data.draw(st.sampled_from(ids)) if ids else None

    @precondition(lambda self: self.runs)
    @rule(data=st.data())
    def lapse(self, data) -> None:
        run_id = self._pick(data, ("active",))
        if run_id is None:
            return
        self.wh.conn.execute("UPDATE managed_runs SET lease_expires_at = ? WHERE id = ?", (PAST, run_id))
        self.wh.conn.commit()
        self.runs[run_id]["lapsed"] = True

    @precondition(lambda self: self._holder() is not None)
    @rule(harness=st.sampled_from(HARNESSES))
    def take_over(self, harness: str) -> None:
        """The launcher dies: its lease lapses and another run opens the workstream."""
        holder = self._holder()
        self.wh.conn.execute("UPDATE managed_runs SET lease_expires_at = ? WHERE id = ?", (PAST, holder))
        self.wh.conn.commit()
        self.runs[holder]["lapsed"] = True
        self.open(harness)
        assert self.runs[holder]["state"] == "expired"

    @precondition(lambda self: self.runs)
    @rule(data=st.data(), action=st.sampled_from(["renew", "release", "cancel"]))
    def end_or_renew(self, data, action: str) -> None:
        run_id = data.draw(st.sampled_from(sorted(self.runs)))
        v = self.runs[run_id]
        reply = self._run("workstream.lease", {"action": action, "run_id": run_id})
        if action == "cancel" and v["state"] in ("released", "cancelled"):
            assert reply["ok"] and reply["result"]["run"]["state"] == v["state"]
            return
        if v["state"] not in ("active", "expired"):
            assert not reply["ok"] and reply["error"]["code"] == "lease_not_active"
            return
        other = self._holder()
        if action == "renew" and (v["state"] == "expired" or v["lapsed"]) and other not in (None, run_id):
            assert not reply["ok"] and reply["error"]["code"] == "lease_not_active"
            return
        assert reply["ok"], (action, v, reply)
        if action == "renew":
            v.update(state="active", lapsed=False)
        else:
            v.update(state="released" if action == "release" else "cancelled", lapsed=False)

    @precondition(lambda self: self.runs)
    @rule(data=st.data(), n=st.integers(1, 3))
    def append(self, data, n: int) -> None:
        run_id = data.draw(st.sampled_from(sorted(self.runs)))
        v = self.runs[run_id]
        reply = self._run("workstream.append", {"run_id": run_id, "events": [
            {"role": "user", "text": f"step {self.last_seq + i}"} for i in range(n)]})
        if v["state"] not in ("active", "expired"):
            assert not reply["ok"] and reply["error"]["code"] == "lease_not_active"
            return
        assert reply["ok"] and reply["result"]["first_seq"] == self.last_seq + 1
        if self.cursor[v["harness"]] >= self.last_seq:
            self.cursor[v["harness"]] = self.last_seq + n  # its own events count as seen
        self.last_seq += n

    @precondition(lambda self: self.runs)
    @rule(data=st.data(), through=st.integers(0, 12), with_handoff=st.booleans())
    def deliver(self, data, through: int, with_handoff: bool) -> None:
        run_id = data.draw(st.sampled_from(sorted(self.runs)))
        harness = self.runs[run_id]["harness"]
        if with_handoff:  # a managed start: the handoff claim and the packet in one command
            reply = self._run("handoff.accept", {"cwd": ROOT, "only_new_session": True, "session_id": f"s{self.n}",
                                                 "run_id": run_id, "through_seq": through})
        else:
            reply = self._run("workstream.deliver", {"run_id": run_id, "through_seq": through})
        if through > self.last_seq:
            assert not reply["ok"] and reply["error"]["code"] == "beyond_ledger"
            return
        assert reply["ok"], reply
        self.cursor[harness] = max(self.cursor[harness], through)

    @invariant()
    def store_matches_the_model(self) -> None:
        if not hasattr(self, "wh"):
            return
        rows = {r[0]: r[1] for r in self.wh.conn.execute("SELECT id, state FROM managed_runs")}
        assert rows == {r: v["state"] for r, v in self.runs.items()}
        cursors = dict(self.wh.conn.execute("SELECT harness, delivered_seq FROM workstream_harnesses").fetchall())
        assert cursors == {h: c for h, c in self.cursor.items() if h in cursors}
        assert all(c <= self.last_seq for c in cursors.values())
        got = self.wh.conn.execute("SELECT coalesce(max(last_seq), 0) FROM workstreams").fetchone()[0]
        assert got == self.last_seq


@pytest.mark.timeout(600)
def test_lease_and_delivery_rules_hold_in_any_order(wh) -> None:
    """A fixed seed (a run is the same everywhere) and a fresh store per example, built as the fixture's."""
    LeaseModel.harness_class = type(wh)
    case = seed(SEED)(LeaseModel.TestCase)
    case.settings = settings(max_examples=25, stateful_step_count=20, deadline=None, database=None)
    result = unittest.TextTestRunner(stream=io.StringIO()).run(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    assert result.wasSuccessful(), "\n".join(text for _, text in result.failures + result.errors)
