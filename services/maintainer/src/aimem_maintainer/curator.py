"""The curator: one report page of knowledge pages to merge, split or retire.

Rule-based and read-only over live pages (no LLM, so it works with the zero-LLM default);
it changes nothing itself: it writes one page, ``_lint/curator.md``, for a person or an agent
to act on. The body has no timestamp, so an unchanged set of findings is a no-op write.

* **merge**: two knowledge pages with the same normalised title, or whose bodies share at
  least ``MERGE_SIMILARITY`` of their word pairs (Jaccard over word bigrams).
* **split**: a page over ``SPLIT_CHARS`` characters with at least ``SPLIT_SECTIONS``
  second-level sections.
* **retire**: a page flagged ``stale`` or ``wrong`` through feedback more often than marked
  ``helpful``, or one nobody read, nothing links to and nobody changed for
  ``RETIRE_IDLE_DAYS`` days.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from aimem_common.models import Scope

from aimem_maintainer.lint import KNOWLEDGE_DIRS

if TYPE_CHECKING:
    from aimem_maintainer.context import MaintContext

REPORT_PATH = "_lint/curator.md"
MAX_PAGES = 400  # newest knowledge pages compared pairwise (bounded work)
MERGE_SIMILARITY = 0.5
MIN_BIGRAMS = 8  # pages shorter than this are compared by title only
SPLIT_CHARS = 8_000
SPLIT_SECTIONS = 3
RETIRE_IDLE_DAYS = 180
_WORD = re.compile(r"\w+", re.UNICODE)


def _bigrams(text: str) -> frozenset[tuple[str, str]]:
    words = _WORD.findall(text.casefold())
    return frozenset(zip(words, words[1:]))


def curate(conn: sqlite3.Connection, scope: Scope, now: datetime | None = None) -> list[dict[str, Any]]:
    """Return the findings of ``scope``: ``[{action: merge|split|retire, paths: [..], detail}]``,
    sorted by action, then paths."""
    now = now or datetime.now(UTC)
    rows = conn.execute(
        "SELECT id, path, title, body, access_count, last_accessed_at, updated_at FROM pages"
        " WHERE project_id = ? AND is_latest = 1 ORDER BY updated_at DESC, id DESC",
        (scope.project_id,),
    ).fetchall()
    pages = [r for r in rows if r["path"].startswith(KNOWLEDGE_DIRS)][:MAX_PAGES]
    out: list[dict[str, Any]] = []
    grams = {r["id"]: _bigrams(r["body"] or "") for r in pages}
    for i, a in enumerate(pages):
        ta = " ".join((a["title"] or "").casefold().split())
        for b in pages[i + 1:]:
            if ta and ta == " ".join((b["title"] or "").casefold().split()):
                out.append({"action": "merge", "paths": sorted([a["path"], b["path"]]), "detail": "same title"})
                continue
            ga, gb = grams[a["id"]], grams[b["id"]]
            if len(ga) < MIN_BIGRAMS or len(gb) < MIN_BIGRAMS:
                continue
            sim = len(ga & gb) / len(ga | gb)
            if sim >= MERGE_SIMILARITY:
                out.append({"action": "merge", "paths": sorted([a["path"], b["path"]]),
                            "detail": f"{sim:.0%} of their word pairs are shared"})
    for p in pages:
        body = p["body"] or ""
        sections = [ln[3:].strip() for ln in body.splitlines() if ln.startswith("## ")]
        if len(body) > SPLIT_CHARS and len(sections) >= SPLIT_SECTIONS:
            out.append({"action": "split", "paths": [p["path"]],
                        "detail": f"{len(body)} chars in {len(sections)} sections: "
                                  + ", ".join(s[:60] for s in sections[:8])})
    ids = [p["id"] for p in pages]
    signals: dict[int, dict[str, int]] = {}
    incoming: set[int] = set()
    if ids:
        marks = ",".join("?" * len(ids))
        for r in conn.execute(f"SELECT page_id, signal, count(*) FROM page_feedback WHERE page_id IN ({marks})"
                              " GROUP BY page_id, signal", ids):
            signals.setdefault(r[0], {})[r[1]] = r[2]
        incoming = {r[0] for r in conn.execute(
            f"SELECT DISTINCT l.to_page_id FROM links l JOIN pages src ON src.id = l.from_page_id AND src.is_latest = 1"
            f" WHERE l.to_page_id IN ({marks}) AND src.id != l.to_page_id", ids)}
    idle_before = (now - timedelta(days=RETIRE_IDLE_DAYS)).isoformat()
    for p in pages:
        s = signals.get(p["id"], {})
        bad = s.get("stale", 0) + s.get("wrong", 0)
        if bad and bad > s.get("helpful", 0):
            out.append({"action": "retire", "paths": [p["path"]],
                        "detail": f"flagged stale/wrong {bad}×, helpful {s.get('helpful', 0)}×"})
        elif (p["access_count"] or 0) == 0 and p["id"] not in incoming and p["updated_at"] < idle_before:
            out.append({"action": "retire", "paths": [p["path"]],
                        "detail": f"never read, no links in, unchanged for {RETIRE_IDLE_DAYS}+ days"})
    out.sort(key=lambda f: (f["action"], f["paths"], f["detail"]))
    return out


def render(scope: Scope, findings: list[dict[str, Any]]) -> str:
    """Markdown body of the curator page (deterministic: no timestamps; code spans, not
    wikilinks, so the report creates no links)."""
    lines = [f"# Curator report: {scope.workspace}/{scope.project}", ""]
    if not findings:
        return "\n".join(lines + ["Nothing to merge, split or retire."]) + "\n"
    heads = {"merge": "Merge", "split": "Split", "retire": "Retire"}
    for action in ("merge", "split", "retire"):
        group = [f for f in findings if f["action"] == action]
        if not group:
            continue
        lines += [f"## {heads[action]} ({len(group)})", ""]
        lines += [f"- {' + '.join(f'`{p}`' for p in f['paths'])}: {f['detail']}" for f in group]
        lines.append("")
    return "\n".join(lines)


async def run_curator(ctx: "MaintContext", scope: Scope, *, write: bool = True) -> dict[str, Any]:
    """Curate ``scope``; write ``_lint/curator.md`` through ``page.write`` unless ``write`` is
    False. Returns ``{workspace, project, findings, counts: {action: n}, report?: {path,
    page_id, changed}}``."""
    findings = await ctx.read_pool.run(lambda conn: curate(conn, scope))
    counts: dict[str, int] = {}
    for f in findings:
        counts[f["action"]] = counts.get(f["action"], 0) + 1
    out: dict[str, Any] = {"workspace": scope.workspace, "project": scope.project, "findings": findings,
                           "counts": counts}
    if write:
        res = await ctx.send("page.write", {
            "path": REPORT_PATH, "title": f"Curator report {scope.project}", "body": render(scope, findings),
            "frontmatter": {"generated_by": "aimem-maintainer", "findings": len(findings)}}, scope)
        out["report"] = {"path": REPORT_PATH, "page_id": res.get("page_id"), "changed": res.get("changed")}
    return out
