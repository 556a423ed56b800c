"""``python -m bench report``: write ``bench/RESULTS.md`` from the newest raw result of each benchmark.

Every benchmark writes its raw figures to ``bench/results/<name>-<stamp>.json`` (with the
machine, the commit and the load average); this module reads the newest file of each and
renders one table of targets — the figure, its reference measured in the same run, the
ratio, the CPU cost beside the wall clock, and the machine — followed by a section per
benchmark. ``python -m bench`` (``make bench``) calls it after the benchmarks ran, so the
page always says what the files say; the reasoning behind the figures (profiles, what was
tried) lives in ``bench/NOTES.md``, written by hand.

A benchmark whose file is missing is listed as "not run". Nothing here measures anything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import RESULTS

OUT = Path(__file__).resolve().parent / "RESULTS.md"
_STAMP = re.compile(r"-(\d{8}T\d{6})\.json$")


@dataclass(slots=True)
class Row:
    """One line of the targets table; ``met`` is None where the issue sets no target."""

    what: str
    target: str
    measured: str
    reference: str
    met: bool | None
    source: str


def _files(name: str, results: Path) -> list[Path]:
    """``<name>-<stamp>.json`` under ``results``, oldest first (``<name>-<tag>-<stamp>`` excluded)."""
    return sorted((p for p in results.glob(f"{name}-*.json") if _STAMP.search(p.name)
                   and p.name[len(name) + 1:len(name) + 2].isdigit()), key=lambda p: _STAMP.search(p.name).group(1))


def newest(name: str, results: Path = RESULTS) -> tuple[Path, dict[str, Any]] | None:
    """The newest ``<name>-<stamp>.json`` under ``results`` and its content, or None."""
    files = _files(name, results)
    if not files:
        return None
    return files[-1], json.loads(files[-1].read_text())


def newest_query_sizes(results: Path = RESULTS) -> list[tuple[Path, dict[str, Any]]]:
    """For each vault size ``query_latency`` measured, the newest file holding it, as
    ``(path, {machine, sizes: [that size]})``, smallest size first (100k and 1M are
    usually separate runs: 1M takes long to seed)."""
    best: dict[int, tuple[Path, dict[str, Any]]] = {}
    for path in _files("query_latency", results):
        data = json.loads(path.read_text())
        for size in data.get("sizes", []):
            best[size["pages"]] = (path, {**data, "sizes": [size]})
    return [best[n] for n in sorted(best)]


def _ms(v: Any) -> str:
    return "—" if v is None else f"{v:,.1f} ms"


def _num(v: Any, unit: str = "") -> str:
    if v is None:
        return "—"
    return f"{v:,.0f}{unit}" if abs(v) >= 100 else f"{v:,.2f}{unit}" if abs(v) < 10 else f"{v:,.1f}{unit}"


def _load(data: dict[str, Any]) -> str:
    m = data.get("machine", {})
    la = m.get("loadavg")
    return f"load {la[0]:.1f}/{la[1]:.1f}" if la else ""


def _hook_ingest(path: Path, data: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for stack in data.get("stacks") or []:  # one fresh stack per ingress worker count
        workers = stack.get("ingress_workers", 1)
        tag = f" ({workers} ingress worker{'s' if workers != 1 else ''})"
        for r in stack.get("rates", []):
            cpu = r.get("ingress_cpu_us_per_hook")
            if r["rate"] == 500 and r.get("arrivals") == "in phase":  # the burst shape, beside the target run
                rows.append(Row(f"`/hook` p99 ÷ `/healthz` p99 at 500 ev/s, every connection in phase{tag}", "—",
                                f"{r['p99_ratio']:.2f}× ({_ms(r['hook_p99_ms'])} / {_ms(r['healthz_p99_ms'])})",
                                f"one hey process: bursts of {r['connections']} hooks at once; `/hook` p50 "
                                f"{_ms(r['hook_p50_ms'])}, ingress {cpu:,.0f} µs per hook", None, path.name))
            elif r["rate"] == 500:
                rows.append(Row(f"`/hook` p99 ÷ `/healthz` p99 at 500 ev/s{tag}", "≤ 2×",
                                f"{r['p99_ratio']:.2f}× ({_ms(r['hook_p99_ms'])} / {_ms(r['healthz_p99_ms'])})",
                                f"`/healthz` p99 {_ms(r['healthz_p99_ms'])} in the same seconds; `/hook` p50 "
                                f"{_ms(r['hook_p50_ms'])}; arrivals: {r.get('arrivals', 'in phase')}",
                                r["p99_ratio"] <= 2, path.name))
                rows.append(Row(f"ingress CPU per accepted hook at 500 ev/s{tag}", "≤ 250 µs",
                                f"{cpu:,.0f} µs ({r.get('ingress_cpu_us_per_hook_net', cpu):,.0f} net of `/healthz`)",
                                f"per hook: nats-server {_num(r.get('nats_cpu_us_per_hook'), ' µs')}, writer "
                                f"{_num(r.get('writer_cpu_us_per_hook'), ' µs')}, load generator "
                                f"{_num(_loadgen_us(r), ' µs')}", cpu <= 250, path.name))
            elif r["rate"] == "max":
                client = r.get("client", "hey")
                rows.append(Row(f"accepted ev/s, unthrottled, {client} as the client{tag}", "≥ 3,000 ev/s",
                                f"{r['accepted_per_s']:,.0f} ev/s at {r.get('ingress_cpu_share', 0):.2f} of a core",
                                f"p99 {_ms(r['hook_p99_ms'])}, 429 share {r.get('share_429', 0):.1%}, "
                                f"{cpu:,.0f} µs ingress CPU each; {client} {_num(_loadgen_us(r), ' µs')} per hook "
                                f"of the same cores; pipeline {_num(r.get('pipeline_cpu_us_per_hook'), ' µs')} per hook",
                                r["accepted_per_s"] >= 3000, path.name))
        if "stored_total" in stack:
            unread = stack.get("unread_max", 0)
            checked = (f"; {stack['wrk_ids_checked'] - stack['wrk_ids_missing']:,} of the {stack['wrk_ids_checked']:,}"
                       f" cmd ids wrk read found, {stack['duplicate_cmd_ids']} stored twice"
                       if "wrk_ids_checked" in stack else "")
            rows.append(Row(f"accepted hooks stored{tag}", "0 lost",
                            f"{stack['stored_total']:,} / {stack['accepted_total']:,}",
                            "counted in SQLite after the drain" + (
                                f"; up to {unread} more may be stored: requests in flight when wrk stopped reading"
                                if unread else "") + checked,
                            bool(stack.get("zero_loss")), path.name))
    return rows


def _loadgen_us(r: dict[str, Any]) -> float | None:
    """The load generator's CPU per hook (files before wrk name it ``hey_cpu_us_per_hook``)."""
    return r.get("loadgen_cpu_us_per_hook", r.get("hey_cpu_us_per_hook"))


