"""The sanitizing boundary: only sanitize() builds a SanitizedObservation; secrets never pass."""

from __future__ import annotations

import pytest

from aimem_common.models import ObservationKind
from aimem_common.sanitize import RawObservation, SanitizedObservation, cap_utf8, sanitize


def test_cannot_construct_directly() -> None:
    raw = RawObservation(session_id="s", kind=ObservationKind.USER_PROMPT, body="hi")
    with pytest.raises(TypeError, match="sanitize"):
        SanitizedObservation(raw)


def test_secrets_redacted_in_every_text_field() -> None:
    key = "AKIAIOSFODNN7EXAMPLE"
    raw = RawObservation(
        session_id="s1",
        kind=ObservationKind.POST_TOOL_USE,
        title=f"Bash: aws s3 ls --key {key}",
        body=f"export AWS_ACCESS_KEY_ID={key}\ncurl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345' x",
        tool_name="Bash",
        cwd="/home/dev/proj",
    )
    out = sanitize(raw)
    payload = out.to_payload()
    assert key not in payload.title and key not in payload.body
    assert "abcdefghijklmnopqrstuvwxyz012345" not in payload.body
    assert "[REDACTED:" in payload.body
    assert payload.sanitized is True
    assert payload.redactions  # kinds recorded, values never
    assert payload.cwd == "/home/dev/proj" and payload.tool_name == "Bash"


def test_body_backstop_after_redaction() -> None:
    raw = RawObservation(session_id="s", kind=ObservationKind.USER_PROMPT, body="é" * 20_000)
    body = sanitize(raw).to_payload().body
    assert len(body.encode()) <= 16 * 1024
    assert body.endswith("…")
    body.encode("utf-8")  # valid UTF-8, no split code point


def test_cap_utf8_boundaries() -> None:
    assert cap_utf8("abc", 3) == "abc"
    assert cap_utf8("abcd", 3 + 3) == "abcd"
    emoji = "😀" * 10  # 4 bytes each
    out = cap_utf8(emoji, 10)
    assert len(out.encode()) <= 10 and out.startswith("😀") and out.endswith("…")


def test_overlong_metadata_is_cut_to_the_payload_limits_not_refused() -> None:
    raw = RawObservation(session_id="s", kind=ObservationKind.USER_PROMPT, agent="a" * 500, cwd="/" + "d" * 9000,
                         tool_name="t" * 900, source_event="e" * 300, extension="x" * 300, model="m" * 70_000)
    payload = sanitize(raw).to_payload()  # a ValidationError here was a 500 on /hook
    assert (len(payload.agent), len(payload.cwd), len(payload.tool_name)) == (64, 4096, 256)
    assert (len(payload.source_event), len(payload.extension), len(payload.model)) == (128, 64, 128)
