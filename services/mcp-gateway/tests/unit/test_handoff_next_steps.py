"""``memory_handoff_begin``'s ``next_steps``: a list of steps, or one string of lines (agents
often send a string; it was refused as "not a valid list")."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from aimem_mcp.tools.memory_handoff_begin import Args, compose_body


def test_a_string_is_one_step_per_line() -> None:
    args = Args(project="p", summary="s", next_steps="- add the test\n\n2. run it\n* ship\nplain step")
    assert args.next_steps == ["add the test", "run it", "ship", "plain step"]
    assert compose_body("s", args.next_steps).endswith("## Next steps\n- add the test\n- run it\n- ship\n- plain step")


def test_a_list_is_kept_and_bounded() -> None:
    assert Args(project="p", summary="s", next_steps=["a", "b"]).next_steps == ["a", "b"]
    with pytest.raises(ValidationError, match="at most 50 steps"):
        Args(project="p", summary="s", next_steps=[f"step {i}" for i in range(51)])


def test_the_schema_agents_read_says_both() -> None:
    from aimem_mcp.tooltable import list_tools

    tool = next(t for t in asyncio.run(list_tools()) if t.name == "memory_handoff_begin")
    prop = tool.input_schema["properties"]["next_steps"]
    types = {branch.get("type") for branch in prop.get("anyOf", [prop])}
    assert {"array", "string"} <= types, prop
    assert "list of strings" in prop["description"] and "single string" in prop["description"]
