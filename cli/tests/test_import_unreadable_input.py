"""``aimem import`` never reports "nothing new" for input it could not read: a missing or
unreadable ``--path``, a file that is no transcript, a client folder that does not exist,
a broken Crush ``projects.json`` are one line naming the path and why, and exit 1; a garbage
or foreign ``crush.db`` is counted malformed with its reason (exit 2)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aimem_cli.main import build_app


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("AIMEM_DATA_DIR", str(tmp_path / "client"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(build_app(), ["import", *args])
    return r.exit_code, r.stdout, r.stderr


def one_line_error(code: int, out: str, err: str) -> str:
    assert code == 1, (code, out, err)
    assert "nothing new" not in out
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_a_missing_path_is_named(tmp_path):
    line = one_line_error(*run("--path", str(tmp_path / "nonexistent-dir"), "--dry-run"))
    assert line == f"error: --path {tmp_path / 'nonexistent-dir'}: no such file or folder"


def test_a_file_that_is_no_transcript_says_so(tmp_path):
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    line = one_line_error(*run("--path", str(passwd), "--client", "pi", "--dry-run"))
    assert line.startswith(f"error: --path {passwd}: not a pi transcript")


def test_a_folder_without_transcripts_says_so(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.txt").write_text("hello\n")
    line = one_line_error(*run("--path", str(folder), "--dry-run"))
    assert line == f"error: --path {folder}: no file in it is any client's transcript"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_path_says_permission_denied(tmp_path):
    secret = tmp_path / "rollout-x.jsonl"
    secret.write_text("{}\n")
    secret.chmod(0)
    line = one_line_error(*run("--path", str(secret), "--dry-run"))
    assert line == f"error: --path {secret}: not readable (permission denied)"


def test_a_named_client_whose_folder_is_missing(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    line = one_line_error(*run("--client", "pi", "--home", str(home), "--dry-run"))
    assert line == f"error: no pi transcripts: {home / '.pi/agent/sessions'} does not exist"


@pytest.mark.parametrize("body, why", [
    (b"{not json", "not JSON"),
    (b'{"projects": {"a": 1}}', "not the shape Crush writes"),
    (b'[1, 2]', "not the shape Crush writes"),
])
def test_a_broken_crush_projects_file_is_named_with_why(tmp_path, body, why):
    home = tmp_path / "home"
    projects = home / ".local/share/crush/projects.json"
    projects.parent.mkdir(parents=True)
    projects.write_bytes(body)
    line = one_line_error(*run("--client", "crush", "--home", str(home), "--dry-run"))
    assert line.startswith(f"error: {projects}: {why}")
    # with every client, the others still import and the note names it
    code, out, err = run("--home", str(home), "--dry-run")
    assert code == 0 and f"note: Crush's sessions skipped: {projects}: {why}" in err


@pytest.mark.parametrize("make, why", [
    (lambda p: p.write_bytes(b"garbage, not SQLite" * 100), "not a Crush database: file is not a database"),
    (lambda p: sqlite3.connect(p).execute("CREATE TABLE other (x)").connection.commit(),
     "not a Crush database: no such table: messages"),
])
def test_an_unreadable_crush_db_is_malformed_with_its_reason(tmp_path, make, why):
    db = tmp_path / "repo/.crush/crush.db"
    db.parent.mkdir(parents=True)
    make(db)
    code, out, err = run("--path", str(db), "--dry-run")
    assert f"1 lines not readable: {db} ({why})" in out
    code, out, err = run("--path", str(db), "--json", "--dry-run")
    assert json.loads(out)["malformed_at"] == [f"{db} ({why})"]
