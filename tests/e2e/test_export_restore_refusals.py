"""``aimem import --from-export`` refuses a bad export in one line, exit 1, and stores nothing of it.

A file that is no zip, an export with a malformed JSONL line, and a zip holding a page path
that climbs out of the project (``../``) are each refused before the first write; a good
restore sent after them (same stack, same lanes) is applied, and the refused projects still
have no sessions and no pages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from aimem_testing.stack import LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
AIMEM = Path(sys.executable).with_name("aimem")


def export_files(project: str) -> dict[str, str]:
    """A small export in ``aimem export``'s layout (one ended session, two observations, one page)."""
    manifest = {"format": "aimem-export", "v": 1, "workspace": "default", "project": project,
                "exported_at": "2026-12-01T10:00:00+00:00", "page_format": "markdown", "counts": {}}
    obs = [{"id": i, "session_id": "s1", "kind": "user-prompt", "agent": "claude-code", "cwd": "/src/x",
            "body": f"restored prompt {i} about the walrus cache", "occurred_at": f"2026-12-01T10:0{i}:00+00:00"}
           for i in (1, 2)]
    session = {"session_id": "s1", "agent": "claude-code", "cwd": "/src/x", "started_at": "2026-12-01T10:00:00+00:00",
               "ended_at": "2026-12-01T10:05:00+00:00"}
    return {"aimem-export.json": json.dumps(manifest),
            "aimem-data/sessions.jsonl": json.dumps(session) + "\n",
            "aimem-data/observations.jsonl": "".join(json.dumps(o) + "\n" for o in obs),
            "notes/walrus.md": "---\ntitle: Walrus\n---\nThe walrus cache note.\n"}


def write_folder(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def restore(stack: LocalStack, src: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = stack.client_env(AIMEM_DATA_DIR=str(tmp_path / "client"))
    return subprocess.run([str(AIMEM), "import", "--from-export", str(src)], env=env, capture_output=True,
                          text=True, timeout=120)


def stored(stack: LocalStack, project: str, part: str) -> list:
    r = httpx.get(f"{stack.url('query')}/api/v1/workspaces/default/projects/{project}/export",
                  params={"part": part}, headers=stack.headers, timeout=30)
    return [] if r.status_code == 404 else r.json()["items"]


@pytest.mark.timeout(300)
def test_a_bad_export_is_refused_in_one_line_and_stores_nothing(tmp_path):
    not_zip = tmp_path / "passwd"
    not_zip.write_text("root:x:0:0:root:/root:/bin/bash\n")
    garbage = write_folder(tmp_path / "x3", export_files("x3"))
    with open(garbage / "aimem-data/observations.jsonl", "a") as fh:
        fh.write("garbage{\n")
    climbing = tmp_path / "x4.zip"
    with zipfile.ZipFile(climbing, "w") as z:
        for rel, text in export_files("x4").items():
            z.writestr(rel, text)
        z.writestr("../../../tmp/x.md", "# out of the project\n")
    good = write_folder(tmp_path / "x5", export_files("x5"))

    with LocalStack(tmp_path / "stack", tmp_path / "logs") as stack:
        cases = [(not_zip, f"aimem: {not_zip}: not an aimem export (neither a folder nor a zip archive: "
                           "File is not a zip file)"),
                 (garbage, f"aimem: {garbage}: aimem-data/observations.jsonl line 3 is not JSON"),
                 (climbing, f"aimem: {climbing}: ../../../tmp/x.md: invalid page path '../../../tmp/x.md': "
                            "'.' or '..' segment")]
        for src, first_words in cases:
            res = restore(stack, src, tmp_path)
            assert res.returncode == 1, res.stderr
            assert len(res.stderr.splitlines()) == 1 and res.stderr.startswith(first_words), res.stderr
            assert "Traceback" not in res.stderr and res.stdout == ""
        res = restore(stack, good, tmp_path)
        assert res.returncode == 0, res.stderr
        # the good restore went through the same lanes after the refused ones: once it is
        # applied, anything the refused ones had sent would be too
        deadline = time.monotonic() + 120
        while not (stored(stack, "x5", "sessions") and stored(stack, "x5", "observations")):
            assert time.monotonic() < deadline, "the good restore was never applied"
            time.sleep(0.3)
        for project in ("x3", "x4"):
            assert stored(stack, project, "sessions") == [] and stored(stack, project, "pages") == []
            assert stored(stack, project, "observations") == []
