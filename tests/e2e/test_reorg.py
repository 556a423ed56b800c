"""``aimem reorg`` on the real stack: ``aimem hook`` → ingress → nats-server → writer, then the
verb through query's ``/admin/session-locations`` and ``/admin/reorg``.

Sessions captured before a ``.aimem.toml`` named their folder's project are moved to the
project that folder resolves to now; a session already in place stays; an open session is
skipped unless ``--force``; a folder that no longer exists is left alone. The preview's
counts are the confirmed run's, and nothing outside the moved sessions changes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aimem_testing.gitrepo import make_repo, wait_for
from tests.e2e.test_identity_lifecycle import Client, Store, sid

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

AIMEM = str(Path(sys.executable).with_name("aimem"))


def reorg(query: str, *args: str) -> tuple[int, dict | str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    proc = subprocess.run([AIMEM, "reorg", "--server", query, *args], capture_output=True, text=True, env=env,
                          timeout=120)
    if "--json" in args and proc.returncode == 0:
        return proc.returncode, json.loads(proc.stdout)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.timeout(600)
def test_reorg_moves_sessions_to_the_project_their_folder_resolves_to_now(services, settings, tmp_path: Path):
    procs = services("writer", "ingress", "query")
    client, store = Client(procs["ingress"].url, tmp_path / "client"), Store(settings.db_path)
    query = procs["query"].url
    docs = tmp_path / "work" / "docs"
    docs.mkdir(parents=True)
    repo = make_repo(tmp_path / "src" / "billing")
    gone = tmp_path / "scratch"
    gone.mkdir()

    ended, open_, placed, lost = sid("ended"), sid("open"), sid("placed"), sid("lost")
    client.session(ended, docs, "outline the user guide")
    client.start(open_, docs)
    client.work(open_, docs, "draft the install chapter")
    client.start(placed, repo)
    client.work(placed, repo, "add the invoice endpoint")
    client.start(lost, gone)
    client.work(lost, gone, "try something")
    wait_for(lambda: store.handoff(ended), what="the ended session's handoff")
    wait_for(lambda: all(store.project_of(s) for s in (open_, placed, lost)), what="every session stored")
    assert store.project_of(ended) == store.project_of(open_) == "default/docs"
    before_obs = {s: len(store.rows("SELECT 1 FROM observations WHERE session_id = ?", s))
                  for s in (ended, open_, placed, lost)}

    # Later the user names the folder's project; the old sessions stay under "docs".
    (docs / ".aimem.toml").write_text('project = "user-guide"\n')
    shutil.rmtree(gone)

    code, preview = reorg(query, "--json")
    assert code == 0, preview
    assert preview["dry_run"] is True
    # without --force nothing moves: the ended session still waits for its consolidation (no
    # maintainer runs here), the other is open
    assert preview["sessions"] == []
    assert sorted((s["session_id"], s["reason"]) for s in preview["skipped"]) == sorted(
        [(ended, "consolidation_pending"), (open_, "session_open")])
    assert all(s["to"] == {"workspace": "default", "project": "user-guide"} for s in preview["skipped"])
    assert preview["unchanged"] == 1  # the repository's session is where it belongs
    assert [(e["cwd"], e["reason"], e["sessions"]) for e in preview["left_alone"]] == [(str(gone), "cwd_gone", 1)]
    assert preview["created_projects"] == []  # nothing would move there: it would not be created
    code, done = reorg(query, "--confirm", "--json")  # a confirmed run skips the same two, changes nothing
    assert code == 0 and done["moved"] == 0 and len(done["skipped"]) == 2, done
    assert store.project_of(ended) == "default/docs"
    assert not store.rows("SELECT 1 FROM projects WHERE name = 'user-guide'")

    code, preview = reorg(query, "--force", "--json")
    assert code == 0, preview
    assert [s["session_id"] for s in preview["sessions"]] == [ended, open_] and preview["skipped"] == []
    assert preview["sessions"][0]["to"] == {"workspace": "default", "project": "user-guide"}
    assert preview["sessions"][0]["summary"]["observations"] == before_obs[ended]
    assert preview["sessions"][0]["summary"]["handoffs"] == 1
    assert preview["created_projects"] == [{"workspace": "default", "project": "user-guide"}]
    assert store.project_of(ended) == "default/docs"  # the preview changed nothing
    assert not store.rows("SELECT 1 FROM projects WHERE name = 'user-guide'")
    code, out = reorg(query, "--force")  # the human preview says what would happen and how to apply it
    assert code == 0 and "would move session " + ended in out and "re-run with --confirm" in out, out

    code, done = reorg(query, "--confirm", "--force", "--json", "-p", "docs")
    assert code == 0, done
    assert done["dry_run"] is False
    assert (done["moved"], done["unchanged"], done["summary"]) == (2, 0, preview["summary"])
    assert [s["summary"] for s in done["sessions"]] == [s["summary"] for s in preview["sessions"]]
    assert done["created_projects"] == [{"workspace": "default", "project": "user-guide"}]
    assert store.project_of(ended) == store.project_of(open_) == "default/user-guide"
    assert store.handoff(ended)["project"] == "user-guide"
    assert store.page_project(ended) == ["user-guide"]
    assert len(store.rows("SELECT 1 FROM observations o JOIN projects p ON p.id = o.project_id"
                          " WHERE o.session_id = ? AND p.name = 'user-guide'", ended)) == before_obs[ended]
    # nothing else moved: the repository's session, the lost folder's
    assert (store.project_of(placed), store.project_of(lost)) == ("default/billing", "default/scratch")

    # a new event of the open session lands where reorg put it; a second reorg has nothing to do
    client.work(open_, docs, "draft the upgrade chapter")
    wait_for(lambda: len(store.rows("SELECT 1 FROM observations WHERE session_id = ?", open_)) > before_obs[open_],
             what="the later event stored")
    assert store.project_of(open_) == "default/user-guide"

    # into a project that exists: the preview (rolled back) and the run agree
    notes = tmp_path / "work" / "notes"
    notes.mkdir()
    late = sid("late")
    client.start(late, notes)
    client.work(late, notes, "collect the release notes")
    wait_for(lambda: store.project_of(late), what="the notes session")
    (notes / ".aimem.toml").write_text('project = "user-guide"\n')
    code, preview = reorg(query, "--force", "--json", "-p", "notes")
    assert code == 0, preview
    assert [s["session_id"] for s in preview["sessions"]] == [late] and preview["created_projects"] == []
    assert preview["unchanged"] == 0 and preview["summary"]["observations"] >= 3
    assert store.project_of(late) == "default/notes"  # the preview changed nothing
    code, done = reorg(query, "--force", "--confirm", "--json", "-p", "notes")
    assert code == 0 and done["summary"] == preview["summary"], done
    assert store.project_of(late) == "default/user-guide"

    code, again = reorg(query, "--json")
    assert code == 0 and again["moved"] == 0 and again["skipped"] == [] and again["unchanged"] == 4, again

    # clear errors: an unknown project filter, a bad --pages value
    code, out = reorg(query, "-p", "nope")
    assert code == 1 and "not found" in out and "Traceback" not in out, out
    code, out = reorg(query, "--pages", "copy")
    assert code == 1 and "--pages" in out
