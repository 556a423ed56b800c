"""The shared stdlib helpers (``aimem_common.text``) and the client registry (``aimem_common.clients``)."""

from __future__ import annotations

import json

from aimem_common import clients
from aimem_common.kinds import ObservationKind as K
from aimem_common.sanitize import cap_redacted
from aimem_common.text import cap_utf8, iso_from_epoch, replace_lone_surrogates


def test_cap_utf8_marks_a_cut_inside_the_budget() -> None:
    assert cap_utf8("abcdef", 5) == "ab…"
    assert cap_utf8("abcdef", 5, marker="~") == "abcd~"
    assert cap_utf8("abcdef", 2) == "ab"  # no room for the marker: cut without it
    assert cap_utf8("a\ud800", 10) == "a?"  # always encodable


def test_cap_redacted_redacts_before_it_cuts() -> None:
    secret = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"
    out = cap_redacted("token " + secret + " " + "y" * 100, 30)
    assert "ghp_" not in out and len(out.encode()) <= 30


def test_replace_lone_surrogates_keys_values_and_depth() -> None:
    assert replace_lone_surrogates({"\udc00": ["a\ud800"]}) == {"\ufffd": ["a\ufffd"]}
    assert replace_lone_surrogates([[["x"]]], max_depth=1) == [["…"]]


def test_iso_from_epoch() -> None:
    assert iso_from_epoch(0) == "1970-01-01T00:00:00.000Z"
    assert iso_from_epoch(float("inf")) is None


def test_every_client_is_registered_with_its_end_event_and_install_list() -> None:
    assert clients.AGENTS == ("claude-code", "codex", "gemini-cli", "cursor", "copilot-cli", "opencode", "crush", "pi",
                              "omp", "openclaw", "antigravity", "generic")
    for name, client in clients.CLIENTS.items():
        assert client.kind_of(client.end_event) is K.SESSION_END, name
        assert all(client.kind_of(e) is not K.OTHER for e in client.install_events), name
    assert clients.INSTALLABLE == clients.AGENTS[:-1]


def test_session_start_output_per_client() -> None:
    assert json.loads(clients.format_context("cursor", "x")) == {"additional_context": "x"}
    assert json.loads(clients.format_context("codex", "x"))["hookSpecificOutput"]["additionalContext"] == "x"
    assert clients.format_context("opencode", "x") == "x"
    assert not clients.wants_context("copilot-cli") and clients.wants_context("unknown-client")
