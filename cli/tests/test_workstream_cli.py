"""``aimem`` workstream commands against a small stand-in query/admin server (stdlib HTTP on
loopback): what they refuse before asking, and what they print after a run."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from typer.testing import CliRunner

from aimem_cli.main import build_app

WID = "b54b" + "0" * 28


class OneWorkstream:
    """Answers ``GET …/workstreams`` with one workstream and records every request."""

    def __init__(self):
        self.requests: list[tuple[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, body: object) -> None:
                out = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def do_GET(self):  # noqa: N802
                outer.requests.append(("GET", self.path))
                self._answer([{"id": WID, "name": "wsrepo", "checkout_root": "/nowhere", "harnesses": [],
                               "live_run": None, "events": 11}])

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.requests.append(("POST", self.path))
                self._answer({"dry_run": False, "name": "wsrepo", "workstream_id": WID,
                              "workstream_events_deleted": 11, "managed_runs_deleted": 3})

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def one_workstream():
    with OneWorkstream() as s:
        yield s


@pytest.mark.parametrize("verb", [["workstream-delete", "--confirm"], ["workstream-delete"], ["show"],
                                  ["resume"]])
@pytest.mark.parametrize("ref", ["", "  "])
def test_a_blank_workstream_is_refused_before_the_server_is_asked(verb, ref, one_workstream) -> None:
    r = CliRunner().invoke(build_app(), [verb[0], ref, *verb[1:], "-w", "w", "-p", "proj",
                                         "--server", one_workstream.url, "--token", "t"])
    assert r.exit_code == 1, r.output
    assert r.output.strip() == "aimem: the workstream is empty; pass its id (or a prefix) or its name" \
        or r.output.strip().endswith("the workstream is empty; pass its id (or a prefix) or its name"), r.output
    assert len(r.output.strip().splitlines()) == 1 and one_workstream.requests == []


def test_a_real_prefix_still_deletes(one_workstream) -> None:
    r = CliRunner().invoke(build_app(), ["workstream-delete", "b54b", "--confirm", "-w", "w", "-p", "proj",
                                         "--server", one_workstream.url, "--token", "t"])
    assert r.exit_code == 0, r.output
    assert f"Deleted workstream 'wsrepo' ({WID}) of w/proj: 11 ledger events, 3 runs." in r.output
    assert ("POST", "/admin/workstream-delete") in one_workstream.requests

