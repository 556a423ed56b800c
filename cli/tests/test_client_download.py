"""``Client.download`` (the ``aimem backup`` transport) against a real HTTP server on loopback."""

from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from aimem_cli.client import CliError, Client

BODY = b"\x1f\x8b" + os.urandom(4096)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/admin/backup":
            self.send_response(200)
            self.send_header("Content-Type", "application/gzip")
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)
        else:
            data = b'{"error":{"code":"not_found","message":"no such route"}}'
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        t.join(5)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_backup_archive_is_owner_only_under_a_permissive_umask(server, umask_022, tmp_path: Path) -> None:
    dest = tmp_path / "b.tar.gz"
    # a stale partial download from an earlier run, world-readable, must not lend its mode
    stale = tmp_path / ".b.tar.gz.part"
    stale.write_bytes(b"old")
    stale.chmod(0o644)
    with Client(server) as c:
        n = c.download("/admin/backup", dest)
    assert n == len(BODY)
    assert dest.read_bytes() == BODY
    assert dest.stat().st_mode & 0o777 == 0o600
    assert not stale.exists()


def test_backup_replacing_a_world_readable_file_narrows_it(server, umask_022, tmp_path: Path) -> None:
    dest = tmp_path / "b.tar.gz"
    dest.write_bytes(b"previous")
    dest.chmod(0o644)
    with Client(server) as c:
        c.download("/admin/backup", dest)
    assert dest.read_bytes() == BODY
    assert dest.stat().st_mode & 0o777 == 0o600


def test_failed_download_leaves_no_file(server, tmp_path: Path) -> None:
    dest = tmp_path / "b.tar.gz"
    with Client(server) as c, pytest.raises(CliError, match=r"no such route \(HTTP 404\)"):
        c.download("/admin/nothing", dest)
    assert not dest.exists()
    assert list(tmp_path.iterdir()) == []
