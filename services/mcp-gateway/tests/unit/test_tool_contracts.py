"""tools/list is a contract: pinned names, parameter lists, annotations, the README table."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from aimem_mcp import tooltable
from aimem_mcp.tools import ALL_TOOLS

PKG = Path(__file__).resolve().parents[2]
REPO = PKG.parents[1]

# name -> parameter names in schema order (aliases included). Changing one is an API change:
# update this list, TOOLS.md and the README table together.
PINNED: dict[str, list[str]] = {
    "memory_query": ["query", "workspace", "project", "limit", "scopes", "global", "explain", "include_expired",
                     "include_superseded", "q", "search", "n", "top_k"],
    "memory_recent": ["workspace", "project", "project_id", "limit", "updated_since", "cursor", "include_expired",
                      "n", "top_k"],
    "memory_read_page": ["workspace", "project", "project_id", "path", "query", "page_id"],
    "memory_read_session_observations": ["workspace", "project", "project_id", "session_id", "offset", "limit",
                                         "body_max_chars", "n", "top_k"],
    "memory_status": ["workspace", "project"],
    "memory_briefing": ["workspace", "project", "project_id", "limit", "settled_first", "n", "top_k"],
    "memory_explore": ["workspace", "project", "project_id", "focus", "settled_first"],
    "memory_handoff_begin": ["workspace", "project", "project_id", "summary", "next_steps", "title", "cwd",
                             "to_agent", "from_agent", "session_id", "shared"],
    "memory_handoff_list": ["workspace", "project", "project_id", "status", "limit", "any_owner", "include_body",
                            "n", "top_k"],
    "memory_handoff_accept": ["workspace", "project", "project_id", "handoff_id", "cwd", "agent", "session_id",
                              "any_owner"],
    "memory_handoff_cancel": ["workspace", "project", "project_id", "handoff_id", "any_owner"],
    "memory_message_send": ["workspace", "project", "project_id", "to_project", "to_workspace", "body", "subject"],
    "memory_message_list": ["workspace", "project", "project_id", "box", "status", "limit", "n", "top_k"],
    "memory_message_pop": ["workspace", "project", "project_id", "message_id"],
    "memory_message_cancel": ["workspace", "project", "project_id", "message_id"],
    "memory_consolidate": ["workspace", "project", "project_id", "session_id", "multi_page", "instructions"],
    "memory_feedback": ["workspace", "project", "project_id", "path", "signal", "reason"],
    "memory_profile": ["action", "text", "entry_id", "workspace", "project", "session_id"],
    "memory_auto_improve": ["workspace", "project", "project_id", "session_id"],
    "memory_write_page": ["workspace", "project", "project_id", "path", "body", "title", "frontmatter", "scope",
                          "expires_at", "create_only", "expected_page_id"],
    "memory_write_pages_batch": ["workspace", "project", "project_id", "pages"],
    "memory_delete_page": ["workspace", "project", "project_id", "path", "expected_page_id"],
    "memory_restore_page": ["workspace", "project", "project_id", "path", "rev", "limit", "n", "top_k"],
    "memory_resolve_write_target": ["workspace", "project", "project_id"],
    "memory_forget_sweep": ["workspace", "project", "project_id", "dry_run"],
    "memory_lint": ["workspace", "project", "project_id", "llm"],
    "memory_install_self_routing": ["client", "workspace", "project"],
    "memory_workstream_search": ["workspace", "project", "project_id", "query", "limit", "n", "top_k"],
    "memory_workstreams": ["workspace", "project", "project_id", "workstream_id", "after_seq", "limit", "n", "top_k"],
}

READ_ONLY = {
    "memory_query", "memory_recent", "memory_read_page", "memory_read_session_observations", "memory_status",
    "memory_briefing", "memory_explore", "memory_handoff_list", "memory_message_list", "memory_install_self_routing",
    "memory_workstream_search", "memory_workstreams",
    "memory_resolve_write_target",
}


@pytest.fixture(scope="module")
def listed():
    return asyncio.run(tooltable.list_tools())


def test_names_and_parameters_are_pinned(listed):
    assert [t.name for t in listed] == list(PINNED)
    for t in listed:
        assert list(t.input_schema["properties"]) == PINNED[t.name], t.name


def test_every_tool_has_full_annotations_and_a_useful_description(listed):
    for t in listed:
        a = t.annotations
        assert a is not None, t.name
        for hint in (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint):
            assert isinstance(hint, bool), t.name
        assert a.read_only_hint == (t.name in READ_ONLY), t.name
        if a.read_only_hint:
            assert not a.destructive_hint, t.name
        assert t.title and len(t.description) > 200, t.name
        assert "Returns" in t.description, t.name
        assert t.input_schema.get("additionalProperties") is False, t.name


def test_briefing_and_handoff_descriptions_tell_them_apart(listed):
    by = {t.name: t.description for t in listed}
    assert "memory_handoff_accept" in by["memory_briefing"]
    assert "memory_briefing" in by["memory_handoff_begin"]
    assert "memory_briefing" in by["memory_handoff_accept"]


def test_project_scoped_tools_require_project(listed):
    for t in listed:
        if t.name in ("memory_query", "memory_status", "memory_install_self_routing", "memory_profile"):
            assert "project" not in t.input_schema.get("required", []), t.name
        else:
            # `project` or the stable `project_id` (exactly one; checked at call time: a top-level
            # anyOf is refused by some clients' tool schemas)
            props = t.input_schema["properties"]
            assert "project" in props and "project_id" in props, t.name
            assert "Required unless `project_id`" in props["project"]["description"], t.name


def test_tools_md_matches_tools_list(listed):
    assert (PKG / "TOOLS.md").read_text() == tooltable.render(listed), (
        "TOOLS.md is stale: run `python -m aimem_mcp.tooltable > services/mcp-gateway/TOOLS.md`"
    )


def test_readme_table_matches_tools_list(listed):
    readme = REPO / "README.md"
    text = readme.read_text() if readme.is_file() else ""
    assert tooltable.BEGIN in text, "README.md lacks the generated MCP tool table (services/mcp-gateway/TOOLS.md)"
    block = re.search(re.escape(tooltable.BEGIN) + r".*?" + re.escape(tooltable.END), text, re.S)
    assert block and block.group(0) + "\n" == tooltable.render(listed), (
        "README tool table is stale: paste `python -m aimem_mcp.tooltable`"
    )


# Tools whose result is stored memory handed to the agent as context (DESIGN: every injected
# output is fenced): their strings are neutralised and their text is one <aimem-memory> fence.
FENCED = {"memory_briefing", "memory_handoff_accept", "memory_explore", "memory_profile", "memory_workstreams",
          "memory_workstream_search"}


def test_the_injected_outputs_are_fenced_and_say_so():
    assert {s.name for s in ALL_TOOLS if s.fenced} == FENCED
    for spec in ALL_TOOLS:
        if spec.fenced:
            assert "<aimem-memory>" in spec.description and "fence" in spec.description, spec.name


def test_the_managed_skills_and_routing_name_only_real_tools_and_parameters(listed):
    """The skills (aimem_common.skills, written by `aimem install-skills` and returned by
    memory_install_self_routing) teach agents tool names: each one must exist."""
    from aimem_common.skills import MANAGED_MARK, SKILLS
    from aimem_mcp.tools.memory_install_self_routing import SNIPPET

    names = {t.name for t in listed}
    for rel, text in SKILLS.items():
        assert text.startswith("---\nname: " + rel.split("/")[0] + "\n") and MANAGED_MARK in text
        used = set(re.findall(r"memory_[a-z_]+", text))
        assert used and used <= names, (rel, used - names)
    assert set(re.findall(r"memory_[a-z_]+", SNIPPET)) <= names
