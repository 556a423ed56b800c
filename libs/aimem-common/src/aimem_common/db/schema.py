"""The SQLite schema as forward-only migrations keyed by ``PRAGMA user_version``.

Only the writer applies them (``connect.open_writer``); readers wait until the file
reaches ``SCHEMA_VERSION``. Every domain row carries ``workspace_id``/``project_id``
(invariant 4). FTS tables are external-content FTS5 kept in sync by triggers in the same
transaction as the rows (invariant 3); ``pages_fts`` indexes live page versions only.
Each migration's SQL is its own module under ``db/migrations/`` (how to add one: its
package docstring); this list is the one place they are put in order.
"""

from __future__ import annotations

from aimem_common.db.migrations import (
    m01_core, m02_identity_keys, m03_imported_counts, m04_web_logins, m06_scoped_fts_and_trigrams,
    m07_dead_letters, m08_observations_fts_project, m09_count_indexes, m10_search_outbox, m11_chunk_vectors,
    m12_pages_tri_instances, m13_observations_tri, m14_handoff_lifecycle, m15_purge_tombstones, m16_locations,
    m17_workstreams, m18_project_backfills, m19_proposal_patches, m20_run_ids, m21_live_page_index, m22_page_degrees,
    m23_profile_entries, m24_ingest_key_projects,
)

# Forward-only: append new migrations; never edit one that has shipped. A database is only
# ever moved forward from its ``user_version``; 5 was reserved and never shipped, so the list
# has a gap there.
MIGRATIONS: list[tuple[int, str]] = [
    (1, m01_core.SQL),
    (2, m02_identity_keys.SQL),
    (3, m03_imported_counts.SQL),
    (4, m04_web_logins.SQL),
    (6, m06_scoped_fts_and_trigrams.SQL),
    (7, m07_dead_letters.SQL),
    (8, m08_observations_fts_project.SQL),
    (9, m09_count_indexes.SQL),
    (10, m10_search_outbox.SQL),
    (11, m11_chunk_vectors.SQL),
    (12, m12_pages_tri_instances.SQL),
    (13, m13_observations_tri.SQL),
    (14, m14_handoff_lifecycle.SQL),
    (15, m15_purge_tombstones.SQL),
    (16, m16_locations.SQL),
    (17, m17_workstreams.SQL),
    (18, m18_project_backfills.SQL),
    (19, m19_proposal_patches.SQL),
    (20, m20_run_ids.SQL),
    (21, m21_live_page_index.SQL),
    (22, m22_page_degrees.SQL),
    (23, m23_profile_entries.SQL),
    (24, m24_ingest_key_projects.SQL),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]
