"""The sanitizing boundary (DESIGN.md invariant 6).

A ``SanitizedObservation`` can only be produced by ``sanitize()``: its constructor demands
a private token. ``sanitize`` redacts secrets from every free-text field with
``aimem_common.redact`` and applies the 16 KiB body backstop after redaction; the result
turns into an ``observation.append`` payload with ``sanitized=True``. The writer re-checks
the text (``contains_secret``) and refuses a command that still carries a secret.

What is accepted must be storable: NUL, which no page body may hold (the writer's page
store refuses it, so a prompt carrying one would make its session's page, and so its
end, fail for good), is removed from every text field here (``storable``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aimem_common.models import ObservationKind
from aimem_common.commands.observations import ObservationAppend
from aimem_common.redact import redact
from aimem_common.text import cap_utf8
from aimem_common.workstreams import strip_packets

BODY_BACKSTOP_BYTES = 16 * 1024
TITLE_CAP_BYTES = 512

_TOKEN = object()
UNSTORABLE_CHARS = "\x00"  # what a page body refuses (``aimem_writer.page_store``)
_UNSTORABLE = str.maketrans("", "", UNSTORABLE_CHARS)


def storable(text: str) -> str:
    """Return ``text`` without the characters no page body may hold (``UNSTORABLE_CHARS``: NUL).

    Pure; the other characters (other controls, any Unicode) are kept as they are.
    """
    return text.translate(_UNSTORABLE) if "\x00" in text else text


def cap_redacted(text: str, max_bytes: int) -> str:
    """Return ``text`` cut to at most ``max_bytes`` UTF-8 bytes (``text.cap_utf8``), redacting
    it first when it has to be cut: a cut through a secret leaves a prefix no rule
    recognises (``ghp_abc…``), which ``sanitize()`` would then let through.
    """
    data = text.encode("utf-8", "replace")  # lone surrogates as `?`, as `cap_utf8` does
    if len(data) <= max_bytes:
        return cap_utf8(text, max_bytes)
    return cap_utf8(redact(data.decode("utf-8")).text, max_bytes)


@dataclass(frozen=True, slots=True)
class RawObservation:
    """An observation as normalised from a hook payload, before redaction."""

    session_id: str
    kind: ObservationKind
    agent: str = "generic"
    cwd: str | None = None
    title: str = ""
    body: str = ""
    tool_name: str | None = None
    source_event: str | None = None
    extension: str | None = None
    model: str | None = None
    occurred_at: str | None = None
    parent_session_id: str | None = None


@dataclass(frozen=True, slots=True)
class SanitizedObservation:
    """A redacted, bounded observation. Build it with ``sanitize()`` only."""

    raw: RawObservation
    redactions: tuple[str, ...] = field(default=())
    _token: object = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._token is not _TOKEN:
            raise TypeError("SanitizedObservation can only be built by sanitize()")

    def to_payload(self) -> ObservationAppend:
        """Return the ``observation.append`` payload (``sanitized=True``)."""
        r = self.raw
        return ObservationAppend(
            session_id=r.session_id,
            kind=r.kind,
            agent=r.agent,
            cwd=r.cwd,
            title=r.title,
            body=r.body,
            tool_name=r.tool_name,
            source_event=r.source_event,
            extension=r.extension,
            model=r.model,
            occurred_at=r.occurred_at,
            parent_session_id=r.parent_session_id,
            sanitized=True,
            redactions=list(self.redactions),
        )


def _cut(text: str | None, max_chars: int) -> str | None:
    """A metadata field made storable and cut to the ``observation.append`` limit (a
    client's odd value is shortened, never a reason to refuse the event)."""
    text = storable(text) if text else text
    return text[:max_chars] if text and len(text) > max_chars else text


def sanitize(obs: RawObservation) -> SanitizedObservation:
    """Remove NUL from every text field (``storable``) and every workstream packet an agent
    echoed back (``aimem_common.workstreams.strip_packets``), redact secrets in
    title/body/cwd/tool name/model, then cap title (512 B) and body (16 KiB), and cut the
    metadata fields to their payload limits (agent, extension 64; model, source event 128;
    tool name 256; cwd 4096 characters).

    Returns the only kind of observation the writer accepts.
    """
    kinds: list[str] = []

    def clean(text: str | None) -> str | None:
        if not text:
            return text
        res = redact(storable(strip_packets(text)))
        kinds.extend(res.kinds)
        return res.text

    def clean_capped(text: str | None, max_bytes: int) -> str:
        # Redact, cap, then redact again: a cut can strip the context that marked a value
        # as code (``TOKEN=get_token()`` → ``TOKEN=get_tok…``) and make it look like a
        # secret. Uncut text needs no second pass (redaction is idempotent).
        redacted = clean(text) or ""
        capped = cap_utf8(redacted, max_bytes)
        return (clean(capped) or "") if capped is not redacted else capped

    title = clean_capped(obs.title, TITLE_CAP_BYTES)
    body = clean_capped(obs.body, BODY_BACKSTOP_BYTES)
    raw = RawObservation(
        session_id=obs.session_id,
        kind=obs.kind,
        agent=_cut(obs.agent, 64) or "generic",
        cwd=_cut(clean(obs.cwd), 4096),
        title=title,
        body=body,
        tool_name=_cut(clean(obs.tool_name), 256),
        source_event=_cut(obs.source_event, 128),
        extension=_cut(obs.extension, 64),
        model=_cut(clean(obs.model), 128),
        occurred_at=obs.occurred_at,
        parent_session_id=_cut(obs.parent_session_id, 256),
    )
    return SanitizedObservation(raw, tuple(dict.fromkeys(kinds)), _token=_TOKEN)
