"""``aimem run`` against the real stack (``aimem up``) with a stand-in harness binary: what the
launcher says when the workstream is deleted under a live run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aimem_cli.managed import RunError, run
from aimem_testing.stack import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def test_a_run_whose_workstream_is_force_deleted_reports_nothing_stored(tmp_path: Path) -> None:
    stack = LocalStack(tmp_path / "data", tmp_path / "logs").start()
    try:
        repo = tmp_path / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        bindir = tmp_path / "bin"
        bindir.mkdir()
        stub = bindir / "claude"  # the "harness": deletes its own workstream while holding the lease
        stub.write_text(textwrap.dedent(f"""\
            #!{sys.executable}
            import os, httpx
            r = httpx.post("{stack.url('query')}/admin/workstream-delete",
                           headers={{"Authorization": "Bearer {stack.token}"}},
                           json={{"workspace": "default", "project": "repo", "confirm": True, "force": True,
                                  "workstream_id": os.environ["AIMEM_WORKSTREAM_ID"]}})
            raise SystemExit(0 if r.status_code == 200 else 9)
            """))
        stub.chmod(0o755)
        home = tmp_path / "home"
        env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "HOME": str(home)}
        with pytest.raises(RunError) as got:
            run("claude-code", [], cwd=repo, url=stack.url("ingress"), token=stack.token, home=home, env=env,
                wire=False)
        msg = str(got.value)
        assert msg.startswith("workstream ") and " was deleted while run " in msg, msg
        assert msg.endswith("none of its 1 event(s) are stored (the harness exited 0)"), msg
    finally:
        stack.stop()
