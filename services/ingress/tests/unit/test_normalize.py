"""Hook normalisation against every shared fixture, Copilot CLI shapes, caps and bad input.

Fixtures: ``<repo>/../shared/fixtures/hooks/<client>/<event>.json`` (``_output.*`` are hook
stdout, not input). Copilot CLI has no fixture folder, so its payloads live here, written
from github/docs ``content/copilot/reference/copilot-cli-reference/cli-hooks-reference.md``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from aimem_common.errors import BadRequestError
from aimem_common.models import ObservationKind as K
from aimem_common.clients import detect as detect_agent
from aimem_common.text import cap_utf8
from aimem_ingress.normalize import (
    BODY_CAP_BYTES,
    EXCERPT_CAP_BYTES,
    PROMPT_CAP_BYTES,
    HookPayloadError,
    normalize,
)

HOOKS_DIR = Path(__file__).resolve().parents[4].parent / "shared" / "fixtures" / "hooks"
if not HOOKS_DIR.is_dir():
    pytest.skip(f"shared hook fixtures not found at {HOOKS_DIR}", allow_module_level=True)

CWD = "/home/dev/projects/acme-api"
SESSIONS = {
    "claude-code": "3f2b9c1e-7a4d-4e8b-9c21-5d6f0a1b2c3d",
    "codex": "019d036d-c7fa-72d2-b6fd-78878bfe34e4",
    "cursor": "b1e2c3d4-5f60-4a7b-8c9d-0e1f2a3b4c5d",
    "gemini-cli": "8d1e4f2a-6b3c-4d5e-9f01-2a3b4c5d6e7f",
    "opencode": "ses_5f1a2b3c4d5eFg6H7i8J9k0L",
}
PRE, POST = K.PRE_TOOL_USE, K.POST_TOOL_USE
# "<client>/<file>": (kind, tool_name, payload carries a tool output) -- written by hand.
EXPECTED: dict[str, tuple[K, str | None, bool]] = {
    "claude-code/Notification.idle.json": (K.NOTIFICATION, None, False),
    "claude-code/Notification.json": (K.NOTIFICATION, None, False),
    "claude-code/PostToolUse.Bash.json": (POST, "Bash", True),
    "claude-code/PostToolUse.json": (POST, "Edit", True),
    "claude-code/PreCompact.auto.json": (K.PRE_COMPACT, None, False),
    "claude-code/PreCompact.json": (K.PRE_COMPACT, None, False),
    "claude-code/PreToolUse.json": (PRE, "Bash", False),
    "claude-code/SessionEnd.json": (K.SESSION_END, None, False),
    "claude-code/SessionStart.json": (K.SESSION_START, None, False),
    "claude-code/SessionStart.resume.json": (K.SESSION_START, None, False),
    "claude-code/Stop.json": (K.STOP, None, False),
    "claude-code/SubagentStart.json": (K.SUBAGENT_START, None, False),
    "claude-code/SubagentStop.json": (K.SUBAGENT_STOP, None, False),
    "claude-code/UserPromptSubmit.json": (K.USER_PROMPT, None, False),
    "codex/PostCompact.json": (K.POST_COMPACTION, None, False),
    "codex/PostToolUse.json": (POST, "Bash", True),
    "codex/PreCompact.json": (K.PRE_COMPACT, None, False),
    "codex/PreToolUse.json": (PRE, "Bash", False),
    "codex/SessionEnd.json": (K.SESSION_END, None, False),
    "codex/SessionStart.json": (K.SESSION_START, None, False),
    "codex/Stop.json": (K.STOP, None, False),
    "codex/SubagentStop.json": (K.SUBAGENT_STOP, None, False),
    "codex/UserPromptSubmit.json": (K.USER_PROMPT, None, False),
    "codex/notify.agent-turn-complete.json": (K.STOP, None, False),
    "cursor/afterAgentResponse.json": (K.STOP, None, False),
    "cursor/afterFileEdit.json": (POST, "Edit", True),
    "cursor/afterShellExecution.json": (POST, "Shell", True),
    "cursor/beforeShellExecution.json": (PRE, "Shell", False),
    "cursor/beforeSubmitPrompt.json": (K.USER_PROMPT, None, False),
    "cursor/postToolUse.json": (POST, "Shell", True),
    "cursor/preCompact.json": (K.PRE_COMPACT, None, False),
    "cursor/preToolUse.json": (PRE, "Shell", False),
    "cursor/sessionEnd.json": (K.SESSION_END, None, False),
    "cursor/sessionStart.json": (K.SESSION_START, None, False),
    "cursor/stop.json": (K.STOP, None, False),
    "gemini-cli/AfterAgent.json": (K.STOP, None, False),
    "gemini-cli/AfterTool.json": (POST, "run_shell_command", True),
    "gemini-cli/AfterTool.write_file.json": (POST, "replace", True),
    "gemini-cli/BeforeAgent.json": (K.USER_PROMPT, None, False),
    "gemini-cli/BeforeTool.json": (PRE, "run_shell_command", False),
    "gemini-cli/Notification.json": (K.NOTIFICATION, None, False),
    "gemini-cli/PreCompress.json": (K.PRE_COMPACT, None, False),
    "gemini-cli/SessionEnd.json": (K.SESSION_END, None, False),
    "gemini-cli/SessionStart.json": (K.SESSION_START, None, False),
    "opencode/chat.message.json": (K.USER_PROMPT, None, False),
    "opencode/event.file.edited.json": (POST, "edit", False),
    "opencode/event.session.compacted.json": (K.POST_COMPACTION, None, False),
    "opencode/event.session.created.json": (K.SESSION_START, None, False),
    "opencode/event.session.deleted.json": (K.SESSION_END, None, False),
    "opencode/event.session.idle.json": (K.STOP, None, False),
    "opencode/experimental.session.compacting.json": (K.PRE_COMPACT, None, False),
    "opencode/tool.execute.after.json": (POST, "edit", True),
    "opencode/tool.execute.before.json": (PRE, "bash", False),
}
FIXTURES = sorted(
    p.relative_to(HOOKS_DIR).as_posix()
    for p in HOOKS_DIR.glob("*/*.json")
    if not p.name.startswith("_output.")
)


def load(rel: str) -> dict:
    return json.loads((HOOKS_DIR / rel).read_text(encoding="utf-8"))


def envelope(rel: str, raw: dict) -> dict:
    """Wrap a raw OpenCode (input, output) fixture in the plugin's POST envelope."""
    stem = Path(rel).stem
    if stem.startswith("event."):
        env = {"event": raw["event"]["type"], "input": raw, "output": None}
    else:
        env = {"event": stem, "input": raw.get("input"), "output": raw.get("output")}
    env.update(agent="opencode", directory=CWD)
    if stem == "event.file.edited":  # the bus event has no session: the plugin sends the last one
        env["sessionID"] = SESSIONS["opencode"]
    return env