def _wake_cost(path: Path, data: dict[str, Any]) -> list[Row]:
    """The machine's floor under a lone hook (``wake_cost``): no target, the reference of the
    ingress CPU rows."""
    rows = data.get("rows", [])
    ack = next((r for r in rows if r["case"].startswith("puback")), None)
    sleep = next((r for r in rows if r["case"] == "sleep"), None)
    if not ack or not sleep:
        return []
    gap = data.get("gap_ms", 2)
    return [Row(f"a publish and its PubAck, one every {gap:g} ms (the floor under a hook that arrives alone)", "—",
                f"{ack['after_idle_cpu_us']:,.0f} µs CPU ({ack['back_to_back_cpu_us']:,.0f} back to back)",
                f"waking from {gap:g} ms idle alone costs {sleep['after_idle_cpu_us']:,.0f} µs CPU; "
                f"PubAck p50 {ack.get('p50_us', 0):,.0f} µs", None, path.name)]


def _writer(path: Path, data: dict[str, Any]) -> list[Row]:
    return [Row("writer apply rate, 20,000-observation backlog", "≥ 6,000 obs/s",
                f"{data['obs_per_s']:,} obs/s", f"{data.get('obs_per_cpu_s', 0):,} per writer CPU-second, "
                f"mean batch {data.get('mean_batch', 0):,.0f}", data["obs_per_s"] >= 6000, path.name)]


