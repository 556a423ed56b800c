"""Migration 19: auto-improve proposals as patches: the patch, who refused it (validation, eval, operator), why, and the eval's answer."""

from __future__ import annotations

SQL = """
ALTER TABLE auto_improve_proposals ADD COLUMN patch TEXT;
ALTER TABLE auto_improve_proposals ADD COLUMN reject_stage TEXT;
ALTER TABLE auto_improve_proposals ADD COLUMN reject_reason TEXT;
ALTER TABLE auto_improve_proposals ADD COLUMN eval TEXT;
CREATE INDEX auto_improve_rejected ON auto_improve_proposals(project_id, status, id);
"""
