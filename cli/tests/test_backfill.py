"""The client half of backfill on start, without a server: the switch, the local marker, which
transcripts are read, the bounds, and the importer's ``only=`` filter (one repository's sessions)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from aimem_cli import backfill
from aimem_cli.identity import resolve
from aimem_cli.importer import Importer
from aimem_testing.gitrepo import make_repo


class Recorder:
    def __init__(self):
        self.batches: list[dict] = []

    def __call__(self, body: bytes) -> dict:
        batch = json.loads(body)
        self.batches.append(batch)
        return {"accepted": len(batch["events"]), "duplicates": 0, "rejected": []}


def _line(sid: str, cwd: str | None, n: int) -> str:
    obj = {"type": "user", "uuid": f"{sid}-{n}", "sessionId": sid, "timestamp": f"2026-03-01T10:00:0{n}Z",
           "message": {"role": "user", "content": f"prompt {n}"}}
    if cwd is not None:
        obj["cwd"] = cwd
    return json.dumps(obj)


def test_the_switch_reads_env_over_config_and_defaults_on(tmp_path: Path) -> None:
    assert backfill.enabled({}, tmp_path) is True
    (tmp_path / "config.toml").write_text("[hooks]\nbackfill_on_start = false\n")
    assert backfill.enabled({}, tmp_path) is False
    assert backfill.enabled({"AIMEM_HOOK_BACKFILL": "1"}, tmp_path) is True
    (tmp_path / "config.toml").write_text("[hooks]\ntranscript_tail = true\n")
    assert backfill.enabled({}, tmp_path) is True
    assert backfill.enabled({"AIMEM_HOOK_BACKFILL": "off"}, tmp_path) is False


def test_wanted_once_per_project_and_stack_for_clients_with_transcripts(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", origin="https://example.com/acme/repo.git")
    ident, data = resolve(repo), tmp_path / "client"
    url = "http://127.0.0.1:8701"
    assert backfill.wanted("claude-code", ident, {}, data, url)
    assert not backfill.wanted("cursor", ident, {}, data, url)  # no transcript reader
    assert not backfill.wanted("claude-code", None, {}, data, url)
    marker = backfill.marker_path(data, ident, url)
    marker.parent.mkdir(parents=True)
    marker.write_text("{}")
    assert not backfill.wanted("claude-code", ident, {}, data, url)
    assert backfill.wanted("claude-code", ident, {}, data, "http://127.0.0.1:9701")  # another stack
    assert backfill.wanted("claude-code", resolve(make_repo(tmp_path / "other")), {}, data, url)


def test_only_the_repositorys_claude_folders_are_read_newest_first_and_bounded(tmp_path: Path, monkeypatch) -> None:
    repo = make_repo(tmp_path / "api")
    (repo / "sub").mkdir()
    projects = tmp_path / "home" / ".claude" / "projects"
    names = [str(repo), str(repo / "sub"), str(tmp_path / "api2"), str(tmp_path / "other")]
    for i, cwd in enumerate(names):
        f = projects / cwd.replace("/", "-") / f"s{i}.jsonl"
        f.parent.mkdir(parents=True)
        f.write_text(_line(f"s{i}", cwd, 1) + "\n")
        os.utime(f, (1_000_000 + i, 1_000_000 + i))
    files = backfill.project_files("claude-code", tmp_path / "home", resolve(repo))
    assert [p.name for _, p in files] == ["s1.jsonl", "s0.jsonl"]  # api2 is another repository
    monkeypatch.setattr(backfill, "MAX_FILES", 1)
    assert [p.name for _, p in backfill.bounded(files)[0]] == ["s1.jsonl"] and backfill.bounded(files)[1]
    monkeypatch.setattr(backfill, "MAX_FILES", 10)
    monkeypatch.setattr(backfill, "MAX_BYTES", files[0][1].stat().st_size)
    assert backfill.bounded(files) == (files[:1], True)


def test_only_sends_the_sessions_of_that_project(tmp_path: Path) -> None:
    repo, other = make_repo(tmp_path / "repo"), make_repo(tmp_path / "other")
    f = tmp_path / "mixed.jsonl"
    f.write_text("\n".join([_line("mine", str(repo / "."), 1), _line("theirs", str(other), 1),
                            _line("nowhere", None, 1)]) + "\n")
    rec = Recorder()
    stats = Importer(sender=rec, only=resolve(repo)).run([("claude-code", f)])
    sent = {e["payload"]["session_id"] for b in rec.batches for e in b["events"]}
    assert sent == {"mine"} and stats.sessions_skipped_filter == 2
    assert {b["project"] for b in rec.batches} == {"repo"}