def payload_for(rel: str) -> dict:
    raw = load(rel)
    return envelope(rel, raw) if rel.startswith("opencode/") else raw


def test_expected_table_covers_every_fixture():
    assert FIXTURES, "no fixtures found"
    assert set(FIXTURES) == set(EXPECTED)


@pytest.mark.parametrize("rel", FIXTURES)
def test_fixture_normalises(rel: str):
    client = rel.split("/")[0]
    kind, tool_name, has_output = EXPECTED[rel]
    ev = normalize(client, payload_for(rel))
    assert ev.agent == client
    assert ev.kind is kind
    assert ev.session_id == SESSIONS[client]
    assert ev.cwd == CWD
    assert ev.project == "acme-api"
    assert ev.workspace is None
    assert ev.source_event == (payload_for(rel).get("hook_event_name") or ev.source_event)
    assert ev.extension is None
    assert ev.title and "\n" not in ev.title
    content_only = (K.SESSION_START, K.PRE_COMPACT, K.POST_COMPACTION, K.SESSION_END, K.SUBAGENT_START)
    assert (ev.body or kind in content_only) and len(ev.body.encode("utf-8")) <= BODY_CAP_BYTES
    assert ev.tool_name == tool_name
    if kind in (PRE, POST):
        assert ev.body.startswith(f"tool: {tool_name}\n")
    if has_output:
        assert ev.tool_output, rel
        assert f"output: {ev.tool_output[:20]}" in ev.body
    else:
        assert ev.tool_output is None


