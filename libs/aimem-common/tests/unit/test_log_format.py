"""Service logs: readable text on a terminal, JSON lines otherwise, or as ``log_format`` says;
the same fields either way (``aimem_common.telemetry``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from aimem_common import config

SCRIPT = """
import logging
from aimem_common import config
from aimem_common.telemetry import setup_logging
s = config.load(check_writable=False)
setup_logging("writer", s.log_level, s.log_format)
try:
    raise ValueError("boom")
except ValueError:
    logging.getLogger("aimem.test").exception("hello %s", "there")
"""


def run_logging(tmp_path, *, tty: bool, log_format: str | None = None) -> str:
    """Run a real ``setup_logging`` in a child whose stderr is a terminal (a pty) or a pipe."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")} | {"AIMEM_DATA_DIR": str(tmp_path)}
    if log_format:
        env["AIMEM_LOG_FORMAT"] = log_format
    if not tty:
        out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stderr
    primary, secondary = os.openpty()
    try:
        proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, stderr=secondary, stdout=subprocess.DEVNULL,
                              timeout=60)
        os.close(secondary)
        chunks = []
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the child's end is closed
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(primary)
    assert proc.returncode == 0
    return b"".join(chunks).decode().replace("\r\n", "\n")


def _line(text: str) -> str:
    return next(line for line in text.splitlines() if "hello there" in line)


def test_a_terminal_gets_readable_lines(tmp_path) -> None:
    text = run_logging(tmp_path, tty=True)
    line = _line(text)
    assert not line.lstrip().startswith("{"), line
    assert " ERROR   writer aimem.test: hello there" in line, line
    assert "ValueError: boom" in text  # the traceback follows the line


def test_a_pipe_gets_json_with_the_same_fields(tmp_path) -> None:
    rec = json.loads(_line(run_logging(tmp_path, tty=False)))
    assert {k: rec[k] for k in ("level", "service", "logger", "msg")} == {
        "level": "error", "service": "writer", "logger": "aimem.test", "msg": "hello there"}
    assert "ValueError: boom" in rec["exc"] and rec["ts"].endswith("+00:00")


@pytest.mark.parametrize(("tty", "fmt", "json_out"), [(True, "json", True), (False, "text", False)])
def test_log_format_forces_one(tmp_path, tty: bool, fmt: str, json_out: bool) -> None:
    line = _line(run_logging(tmp_path, tty=tty, log_format=fmt))
    assert line.lstrip().startswith("{") is json_out, line


def test_a_bad_log_format_is_a_configuration_error(tmp_path) -> None:
    with pytest.raises(config.ConfigError, match="log_format must be auto|text|json"):
        config.load(tmp_path, environ={"AIMEM_LOG_FORMAT": "xml"})
