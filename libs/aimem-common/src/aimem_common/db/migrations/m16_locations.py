"""Migration 16: locations and identity: repository ids, project root aliases, normalised stored locations."""

from __future__ import annotations

# Issue 26 (locations and identity): a repository's stable id and the roots a project has been
# seen at (a moved, renamed or second checkout of one repository: its handoffs follow it), and
# the roots/handoff places stored before one location normaliser existed brought to its form
# (aimem_common.locations: '\\' -> '/', Windows locations lower-cased, no trailing separator;
# char(92) is the backslash). Duplicated keys this leaves behind are harmless: a lookup takes
# the oldest project holding them.
SQL = """
ALTER TABLE projects ADD COLUMN repo_id TEXT;        -- the repository's stable id (<git dir>/aimem-id)
CREATE INDEX projects_repo_id ON projects(workspace_id, repo_id) WHERE repo_id IS NOT NULL;
CREATE TABLE project_roots (
  workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  root          TEXT NOT NULL,                     -- normalised (aimem_common.locations)
  first_seen_at TEXT NOT NULL,
  PRIMARY KEY (project_id, root)
);
CREATE INDEX project_roots_root ON project_roots(workspace_id, root);
UPDATE projects SET root = lower(replace(root, char(92), '/'))
  WHERE root GLOB '[A-Za-z]:*' OR substr(root, 1, 2) IN (char(92) || char(92), '//');
UPDATE projects SET root = rtrim(replace(root, char(92), '/'), '/')
  WHERE length(root) > 1 AND substr(replace(root, char(92), '/'), -1) = '/' AND NOT root GLOB '[a-z]:/';
UPDATE handoffs SET root = lower(replace(root, char(92), '/'))
  WHERE root GLOB '[A-Za-z]:*' OR substr(root, 1, 2) IN (char(92) || char(92), '//');
UPDATE handoffs SET cwd = lower(replace(cwd, char(92), '/'))
  WHERE cwd GLOB '[A-Za-z]:*' OR substr(cwd, 1, 2) IN (char(92) || char(92), '//');
"""
