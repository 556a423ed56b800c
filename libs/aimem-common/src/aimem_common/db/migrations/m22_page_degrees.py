"""Migration 22: each live page's link degree and each project's link-graph version, kept by triggers."""

from __future__ import annotations

# The project graph draws a project's most connected pages. Counting them from `links` reads
# every link of the project and checks both ends (70 ms at 10,000 pages), so the degrees are
# kept instead and the top pages are read from an index.
#
# A link counts once at each end when both ends are live pages of one project and differ.
# `page_degrees` holds one row per live page (its project and that count); it is kept by
# triggers in the transaction that changes the links or the pages, so every write path
# (write, delete, restore, sweep, move, purge, import, rebuild) keeps it without knowing.
# The triggers read liveness and project from `page_degrees` itself: a row exists exactly
# while its page is live, so the link triggers need no look-up in `pages`, and a link trigger
# whose link does not count (a dangling one, one from a retired version) stops at its WHEN.
#
# A page's own row changes (is_latest, project_id) are handled as "remove what the page
# counted under its old row, then add what it counts under its new row"; the neighbours'
# counts come from one grouped read of the page's links (a hub's thousand backlinks are
# one pass, not a thousand look-ups). A deleted page is removed BEFORE its row goes,
# because the links cascading from it are deleted after the row, when it is no longer known.
#
# `link_graph_versions` counts every change of what a project's graph shows (a page going
# live or not, a counted link added, removed or repointed): a kept drawing is shown while
# its project's version is unchanged. (The newest page id and the page count could repeat
# after a purge freed the highest ids.)
SQL = """
CREATE TABLE page_degrees (
  page_id     INTEGER PRIMARY KEY,   -- a live page (rows follow pages through the triggers below)
  project_id  TEXT NOT NULL,
  degree      INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE link_graph_versions (
  project_id  TEXT PRIMARY KEY,
  version     INTEGER NOT NULL DEFAULT 0
);
WITH live AS MATERIALIZED (
  SELECT l.from_page_id AS a, l.to_page_id AS b FROM links l
  JOIN pages s ON s.id = l.from_page_id JOIN pages t ON t.id = l.to_page_id
  WHERE s.is_latest = 1 AND t.is_latest = 1 AND s.project_id = t.project_id AND l.from_page_id != l.to_page_id
), counted AS (
  SELECT id, count(*) AS n FROM (SELECT a AS id FROM live UNION ALL SELECT b FROM live) GROUP BY id
)
INSERT INTO page_degrees(page_id, project_id, degree)
SELECT p.id, p.project_id, coalesce(c.n, 0) FROM pages p LEFT JOIN counted c ON c.id = p.id WHERE p.is_latest = 1;
CREATE INDEX page_degrees_rank ON page_degrees(project_id, degree DESC, page_id);
INSERT INTO link_graph_versions(project_id, version) SELECT DISTINCT project_id, 1 FROM page_degrees;

CREATE TRIGGER links_degree_insert AFTER INSERT ON links
WHEN new.to_page_id != new.from_page_id
  AND (SELECT a.project_id FROM page_degrees a JOIN page_degrees b ON b.project_id = a.project_id
       WHERE a.page_id = new.from_page_id AND b.page_id = new.to_page_id) IS NOT NULL BEGIN
  UPDATE link_graph_versions SET version = version + 1 WHERE project_id =
    (SELECT a.project_id FROM page_degrees a JOIN page_degrees b ON b.project_id = a.project_id
     WHERE a.page_id = new.from_page_id AND b.page_id = new.to_page_id);
  UPDATE page_degrees SET degree = degree + 1 WHERE page_id IN (new.from_page_id, new.to_page_id);
END;
CREATE TRIGGER links_degree_delete AFTER DELETE ON links
WHEN old.to_page_id != old.from_page_id
  AND (SELECT a.project_id FROM page_degrees a JOIN page_degrees b ON b.project_id = a.project_id
       WHERE a.page_id = old.from_page_id AND b.page_id = old.to_page_id) IS NOT NULL BEGIN
  UPDATE link_graph_versions SET version = version + 1 WHERE project_id =
    (SELECT a.project_id FROM page_degrees a JOIN page_degrees b ON b.project_id = a.project_id
     WHERE a.page_id = old.from_page_id AND b.page_id = old.to_page_id);
  UPDATE page_degrees SET degree = degree - 1 WHERE page_id IN (old.from_page_id, old.to_page_id);
END;
CREATE TRIGGER links_degree_unlink AFTER UPDATE OF from_page_id, to_page_id ON links
WHEN old.to_page_id != old.from_page_id
  AND (old.from_page_id IS NOT new.from_page_id OR old.to_page_id IS NOT new.to_page_id)
  AND (SELECT a.project_id FROM page_degrees a JOIN page_degrees b ON b.project_id = a.project_id
       WHERE a.page_id = old.from_page_id AND b.page_id = old.to_page_id) IS NOT NULL BEGIN
  UPDATE link_graph_versions SET version = version + 1 WHERE project_id =
    (SELECT a.project_id FROM page_degrees a JOIN page_degrees b ON b.project_id = a.project_id
     WHERE a.page_id = old.from_page_id AND b.page_id = old.to_page_id);
  UPDATE page_degrees SET degree = degree - 1 WHERE page_id IN (old.from_page_id, old.to_page_id);
END;
CREATE TRIGGER links_degree_relink AFTER UPDATE OF from_page_id, to_page_id ON links
WHEN new.to_page_id != new.from_page_id
  AND (old.from_page_id IS NOT new.from_page_id OR old.to_page_id IS NOT new.to_page_id)
  AND (SELECT a.project_id FROM page_degrees a JOIN page_degrees b ON b.project_id = a.project_id
       WHERE a.page_id = new.from_page_id AND b.page_id = new.to_page_id) IS NOT NULL BEGIN
  UPDATE link_graph_versions SET version = version + 1 WHERE project_id =
    (SELECT a.project_id FROM page_degrees a JOIN page_degrees b ON b.project_id = a.project_id
     WHERE a.page_id = new.from_page_id AND b.page_id = new.to_page_id);
  UPDATE page_degrees SET degree = degree + 1 WHERE page_id IN (new.from_page_id, new.to_page_id);
END;

CREATE TRIGGER pages_degree_insert AFTER INSERT ON pages WHEN new.is_latest = 1 BEGIN
  INSERT INTO page_degrees(page_id, project_id, degree) VALUES (new.id, new.project_id, 0);
  INSERT OR IGNORE INTO link_graph_versions(project_id, version) VALUES (new.project_id, 0);
  UPDATE link_graph_versions SET version = version + 1 WHERE project_id = new.project_id;
  UPDATE page_degrees SET degree = degree + c.n FROM (
    SELECT nb, count(*) AS n FROM (SELECT to_page_id AS nb FROM links WHERE from_page_id = new.id
                                   UNION ALL SELECT from_page_id FROM links WHERE to_page_id = new.id)
    WHERE nb != new.id GROUP BY nb) AS c
  WHERE page_degrees.page_id = c.nb AND page_degrees.project_id = new.project_id;
  UPDATE page_degrees SET degree = (
    SELECT count(*) FROM (SELECT to_page_id AS nb FROM links WHERE from_page_id = new.id
                          UNION ALL SELECT from_page_id FROM links WHERE to_page_id = new.id) AS c
    JOIN page_degrees d ON d.page_id = c.nb WHERE c.nb != new.id AND d.project_id = new.project_id)
  WHERE page_id = new.id;
END;
CREATE TRIGGER pages_degree_update AFTER UPDATE OF is_latest, project_id ON pages
WHEN old.is_latest IS NOT new.is_latest OR old.project_id IS NOT new.project_id BEGIN
  UPDATE link_graph_versions SET version = version + 1
  WHERE project_id = (SELECT project_id FROM page_degrees WHERE page_id = old.id);
  UPDATE page_degrees SET degree = degree - c.n FROM (
    SELECT nb, count(*) AS n FROM (SELECT to_page_id AS nb FROM links WHERE from_page_id = old.id
                                   UNION ALL SELECT from_page_id FROM links WHERE to_page_id = old.id)
    WHERE nb != old.id GROUP BY nb) AS c
  WHERE page_degrees.page_id = c.nb
    AND page_degrees.project_id = (SELECT project_id FROM page_degrees WHERE page_id = old.id);
  DELETE FROM page_degrees WHERE page_id = old.id;
  INSERT INTO page_degrees(page_id, project_id, degree) SELECT new.id, new.project_id, 0 WHERE new.is_latest = 1;
  INSERT OR IGNORE INTO link_graph_versions(project_id, version) SELECT new.project_id, 0 WHERE new.is_latest = 1;
  UPDATE link_graph_versions SET version = version + 1 WHERE new.is_latest = 1 AND project_id = new.project_id;
  UPDATE page_degrees SET degree = degree + c.n FROM (
    SELECT nb, count(*) AS n FROM (SELECT to_page_id AS nb FROM links WHERE from_page_id = new.id
                                   UNION ALL SELECT from_page_id FROM links WHERE to_page_id = new.id)
    WHERE nb != new.id GROUP BY nb) AS c
  WHERE new.is_latest = 1 AND page_degrees.page_id = c.nb AND page_degrees.project_id = new.project_id;
  UPDATE page_degrees SET degree = (
    SELECT count(*) FROM (SELECT to_page_id AS nb FROM links WHERE from_page_id = new.id
                          UNION ALL SELECT from_page_id FROM links WHERE to_page_id = new.id) AS c
    JOIN page_degrees d ON d.page_id = c.nb WHERE c.nb != new.id AND d.project_id = new.project_id)
  WHERE page_id = new.id;
END;
CREATE TRIGGER pages_degree_delete BEFORE DELETE ON pages WHEN old.is_latest = 1 BEGIN
  UPDATE link_graph_versions SET version = version + 1
  WHERE project_id = (SELECT project_id FROM page_degrees WHERE page_id = old.id);
  UPDATE page_degrees SET degree = degree - c.n FROM (
    SELECT nb, count(*) AS n FROM (SELECT to_page_id AS nb FROM links WHERE from_page_id = old.id
                                   UNION ALL SELECT from_page_id FROM links WHERE to_page_id = old.id)
    WHERE nb != old.id GROUP BY nb) AS c
  WHERE page_degrees.page_id = c.nb
    AND page_degrees.project_id = (SELECT project_id FROM page_degrees WHERE page_id = old.id);
  DELETE FROM page_degrees WHERE page_id = old.id;
END;
CREATE TRIGGER projects_degree_delete AFTER DELETE ON projects BEGIN
  DELETE FROM page_degrees WHERE project_id = old.id;
  DELETE FROM link_graph_versions WHERE project_id = old.id;
END;
"""
