"""Generate deploy/grafana/dashboards/aimem-overview.json: python deploy/grafana/gen_overview.py > that file.

The JSON is the artifact Grafana provisions; tests/deploy checks it matches this script and
that every metric it queries is exported by the services.
"""
import json

DS = {"type": "prometheus", "uid": "${datasource}"}
R = "$__rate_interval"
panels = []
y = 0


def row(title):
    global y
    panels.append({"type": "row", "title": title, "collapsed": False, "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
    y += 1


def ts(title, targets, unit="short", w=8, desc="", stack=False):
    x = sum(p["gridPos"]["w"] for p in panels if p["gridPos"]["y"] == y and p["type"] != "row")
    panels.append({
        "type": "timeseries", "title": title, "description": desc, "datasource": DS,
        "gridPos": {"h": 8, "w": w, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit, "custom": {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10,
                                                              "stacking": {"mode": "normal" if stack else "none"}}},
                        "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
        "targets": [{"datasource": DS, "refId": chr(65 + i), "expr": e, "legendFormat": l} for i, (e, l) in enumerate(targets)],
    })


def newline():
    global y
    y += 8


def q(p, metric, by="le", sel=""):
    return f"histogram_quantile({p}, sum by ({by}) (rate({metric}_bucket{sel}[{R}])))"


row("Hooks (ingress)")
ts("Hook events by kind", [(f"sum by (kind) (rate(aimem_hook_events_total[{R}]))", "{{kind}}")], "reqps", stack=True,
   desc="Accepted hook events (202) per second, by normalised ObservationKind.")
ts("Hook responses: 202 / 429 / 5xx", [
    (f'sum(rate(aimem_hook_responses_total{{status="202"}}[{R}]))', "202 accepted"),
    (f'sum(rate(aimem_hook_responses_total{{status="429"}}[{R}]))', "429 back-pressure"),
    (f'sum(rate(aimem_hook_responses_total{{status=~"5.."}}[{R}]))', "5xx"),
    (f'sum(rate(aimem_hook_responses_total{{status=~"4..",status!="429"}}[{R}]))', "other 4xx"),
], "reqps")
ts("Ingress latency p50 / p99 (POST /hook)", [
    (q(0.5, "aimem_hook_request_duration_seconds"), "p50"),
    (q(0.99, "aimem_hook_request_duration_seconds"), "p99"),
], "s")
newline()
row("Bus and writer")
ts("Bus publish latency p99 by op (PubAck)", [(q(0.99, "aimem_bus_publish_seconds", "le, op"), "{{op}}")], "s",
   desc="JetStream publish round trip, every service that publishes.")
ts("Writer batch size (mean, p90), commands per bus message", [
    (f"sum(rate(aimem_writer_batch_size_sum[{R}])) / sum(rate(aimem_writer_batch_size_count[{R}]))", "mean"),
    (q(0.9, "aimem_writer_batch_size"), "p90"),
    # above 1 while concurrent hooks share JetStream messages (aimem_common.bundles)
    (f"sum(rate(aimem_bus_message_commands_sum[{R}])) / sum(rate(aimem_bus_message_commands_count[{R}]))",
     "commands per message"),
], "short")
ts("Writer apply latency p50 / p99", [
    (q(0.5, "aimem_writer_apply_seconds"), "p50"),
    (q(0.99, "aimem_writer_apply_seconds"), "p99"),
    (q(0.99, "aimem_writer_git_checkpoint_seconds"), "git checkpoint p99"),
], "s")
newline()
ts("Writer lag (consumer pending)", [("max(aimem_writer_consumer_pending)", "pending")], "short",
   desc="Commands in JetStream not yet applied (num_pending + num_ack_pending).")
ts("Writer commands by op", [(f"sum by (op) (rate(aimem_writer_commands_total[{R}]))", "{{op}}")], "ops", stack=True)
ts("Writer errors and duplicates", [
    (f"sum by (op, code) (rate(aimem_writer_errors_total[{R}]))", "error {{op}} {{code}}"),
    (f"sum by (op) (rate(aimem_writer_duplicates_total[{R}]))", "duplicate {{op}}"),
], "ops")
newline()
row("Read side (query, MCP)")
ts("Query API latency p99 by route", [
    (q(0.99, "aimem_http_request_duration_seconds", "le, route", '{service="query"}'), "{{route}}"),
], "s", w=12)
ts("HTTP request rate by service and status", [
    (f"sum by (service, status) (rate(aimem_http_request_duration_seconds_count[{R}]))", "{{service}} {{status}}"),
], "reqps", w=12)
newline()
ts("MCP tool calls by tool", [(f"sum by (tool) (rate(aimem_mcp_tool_calls_total[{R}]))", "{{tool}}")], "ops", stack=True)
ts("MCP tool errors by tool and outcome", [
    (f'sum by (tool, outcome) (rate(aimem_mcp_tool_calls_total{{outcome!="ok"}}[{R}]))', "{{tool}} {{outcome}}"),
], "ops")
ts("MCP tool latency p99", [(q(0.99, "aimem_mcp_tool_duration_seconds", "le, tool"), "{{tool}}")], "s")
newline()
row("Maintainer and LLM")
ts("Job runs by job and outcome (sweep, lint, consolidation, ...)", [
    ("sum by (task, outcome) (increase(aimem_maint_job_runs_total[1h]))", "{{task}} {{outcome}}"),
], "short", desc="Runs per hour.")
ts("Forget sweep: pages by action", [("sum by (action) (increase(aimem_maint_sweep_pages_total[1h]))", "{{action}}")], "short")
ts("Job duration p95", [(q(0.95, "aimem_maint_job_duration_seconds", "le, job"), "{{job}}")], "s")
newline()
ts("LLM calls by candidate and outcome", [
    (f"sum by (candidate, outcome) (rate(aimem_llm_calls_total[{R}]))", "{{candidate}} {{outcome}}"),
], "ops")
ts("LLM latency p50 / p95", [
    (q(0.5, "aimem_llm_latency_seconds", "le, candidate"), "p50 {{candidate}}"),
    (q(0.95, "aimem_llm_latency_seconds", "le, candidate"), "p95 {{candidate}}"),
], "s")
ts("LLM errors and open circuits", [
    (f'sum by (candidate, outcome) (rate(aimem_llm_calls_total{{outcome!="ok"}}[{R}]))', "error {{candidate}} {{outcome}}"),
    ("max by (candidate) (aimem_llm_circuit_open)", "circuit open {{candidate}}"),
], "short")
newline()
row("Services")
ts("Services up", [("max by (service) (aimem_up)", "{{service}}"), ('up{job=~".*aimem.*"}', "scrape {{instance}}")], "short", w=12)
ts("Uptime", [("time() - max by (service) (aimem_start_time_seconds)", "{{service}}")], "s", w=12)

dash = {
    "uid": "aimem-overview", "title": "aimem overview", "tags": ["aimem"], "timezone": "browser",
    "schemaVersion": 39, "version": 1, "editable": True, "refresh": "30s",
    "time": {"from": "now-6h", "to": "now"},
    "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus",
                             "current": {"text": "Prometheus", "value": "aimem-prometheus"}}]},
    "annotations": {"list": []}, "links": [],
    "panels": panels,
}
print(json.dumps(dash, indent=2))