@pytest.mark.parametrize("rel", FIXTURES)
def test_detect_agent_per_folder(rel: str):
    client = rel.split("/")[0]
    assert detect_agent(payload_for(rel)) == client
    assert detect_agent(load(rel)) == client  # raw OpenCode hook arguments too


@pytest.mark.parametrize("rel", [r for r in FIXTURES if r.startswith("opencode/")])
def test_opencode_raw_hook_arguments(rel: str):
    raw = load(rel)
    stem = Path(rel).stem
    event = None if stem.startswith("event.") else stem
    if stem == "event.file.edited":
        with pytest.raises(HookPayloadError) as err:
            normalize("opencode", raw)
        assert err.value.code == "missing_session_id"
        return
    ev = normalize("opencode", raw, event=event)
    assert ev.kind is EXPECTED[rel][0]
    assert ev.session_id == SESSIONS["opencode"]


def test_fixture_details():
    ev = normalize(None, load("claude-code/UserPromptSubmit.json"))
    assert ev.title.startswith("Prompt: Add pagination to GET /v1/invoices")
    assert ev.body == load("claude-code/UserPromptSubmit.json")["prompt"]

    ev = normalize(None, load("claude-code/PreToolUse.json"))
    assert ev.title == "Bash: npm test -- --runTestsByPath src/routes/invoices.test.ts"
    assert json.loads(ev.tool_input)["command"].startswith("npm test")

    ev = normalize(None, load("claude-code/SessionStart.resume.json"))
    assert ev.title == "Session start (resume)"
    assert ev.model == "claude-sonnet-4-5-20250929"
    assert ev.extra["source"] == "resume"

    ev = normalize(None, load("claude-code/PostToolUse.Bash.json"))
    assert ev.tool_output.startswith(" M src/routes/invoices.ts")

    ev = normalize(None, load("claude-code/PostToolUse.json"))
    assert ev.title == "Edit: src/routes/invoices.ts"
    assert "originalFile" not in ev.tool_output

    ev = normalize(None, load("claude-code/PreCompact.json"))
    assert ev.body == "Keep the decisions about pagination and the DB migration plan."
    assert ev.title == "Pre-compact (manual)"

    ev = normalize(None, load("claude-code/Stop.json"))
    assert ev.body.startswith("Pagination is in place")
    assert normalize(None, load("claude-code/SubagentStop.json")).title.startswith("Subagent stop (Explore): ")

    ev = normalize(None, load("claude-code/Notification.json"))
    assert ev.body == "Claude needs your permission to use Bash"

    ev = normalize(None, load("codex/notify.agent-turn-complete.json"))
    assert ev.body.startswith("All 14 invoice tests pass")
    assert ev.extra["turn_id"] == "019d036e-3164-72c3-a170-98925564c4fc"

    ev = normalize(None, load("codex/PostToolUse.json"))
    assert ev.tool_output.startswith("PASS src/routes/invoices.test.ts")
    assert ev.model == "gpt-5-codex"

    ev = normalize(None, load("cursor/afterShellExecution.json"))
    assert ev.tool_input == "npm test -- invoices"
    assert ev.tool_output.startswith("PASS")
    assert ev.title == "Shell: npm test -- invoices"
    assert normalize(None, load("cursor/afterAgentResponse.json")).body.startswith("I added cursor")
    assert "findMany({ take" in normalize(None, load("cursor/afterFileEdit.json")).tool_output

    ev = normalize(None, load("gemini-cli/AfterAgent.json"))
    assert ev.body.startswith("Prisma includes the cursor row")
    assert ev.occurred_at == "2026-03-14T09:21:10.902Z"
    assert normalize(None, load("gemini-cli/AfterTool.json")).tool_output.startswith("Command: grep")
    assert normalize(None, load("gemini-cli/BeforeAgent.json")).body.startswith("Why does GET")

    ev = normalize(None, payload_for("opencode/chat.message.json"))
    assert ev.body == "Add cursor pagination to GET /v1/invoices"
    assert ev.model == "anthropic/claude-sonnet-4-5"
    assert ev.occurred_at == "2026-03-14T09:13:35.004Z"
    ev = normalize(None, payload_for("opencode/tool.execute.after.json"))
    assert ev.tool_output == "Edit applied successfully."
    assert ev.extra["tool_use_id"] == "toolu_01Bv8sN2dE5gH9jK4mQ7pR1t"
    ev = normalize(None, payload_for("opencode/event.file.edited.json"))
    assert ev.tool_input == f"{CWD}/src/routes/invoices.ts"
    ev = normalize("opencode", load("opencode/event.session.created.json"))  # raw: cwd from info
    assert ev.cwd == CWD and ev.project == "acme-api"


