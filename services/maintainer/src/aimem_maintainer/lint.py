"""Rule-based lint (+ the LLM contradiction pass) → one ``_lint/report.md`` page per project.

Rules (all read-only SQL over live pages): dangling links, dangling cross-project links,
orphan knowledge pages (no incoming link), duplicate titles, missing/invalid frontmatter,
oversized pages, and pages flagged ``stale``/``wrong`` through feedback. The report body has
no timestamp, so an unchanged set of findings is a no-op write (same content hash).
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from aimem_common.models import Scope, Tier
from aimem_maintainer.llm import fence
from aimem_maintainer.store import parse_time

if TYPE_CHECKING:
    from aimem_maintainer.context import MaintContext

REPORT_PATH = "_lint/report.md"
OVERSIZED_CHARS = 32_000
KNOWLEDGE_DIRS = ("concepts/", "decisions/", "gotchas/", "procedures/", "_rules/")
CONTRADICTION_PAGES = 12


def lint_rules(conn: sqlite3.Connection, scope: Scope) -> list[dict[str, Any]]:
    """Return the rule findings of ``scope``: ``[{rule, path, detail}]``, sorted."""
    pid = scope.project_id
    findings: list[dict[str, Any]] = []
    for r in conn.execute(
        "SELECT p.path, l.to_path, l.to_workspace, l.to_project FROM links l JOIN pages p ON p.id = l.from_page_id"
        " WHERE p.project_id = ? AND p.is_latest = 1 AND l.to_page_id IS NULL",
        (pid,),
    ):
        if r["to_project"] is None:
            findings.append({"rule": "dangling_link", "path": r["path"], "detail": f"links to missing {r['to_path']}"})
        else:
            target = f"{r['to_workspace'] + '/' if r['to_workspace'] else ''}{r['to_project']}:{r['to_path']}"
            findings.append({"rule": "dangling_cross_project_link", "path": r["path"],
                             "detail": f"links to missing {target}"})
    live = conn.execute(
        "SELECT id, path, title, body, frontmatter, tier, expires_at FROM pages WHERE project_id = ? AND is_latest = 1"
        " AND path != ? ORDER BY path",
        (pid, REPORT_PATH),
    ).fetchall()
    incoming = {r[0] for r in conn.execute(
        "SELECT DISTINCT l.to_page_id FROM links l JOIN pages src ON src.id = l.from_page_id AND src.is_latest = 1"
        " WHERE l.to_page_id IS NOT NULL AND src.id != l.to_page_id"
    )}
    titles: dict[str, list[str]] = defaultdict(list)
    for p in live:
        path = p["path"]
        if path.startswith(KNOWLEDGE_DIRS) and p["id"] not in incoming:
            findings.append({"rule": "orphan_page", "path": path, "detail": "no live page links here"})
        if (p["title"] or "").strip():
            titles[" ".join(p["title"].casefold().split())].append(path)
        else:
            findings.append({"rule": "missing_frontmatter", "path": path, "detail": "no title"})
        try:
            fm = json.loads(p["frontmatter"] or "{}")
            if not isinstance(fm, dict):
                raise ValueError("not an object")
        except ValueError:
            findings.append({"rule": "invalid_frontmatter", "path": path, "detail": "frontmatter is not a mapping"})
            fm = {}
        if fm.get("tier") is not None and fm.get("tier") not in {t.value for t in Tier}:
            findings.append({"rule": "invalid_frontmatter", "path": path, "detail": f"unknown tier {fm.get('tier')!r}"})
        exp = fm.get("expires_at", p["expires_at"])
        if exp not in (None, "") and parse_time(str(exp)) is None:
            findings.append({"rule": "invalid_frontmatter", "path": path, "detail": f"unparsable expires_at {exp!r}"})
        if path.startswith("_slots/") and fm.get("slot_kind") not in (None, "state", "invariant"):
            findings.append({"rule": "invalid_frontmatter", "path": path,
                             "detail": f"slot_kind must be state|invariant, got {fm.get('slot_kind')!r}"})
        if len(p["body"] or "") > OVERSIZED_CHARS:
            findings.append({"rule": "oversized_page", "path": path, "detail": f"{len(p['body'])} chars"})
    for title, paths in titles.items():
        if len(paths) > 1:
            for path in paths:
                others = ", ".join(x for x in paths if x != path)
                findings.append({"rule": "duplicate_title", "path": path, "detail": f"same title as {others}"})
    for r in conn.execute(
        "SELECT p.path, f.signal, count(*) AS n, max(f.reason) AS reason FROM page_feedback f"
        " JOIN pages p ON p.id = f.page_id WHERE p.project_id = ? AND p.is_latest = 1"
        " AND f.signal IN ('stale', 'wrong') GROUP BY p.path, f.signal",
        (pid,),
    ):
        detail = f"{r['n']}× {r['signal']}" + (f": {r['reason'][:200]}" if r["reason"] else "")
        findings.append({"rule": "feedback_flagged", "path": r["path"], "detail": detail})
    findings.sort(key=lambda f: (f["rule"], f["path"], f["detail"]))
    return findings


class Contradiction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    paths: list[str] = Field(description="the two (or more) page paths that contradict each other")
    explanation: str


class ContradictionReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    contradictions: list[Contradiction]


def _knowledge_pages(conn: sqlite3.Connection, scope: Scope) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT path, title, substr(body, 1, 1500) AS body FROM pages WHERE project_id = ? AND is_latest = 1"
        " AND (path LIKE 'concepts/%' OR path LIKE 'decisions/%' OR path LIKE 'gotchas/%' OR path LIKE '_rules/%'"
        " OR path LIKE 'procedures/%') ORDER BY updated_at DESC LIMIT ?",
        (scope.project_id, CONTRADICTION_PAGES),
    ).fetchall()
    return [dict(r) for r in rows]


async def contradiction_pass(ctx: "MaintContext", scope: Scope) -> list[dict[str, Any]]:
    """Ask the LLM which of the newest knowledge pages contradict each other (bounded)."""
    pages = await ctx.read_pool.run(lambda conn: _knowledge_pages(conn, scope))
    if len(pages) < 2 or ctx.llm is None:
        return []
    known = {p["path"] for p in pages}
    report = await ctx.llm.structured(
        ContradictionReport,
        name="lint_contradictions",
        system="You audit a project's knowledge wiki. Report only direct factual contradictions between pages; "
        "an empty list is a good answer.",
        user="Pages:\n" + fence("wiki_pages", pages),
    )
    out = []
    for c in report.contradictions:
        paths = [p for p in c.paths if p in known]
        if len(paths) >= 2:
            out.append({"rule": "contradiction", "path": paths[0],
                        "detail": f"contradicts {', '.join(paths[1:])}: {c.explanation[:300]}"})
    return out


def render_report(scope: Scope, findings: list[dict[str, Any]]) -> str:
    """Markdown body of the report (deterministic: no timestamps)."""
    counts: dict[str, int] = defaultdict(int)
    for f in findings:
        counts[f["rule"]] += 1
    lines = [f"# Lint report: {scope.workspace}/{scope.project}", ""]
    if not findings:
        lines.append("No findings.")
        return "\n".join(lines) + "\n"
    lines.append(f"{len(findings)} findings: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    current = None
    for f in findings:
        if f["rule"] != current:
            current = f["rule"]
            lines += ["", f"## {current}", ""]
        # Plain code spans, not wikilinks: the report must not create links that hide orphans.
        lines.append(f"- `{f['path']}`: {f['detail']}")
    return "\n".join(lines) + "\n"


async def run_lint(ctx: "MaintContext", scope: Scope, *, write: bool = True, use_llm: bool = True
                   ) -> dict[str, Any]:
    """Lint ``scope``; write ``_lint/report.md`` through ``page.write`` unless ``write`` is False."""
    findings = await ctx.read_pool.run(lambda conn: lint_rules(conn, scope))
    llm_error = None
    if use_llm and ctx.llm is not None:
        try:
            findings += await contradiction_pass(ctx, scope)
        except Exception as exc:  # noqa: BLE001 - the rule-based report still lands
            llm_error = getattr(exc, "code", type(exc).__name__)
        findings.sort(key=lambda f: (f["rule"], f["path"], f["detail"]))
    out: dict[str, Any] = {"workspace": scope.workspace, "project": scope.project, "findings": findings,
                           "count": len(findings), "llm_error": llm_error}
    if write:
        res = await ctx.send(
            "page.write",
            {"path": REPORT_PATH, "title": f"Lint report {scope.project}", "body": render_report(scope, findings),
             "frontmatter": {"generated_by": "aimem-maintainer", "findings": len(findings)}},
            scope,
        )
        out["report"] = {"path": REPORT_PATH, "page_id": res.get("page_id"), "changed": res.get("changed")}
    return out