def _query(path: Path, data: dict[str, Any]) -> list[Row]:
    rows = []
    for s in data.get("sizes", []):
        n = s["pages"]
        target = 25.0 if n <= 100_000 else 100.0
        label = f"{n // 1000:,}k" if n < 1_000_000 else f"{n / 1e6:g}M"
        obs = f", {s['observations']:,} observations" if s.get("observations") else ""
        for scope, mult in (("project_scoped", 1), ("global", 2)):
            side = s.get(scope) or {}
            main, ref = (side.get("text_index"), side.get("fts5")) if "text_index" in side else (side, None)
            if not main:
                continue
            ref_txt = (f"FTS5 path p95 {_ms(ref['p95_ms'])} ({ref['p95_ms'] / main['p95_ms']:.1f}× slower), "
                       f"CPU p95 {_ms(ref.get('cpu_p95_ms'))}" if ref else "FTS5 path not asked in this run (`--skip-fts5`)")
            rows.append(Row(f"`memory_query` p95 at {label} pages{obs}, {scope.replace('_', '-')}",
                            f"≤ {mult * target:g} ms",
                            f"{_ms(main['p95_ms'])} (CPU {_ms(main.get('cpu_p95_ms'))}; p50 {_ms(main['p50_ms'])})",
                            ref_txt, main["p95_ms"] <= mult * target, path.name))
        fp = s.get("footprint") or {}
        if fp:
            disk = fp.get("sqlite_mb_per_100k", fp.get("disk_mb_per_100k", 0))
            idx = f" + text index {fp['text_index_mb_per_100k']:,.1f} MB" if "text_index_mb_per_100k" in fp else ""
            rows.append(Row(f"footprint at {label} pages{obs}", "reported",
                            f"SQLite {disk:,.0f} MB{idx} per 100k pages",
                            f"peak RSS {fp.get('peak_rss_mb', 0):,.0f} MB (the bench process and its readers)",
                            None, path.name))
    return rows


def _locomo_all(data: dict[str, Any]) -> dict[str, Any]:
    return next((r for r in data.get("rows", []) if r.get("category") == "all"), {})


def _locomo(path: Path, data: dict[str, Any]) -> list[Row]:
    a = _locomo_all(data)
    if not a:
        return []
    ref = newest("basic-memory")
    bm = _locomo_all(ref[1].get("locomo", {})) if ref else {}
    bm_txt = (lambda k: f"basic-memory {bm[k]:.3f} ({a[k] / bm[k]:.2f}×)" if bm.get(k) else "basic-memory not run")
    # Ranking is tuned on conversations 0–2 only; 3–4 are the check a change must hold on too.
    halves = [Row(f"LoCoMo dev, conversations {h['half']}", "reported", f"hit@5 {h['hit@5']:.3f}, MRR {h['mrr']:.3f}",
                  f"{h['n']} questions", None, path.name) for h in data.get("halves", [])]
    return [
        Row("LoCoMo dev hit@5, default configuration", "≥ 0.95", f"{a['hit@5']:.3f}", bm_txt("hit@5"),
            a["hit@5"] >= 0.95, path.name),
        Row("LoCoMo dev MRR, default configuration", "≥ 0.85", f"{a['mrr']:.3f}", bm_txt("mrr"), a["mrr"] >= 0.85, path.name),
        *halves,
        Row("LoCoMo query p95 (HTTP, full stack)", "≤ 30 ms", _ms(data.get("query_ms_p95")),
            f"p50 {_ms(data.get('query_ms_p50'))}" + (f", CPU p95 {_ms(data['query_cpu_ms_p95'])}" if data.get("query_cpu_ms_p95") else ""),
            data.get("query_ms_p95") is not None and data["query_ms_p95"] <= 30, path.name),
    ] + ([
        Row("LoCoMo `memory_query` p95 (MCP, full stack)", "≤ 12 ms", _ms(data["mcp_query_ms_p95"]),
            f"p50 {_ms(data.get('mcp_query_ms_p50'))}; asked in turn with HTTP; server CPU per question: "
            f"gateway {_ms(data.get('mcp_server_cpu_ms_per_query'))}, query {_ms(data.get('http_server_cpu_ms_per_query'))}"
            f"; {_load(data)}", data["mcp_query_ms_p95"] <= 12, path.name),
    ] if data.get("mcp_query_ms_p95") is not None else [])