# --- GitHub Copilot CLI (cli-hooks-reference.md): camelCase and VS Code-compatible shapes ----
CP_SID, CP_MS, CP_ISO = "c0p1l07-5e55-4a1d-9b2c-3d4e5f6a7b8c", 1773479615004, "2026-03-14T09:13:35.004Z"
_CP = {"sessionId": CP_SID, "timestamp": CP_MS, "cwd": CWD}
_VS = {"session_id": CP_SID, "timestamp": CP_ISO, "cwd": CWD}
TRANSCRIPT = "/home/dev/.copilot/session-state/c0p1l07.jsonl"
COPILOT_CAMEL = {  # event name -> (payload, kind, tool_name, tool output)
    "sessionStart": ({**_CP, "source": "new", "initialPrompt": "Fix the flaky test"},
                     K.SESSION_START, None, None),
    "userPromptSubmitted": ({**_CP, "prompt": "Add cursor pagination"}, K.USER_PROMPT, None, None),
    "preToolUse": ({**_CP, "toolName": "bash", "toolArgs": {"command": "npm test"}}, PRE, "bash", None),
    "postToolUse": ({**_CP, "toolName": "bash", "toolArgs": {"command": "npm test"},
                     "toolResult": {"resultType": "success", "textResultForLlm": "14 passed"}},
                    POST, "bash", "14 passed"),
    "postToolUseFailure": ({**_CP, "toolName": "edit", "toolArgs": {"path": "a.ts"},
                            "error": "old_str not found"}, POST, "edit", None),
    "agentStop": ({**_CP, "transcriptPath": TRANSCRIPT, "stopReason": "end_turn"}, K.STOP, None, None),
    "subagentStart": ({**_CP, "transcriptPath": TRANSCRIPT, "agentName": "explore"}, K.SUBAGENT_START,
                      None, None),
    "subagentStop": ({**_CP, "transcriptPath": TRANSCRIPT, "agentName": "explore",
                      "stopReason": "end_turn"}, K.SUBAGENT_STOP, None, None),
    "errorOccurred": ({**_CP, "error": {"message": "rate limited", "name": "ApiError"},
                       "errorContext": "model_call", "recoverable": True}, K.NOTIFICATION, None, None),
    "preCompact": ({**_CP, "transcriptPath": TRANSCRIPT, "trigger": "auto", "customInstructions": ""},
                   K.PRE_COMPACT, None, None),
    "sessionEnd": ({**_CP, "reason": "user_exit"}, K.SESSION_END, None, None),
}
COPILOT_VSCODE = {  # hook_event_name -> (payload, kind, tool_name, tool output)
    "SessionStart": ({**_VS, "source": "startup"}, K.SESSION_START, None, None),
    "UserPromptSubmit": ({**_VS, "prompt": "Add cursor pagination"}, K.USER_PROMPT, None, None),
    "PreToolUse": ({**_VS, "tool_name": "bash", "tool_input": {"command": "npm test"}}, PRE, "bash", None),
    "PostToolUse": ({**_VS, "tool_name": "bash", "tool_input": {"command": "npm test"},
                     "tool_result": {"result_type": "success", "text_result_for_llm": "14 passed"}},
                    POST, "bash", "14 passed"),
    "PostToolUseFailure": ({**_VS, "tool_name": "edit", "tool_input": {"path": "a.ts"},
                            "error": "old_str not found"}, POST, "edit", None),
    "Stop": ({**_VS, "transcript_path": TRANSCRIPT, "stop_reason": "end_turn"}, K.STOP, None, None),
    "SubagentStop": ({**_VS, "transcript_path": TRANSCRIPT, "agent_name": "explore",
                      "stop_reason": "end_turn"}, K.SUBAGENT_STOP, None, None),
    "ErrorOccurred": ({**_VS, "error": {"message": "rate limited", "name": "ApiError"},
                       "error_context": "model_call", "recoverable": True}, K.NOTIFICATION, None, None),
    "PreCompact": ({**_VS, "transcript_path": TRANSCRIPT, "trigger": "manual",
                    "custom_instructions": "keep the API decisions"}, K.PRE_COMPACT, None, None),
    "SessionEnd": ({**_VS, "reason": "complete"}, K.SESSION_END, None, None),
}


