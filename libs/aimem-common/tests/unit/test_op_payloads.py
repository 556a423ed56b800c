"""Op payload validation shared by every caller and the writer."""

from __future__ import annotations

import pytest

from aimem_common.errors import BadRequestError
from aimem_common.commands.envelope import parse_payload


@pytest.mark.parametrize(("op", "payload"), [
    ("page.write", {"path": "concepts/x.md", "body": "x", "expected_page_id": 10**30}),
    ("page.restore", {"path": "concepts/x.md", "page_id": 2**63}),
    ("apikey.revoke", {"key_id": 10**26}),
    ("handoff.accept", {"handoff_id": -(2**64)}),
    ("message.pop", {"message_id": 2**64}),
])
def test_integers_past_sqlite_range_are_invalid_payload(op: str, payload: dict):
    """An id SQLite cannot bind is a 400 before the writer's transaction, not an OverflowError."""
    with pytest.raises(BadRequestError) as err:
        parse_payload(op, payload)
    assert err.value.code == "invalid_payload" and "out of range" in str(err.value)


def test_largest_sqlite_integer_is_still_valid():
    assert parse_payload("handoff.accept", {"handoff_id": 2**63 - 1}).handoff_id == 2**63 - 1


def test_session_end_reason_is_redacted_when_parsed():
    """The end reason is the client's text and lands on the session page: redacted by type,
    in whoever builds the command and again in the writer's parse."""
    from aimem_common.commands.observations import SessionEnd

    end = SessionEnd(session_id="s-1", reason="other ghp_" + "a1B2c3D4e5" * 4)
    assert end.reason == "other [REDACTED:github_token]"
