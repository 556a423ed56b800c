"""Container HEALTHCHECK: healthy when this container's aimem service answers /healthz 200.

One image serves all five services and only one listens per container, so probe the five
ports (``AIMEM_PORT_BASE`` + 0..4) and succeed on the first 200. Stdlib only; exit 0/1.
"""

import os
import sys
import urllib.error
import urllib.request

base = int(os.environ.get("AIMEM_PORT_BASE", "8701"))
for port in range(base, base + 5):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
            if resp.status == 200:
                sys.exit(0)
    except urllib.error.HTTPError as exc:  # 503 degraded: this is our service, unhealthy
        print(f"port {port}: /healthz {exc.code}", file=sys.stderr)
        sys.exit(1)
    except OSError:
        continue
print("no aimem service answers /healthz", file=sys.stderr)
sys.exit(1)