# name of the result files → what its targets are
def _import_live(path: Path, data: dict[str, Any]) -> list[Row]:
    quiet, live, imp = data["quiet"], data["live_during_import"], data["import_live"]
    size = f"{data['import_alone']['lines']:,} lines a corpus, live hooks at {data['args']['rate']}/s"
    handoff, quiet_handoff = imp.get("handoff") or {}, data.get("quiet_handoff") or {}
    return [
        Row(f"live `/hook` p95 during an import ({size})", "≤ 3× quiet or ≤ 25 ms",
            f"{_ms(live['p95_ms'])} ({data['p95_ratio']}×)", f"quiet p95 {_ms(quiet['p95_ms'])}, "
            f"{_load(data)}", data["p95_met"], path.name),
        Row("live `/hook` 429s during an import", "0", f"{live['status_429']:,} of {live['requests']:,}",
            f"quiet: {quiet['status_429']:,} of {quiet['requests']:,}", data["no_429_met"], path.name),
        Row("handoff of a session that ends during an import (end → stored; claim)", "its usual time",
            f"{handoff.get('handoff_s')} s; claim {handoff.get('claim_s')} s",
            f"quiet {quiet_handoff.get('handoff_s')} s; claim {quiet_handoff.get('claim_s')} s; import "
            f"{handoff.get('import_stored_share_at_end')} stored then", data["handoff_met"], path.name),
        Row("import lines/s until stored, alone / with live hooks", "—",
            f"{data['import_alone']['lines_per_s']:,} / {imp['lines_per_s']:,}", size, None, path.name),
    ]


def _pictures(path: Path, data: dict[str, Any]) -> list[Row]:
    target = data.get("target_p95_ms", 50.0)
    return [Row(f"`/web` picture: {r['picture']} at {data['pages']:,} pages", f"≤ {target:g} ms p95",
                f"{_ms(r['p95_ms'])} (CPU {_ms(r.get('cpu_p95_ms'))}; p50 {_ms(r['p50_ms'])})",
                f"load {r.get('load_1m', 0):.1f} (wall on a loaded machine; the CPU figure is less inflated)",
                r["p95_ms"] <= target, path.name) for r in data.get("rows", [])]


def _workstream_start(path: Path, data: dict[str, Any]) -> list[Row]:
    """``aimem run``'s start overhead (target from issue 29) and its first launch in a HOME."""
    rows = {r["what"]: r for r in data.get("rows", [])}
    managed, alone = rows.get("aimem run: until the harness starts"), rows.get("harness alone: until the harness starts")
    if not managed or not alone:
        return []
    n = managed.get("n", data.get("n", "?"))
    parts = [f"{label} p50 {_ms(rows[k]['p50_ms'])}" for label, k in (
        ("interpreter", "part: the interpreter starts (python -c pass)"),
        ("+ imports", "part: interpreter + the run path's imports"),
        ("lease open", "part: lease open, one writer round trip through ingress"),
        ("CPU of a whole run", "aimem run: CPU (launcher and harness), start to exit")) if k in rows]
    out = [Row(f"`aimem run`: until the harness starts, p95 of {n} launches", "≤ 150 ms",
               f"{_ms(managed['p95_ms'])} (p50 {_ms(managed['p50_ms'])})",
               f"the harness alone p95 {_ms(alone['p95_ms'])}" + (f"; {', '.join(parts)}" if parts else "")
               + (f"; {_load(data)}" if _load(data) else ""), managed["p95_ms"] <= 150, path.name)]
    first = data.get("first_launch_ms")
    if first:
        out.append(Row("`aimem run`: first launch in a HOME (wires the hooks), until the harness starts", "—",
                       _ms(first["start"]), "once per harness and HOME; not in the percentiles", None, path.name))
    return out


