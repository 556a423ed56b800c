"""The session-start context of a claim: dated by event time, parallel sessions handed on with
their own text, inside one fence and the budget (docs/lifecycle.md)."""

from __future__ import annotations

from aimem_ingress.brief import CLOSE_TAG, OPEN_TAG, BriefPage, render_context


def handoff(sid: str, body: str, event_at: str, **kw) -> dict:
    return {"id": hash(sid) % 1000, "from_agent": "codex", "from_session_id": sid, "title": f"Continue: {sid}",
            "body": body, "created_at": "2026-12-04T23:59:59Z", "event_at": event_at, **kw}


def test_parallel_handoffs_each_keep_their_own_text_within_the_budget() -> None:
    left = handoff("left", "left: tune the invoice index\n" + "detail line\n" * 400, "2026-12-01T10:30:00Z")
    right = handoff("right", "right: write the refunds report\n" + "more\n" * 400, "2026-12-01T10:00:00Z")
    left["parallel"] = [right]
    left["folded"] = [{"id": 1, "title": "Continue: older", "from_session_id": "older",
                       "created_at": "2026-12-04T23:59:58Z", "event_at": "2026-12-01T08:00:00Z"}]
    text = render_context(left, [BriefPage("_rules/a.md", "Cents", "Money is integer cents.")], max_chars=6000,
                          project="billing")
    assert len(text) <= 6000 and text.count(OPEN_TAG) == 1 and text.count(CLOSE_TAG) == 1
    assert "left: tune the invoice index" in text and "right: write the refunds report" in text
    assert "Also handed on: a session that ran in parallel, from codex (session right, 2026-12-01T10:00:00Z)" in text
    # Dates are the events' own (when the work ended), never arrival.
    assert "(session left, 2026-12-01T10:30:00Z)" in text and "older, 2026-12-01T08:00:00Z" in text
    assert "2026-12-04T23:59:5" not in text
    assert "Money is integer cents." in text