def _check_copilot(ev, kind, tool_name, output, iso):
    assert ev.agent == "copilot-cli" and ev.kind is kind
    assert (ev.session_id, ev.cwd, ev.project) == (CP_SID, CWD, "acme-api")
    assert ev.occurred_at == iso
    assert ev.tool_name == tool_name
    assert ev.tool_output == output
    if kind in (PRE, POST):
        assert json.loads(ev.tool_input)
        assert ev.title.startswith(f"{tool_name}: ") or ev.title.startswith(f"{tool_name} failed: ")
    if ev.extra.get("status") == "failed":  # the error text is kept on its own line
        assert "\nerror: old_str not found" in ev.body and ev.title == "edit failed: a.ts"


@pytest.mark.parametrize("name", sorted(COPILOT_CAMEL))
def test_copilot_camel_case(name: str):
    payload, kind, tool_name, output = COPILOT_CAMEL[name]
    assert detect_agent(payload) == "copilot-cli"
    _check_copilot(normalize("copilot-cli", payload, event=name), kind, tool_name, output, CP_ISO)
    # The camelCase shape carries no event name: without --event it is inferred from fields.
    _check_copilot(normalize(None, payload), kind, tool_name, output, CP_ISO)


@pytest.mark.parametrize("name", sorted(COPILOT_VSCODE))
def test_copilot_vscode_shape(name: str):
    payload, kind, tool_name, output = COPILOT_VSCODE[name]
    payload = {"hook_event_name": name, **payload}
    assert detect_agent(payload) == "copilot-cli"
    _check_copilot(normalize(None, payload), kind, tool_name, output, CP_ISO)


def test_copilot_details():
    ev = normalize("copilot", COPILOT_CAMEL["errorOccurred"][0])
    assert ev.body == "rate limited" and ev.extra["error_context"] == "model_call"
    ev = normalize(None, {"hook_event_name": "PreCompact", **COPILOT_VSCODE["PreCompact"][0]})
    assert ev.body == "keep the API decisions"
    ev = normalize(None, COPILOT_CAMEL["sessionStart"][0])
    assert ev.title == "Session start (new): Fix the flaky test" and ev.body == "Fix the flaky test"
    notification = {**_CP, "hook_event_name": "Notification", "message": "Shell completed",
                    "notification_type": "shell_completed"}
    ev = normalize(None, notification)
    assert (ev.agent, ev.kind, ev.body) == ("copilot-cli", K.NOTIFICATION, "Shell completed")


