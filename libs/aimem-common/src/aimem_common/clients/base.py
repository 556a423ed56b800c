"""``Client``: what aimem knows about one agent client, as data (stdlib only)."""

from __future__ import annotations

from typing import Any, NamedTuple

from aimem_common.kinds import ObservationKind

K = ObservationKind

# Canonical field -> dotted payload paths tried in order (digits index lists). Claude,
# Gemini, Codex hooks and both Copilot shapes share these; a client's ``paths`` replace a field.
COMMON_PATHS: dict[str, tuple[str, ...]] = {
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

# How a client reads the session-start context the hook client prints on stdout.
HOOK_SPECIFIC_OUTPUT = "hookSpecificOutput"  # {"hookSpecificOutput": {"hookEventName", "additionalContext"}}
ADDITIONAL_CONTEXT = "additional_context"  # {"additional_context": text}
PLAIN_TEXT = "text"  # the text as it is
NO_OUTPUT = "none"  # the client ignores session-start output: the context is not fetched


def event_table(by_kind: dict[ObservationKind, str]) -> dict[str, ObservationKind]:
    """Invert ``{kind: "NativeA NativeB"}`` to ``{"nativea": kind}`` (case-insensitive lookup)."""
    return {name.casefold(): kind for kind, names in by_kind.items() for name in names.split()}


class Client(NamedTuple):
    """One agent client: its hook events, where its payloads keep each field, and its hooks.

    ``events``: every event its current hook reference documents (casefolded) -> one kind;
    ``K.OTHER`` entries are documented events no kind fits (they keep their raw fields).
    ``paths``: canonical field -> payload paths, replacing ``COMMON_PATHS`` entries.
    ``implied_tools``: events that imply their tool instead of naming it (casefolded).
    ``install_events``: the events the installer subscribes to (native spelling; empty
    when the client is not hooked through a settings file). ``end_event``: the native name
    of a session end (``aimem finalize-session``). ``session_start_output``: one of
    ``HOOK_SPECIFIC_OUTPUT``, ``ADDITIONAL_CONTEXT``, ``PLAIN_TEXT``, ``NO_OUTPUT``.
    ``transcript_dir``: a path part its transcripts live under (detection by
    ``transcript_path``). ``short_timeout_events``: installed events the client clamps
    to a few seconds. A ``NamedTuple``, not a dataclass: ``dataclasses`` imports ``inspect``,
    ~30 ms the hook client would pay on every call. The dict defaults are never mutated.
    """

    name: str
    events: dict[str, ObservationKind]
    end_event: str
    aliases: tuple[str, ...] = ()
    paths: dict[str, tuple[str, ...]] = {}  # noqa: RUF012 - read only
    implied_tools: dict[str, str] = {}  # noqa: RUF012 - read only
    install_events: tuple[str, ...] = ()
    session_start_output: str = PLAIN_TEXT
    transcript_dir: str | None = None
    short_timeout_events: frozenset[str] = frozenset()
    installable: bool = True

    def kind_of(self, event: str | None) -> ObservationKind:
        """The kind of native ``event`` (any case); ``other`` for an unknown or no name."""
        return self.events.get(event.casefold(), K.OTHER) if event else K.OTHER

    def field_paths(self) -> dict[str, tuple[str, ...]]:
        """Canonical field -> payload paths for this client (``COMMON_PATHS`` + ``paths``)."""
        return {**COMMON_PATHS, **self.paths}


def get_path(obj: Any, path: str) -> Any:
    """The value at dotted ``path`` in decoded JSON (digits index lists); None when absent."""
    for step in path.split("."):
        if isinstance(obj, dict):
            obj = obj.get(step)
        elif isinstance(obj, list) and step.isdigit() and int(step) < len(obj):
            obj = obj[int(step)]
        else:
            return None
    return obj


__all__ = ["ADDITIONAL_CONTEXT", "COMMON_PATHS", "HOOK_SPECIFIC_OUTPUT", "NO_OUTPUT", "PLAIN_TEXT",
           "Client", "K", "event_table", "get_path"]
