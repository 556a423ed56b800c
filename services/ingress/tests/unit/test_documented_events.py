"""Every documented hook event of the eleven clients, read from its vendor's reference.

One fixture per event in ``tests/fixtures/hooks/<client>/`` (see ``SOURCES.md`` there):
the list of events is checked against the documents, and each payload's normalisation
against the fixture's ``expect`` (kind, tool, title, the text its body keeps).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aimem_common.models import ObservationKind
from aimem_ingress.normalize import normalize

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hooks"
# The events each client's current hook reference documents (see SOURCES.md).
DOCUMENTED = {
    "claude-code": """SessionStart UserPromptSubmit UserPromptExpansion PreToolUse PermissionRequest
        PermissionDenied PostToolUse PostToolUseFailure PostToolBatch Notification Elicitation ElicitationResult
        Stop StopFailure SubagentStart SubagentStop PreCompact PostCompact Setup TeammateIdle TaskCreated
        TaskCompleted ConfigChange InstructionsLoaded WorktreeCreate WorktreeRemove CwdChanged FileChanged
        DirectoryAdded PreModelSwitch PostModelSwitch MessageDisplay PreSkillShellCommand SessionEnd""",
    "codex": """SessionStart UserPromptSubmit PreToolUse PermissionRequest PostToolUse PreCompact PostCompact
        SubagentStart SubagentStop Stop StopFailure Interrupt SessionEnd agent-turn-complete""",
    "gemini-cli": """SessionStart SessionEnd BeforeAgent AfterAgent BeforeModel AfterModel BeforeToolSelection
        BeforeTool AfterTool PreCompress Notification""",
    "cursor": """sessionStart sessionEnd preToolUse postToolUse postToolUseFailure subagentStart subagentStop
        beforeShellExecution afterShellExecution beforeMCPExecution afterMCPExecution beforeReadFile
        afterFileEdit beforeSubmitPrompt preCompact stop afterAgentResponse afterAgentThought
        beforeTabFileRead afterTabFileEdit""",
    "copilot-cli": """sessionStart sessionEnd userPromptSubmitted preToolUse permissionRequest postToolUse
        postToolUseFailure agentStop subagentStart subagentStop errorOccurred preCompact notification""",
    "opencode": """chat.message tool.execute.before tool.execute.after permission.ask command.execute.before
        experimental.session.compacting session.created session.idle session.compacted session.error
        file.edited permission.updated todo.updated session.deleted dispose""",
    "crush": """Interrupt PermissionRequest PermissionResult PostCompact PostToolUse PostToolUseFailure
        PreCompact PreToolUse SessionEnd SessionStart StopFailure TurnEnd TurnStart""",
    "pi": """after_provider_response agent_end agent_start before_agent_start before_provider_request
        context input message_end message_start message_update model_select resources_discover
        session_before_compact session_before_fork session_before_switch session_before_tree
        session_compact session_shutdown session_start session_tree thinking_level_select tool_call
        tool_execution_end tool_execution_start tool_execution_update tool_result turn_end turn_start
        user_bash""",
    "omp": """after_provider_response agent_end agent_start auto_compaction_end auto_compaction_start
        auto_retry_end auto_retry_start before_agent_start before_provider_request
        before_subagent_spawn context credential_disabled goal_updated input mcp_notification
        message_end message_start message_update resources_discover retry_fallback_applied
        retry_fallback_succeeded session.compacting session_before_branch session_before_compact
        session_before_switch session_before_tree session_branch session_compact session_shutdown
        session_start session_stop session_switch session_tree todo_reminder tool_approval_requested
        tool_approval_resolved tool_call tool_execution_end tool_execution_start tool_execution_update
        tool_result ttsr_triggered turn_end turn_start user_bash user_python""",
    "openclaw": """after_compaction after_tool_call agent_end agent_turn_prepare before_agent_finalize
        before_agent_reply before_agent_run before_compaction before_dispatch before_install
        before_message_write before_model_resolve before_prompt_build before_reset before_tool_call
        channel_pairing_requested cron_changed cron_reconciled gateway_start gateway_stop
        heartbeat_prompt_contribution inbound_claim llm_input llm_output message_received
        message_sending message_sent model_call_ended model_call_started reply_dispatch
        reply_payload_sending resolve_exec_env session_end session_start skill_changed
        skill_proposal_changed skill_proposal_evaluate tool_result_persist""",
    "antigravity": """PostInvocation PostToolUse PreInvocation PreToolUse SessionStart Stop""",
}
FILES = sorted(p for p in FIXTURES.glob("*/*.json"))


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_every_documented_event_has_a_fixture_naming_its_document():
    for client, names in DOCUMENTED.items():
        got = {load(p)["event"] for p in (FIXTURES / client).glob("*.json")}
        assert set(names.split()) == got, (client, set(names.split()) ^ got)
    for path in FILES:
        doc = load(path)
        assert doc["source"] and doc["payload"] and doc["expect"]["kind"], path.name


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
def test_documented_event_maps_to_its_kind_and_keeps_what_matters(path: Path):
    doc = load(path)
    expect = doc["expect"]
    ev = normalize(path.parent.name, doc["payload"], event=doc["event"])
    assert ev.kind is ObservationKind(expect["kind"])
    assert ev.source_event == doc["event"]
    assert ev.title.startswith(expect["title"]), ev.title
    assert ev.title != "Other event"
    if "tool_name" in expect:
        assert ev.tool_name == expect["tool_name"]
    for text in expect.get("body", []):
        assert text in ev.body, (text, ev.body)


def test_unknown_event_keeps_raw_fields_bounded_and_redacted():
    """An event no table knows (a newer client) is `other` with its name and raw fields,
    cut to the excerpt cap and with secrets redacted before it leaves ingress."""
    from aimem_common.sanitize import RawObservation, sanitize
    from aimem_ingress.normalize import EXCERPT_CAP_BYTES

    payload = {"session_id": "s-new", "cwd": "/home/dev/projects/acme-api", "hook_event_name": "HologramOpened",
               "transcript_path": "/home/dev/.claude/projects/x/s-new.jsonl", "subject": "deploy preview",
               "token": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "blob": "x" * 10_000}
    ev = normalize("claude-code", payload)
    assert ev.kind is ObservationKind.OTHER and ev.source_event == "HologramOpened"
    assert ev.title == "HologramOpened: deploy preview"
    assert len(ev.body.encode()) <= EXCERPT_CAP_BYTES and '"subject": "deploy preview"' in ev.body
    for body in (ev.body, normalize("claude-code", {**payload, "blob": "short"}).body):  # cut, and whole
        clean = sanitize(RawObservation(session_id=ev.session_id, kind=ev.kind, title=ev.title, body=body)).raw
        assert "ghp_a1B2" not in clean.body and "[REDACTED:github_token]" in clean.body
        assert "transcript_path" not in clean.body
