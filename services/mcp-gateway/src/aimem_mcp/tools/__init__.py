"""Every MCP tool, one module each; ``ALL_TOOLS`` is the served order (tools/list order).

Adding a tool: write ``tools/<name>.py`` with an ``Args`` model and an ``@tool`` coroutine,
add it here, and update the pinned list in ``tests/unit/test_tool_contracts.py`` and
``TOOLS.md`` (``python -m aimem_mcp.tooltable``).
"""

from __future__ import annotations

from aimem_mcp.registry import ToolSpec
from aimem_mcp.tools import (
    memory_auto_improve,
    memory_briefing,
    memory_consolidate,
    memory_delete_page,
    memory_explore,
    memory_feedback,
    memory_forget_sweep,
    memory_handoff_accept,
    memory_handoff_begin,
    memory_handoff_cancel,
    memory_handoff_list,
    memory_install_self_routing,
    memory_lint,
    memory_message_cancel,
    memory_message_list,
    memory_message_pop,
    memory_message_send,
    memory_profile,
    memory_query,
    memory_read_page,
    memory_read_session_observations,
    memory_recent,
    memory_resolve_write_target,
    memory_restore_page,
    memory_status,
    memory_write_page,
    memory_workstream_search,
    memory_workstreams,
    memory_write_pages_batch,
)

ALL_TOOLS: list[ToolSpec] = [
    memory_query.memory_query,
    memory_recent.memory_recent,
    memory_read_page.memory_read_page,
    memory_read_session_observations.memory_read_session_observations,
    memory_status.memory_status,
    memory_briefing.memory_briefing,
    memory_explore.memory_explore,
    memory_handoff_begin.memory_handoff_begin,
    memory_handoff_list.memory_handoff_list,
    memory_handoff_accept.memory_handoff_accept,
    memory_handoff_cancel.memory_handoff_cancel,
    memory_message_send.memory_message_send,
    memory_message_list.memory_message_list,
    memory_message_pop.memory_message_pop,
    memory_message_cancel.memory_message_cancel,
    memory_consolidate.memory_consolidate,
    memory_feedback.memory_feedback,
    memory_profile.memory_profile,
    memory_auto_improve.memory_auto_improve,
    memory_write_page.memory_write_page,
    memory_write_pages_batch.memory_write_pages_batch,
    memory_delete_page.memory_delete_page,
    memory_restore_page.memory_restore_page,
    memory_resolve_write_target.memory_resolve_write_target,
    memory_forget_sweep.memory_forget_sweep,
    memory_lint.memory_lint,
    memory_install_self_routing.memory_install_self_routing,
    memory_workstream_search.memory_workstream_search,
    memory_workstreams.memory_workstreams,
]