# --- unknown events, extensions, overrides ---------------------------------------------------
def test_unknown_event_is_other_with_its_name_and_raw_fields():
    payload = {**load("claude-code/Stop.json"), "hook_event_name": "TeleportStart", "destination": "mars"}
    ev = normalize("claude-code", payload)
    assert ev.kind is K.OTHER and ev.source_event == "TeleportStart" and ev.extension is None
    assert ev.title.startswith("TeleportStart")
    assert '"destination": "mars"' in ev.body and "transcript_path" not in ev.body


def test_unknown_event_with_extension_keeps_source():
    payload = {**load("claude-code/Stop.json"), "hook_event_name": "TeleportStart"}
    ev = normalize("claude-code", payload, extension="acme.review")
    assert ev.kind is K.OTHER
    assert (ev.source_event, ev.extension) == ("TeleportStart", "acme.review")
    assert ev.title.startswith("acme.review: TeleportStart")


def test_event_override_and_case_tolerance():
    payload = load("claude-code/Stop.json")
    assert normalize("claude-code", payload, event="SessionEnd").kind is K.SESSION_END
    assert normalize("claude-code", {**payload, "hook_event_name": "userpromptsubmit"}).kind is K.USER_PROMPT
    assert normalize("cursor", load("cursor/stop.json"), event="BEFORESUBMITPROMPT").kind is K.USER_PROMPT
    assert normalize("gemini", load("gemini-cli/BeforeTool.json")).agent == "gemini-cli"


def test_generic_and_project_resolution():
    ev = normalize(None, {"session_id": "s1", "event": "user-prompt", "prompt": "hi", "cwd": "/a/repo/"})
    assert (ev.agent, ev.kind, ev.body, ev.project) == ("generic", K.USER_PROMPT, "hi", "repo")
    ev = normalize("generic", {"session_id": "s1", "event": "stop", "cwd": "/a/repo",
                               "workspace": "acme", "project": "billing"})
    assert (ev.kind, ev.workspace, ev.project) == (K.STOP, "acme", "billing")
    ev = normalize("generic", {"session_id": "s1", "event": "nope"})
    assert (ev.kind, ev.cwd, ev.project) == (K.OTHER, None, None)
    assert detect_agent({"foo": 1}) == "generic"


# --- caps --------------------------------------------------------------------------------------
def test_huge_prompt_is_capped_utf8_safe():
    emoji = "\U0001F600"  # 4 bytes
    prompt = "a" * (PROMPT_CAP_BYTES - 5) + emoji * 25_000  # ~100 KB, emoji across the cut
    assert len(prompt.encode("utf-8")) > 100_000
    payload = {**load("claude-code/UserPromptSubmit.json"), "prompt": prompt}
    ev = normalize(None, payload)
    raw = ev.body.encode("utf-8")
    assert len(raw) <= BODY_CAP_BYTES
    assert raw.decode("utf-8") == ev.body and "\ufffd" not in ev.body
    assert ev.body.endswith("…") and prompt.startswith(ev.body[:-1])
    assert len(ev.title) <= 100


def test_tool_and_notification_excerpts_are_capped():
    payload = copy.deepcopy(load("codex/PostToolUse.json"))
    payload["tool_response"] = "é" * 50_000
    payload["tool_input"] = {"command": "x" * 50_000}
    ev = normalize(None, payload)
    assert len(ev.tool_output.encode("utf-8")) <= EXCERPT_CAP_BYTES
    assert len(ev.tool_input.encode("utf-8")) <= EXCERPT_CAP_BYTES
    assert len(ev.body.encode("utf-8")) <= BODY_CAP_BYTES
    note = {**load("claude-code/Notification.json"), "message": "ü" * 10_000}
    assert len(normalize(None, note).body.encode("utf-8")) <= EXCERPT_CAP_BYTES


@pytest.mark.parametrize("limit", range(0, 24))
def test_cap_utf8_never_splits_a_code_point(limit: int):
    text = "a\U0001F600é\u20acb" * 4
    out = cap_utf8(text, limit)
    assert len(out.encode("utf-8")) <= limit
    assert text.startswith(out.removesuffix("…"))


