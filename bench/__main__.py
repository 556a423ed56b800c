"""``python -m bench`` (``make bench``): run every benchmark in turn; each prints its table
and writes JSON to ``bench/results/``. ``python -m bench NAME ...`` runs only those.

Benchmarks: footprint, writer_throughput, wake_cost, hook_ingest, hook_identity, visibility, query_latency, web_screens, pictures,
import_throughput, import_live (live hooks and a handoff during a large import), locomo,
locomo_local (LoCoMo with the local embedder; skipped when it is not installed),
basic_memory (side by side; needs Python ≥ 3.12 for the peer), read_replica (Litestream follow-mode lag),
workstream_start (what ``aimem run`` adds to a harness's start), workstream_ledger (packet size and
ledger search at 10k and 100k events).
After every run, of all of them or of some (or alone: ``python -m bench report``),
``bench/report.py`` rewrites ``bench/RESULTS.md`` from the newest raw file of each benchmark.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
import traceback

ORDER = ["footprint", "writer_throughput", "wake_cost", "hook_ingest", "hook_identity", "hook_auth", "visibility",
         "query_latency", "web_screens", "pictures", "import_throughput", "import_live", "locomo", "locomo_local",
         "basic_memory", "read_replica", "workstream_start", "workstream_ledger"]


def run(name: str) -> bool:
    print(f"\n=== bench: {name} ===", flush=True)
    t0 = time.perf_counter()
    try:
        if name == "locomo_local":
            if importlib.util.find_spec("sentence_transformers") is None:
                print("skipped: the local embedder extra is not installed (pip install -e 'libs/aimem-common[local-embed]')")
                return True
            importlib.import_module("bench.locomo").main(["--embedder", "local"])
        else:
            mod = importlib.import_module(f"bench.{name}")
            mod.main([]) if _takes_argv(mod.main) else mod.main()
    except SystemExit as exc:
        if exc.code not in (None, 0):
            print(f"bench {name} exited: {exc.code}")
            return False
    except Exception:
        traceback.print_exc()
        return False
    print(f"=== {name} done in {time.perf_counter() - t0:.1f} s ===", flush=True)
    return True


def _takes_argv(fn) -> bool:
    import inspect

    return bool(inspect.signature(fn).parameters)


def main() -> None:
    names = sys.argv[1:] or ORDER
    if names == ["report"]:
        importlib.import_module("bench.report").main()
        return
    unknown = [n for n in names if n not in ORDER]
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(ORDER)}")
    failed = [n for n in names if not run(n)]
    importlib.import_module("bench.report").main()
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
