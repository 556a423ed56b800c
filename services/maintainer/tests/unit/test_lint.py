"""Rule-based lint over a seeded store."""

from __future__ import annotations

from aimem_maintainer.lint import lint_rules, render_report
from aimem_common.read.scopes import all_scopes


def test_lint_rules_find_each_kind(seed):
    a = seed.project("alpha")
    linked = seed.page(a, "concepts/linked.md", title="Linked")
    src = seed.page(a, "decisions/src.md", title="Source")
    seed.page(a, "concepts/orphan.md", title="Orphan")
    seed.page(a, "gotchas/dup1.md", title="Same  Title")
    seed.page(a, "gotchas/dup2.md", title="same title")
    seed.page(a, "notes/big.md", title="Big", body="x" * 40_000)
    seed.page(a, "_slots/focus.md", title="Focus", frontmatter={"slot_kind": "weird"})
    seed.page(a, "notes/ttl.md", title="TTL", frontmatter={"expires_at": "next tuesday"})
    c = seed.conn
    c.execute("INSERT INTO links(workspace_id, project_id, from_page_id, to_path, to_page_id) VALUES (?,?,?,?,?)",
              (a.workspace_id, a.project_id, src, "concepts/linked.md", linked))
    c.execute("INSERT INTO links(workspace_id, project_id, from_page_id, to_path, to_page_id) VALUES (?,?,?,?,NULL)",
              (a.workspace_id, a.project_id, src, "concepts/missing.md"))
    c.execute("INSERT INTO links(workspace_id, project_id, from_page_id, to_project, to_path, to_page_id)"
              " VALUES (?,?,?,?,?,NULL)", (a.workspace_id, a.project_id, src, "other", "x.md"))
    c.execute("INSERT INTO page_feedback(workspace_id, project_id, page_id, path, signal, reason, created_at)"
              " VALUES (?,?,?,?,?,?,?)", (a.workspace_id, a.project_id, linked, "concepts/linked.md", "wrong", "outdated", "2026-01-01"))
    findings = lint_rules(c, all_scopes(c)[0])
    got = {(f["rule"], f["path"]) for f in findings}
    assert got == {
        ("dangling_link", "decisions/src.md"),
        ("dangling_cross_project_link", "decisions/src.md"),
        ("orphan_page", "concepts/orphan.md"),
        ("orphan_page", "decisions/src.md"),
        ("orphan_page", "gotchas/dup1.md"),
        ("orphan_page", "gotchas/dup2.md"),
        ("duplicate_title", "gotchas/dup1.md"),
        ("duplicate_title", "gotchas/dup2.md"),
        ("oversized_page", "notes/big.md"),
        ("invalid_frontmatter", "_slots/focus.md"),
        ("invalid_frontmatter", "notes/ttl.md"),
        ("feedback_flagged", "concepts/linked.md"),
    }
    report = render_report(all_scopes(c)[0], findings)
    assert "[[" not in report and "## orphan_page" in report
    assert render_report(all_scopes(c)[0], findings) == report  # deterministic: unchanged = no new version
