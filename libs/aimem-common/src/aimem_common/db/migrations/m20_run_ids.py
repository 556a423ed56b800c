"""Migration 20: managed runs meet the rest of the store (run ids on observations, native session ids on runs)."""

from __future__ import annotations

# An observation captured by a child of `aimem run` keeps its run id; a run keeps the
# harness's native session id (set by its ledger append), so a session purge finds the run's
# ledger events and segments.
SQL = """
ALTER TABLE observations ADD COLUMN run_id TEXT;
CREATE INDEX observations_run ON observations(run_id) WHERE run_id IS NOT NULL;
ALTER TABLE managed_runs ADD COLUMN native_session_id TEXT;
CREATE INDEX managed_runs_session ON managed_runs(project_id, native_session_id)
  WHERE native_session_id IS NOT NULL;
"""
