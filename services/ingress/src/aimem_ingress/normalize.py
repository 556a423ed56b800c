"""Turn one agent CLI's native hook payload into one ``NormalizedEvent`` (pure: no I/O).

Shapes: ``shared/fixtures/hooks/SOURCES.md`` (Claude SDK types, codex hook schemas and
``notify``, gemini-cli and cursor hook docs, ``@opencode-ai/plugin``) and, for Copilot CLI,
github/docs ``cli-hooks-reference.md`` (camelCase and VS Code PascalCase/snake_case shapes).
DESIGN.md "Hook ingress" fixes the vocabulary, the UTF-8 caps and project resolution.

OpenCode has no stdin hooks, so its in-process plugin must POST this envelope, one
object per hook call (``input``/``output`` are the hook's two arguments, verbatim)::

    {"agent": "opencode",
     "event": "tool.execute.after",    # hook name; for the `event` hook: event.type
     "sessionID": "ses_...",           # optional; REQUIRED for file.edited (last seen one)
     "directory": "/home/dev/projects/acme-api",   # PluginInput.directory
     "timestamp": 1773479615004,       # optional, epoch ms
     "input": {...},                   # 1st argument; `event` hook: {"event": {type, properties}}
     "output": {...} | null}           # 2nd argument (null for `event`)

The bare ``event`` hook argument (``{"event": {"type": ..., "properties": ...}}``) works too.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aimem_common import locations
from aimem_common.errors import BadRequestError
from aimem_common.models import ObservationKind
from aimem_common.patches import is_patch_tool, looks_like_patch, patch_files
from aimem_common.redact import redact
from aimem_common.sanitize import cap_redacted
from aimem_common.text import ELLIPSIS, iso_from_epoch

K = ObservationKind
AGENTS = ("claude-code", "codex", "gemini-cli", "cursor", "copilot-cli", "opencode", "generic")
AGENT_ALIASES = {"claude": "claude-code", "gemini": "gemini-cli", "copilot": "copilot-cli"}

PROMPT_CAP_BYTES = 16 * 1024  # prompts and compaction summaries (DESIGN "Hook ingress")
EXCERPT_CAP_BYTES = 2 * 1024  # each tool input/output excerpt and notification text
TAIL_CAP_BYTES = 8 * 1024  # a session end's transcript tail (final message, last tool results)
BODY_CAP_BYTES = 16 * 1024  # the whole body
TITLE_TEXT_CHARS = 80  # the free-text part of a one-line title
MAX_ID_CHARS = 256  # session ids and other identity strings

_EXTENSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class HookPayloadError(BadRequestError, ValueError):
    """The payload cannot be normalised (HTTP 400); ``code`` says why.

    Codes: ``invalid_field`` (not an object, a key field has the wrong type, or an identity
    field holds a control character or a lost character: ``check_identity``),
    ``missing_session_id``, ``unknown_agent``.
    """

    def __init__(self, code: str, message: str):
        super().__init__(message, code=code)


@dataclass(frozen=True, slots=True)
class NormalizedEvent:
    """One hook call in the shared vocabulary; text fields are already capped (bytes, UTF-8).

    ``source_event`` is the native event name, kept only when an ``extension`` namespace is
    given. ``tool_input``/``tool_output`` are excerpts ≤ ``EXCERPT_CAP_BYTES``; ``body`` ≤
    ``BODY_CAP_BYTES``; ``occurred_at`` is ISO-8601 UTC (``...Z``) or None; ``extra`` holds
    small scalar metadata (source, reason, trigger, transcript_path, tool_use_id, ...).
    ``parent_session_id`` names the session this one was spawned from (OpenCode
    ``session.created`` with ``info.parentID``, or a generic ``parent_session_id``): a
    child session, which never claims nor opens a handoff.
    """

    agent: str
    kind: ObservationKind
    source_event: str | None
    extension: str | None
    session_id: str
    cwd: str | None
    project: str | None
    workspace: str | None
    title: str
    body: str
    tool_name: str | None = None
    tool_input: str | None = None
    tool_output: str | None = None
    occurred_at: str | None = None
    model: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    parent_session_id: str | None = None


def _table(by_kind: dict[ObservationKind, str]) -> dict[str, ObservationKind]:
    """Invert ``{kind: "NativeA NativeB"}`` to ``{"nativea": kind}`` (case-insensitive lookup)."""
    return {name.casefold(): kind for kind, names in by_kind.items() for name in names.split()}


# One table per client: every event its current hook reference documents -> one kind. The
# `K.OTHER` entries are documented events no kind fits: they keep their raw fields. Names
# not in a table (newer client versions) also land on `other`, raw fields kept.
CLAUDE_EVENTS = _table({  # Claude Agent SDK 0.3.332 `HookInput` (= Claude Code 2.1.332)
    K.SESSION_START: "SessionStart", K.USER_PROMPT: "UserPromptSubmit",
    K.PRE_TOOL_USE: "PreToolUse PreSkillShellCommand", K.POST_TOOL_USE: "PostToolUse PostToolUseFailure",
    K.PERMISSION_REQUEST: "PermissionRequest PermissionDenied", K.PRE_COMPACT: "PreCompact",
    K.POST_COMPACTION: "PostCompact", K.NOTIFICATION: "Notification StopFailure Elicitation",
    K.SUBAGENT_START: "SubagentStart", K.SUBAGENT_STOP: "SubagentStop", K.STOP: "Stop",
    K.SESSION_END: "SessionEnd",
    K.OTHER: "PostToolBatch UserPromptExpansion Setup TeammateIdle TaskCreated TaskCompleted"
             " ElicitationResult ConfigChange InstructionsLoaded WorktreeCreate WorktreeRemove"
             " CwdChanged FileChanged DirectoryAdded PreModelSwitch PostModelSwitch MessageDisplay"})
CODEX_EVENTS = _table({  # codex-rs/hooks schemas; agent-turn-complete: the `notify` payload
    K.SESSION_START: "SessionStart", K.USER_PROMPT: "UserPromptSubmit",
    K.PRE_TOOL_USE: "PreToolUse", K.POST_TOOL_USE: "PostToolUse",
    K.PERMISSION_REQUEST: "PermissionRequest", K.PRE_COMPACT: "PreCompact",
    K.POST_COMPACTION: "PostCompact", K.NOTIFICATION: "StopFailure Interrupt",
    K.SUBAGENT_START: "SubagentStart", K.SUBAGENT_STOP: "SubagentStop",
    K.STOP: "Stop agent-turn-complete", K.SESSION_END: "SessionEnd"})
GEMINI_EVENTS = _table({  # BeforeAgent carries the user's prompt
    K.SESSION_START: "SessionStart", K.USER_PROMPT: "BeforeAgent", K.PRE_TOOL_USE: "BeforeTool",
    K.POST_TOOL_USE: "AfterTool", K.PRE_COMPACT: "PreCompress", K.NOTIFICATION: "Notification",
    K.STOP: "AfterAgent", K.SESSION_END: "SessionEnd",
    K.OTHER: "BeforeModel AfterModel BeforeToolSelection"})
CURSOR_EVENTS = _table({
    K.SESSION_START: "sessionStart", K.USER_PROMPT: "beforeSubmitPrompt",
    K.PRE_TOOL_USE: "preToolUse beforeShellExecution beforeMCPExecution beforeReadFile",
    K.POST_TOOL_USE: "postToolUse postToolUseFailure afterShellExecution afterMCPExecution"
                     " afterFileEdit afterTabFileEdit",
    K.PRE_COMPACT: "preCompact", K.SUBAGENT_START: "subagentStart", K.SUBAGENT_STOP: "subagentStop",
    K.STOP: "afterAgentResponse stop", K.SESSION_END: "sessionEnd",
    K.OTHER: "afterAgentThought beforeTabFileRead"})
COPILOT_EVENTS = _table({  # camelCase names + the PascalCase ones that differ beyond case
    K.SESSION_START: "sessionStart", K.USER_PROMPT: "userPromptSubmitted UserPromptSubmit",
    K.PRE_TOOL_USE: "preToolUse", K.POST_TOOL_USE: "postToolUse postToolUseFailure",
    K.PERMISSION_REQUEST: "permissionRequest", K.PRE_COMPACT: "preCompact",
    K.NOTIFICATION: "notification errorOccurred", K.SUBAGENT_START: "subagentStart",
    K.SUBAGENT_STOP: "subagentStop", K.STOP: "agentStop Stop", K.SESSION_END: "sessionEnd"})
OPENCODE_EVENTS = _table({  # plugin hook names and bus event types
    K.SESSION_START: "session.created", K.USER_PROMPT: "chat.message",
    K.PRE_TOOL_USE: "tool.execute.before", K.POST_TOOL_USE: "tool.execute.after file.edited",
    K.PERMISSION_REQUEST: "permission.ask permission.updated permission.asked",
    K.PRE_COMPACT: "experimental.session.compacting", K.POST_COMPACTION: "session.compacted",
    K.NOTIFICATION: "session.error", K.STOP: "session.idle", K.SESSION_END: "session.deleted",
    K.OTHER: "command.execute.before todo.updated"})
GENERIC_EVENTS = {**CLAUDE_EVENTS, **{k.value: k for k in ObservationKind}}
_EVENTS = {"claude-code": CLAUDE_EVENTS, "codex": CODEX_EVENTS, "gemini-cli": GEMINI_EVENTS,
           "cursor": CURSOR_EVENTS, "copilot-cli": COPILOT_EVENTS, "opencode": OPENCODE_EVENTS,
           "generic": GENERIC_EVENTS}
# Tool names for events that imply the tool instead of naming it.
_IMPLIED_TOOL = {"beforeshellexecution": "Shell", "aftershellexecution": "Shell",
                 "afterfileedit": "Edit", "aftertabfileedit": "TabEdit", "beforereadfile": "Read",
                 "file.edited": "edit", "beforemcpexecution": "MCP", "aftermcpexecution": "MCP"}
# Tool events whose tool failed (the payload carries the error instead of a result).
_FAILURE_EVENTS = frozenset({"posttoolusefailure"})
_DENIED_EVENTS = frozenset({"permissiondenied"})

# Canonical field -> dotted payload paths tried in order (digits index lists). Claude,
# Gemini, Codex hooks and both Copilot shapes share these; client entries replace a field.
_COMMON_PATHS: dict[str, tuple[str, ...]] = {
    "event": ("hook_event_name",), "session_id": ("session_id", "sessionId"), "cwd": ("cwd",),
    "prompt": ("prompt", "initial_prompt", "initialPrompt"),
    "tool_name": ("tool_name", "toolName"), "tool_input": ("tool_input", "toolArgs"),
    "tool_output": ("tool_response", "tool_output", "tool_result", "toolResult"),
    "error": ("error", "error_message", "error.message", "tool_response.error.message",
              "tool_response.error", "error_details"),
    "details": ("error_details", "errorDetails"),
    "text": ("last_assistant_message", "prompt_response", "message", "error.message"),
    "summary": ("summary", "compact_summary", "custom_instructions", "customInstructions"),
    "model": ("model",), "timestamp": ("timestamp",),
    "tail": ("transcript_tail",),  # added by the hook client at session end (opt-in)
    "parent": ("parent_session_id",),  # the session this one was spawned from (a child session)
}
_CLIENT_PATHS: dict[str, dict[str, tuple[str, ...]]] = {
    "codex": {"event": ("hook_event_name", "type"), "session_id": ("session_id", "thread-id"),
              "text": ("last_assistant_message", "last-assistant-message")},
    "cursor": {
        "session_id": ("conversation_id", "session_id"), "cwd": ("cwd", "workspace_roots.0"),
        "tool_input": ("tool_input", "command", "file_path"),
        "tool_output": ("tool_output", "output", "result_json", "edits"),
        "text": ("text", "message", "summary", "task")},
    "opencode": {  # `_opencode_view` lifts the bus event to `bus`
        "event": ("event", "bus.type"),
        "session_id": ("sessionID", "input.sessionID", "output.message.sessionID",
                       "bus.properties.sessionID", "bus.properties.info.id"),
        "cwd": ("directory", "cwd", "bus.properties.info.directory"),
        "prompt": ("output.parts",), "tool_name": ("input.tool", "input.type", "bus.properties.type"),
        "tool_input": ("output.args", "input.args", "bus.properties.file", "input.metadata",
                       "bus.properties.metadata"),
        "tool_output": ("output.output",), "text": ("bus.properties.error.data.message",),
        "summary": (), "error": ("bus.properties.error.data.message", "bus.properties.error.name"),
        "parent": ("bus.properties.info.parentID", "parent_session_id"),  # Session.parentID: a child
        "model": ("input.model", "output.message.model"),
        "timestamp": ("timestamp", "output.message.time.created",
                      "bus.properties.info.time.updated")},
    "generic": {"event": ("hook_event_name", "event", "kind"),
                "text": ("message", "text", "body", "last_assistant_message")},
}
# Scalar metadata copied into `extra` (top level and OpenCode `input`), one spelling each.
_EXTRA_KEYS = frozenset(
    "source reason trigger status notification_type transcript_path tool_use_id agent_id"
    " agent_type agent_name permission_mode turn_id generation_id stop_reason error_context"
    " recoverable client duration_ms composer_mode failure_type subagent_type subagent_id"
    " title".split())
_EXTRA_RENAME = {"transcriptPath": "transcript_path", "callID": "tool_use_id",
                 "agentName": "agent_name", "turn-id": "turn_id", "stopReason": "stop_reason",
                 "errorContext": "error_context", "agentDisplayName": "agent_name",
                 "agent_display_name": "agent_name"}
_GEMINI_ONLY = frozenset(n for n, k in GEMINI_EVENTS.items() if n not in CLAUDE_EVENTS)
_TRANSCRIPT_HINTS = (("/.codex/", "codex"), ("/.gemini/", "gemini-cli"),
                     ("/.claude/", "claude-code"), ("/.cursor/", "cursor"))
_SUMMARY_KEYS = "command file_path filePath path pattern url query description prompt".split()
_OUTPUT_TEXT_KEYS = "llmContent textResultForLlm text_result_for_llm output result content".split()
_BULKY_KEYS = frozenset({"originalFile"})  # Claude Edit echoes the whole file
# Copilot camelCase payloads carry no event name: required fields -> event, first match wins.
_COPILOT_SHAPES = (
    ({"toolResult"}, "postToolUse"), ({"toolName", "error"}, "postToolUseFailure"),
    ({"toolName"}, "preToolUse"), ({"error"}, "errorOccurred"),
    ({"prompt"}, "userPromptSubmitted"), ({"trigger"}, "preCompact"),
    ({"agentName", "stopReason"}, "subagentStop"), ({"agentName"}, "subagentStart"),
    ({"stopReason"}, "agentStop"), ({"source"}, "sessionStart"), ({"reason"}, "sessionEnd"))


def detect_agent(payload: Any) -> str:
    """Guess which client sent ``payload`` from its distinctive fields; ``generic`` if none.

    Order matters: explicit ``agent``, OpenCode envelope, Codex ``notify``, Cursor
    (``conversation_id`` + ``workspace_roots``/``cursor_version``), Copilot camelCase
    (``sessionId``/``toolArgs``), Gemini-only event names, transcript dir (``~/.codex``, ...),
    Codex ``turn_id``; last ``timestamp``: Gemini and Copilot PascalCase carry one, Claude
    Code (``hook_event_name`` + ``transcript_path`` + ``session_id``) does not.
    """
    if not isinstance(payload, dict):
        return "generic"
    if payload.get("agent") in AGENTS:
        return payload["agent"]
    if isinstance(payload.get("event"), dict) or isinstance(_get(payload, "input.sessionID"), str):
        return "opencode"
    if payload.get("type") == "agent-turn-complete" or "thread-id" in payload:
        return "codex"
    if "conversation_id" in payload and payload.keys() & {"workspace_roots", "cursor_version"}:
        return "cursor"
    if "sessionId" in payload or "toolArgs" in payload:
        return "copilot-cli"
    name = payload.get("hook_event_name")
    name = name.casefold() if isinstance(name, str) else ""
    if name in _GEMINI_ONLY:
        return "gemini-cli"
    transcript = payload.get("transcript_path")
    transcript = transcript.replace("\\", "/") if isinstance(transcript, str) else ""
    by_dir = next((agent for hint, agent in _TRANSCRIPT_HINTS if hint in transcript), None)
    if by_dir or "turn_id" in payload:
        return by_dir or "codex"
    if not name or "session_id" not in payload:
        return "generic"
    if isinstance(payload.get("timestamp"), str):
        gemini = "transcript_path" in payload and name in GEMINI_EVENTS
        return "gemini-cli" if gemini else "copilot-cli"
    return "claude-code" if "transcript_path" in payload else "generic"


def normalize(agent: str | None, payload: Any, *, event: str | None = None,
              extension: str | None = None) -> NormalizedEvent:
    """Map one native hook payload to exactly one ``ObservationKind`` plus capped text.

    Args:
        agent: One of ``AGENTS`` (or alias ``claude``/``gemini``/``copilot``); None detects.
        payload: The decoded JSON body the client's hook received (or the OpenCode envelope).
        event: Native event name overriding the payload's own (the hook command's
            ``--event``); Copilot camelCase payloads carry none, so without it the event is
            inferred from their fields.
        extension: Namespace; when given, the native event name is kept in ``source_event``.

    Returns:
        ``NormalizedEvent``; unknown events have kind ``other``.

    Raises:
        HookPayloadError: ``invalid_field``, ``missing_session_id`` or ``unknown_agent``.
    """
    if not isinstance(payload, dict):
        raise HookPayloadError("invalid_field", "payload must be a JSON object")
    agent = detect_agent(payload) if agent is None else _agent_name(agent)
    if extension is not None and not (isinstance(extension, str)
                                      and _EXTENSION_RE.match(extension)):
        raise HookPayloadError("invalid_field", f"extension must match {_EXTENSION_RE.pattern}")
    view = _opencode_view(payload) if agent == "opencode" else payload
    paths = {**_COMMON_PATHS, **_CLIENT_PATHS.get(agent, {})}

    def pick(name: str) -> Any:
        return _first(view, paths[name])

    native = _text_field(event, "event") or _text_field(pick("event"), "event")
    if agent == "opencode" and native == "event":  # plugin sent the hook name, not event.type
        native = _text_field(_get(view, "bus.type"), "event")
    if native is None and agent == "copilot-cli":
        native = next((name for keys, name in _COPILOT_SHAPES if keys <= payload.keys()), None)
    kind = _EVENTS[agent].get(native.casefold(), K.OTHER) if native else K.OTHER
    session_id = check_identity(_text_field(pick("session_id"), "session_id"), "session_id")
    if not session_id:
        raise HookPayloadError("missing_session_id", f"no session id in the {agent} payload")
    cwd = check_identity(_text_field(pick("cwd"), "cwd", max_chars=4096), "cwd")
    project = _text_field(payload.get("project"), "project") or locations.name(cwd)
    extra = _extra(payload)

    folded = (native or "").casefold()
    tool_name = tool_input = tool_output = None
    if kind in (K.PRE_TOOL_USE, K.POST_TOOL_USE, K.PERMISSION_REQUEST):
        tool_name = (_text_field(pick("tool_name"), "tool_name")
                     or _IMPLIED_TOOL.get(folded))
        raw_input = pick("tool_input")
        tool_input = _excerpt(raw_input, as_output=False)
        error = _failure(kind, folded, view, pick) if kind is K.POST_TOOL_USE else None
        if kind is K.POST_TOOL_USE:
            tool_output = _excerpt(pick("tool_output"), as_output=True)
        if error:
            extra["status"] = "failed"
        summary = _input_summary(raw_input, cwd, tool_name)
        if kind is K.PERMISSION_REQUEST:
            label = "Permission denied" if folded in _DENIED_EVENTS else "Permission"
            title = _label(f"{label}: {tool_name or 'tool'}", summary)
        else:
            title = _label(f"{tool_name or 'tool'}{' failed' if error else ''}", summary)
        reason = _as_text(payload.get("reason")) if kind is K.PERMISSION_REQUEST else None
        parts = (("tool", tool_name or "?"), ("input", tool_input), ("output", tool_output),
                 ("error", error), ("reason", cap_redacted(reason, EXCERPT_CAP_BYTES) if reason else None))
        body = "\n".join(f"{label}: {value}" for label, value in parts if value is not None)
    else:
        texts = {name: _as_text(pick(name)) or "" for name in ("prompt", "text", "summary", "tail", "error", "details")}
        title, body = _describe(kind, native, extension, {**extra, **texts})
        if kind is K.OTHER:
            title, body = _other(native, extension, view, body)
    return NormalizedEvent(
        agent=agent, kind=kind, source_event=native, extension=extension,
        session_id=session_id, cwd=cwd, project=project,
        workspace=_text_field(payload.get("workspace"), "workspace"),
        # these bodies are content (a start's prompt, a compaction summary), never the title again
        title=title, body=cap_redacted(body if kind in _CONTENT_ONLY else (body or title), BODY_CAP_BYTES),
        tool_name=tool_name, tool_input=tool_input, tool_output=tool_output,
        occurred_at=_iso(pick("timestamp")), model=_model(pick("model")), extra=extra,
        parent_session_id=check_identity(_text_field(pick("parent"), "parent_session_id"), "parent_session_id"))


def _failure(kind: ObservationKind, folded: str, view: dict[str, Any], pick: Any) -> str | None:
    """Return the error excerpt of a failed tool call, None for a success.

    Failures: a ``*Failure`` event (its ``error``/``error_message``), a Gemini ``AfterTool``
    whose ``tool_response.error`` is set, a Copilot result whose type is not ``success``.
    """
    text: Any = None
    if folded in _FAILURE_EVENTS:
        text = pick("error")
    else:
        response = view.get("tool_response")
        if isinstance(response, dict) and response.get("error"):
            text = response["error"]
        result = view.get("tool_result") or view.get("toolResult")
        kind_of = (result.get("result_type") or result.get("resultType")) if isinstance(result, dict) else None
        if isinstance(kind_of, str) and kind_of not in ("success", ""):
            text = text or result.get("text_result_for_llm") or result.get("textResultForLlm") or kind_of
    if isinstance(text, dict):
        text = text.get("message") or text.get("name") or json.dumps(text, ensure_ascii=False)
    if text is None or text == "":
        return None
    return cap_redacted(str(text), EXCERPT_CAP_BYTES)


# Payload keys that say nothing about an `other` event (identity and plumbing).
_BASE_KEYS = frozenset(
    "session_id sessionId sessionID conversation_id generation_id transcript_path transcriptPath cwd"
    " hook_event_name timestamp permission_mode prompt_id effort workspace_roots cursor_version"
    " user_email model turn_id agent directory project workspace idempotency_key".split())
# First of these (a short scalar) names what an `other` event was about, in its title.
_OTHER_SUMMARY_KEYS = (
    "task_subject subject command_name command name file_path new_cwd directory worktree_path to_model"
    " teammate_name mcp_server_name trigger source text delta").split()


def _other(native: str | None, extension: str | None, view: dict[str, Any], text: str) -> tuple[str, str]:
    """Title and body of an ``other`` event: its native name plus its raw fields (bounded).

    The body is the compact JSON of every field but identity/plumbing ones, capped at
    ``EXCERPT_CAP_BYTES``; it is sanitised (secrets redacted) downstream like any body.
    """
    cwd = view.get("cwd") or view.get("directory")
    raw = {k: v for k, v in view.items()
           if k not in _BASE_KEYS and k != "bus" and v not in (None, "", [], {})}
    if isinstance(view.get("directory"), str) and view["directory"] != cwd:
        raw["directory"] = view["directory"]
    if isinstance(raw.get("input"), dict):  # OpenCode envelope: the hook's first argument
        inner = raw.pop("input")
        raw = {**{k: v for k, v in inner.items() if k not in _BASE_KEYS}, **raw}
        raw.pop("event", None)
    bus = view.get("bus")
    if isinstance(bus, dict) and isinstance(bus.get("properties"), dict):
        raw.update({k: v for k, v in bus["properties"].items() if k not in _BASE_KEYS})
    topic = next((raw[k] for k in _OTHER_SUMMARY_KEYS if isinstance(raw.get(k), str) and raw[k]), "")
    name = f"{extension}: {native}" if extension and native else (native or "Event")
    body = json.dumps(raw, ensure_ascii=False, default=str, separators=(", ", ": ")) if raw else text
    return _label(name, topic), cap_redacted(body, EXCERPT_CAP_BYTES)


def _agent_name(agent: Any) -> str:
    """Return the canonical agent name for ``agent`` or its alias; else ``unknown_agent``."""
    name = agent.casefold() if isinstance(agent, str) else ""
    name = AGENT_ALIASES.get(name, name)
    if name not in AGENTS:
        raise HookPayloadError("unknown_agent", f"unknown agent {agent!r}; expected {AGENTS}")
    return name


_CONTENT_ONLY = frozenset({K.SESSION_START, K.PRE_COMPACT, K.POST_COMPACTION, K.SESSION_END, K.SUBAGENT_START})
_NOTICE_LABELS = {"stopfailure": "Turn failed", "interrupt": "Turn interrupted", "elicitation": "Question",
                  "erroroccurred": "Error", "session.error": "Error"}


def _describe(kind: ObservationKind, native: str | None, extension: str | None,
              v: dict[str, Any]) -> tuple[str, str]:
    """Return ``(title, body)`` for a non-tool event; body caps follow DESIGN per kind."""
    def paren(key: str) -> str:
        return f" ({v[key]})" if isinstance(v.get(key), str) and v[key] else ""

    prompt, text, summary, error, details = v["prompt"], v["text"], v["summary"], v["error"], v["details"]
    who = next((v[k] for k in ("agent_type", "subagent_type", "agent_name") if isinstance(v.get(k), str)
                and v[k]), "")
    if kind is K.SESSION_START:  # Copilot CLI carries the first prompt on the start event
        return _label("Session start" + paren("source"), prompt), cap_redacted(prompt, PROMPT_CAP_BYTES)
    if kind is K.USER_PROMPT:
        return _label("Prompt", prompt), cap_redacted(prompt, PROMPT_CAP_BYTES)
    if kind in (K.PRE_COMPACT, K.POST_COMPACTION):
        label = "Pre-compact" if kind is K.PRE_COMPACT else "Compacted"
        return label + paren("trigger"), cap_redacted(summary, PROMPT_CAP_BYTES)
    if kind is K.NOTIFICATION:
        label = _NOTICE_LABELS.get((native or "").casefold(), "Notification")
        lines = [x for x in (error, details if details != error else "", text if text != error else "") if x]
        return _label(label, error or text or v.get("title")), cap_redacted("\n".join(lines), EXCERPT_CAP_BYTES)
    if kind is K.SUBAGENT_START:
        return _label("Subagent start", " ".join(x for x in (who, text) if x)), cap_redacted(text, EXCERPT_CAP_BYTES)
    if kind is K.SUBAGENT_STOP:
        label = f"Subagent stop ({who})" if who else "Subagent stop"
        return _label(label, text), cap_redacted(text, PROMPT_CAP_BYTES)
    if kind is K.STOP:
        return _label("Stop", text), text
    if kind is K.SESSION_END:  # body: the transcript's tail when the client sent one
        return "Session end" + paren("reason"), cap_redacted(v["tail"], TAIL_CAP_BYTES)
    return "", cap_redacted(text or prompt or error, EXCERPT_CAP_BYTES)  # `other`: see `_other`


def _opencode_view(payload: dict[str, Any]) -> dict[str, Any]:
    """Return the envelope with its bus event (``event`` or ``input.event``) lifted to ``bus``."""
    raw = payload.get("event")
    bus = raw if isinstance(raw, dict) else _get(payload, "input.event")
    view = {k: v for k, v in payload.items() if not (k == "event" and isinstance(v, dict))}
    return {**view, "bus": bus if isinstance(bus, dict) else {}}


def _get(obj: Any, path: str) -> Any:
    for step in path.split("."):
        if isinstance(obj, dict):
            obj = obj.get(step)
        elif isinstance(obj, list) and step.isdigit() and int(step) < len(obj):
            obj = obj[int(step)]
        else:
            return None
    return obj


def _first(obj: Any, paths: tuple[str, ...]) -> Any:
    return next((v for path in paths if (v := _get(obj, path)) is not None and v != ""), None)


def _text_field(value: Any, name: str, *, max_chars: int = MAX_ID_CHARS) -> str | None:
    """Return a stripped identity string, None when absent; wrong type or size -> invalid_field."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > max_chars:
        raise HookPayloadError("invalid_field", f"{name} must be a string of ≤ {max_chars} chars")
    return value.strip() or None


