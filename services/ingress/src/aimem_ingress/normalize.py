"""Turn one agent CLI's native hook payload into one ``NormalizedEvent`` (pure: no I/O).

Shapes: ``shared/fixtures/hooks/SOURCES.md`` (Claude SDK types, codex hook schemas and
``notify``, gemini-cli and cursor hook docs, ``@opencode-ai/plugin``) and, for Copilot CLI,
github/docs ``cli-hooks-reference.md`` (camelCase and VS Code PascalCase/snake_case shapes).
DESIGN.md "Hook ingress" fixes the vocabulary, the UTF-8 caps and project resolution.

The per-client knowledge (event tables, payload paths, detection, the OpenCode envelope)
lives in ``aimem_common.clients``; this module is the shared mapping.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aimem_common import clients, locations
from aimem_common.clients import copilot_cli, opencode
from aimem_common.clients.base import get_path as _get
from aimem_common.errors import BadRequestError
from aimem_common.models import ObservationKind
from aimem_common.patches import is_patch_tool, looks_like_patch, patch_files
from aimem_common.redact import redact
from aimem_common.sanitize import cap_redacted
from aimem_common.text import ELLIPSIS, iso_from_epoch

K = ObservationKind

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
_SUMMARY_KEYS = "command file_path filePath path pattern url query description prompt".split()
_OUTPUT_TEXT_KEYS = "llmContent textResultForLlm text_result_for_llm output result content".split()
_BULKY_KEYS = frozenset({"originalFile"})  # Claude Edit echoes the whole file
def normalize(agent: str | None, payload: Any, *, event: str | None = None,
              extension: str | None = None) -> NormalizedEvent:
    """Map one native hook payload to exactly one ``ObservationKind`` plus capped text.

    Args:
        agent: One of ``clients.AGENTS`` (or alias ``claude``/``gemini``/``copilot``); None detects.
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
    agent = clients.detect(payload) if agent is None else _agent_name(agent)
    if extension is not None and not (isinstance(extension, str)
                                      and _EXTENSION_RE.match(extension)):
        raise HookPayloadError("invalid_field", f"extension must match {_EXTENSION_RE.pattern}")
    client = clients.CLIENTS[agent]
    view = opencode.view(payload) if agent == "opencode" else payload
    paths = client.field_paths()

    def pick(name: str) -> Any:
        return _first(view, paths[name])

    native = _text_field(event, "event") or _text_field(pick("event"), "event")
    if agent == "opencode" and native == opencode.GENERIC_HOOK:  # the hook name, not event.type
        native = _text_field(_get(view, "bus.type"), "event")
    if native is None and agent == "copilot-cli":
        native = copilot_cli.event_from_shape(payload)
    kind = client.kind_of(native)
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
                     or client.implied_tools.get(folded))
        raw_input = pick("tool_input")
        tool_input = _excerpt(raw_input, as_output=False)
        error = _failure(kind, folded, view, pick) if kind is K.POST_TOOL_USE else None
        if kind is K.POST_TOOL_USE:
            tool_output = _excerpt(pick("tool_output"), as_output=True)
        if error:
            extra["status"] = "failed"
        summary = _input_summary(raw_input, cwd, tool_name)
        if kind is K.PERMISSION_REQUEST:
            label = "Permission denied" if folded in clients.DENIED_EVENTS else "Permission"
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
    if folded in clients.FAILED_TOOL_EVENTS:
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
    name = clients.ALIASES.get(name, name)
    if name not in clients.AGENTS:
        raise HookPayloadError("unknown_agent", f"unknown agent {agent!r}; expected {clients.AGENTS}")
    return name


_CONTENT_ONLY = frozenset({K.SESSION_START, K.PRE_COMPACT, K.POST_COMPACTION, K.SESSION_END, K.SUBAGENT_START})

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
        label = clients.NOTICE_LABELS.get((native or "").casefold(), "Notification")
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
    "BODY_CAP_BYTES", "EXCERPT_CAP_BYTES", "PROMPT_CAP_BYTES", "HookPayloadError",
    "NormalizedEvent", "check_identity", "normalize"]
