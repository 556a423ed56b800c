"""``bench/report.py`` renders RESULTS.md from the newest raw file of each benchmark."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import report  # noqa: E402

MACHINE = {"cores": 2, "cpu": "Test CPU", "mem_gib": 23.5, "python": "3.11.7", "commit": "abc1234",
           "date": "2026-12-01T00:00:00+00:00", "loadavg": [0.4, 0.5, 0.6]}


def _write(d: Path, name: str, stamp: str, data: dict) -> None:
    (d / f"{name}-{stamp}.json").write_text(json.dumps({"bench": name, "machine": MACHINE, **data}))


def _lat(p95: float) -> dict:
    return {"p50_ms": p95 / 2, "p95_ms": p95, "cpu_p95_ms": p95 / 3}


def _rows(text: str) -> dict[str, str]:
    return {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}


def test_newest_file_wins_and_verdicts_follow_the_targets(tmp_path):
    _write(tmp_path, "writer_throughput", "20261201T010000", {"obs_per_s": 9000, "obs_per_cpu_s": 9100, "mean_batch": 10})
    _write(tmp_path, "writer_throughput", "20261201T020000", {"obs_per_s": 5999, "obs_per_cpu_s": 6100, "mean_batch": 10})
    # a differently named result beginning with the same name is not the writer's
    _write(tmp_path, "writer_throughput-w2", "20261201T030000", {"obs_per_s": 1, "obs_per_cpu_s": 1, "mean_batch": 1})
    rows = _rows(report.render(tmp_path))
    writer = rows["writer apply rate, 20,000-observation backlog"]
    assert "5,999 obs/s" in writer and "not met" in writer and "writer_throughput-20261201T020000.json" in writer
    assert "not run" in rows["hook_ingest"]


def test_each_vault_size_comes_from_its_newest_file_beside_the_fts5_reference(tmp_path):
    small = {"pages": 100_000, "project_scoped": {"text_index": _lat(24.0), "fts5": _lat(96.0)},
             "global": {"text_index": _lat(51.0), "fts5": _lat(102.0)},
             "footprint": {"sqlite_mb_per_100k": 300, "text_index_mb_per_100k": 14.5, "peak_rss_mb": 90}}
    big = {"pages": 1_000_000, "project_scoped": {"text_index": _lat(99.0)}, "global": {"text_index": _lat(150.0)}}
    _write(tmp_path, "query_latency", "20261201T010000", {"sizes": [big]})
    _write(tmp_path, "query_latency", "20261201T020000", {"sizes": [small]})
    text = report.render(tmp_path)
    rows = _rows(text)
    scoped = rows["`memory_query` p95 at 100k pages, project-scoped"]
    assert "**met**" in scoped and "FTS5 path p95 96.0 ms (4.0× slower)" in scoped
    assert "not met" in rows["`memory_query` p95 at 100k pages, global"]
    assert "**met**" in rows["`memory_query` p95 at 1M pages, project-scoped"]
    assert "query_latency-20261201T010000.json" in rows["`memory_query` p95 at 1M pages, global"]
    assert "SQLite 300 MB + text index 14.5 MB per 100k pages" in rows["footprint at 100k pages"]
    assert "load 0.4/0.5" in text


def test_hook_rows_per_ingress_worker_count(tmp_path):
    rate = {"rate": 500, "p99_ratio": 1.5, "hook_p99_ms": 30.0, "healthz_p99_ms": 20.0, "hook_p50_ms": 5.0,
            "ingress_cpu_us_per_hook": 260.0, "accepted_per_s": 500.0}
    top = {**rate, "rate": "max", "accepted_per_s": 3100.0, "client": "wrk", "loadgen_cpu_us_per_hook": 31.0}
    top_hey = {**rate, "rate": "max", "accepted_per_s": 2600.0, "hey_cpu_us_per_hook": 120.0}  # a file before wrk
    stacks = [{"ingress_workers": w, "rates": [rate, top, top_hey], "stored_total": 10,
               "accepted_total": 10 + w - 1, "zero_loss": w == 1} for w in (1, 2)]
    _write(tmp_path, "hook_ingest", "20261201T010000", {"stacks": stacks})
    rows = _rows(report.render(tmp_path))
    assert "**met**" in rows["`/hook` p99 ÷ `/healthz` p99 at 500 ev/s (1 ingress worker)"]
    assert "not met" in rows["ingress CPU per accepted hook at 500 ev/s (2 ingress workers)"]
    wrk = rows["accepted ev/s, unthrottled, wrk as the client (2 ingress workers)"]
    assert "**met**" in wrk and "3,100 ev/s" in wrk and "wrk 31.0 µs per hook" in wrk
    hey = rows["accepted ev/s, unthrottled, hey as the client (2 ingress workers)"]
    assert "not met" in hey and "hey 120 µs per hook" in hey
    assert "not met" in rows["accepted hooks stored (2 ingress workers)"]


def test_the_machine_line_carries_the_clock_and_the_python_speed(tmp_path):
    """Two VMs of one name differ by more than most changes: every machine line says how fast
    this one was (files written before these fields still render)."""
    (tmp_path / "writer_throughput-20261201T010000.json").write_text(json.dumps(
        {"bench": "writer_throughput", "machine": {**MACHINE, "cpu_mhz": 2600.0, "python_speed_mit_s": 32.9},
         "obs_per_s": 9000, "obs_per_cpu_s": 9100, "mean_batch": 10}))
    _write(tmp_path, "hook_ingest", "20261201T010000", {"stacks": []})
    text = report.render(tmp_path)
    line = next(l for l in text.splitlines() if l.startswith("- `writer_throughput-20261201T010000.json`"))
    assert "2 × Test CPU, 2,600 MHz, pure-Python loop 32.9 M it/s, 23.5 GiB" in line
    old = next(l for l in text.splitlines() if l.startswith("- `hook_ingest-20261201T010000.json`"))
    assert "2 × Test CPU, 23.5 GiB" in old and "MHz" not in old


def test_the_wake_cost_row_is_a_reference_without_a_target(tmp_path):
    rows = [{"case": "sleep", "after_idle_cpu_us": 40.0, "back_to_back_cpu_us": 1.0, "extra_us": 39.0},
            {"case": "sleep + 3,000 loop iterations", "after_idle_cpu_us": 106.5, "back_to_back_cpu_us": 63.7,
             "extra_us": 42.8},
            {"case": "puback (publish + its PubAck)", "after_idle_cpu_us": 215.9, "back_to_back_cpu_us": 78.4,
             "extra_us": 137.5, "p50_us": 267, "p99_us": 478, "back_to_back_p50_us": 151}]
    _write(tmp_path, "wake_cost", "20261201T010000", {"gap_ms": 2.0, "n": 3000, "rows": rows})
    row = _rows(report.render(tmp_path))["a publish and its PubAck, one every 2 ms (the floor under a hook that "
                                         "arrives alone)"]
    assert "216 µs CPU (78 back to back)" in row and "alone costs 40 µs CPU" in row and "p50 267 µs" in row
    assert "met" not in row  # a reference: no verdict


def _ws_row(what: str, p50: float, p95: float, n: int = 40) -> dict:
    return {"what": what, "n": n, "p50_ms": p50, "p95_ms": p95, "max_ms": p95 + 1}


def test_workstream_start_and_ledger_rows_carry_the_issue_targets(tmp_path):
    start = {"n": 40, "first_launch_ms": {"start": 612.0, "total": 700.0}, "rows": [
        _ws_row("harness alone: until the harness starts", 4.0, 9.0),
        _ws_row("aimem run: until the harness starts", 70.0, 151.0),
        _ws_row("part: the interpreter starts (python -c pass)", 18.0, 30.0),
        _ws_row("part: lease open, one writer round trip through ingress", 12.0, 40.0)]}
    _write(tmp_path, "workstream_start", "20261205T060000", start)
    _write(tmp_path, "workstream_ledger", "20261205T060000", {"rows": [
        {"events": 10_000, "packet_bytes": 6310, "packet_tokens_est": 1577, "packet_events": 22,
         "start_read_render_p95_ms": 8.6, "search_p50_ms": 0.7, "search_p95_ms": 12.2},
        {"events": 100_000, "packet_bytes": 6275, "packet_tokens_est": 1568, "packet_events": 21,
         "start_read_render_p95_ms": 27.8, "search_p50_ms": 20.3, "search_p95_ms": 104.5}]})
    rows = _rows(report.render(tmp_path))
    run = rows["`aimem run`: until the harness starts, p95 of 40 launches"]
    assert "151.0 ms" in run and "not met" in run and "≤ 150 ms" in run  # 151 > 150
    assert "the harness alone p95 9.0 ms" in run and "lease open p50 12.0 ms" in run
    assert "612.0 ms" in rows["`aimem run`: first launch in a HOME (wires the hooks), until the harness starts"]
    assert "6,310 bytes ≈ 1,577 tokens" in rows["workstream start-up packet at 10k ledger events"]
    assert "104.5 ms" in rows["`workstream-search` p95 at 100k ledger events"]
    start["rows"][1]["p95_ms"] = 150.0
    _write(tmp_path, "workstream_start", "20261205T070000", start)
    assert "**met**" in _rows(report.render(tmp_path))["`aimem run`: until the harness starts, p95 of 40 launches"]


def test_locomo_rows_show_the_tuned_and_the_check_half_beside_the_overall_figure(tmp_path):
    rows_all = [{"category": "all", "n": 757, "hit@5": 0.954, "mrr": 0.836}]
    halves = [{"half": "tuned 0-2", "n": 452, "hit@1": 0.75, "hit@5": 0.962, "hit@10": 0.98, "mrr": 0.845},
              {"half": "check 3-4", "n": 305, "hit@1": 0.74, "hit@5": 0.941, "hit@10": 0.97, "mrr": 0.822}]
    _write(tmp_path, "locomo-none", "20261201T010000", {"rows": rows_all, "halves": halves, "query_ms_p95": 20.0})
    rows = _rows(report.render(tmp_path))
    assert "0.954" in rows["LoCoMo dev hit@5, default configuration"]
    tuned, check = rows["LoCoMo dev, conversations tuned 0-2"], rows["LoCoMo dev, conversations check 3-4"]
    assert "hit@5 0.962, MRR 0.845" in tuned and "452 questions" in tuned
    assert "hit@5 0.941, MRR 0.822" in check and "locomo-none-20261201T010000.json" in check