def check_identity(value: str | None, name: str) -> str | None:
    """Return ``value`` (an identity field: ``session_id``, ``cwd``) when it can be stored and
    told apart as sent; None passes through.

    Identity is not cleaned but refused: two ids that differ only in a control character
    (``a\\nb``, ``a\\tb``) or in an unencodable lone surrogate (which ``body.py`` has already
    turned into U+FFFD, so ``\\udc00`` and ``\\udc01`` arrive equal) would merge into one
    session if cleaned, and NUL can be neither stored in a page nor part of a path.

    Raises:
        HookPayloadError: ``invalid_field`` for a control character (Unicode category
            ``Cc``: NUL, tab, newline, DEL, C1), a lone surrogate or U+FFFD.
    """
    if value is None:
        return None
    bad = next((c for c in value if c == "\ufffd" or unicodedata.category(c) in ("Cc", "Cs")), None)
    if bad is not None:
        what = "a lone surrogate (sent as U+FFFD)" if bad == "\ufffd" else f"control character U+{ord(bad):04X}"
        raise HookPayloadError("invalid_field", f"{name} contains {what}; send it as printable text")
    return value


def _as_text(value: Any) -> str | None:
    """Flatten prompt-like values: OpenCode ``parts`` lists keep their text parts."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [p.get("text") if isinstance(p, dict) else p for p in value]
        return "\n".join(t for t in texts if isinstance(t, str) and t) or None
    if isinstance(value, dict) and isinstance(value.get("message"), str):  # error objects
        return value["message"]
    return json.dumps(value, ensure_ascii=False, default=str)


def _excerpt(value: Any, *, as_output: bool) -> str | None:
    """Return a ≤ ``EXCERPT_CAP_BYTES`` excerpt: a string as is, else its useful text or JSON."""
    if as_output and isinstance(value, dict):  # stdout/stderr, else the first known text field
        found = [f"stderr: {value[k]}" if k == "stderr" else value[k] for k in ("stdout", "stderr")
                 if isinstance(value.get(k), str) and value[k]]
        found = found or [value[k] for k in _OUTPUT_TEXT_KEYS
                          if isinstance(value.get(k), str) and value[k]][:1]
        value = "\n".join(found) or {k: v for k, v in value.items() if k not in _BULKY_KEYS}
    text = value if value is None or isinstance(value, str) else json.dumps(
        value, ensure_ascii=False, default=str)
    return cap_redacted(text, EXCERPT_CAP_BYTES) if text else None


def _input_summary(raw: Any, cwd: str | None, tool_name: str | None = None) -> str:
    """Pick the one field that says what a tool call did (command, path, pattern, ...).

    A patch (Codex ``apply_patch``, or a shell command feeding one) is summarised by the
    files it changes, not by its first line (``*** Begin Patch``).
    """
    value = raw
    if isinstance(raw, str) and raw.lstrip().startswith("{"):  # Cursor MCP: arguments as a JSON string
        try:
            value = raw = json.loads(raw)
        except ValueError:
            pass
    if isinstance(raw, dict):
        value = next((raw[k] for k in _SUMMARY_KEYS if isinstance(raw.get(k), str) and raw[k]), "")
    if not isinstance(value, str):
        return ""
    root = (cwd or "").rstrip("/") + "/"
    files = patch_files(value) if (is_patch_tool(tool_name) or looks_like_patch(value)) else []
    if files:
        rel = [f[len(root):] if cwd and f.startswith(root) else f for f in files]
        return "apply_patch " + ", ".join(rel)
    return value[len(root):] if cwd and value.startswith(root) else value


def _label(prefix: str, text: str | None) -> str:
    """Return ``"<prefix>: <text on one line, ≤ TITLE_TEXT_CHARS chars>"``, or just the prefix."""
    line = " ".join((text or "").split())
    if len(line) > TITLE_TEXT_CHARS:  # redact first: a cut secret no longer looks like one
        line = redact(line).text
    if len(line) > TITLE_TEXT_CHARS:
        line = line[: TITLE_TEXT_CHARS - 1] + ELLIPSIS
    return f"{prefix}: {line}" if line else prefix


def _model(value: Any) -> str | None:
    if isinstance(value, dict) and isinstance(value.get("modelID"), str):  # OpenCode
        provider = value.get("providerID")
        return f"{provider}/{value['modelID']}" if isinstance(provider, str) else value["modelID"]
    return value[:MAX_ID_CHARS] if isinstance(value, str) and value else None


def _extra(payload: dict[str, Any]) -> dict[str, Any]:
    """Copy ``_EXTRA_KEYS`` scalars from the payload (and OpenCode ``input``), strings capped."""
    out: dict[str, Any] = {}
    for src in (payload, payload.get("input")):
        for key, value in src.items() if isinstance(src, dict) else ():
            name = _EXTRA_RENAME.get(key, key)
            scalar = isinstance(value, str | int | float) and value != ""  # bool is an int
            if scalar and name in _EXTRA_KEYS and name not in out:
                out[name] = value[:MAX_ID_CHARS] if isinstance(value, str) else value
    return out


def _iso(value: Any) -> str | None:
    """Return ISO-8601 UTC (``...Z``) from ISO text (naive = UTC) or epoch s / ms (≥ 1e11)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return iso_from_epoch(value / 1000 if abs(value) >= 1e11 else value)
    if not isinstance(value, str):
        return None
    try:
        dt = datetime.fromisoformat(value)
        dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


__all__ = [
    "AGENTS", "BODY_CAP_BYTES", "EXCERPT_CAP_BYTES", "PROMPT_CAP_BYTES", "HookPayloadError",
    "NormalizedEvent", "check_identity", "detect_agent", "normalize"]
