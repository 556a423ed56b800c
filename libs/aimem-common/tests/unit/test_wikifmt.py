"""aimem_common.wikifmt: frontmatter, titles, links (incl. cross-project), entity names."""

from __future__ import annotations

import pytest

from aimem_common import wikifmt
from aimem_common.errors import BadRequestError
from aimem_common.wikifmt import LinkTarget


def test_parse_and_render_round_trip() -> None:
    text = wikifmt.render({"title": "Retry", "tags": ["a", "b"], "when": "2026-01-02"}, "# Retry\n\nbody")
    parsed = wikifmt.parse(text)
    assert parsed.frontmatter == {"title": "Retry", "tags": ["a", "b"], "when": "2026-01-02"}
    assert parsed.body == "# Retry\n\nbody\n"
    assert wikifmt.render(parsed.frontmatter, parsed.body) == text
    assert wikifmt.parse("no frontmatter\n") == wikifmt.ParsedPage({}, "no frontmatter\n")
    assert wikifmt.parse("---\ndate: 2024-01-01\n---\nx").frontmatter == {"date": "2024-01-01"}
    assert wikifmt.parse("---\r\na: 1\r\n---\r\nx\r\n").body == "x\n"


@pytest.mark.parametrize("text", ["---\na: [1\n---\n", "---\n- x\n---\n", "---\na: 1\n", "---\n: :\n---\n"])
def test_malformed_frontmatter(text) -> None:
    with pytest.raises(BadRequestError) as exc:
        wikifmt.parse(text)
    assert exc.value.code == "invalid_frontmatter"


def test_titles() -> None:
    assert wikifmt.extract_title({"title": " T "}, "# H", "a/b.md") == "T"
    assert wikifmt.extract_title({}, "```\n# not this\n```\n# Real title\n", "a/b.md") == "Real title"
    assert wikifmt.extract_title({}, "no heading", "notes/retry-policy.md") == "retry policy"


def test_links() -> None:
    body = ("[[decisions/0001.md]] [[Some Page|label]] [[infra:runbooks/nats.md]] [[team/lib:api]] "
            "[x](../gotchas/x.md) [y](https://e.com/a.md) [z](#anchor) ![img](pic.md) "
            "`[[inline.md]]`\n```\n[[fenced.md]]\n```\n[[decisions/0001.md]] [up](../../../out.md) [root](../../top.md)")
    got = wikifmt.extract_links(body, "concepts/sub/page.md")
    assert got == [
        LinkTarget("decisions/0001.md"),
        LinkTarget("Some Page.md", label="label"),
        LinkTarget("runbooks/nats.md", project="infra"),
        LinkTarget("api.md", workspace="team", project="lib"),
        LinkTarget("concepts/gotchas/x.md", kind="markdown", label="x"),
        LinkTarget("top.md", kind="markdown", label="root"),
    ]


def test_entities_and_fields() -> None:
    assert wikifmt.normalize_entity("  Jet\u00a0Stream  ") == "jet stream"
    assert wikifmt.normalize_entity("ＡＢＣ") == "abc"
    f = wikifmt.page_fields({"tags": "a, b", "entities": ["X"], "pinned": True, "expires_at": "2030-01-01",
                             "tier": "semantic", "salience": 2})
    assert (f.tags, f.entities, f.pinned, f.expires_at, f.tier, f.salience) == (
        ["a", "b"], ["X"], True, "2030-01-01T00:00:00Z", "semantic", 2.0)
    for bad in ({"pinned": "yes"}, {"tags": [{"a": 1}]}, {"tier": "x"}, {"expires_at": "soon"},
                {"salience": -1}, {"title": 3}):
        with pytest.raises(BadRequestError):
            wikifmt.page_fields(bad)


def test_ledgers_and_manifests() -> None:
    assert wikifmt.is_ledger_name("log-2026-01.md") and wikifmt.is_ledger_name("log.md")
    assert not wikifmt.is_ledger_name("log-2026.md")
    assert wikifmt.looks_like_ledger("## [2026-01-01T00:00:00Z] stop · x\n")
    assert not wikifmt.looks_like_ledger("# A page\n")
    meta = wikifmt.render_meta("project", id="p1", name="app", workspace_id="w1", workspace="default")
    assert wikifmt.parse_meta(meta)["workspace_id"] == "w1"
    with pytest.raises(BadRequestError):
        wikifmt.parse_meta("---\nkind: project\n---\n")
