"""backfill.claim/finish on the real batch path: once per project, only while it is empty."""

from __future__ import annotations


def _claim(wh, sid="live-1", pj="app", **kw) -> dict:
    return wh.ok("backfill.claim", {"agent": "claude-code", "session_id": sid}, pj=pj,
                 root=f"/w/{pj}", origin=f"github.com/acme/{pj}", **kw)


def test_the_first_start_of_an_empty_project_claims_once_and_finish_records_it(wh) -> None:
    wh.obs("live-1", "session-start", root="/w/app", origin="github.com/acme/app")  # the claiming start itself
    got = _claim(wh)
    assert got["claimed"] is True and got["backfill"]["state"] == "running"
    assert got["backfill"]["session_id"] == "live-1" and got["backfill"]["agent"] == "claude-code"
    again = _claim(wh, sid="live-2")  # a second start (or a retry, another machine, after a restart)
    assert again == {"claimed": False, "reason": "already", "backfill": got["backfill"]}
    done = wh.ok("backfill.finish", {"state": "done", "files": 20, "sessions": 20, "events": 140,
                                     "new_events": 140}, root="/w/app", origin="github.com/acme/app")["backfill"]
    assert (done["state"], done["files"], done["events"], done["truncated"]) == ("done", 20, 140, False)
    assert done["finished_at"] >= done["claimed_at"]
    assert _claim(wh, sid="live-3")["reason"] == "already"
    assert wh.count("SELECT count(*) FROM project_backfills") == 1
    assert wh.count("SELECT count(*) FROM audit_log WHERE op = 'backfill.claim'") == 1


def test_a_project_with_another_session_or_a_page_is_never_backfilled(wh) -> None:
    wh.obs("old-1", "user-prompt", "fix it", root="/w/app", origin="github.com/acme/app")
    assert _claim(wh) == {"claimed": False, "reason": "not_empty", "backfill": None}
    wh.ok("page.write", {"path": "concepts/retry.md", "title": "Retry", "body": "Backoff."}, pj="paged",
          root="/w/paged", origin="github.com/acme/paged")
    assert _claim(wh, pj="paged")["reason"] == "not_empty"
    assert wh.count("SELECT count(*) FROM project_backfills") == 0


def test_finish_without_a_claim_is_not_found(wh) -> None:
    _claim(wh, pj="other")  # creates a project of its own; "app" has no backfill
    wh.obs("s", "session-start", root="/w/app", origin="github.com/acme/app")
    err = wh.err("backfill.finish", {"state": "failed", "error": "x"}, root="/w/app", origin="github.com/acme/app")
    assert err["code"] == "backfill_not_found"
