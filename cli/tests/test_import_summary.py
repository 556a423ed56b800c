"""The summary of ``aimem import`` a person reads, where malformed lines are, and the importer's
patience with the import lane's back-pressure (429 + ``Retry-After``) on a real HTTP server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import typer

from aimem_cli.commands.importing import ingress_sender, summary
from aimem_cli.importer import ImportStats, Importer
from aimem_cli.transcripts.base import FileState, ReadStats, json_lines


def test_nothing_new_is_never_told_as_imported() -> None:
    stats = ImportStats(files=3, sessions=2, lines=40, events=30, already=24, captured_live=6, seconds=0.4)
    text = summary(stats)
    first = text.splitlines()[0]
    assert first.startswith("nothing new to import") and "imported" not in first
    assert "already there:  24" in text and "captured live:  6" in text and "new:            0" in text
    assert not stats.failed


def test_new_events_skips_malformed_and_rejected_are_each_told() -> None:
    stats = ImportStats(files=12, files_unchanged=2, sessions=9, lines=1500, events=1200, new=1100, already=40,
                        captured_live=55, rejected_events=5, rejected=["missing_session_id: no session id"] * 2,
                        malformed_lines=8, malformed_at=[f"/t/a.jsonl:{n}" for n in (3, 9, 17, 40, 41)],
                        events_excluded=4, sessions_skipped_capture=2, truncated_files=1, seconds=3.2)
    text = summary(stats)
    assert text.splitlines()[0] == ("imported 1,100 new events from 12 files (2 unchanged), 9 sessions, "
                                    "1,500 lines → 1,200 events")
    assert "/t/a.jsonl:3, /t/a.jsonl:9, /t/a.jsonl:17, /t/a.jsonl:40, /t/a.jsonl:41 and 3 more" in text
    assert "4 events naming excluded files" in text and "2 sessions of repositories with capture = false" in text
    assert "5 events the server could not read" in text and "and 3 more" in text
    assert "1 files end in a partial line" in text
    assert stats.failed and text.rstrip().endswith("(exit 2)")


def test_a_dry_run_says_nothing_was_sent() -> None:
    text = summary(ImportStats(files=1, sessions=1, lines=10, events=8), dry_run=True)
    assert text.startswith("dry run: read 1 files") and "nothing sent" in text and "new:" not in text


def test_malformed_lines_are_located_by_line_number(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    good = json.dumps({"sessionId": "s", "type": "user"})
    lines = [good, "{broken", good, "", good, "[1, 2]", "not json at all"]  # 2, 6, 7 are malformed
    path.write_text("\n".join(lines) + "\n")
    stats = ReadStats()
    assert len(list(json_lines(path, FileState(), stats))) == 3
    assert stats.malformed == 3 and stats.malformed_at == [2, 6, 7]
    # resumed from an offset, a line keeps its number in the file
    state = FileState(offset=len((lines[0] + "\n").encode()) * 1)
    stats = ReadStats()
    list(json_lines(path, state, stats))
    assert stats.malformed_at == [2, 6, 7]


def test_the_importer_names_malformed_lines_with_their_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = home / ".claude" / "projects" / "-w-app"
    project.mkdir(parents=True)
    line = {"sessionId": "s1", "type": "user", "cwd": str(tmp_path), "timestamp": "2026-03-01T10:00:00Z",
            "uuid": "u1", "message": {"role": "user", "content": "hello"}}
    path = project / "s1.jsonl"
    path.write_text(json.dumps(line) + "\n{oops\n")
    stats = Importer(sender=None).run([("claude-code", path)])
    assert stats.malformed_lines == 1 and stats.malformed_at == [f"{path}:2"]


class _Saturated(BaseHTTPRequestHandler):
    """``/hook/import``: 429 (``Retry-After: 0``) for the first ``busy`` posts, then 202."""

    busy = 2
    posts = 0

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).posts += 1
        saturated = type(self).posts <= type(self).busy
        body = (b'{"error": {"code": "backpressure", "message": "busy"}}' if saturated else
                b'{"accepted": 1, "duplicates": 0, "new": 1, "already": 0, "captured_live": 0, "rejected": []}')
        self.send_response(429 if saturated else 202)
        if saturated:
            self.send_header("Retry-After", "0")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def saturated_server():
    _Saturated.posts = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Saturated)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_the_importer_waits_out_the_import_lanes_back_pressure(saturated_server) -> None:
    url = f"http://127.0.0.1:{saturated_server.server_port}"
    _Saturated.busy = 12  # more than the old fixed 8 attempts
    waits: list[float] = []
    answer = ingress_sender(url, None, sleep=waits.append)(b"{}")
    assert answer["new"] == 1 and _Saturated.posts == 13
    assert waits == [0.1] * 12  # Retry-After 0: a short pause, not a busy loop


def test_the_importer_gives_up_after_its_patience_with_status_1(saturated_server) -> None:
    url = f"http://127.0.0.1:{saturated_server.server_port}"
    _Saturated.busy = 10_000
    with pytest.raises(typer.Exit) as exc:
        ingress_sender(url, None, patience_s=0.3)(b"{}")
    assert exc.value.exit_code == 1 and _Saturated.posts >= 2