def test_cap_utf8_short_and_surrogates():
    assert cap_utf8("short", 100) == "short"
    assert cap_utf8("a\ud800b", 100).encode("utf-8") == b"a?b"


GHP = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"


@pytest.mark.parametrize(("field", "cap"), [
    ("prompt", PROMPT_CAP_BYTES), ("tool_response", EXCERPT_CAP_BYTES)])
def test_a_cut_never_leaves_a_secret_prefix(field: str, cap: int):
    """The 80-char title and the byte caps cut after redaction: a cut token matches no rule."""
    from aimem_common.sanitize import RawObservation, sanitize

    base = load("claude-code/" + ("UserPromptSubmit" if field == "prompt" else "PostToolUse") + ".json")
    texts = ["deploy with token " + GHP + " and more words after it",  # cut by the title
             "x" * (cap - 20) + " " + GHP + " tail"]  # cut by the byte cap
    for text in texts:
        ev = normalize("claude-code", {**base, field: text})
        out = sanitize(RawObservation(session_id=ev.session_id, kind=ev.kind, title=ev.title,
                                      body=ev.body)).raw
        assert "ghp_" not in out.title and "ghp_" not in out.body, (out.title, out.body[-80:])


# --- errors --------------------------------------------------------------------------------------
def _code(agent, payload, **kw) -> str:
    with pytest.raises(HookPayloadError) as err:
        normalize(agent, payload, **kw)
    assert isinstance(err.value, ValueError) and isinstance(err.value, BadRequestError)
    assert err.value.status == 400
    return err.value.code


def test_missing_session_id():
    payload = load("claude-code/Stop.json")
    assert _code("claude-code", {k: v for k, v in payload.items() if k != "session_id"}) == "missing_session_id"
    assert _code("claude-code", {**payload, "session_id": "  "}) == "missing_session_id"
    cursor = {k: v for k, v in load("cursor/stop.json").items() if k != "conversation_id"}
    assert _code("cursor", cursor) == "missing_session_id"


@pytest.mark.parametrize("change", [
    {"session_id": 42}, {"session_id": ["a"]}, {"session_id": "x" * 1000}, {"cwd": 5},
    {"cwd": ["/a"]}, {"hook_event_name": 3}, {"project": 7}, {"workspace": {}},
])
def test_wrong_types_are_invalid_field(change: dict):
    assert _code("claude-code", {**load("claude-code/Stop.json"), **change}) == "invalid_field"


def test_bad_payload_agent_and_extension():
    assert _code("claude-code", ["not", "a", "dict"]) == "invalid_field"
    assert _code(None, "text") == "invalid_field"
    assert _code("vim", {"session_id": "s"}) == "unknown_agent"
    assert _code("claude-code", load("claude-code/Stop.json"), extension="bad ns!") == "invalid_field"
    assert _code("claude-code", load("claude-code/Stop.json"), event=12) == "invalid_field"


def test_an_opencode_child_session_names_its_parent():
    """OpenCode's ``session.created`` of a subagent session carries ``info.parentID``
    (``@opencode-ai/sdk`` ``Session.parentID``): the event says whose child it is, so ingress
    claims no handoff for it and the writer opens none (docs/lifecycle.md)."""
    fixture = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "hooks" / "opencode"
                          / "session.created.json").read_text())
    payload = copy.deepcopy(fixture["payload"])
    assert normalize("opencode", payload).parent_session_id is None
    payload["input"]["event"]["properties"]["info"]["parentID"] = "ses_parent01"
    ev = normalize("opencode", payload)
    assert (ev.kind, ev.parent_session_id) == (K.SESSION_START, "ses_parent01")
    generic = normalize("generic", {"session_id": "c1", "hook_event_name": "session-start",
                                    "parent_session_id": "p1", "cwd": "/w"})
    assert generic.parent_session_id == "p1"
    with pytest.raises(BadRequestError):
        normalize("generic", {"session_id": "c1", "hook_event_name": "session-start", "parent_session_id": 7})
