"""CI: run ``make up`` as the README says, wait until every service is healthy, then Ctrl-C it.

``make up`` runs in its own process group; SIGINT goes to that group (what Ctrl-C in a
terminal does). Exits 0 when every ``/healthz`` answered 200 within ``--deadline`` seconds
and the stack then stopped within ``--stop-deadline`` seconds; else prints the tail of its
log and exits 1. Stdlib only: it runs before anything is known to work.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

OFFSETS = {"ingress": 0, "query": 1, "mcp-gateway": 2, "writer": 3, "maintainer": 4}  # config.PORT_OFFSETS


def healthy(port: int) -> bool:
    """True when ``http://127.0.0.1:<port>/healthz`` answers 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def main() -> int:
    """Start, check and stop ``make up``; return the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port-base", type=int, default=int(os.environ.get("PORT_BASE", "8701")))
    ap.add_argument("--deadline", type=float, default=120.0, help="seconds to become healthy")
    ap.add_argument("--stop-deadline", type=float, default=30.0, help="seconds to stop after Ctrl-C")
    args = ap.parse_args()
    log = tempfile.NamedTemporaryFile(prefix="make-up-", suffix=".log", delete=False)
    proc = subprocess.Popen(["make", "-s", "up", f"PORT_BASE={args.port_base}"], stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    ok, pending = False, dict(OFFSETS)
    try:
        deadline = time.monotonic() + args.deadline
        while pending and time.monotonic() < deadline and proc.poll() is None:
            pending = {n: o for n, o in pending.items() if not healthy(args.port_base + o)}
            time.sleep(0.5)
        ok = not pending
        if not ok:
            print(f"ci: make up not healthy ({', '.join(pending) or 'exited'} after {args.deadline:g} s)",
                  file=sys.stderr)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        try:
            rc = proc.wait(args.stop_deadline)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            print(f"ci: make up did not stop within {args.stop_deadline:g} s of Ctrl-C", file=sys.stderr)
            ok = False
    if ok:
        print(f"ci: make up healthy, stopped by Ctrl-C (exit {rc})")
    else:
        with open(log.name, "rb") as fh:
            sys.stderr.write(fh.read()[-4000:].decode("utf-8", "replace"))
    os.unlink(log.name)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