def _workstream_ledger(path: Path, data: dict[str, Any]) -> list[Row]:
    """The ledger's limits of issue 29: packet size at 10k events, search p95 at 100k events."""
    by_n = {r["events"]: r for r in data.get("rows", [])}
    out = []
    if 10_000 in by_n:
        r = by_n[10_000]
        out.append(Row("workstream start-up packet at 10k ledger events", "reported",
                       f"{r['packet_bytes']:,} bytes ≈ {r['packet_tokens_est']:,} tokens ({r['packet_events']} events)",
                       f"read + render p95 {_ms(r['start_read_render_p95_ms'])}", None, path.name))
    if 100_000 in by_n:
        r = by_n[100_000]
        out.append(Row("`workstream-search` p95 at 100k ledger events", "reported", _ms(r["search_p95_ms"]),
                       f"p50 {_ms(r['search_p50_ms'])}; packet {r['packet_bytes']:,} bytes"
                       + (f"; {_load(data)}" if _load(data) else ""), None, path.name))
    return out


TARGETS: dict[str, Callable[[Path, dict[str, Any]], list[Row]]] = {
    "hook_ingest": _hook_ingest,
    "wake_cost": _wake_cost,
    "writer_throughput": _writer,
    "query_latency": _query,
    "pictures": _pictures,
    "locomo-none": _locomo,
    "import_live": _import_live,
    "workstream_start": _workstream_start,
    "workstream_ledger": _workstream_ledger,
}


def _machine(data: dict[str, Any]) -> str:
    m = data.get("machine", {})
    speed = "".join([f", {m['cpu_mhz']:,.0f} MHz" if m.get("cpu_mhz") else "",
                     f", pure-Python loop {m['python_speed_mit_s']} M it/s" if m.get("python_speed_mit_s") else ""])
    return (f"{m.get('cores', '?')} × {m.get('cpu', '?')}{speed}, {m.get('mem_gib', '?')} GiB, Python {m.get('python', '?')}, "
            f"commit `{m.get('commit', '?')}`, {m.get('date', '?')}" + (f", {_load(data)}" if _load(data) else ""))


def render(results: Path = RESULTS) -> str:
    """The markdown of RESULTS.md from the newest files under ``results``."""
    out = ["# Benchmark results", "",
           "Written by `make bench` (`python -m bench`, then `python -m bench report`) from the newest raw "
           "file of each benchmark in `bench/results/`; do not edit by hand. Each figure stands beside its "
           "reference measured in the same run. What limits a figure, the profiles and what was tried: "
           "`bench/NOTES.md`.", "", "## Against the targets", "",
           "| what | target | measured | reference in the same run | | file |", "|---|---|---|---|---|---|"]
    machines: dict[str, str] = {}
    for name, fn in TARGETS.items():
        found = newest_query_sizes(results) if name == "query_latency" else [newest(name, results)]
        if not found or found[0] is None:
            out.append(f"| {name} | | not run | | | |")
            continue
        rows = []
        for path, data in found:
            machines[path.name] = _machine(data)
            rows += fn(path, data)
        for r in rows:
            verdict = "—" if r.met is None else ("**met**" if r.met else "not met")
            out.append(f"| {r.what} | {r.target} | {r.measured} | {r.reference} | {verdict} | `{r.source}` |")
    out += ["", "## Machines", ""]
    out += [f"- `{f}`: {m}" for f, m in machines.items()]
    out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    """Write ``bench/RESULTS.md`` and print where."""
    OUT.write_text(render())
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
