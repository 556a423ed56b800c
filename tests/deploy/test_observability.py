"""The rules and the dashboard query metrics the running services really export, and one
hook is one trace from ingress through the writer's apply (OTLP/HTTP to a local receiver)."""

from __future__ import annotations

import gzip
import json
import threading
import time
from pathlib import Path

import httpx
import pytest

import promql
from aimem_testing.loopback import LoopbackHTTP, QuietHandler, reply

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy/prometheus/rules/aimem.rules.yml"
DASHBOARD = REPO / "deploy/grafana/dashboards/aimem-overview.json"
SERVICES = ("ingress", "query", "mcp-gateway", "writer", "maintainer")
FIXTURE = "UserPromptSubmit.json"


def post_hook(base_url: str, shared_dir: Path, name: str = FIXTURE, **headers: str) -> httpx.Response:
    payload = json.loads((shared_dir / "fixtures/hooks/claude-code" / name).read_text())
    return httpx.post(base_url + "/hook", params={"agent": "claude-code"}, json=payload, headers=headers, timeout=10)


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_promql_metric_names_exist_in_running_stack(stack, shared_dir):
    # Exercise a few endpoints so labelled series exist too (families are checked anyway).
    for name in ("SessionStart.json", FIXTURE, "PostToolUse.Bash.json"):
        assert post_hook(stack.url("ingress"), shared_dir, name, **stack.headers).status_code == 202
    httpx.get(stack.url("query") + "/api/v1/status", timeout=10, headers=stack.headers)
    time.sleep(1.0)
    exposed: set[str] = set()
    for svc in SERVICES:
        resp = httpx.get(stack.url(svc) + "/metrics", timeout=10, headers=stack.headers)
        assert resp.status_code == 200, svc
        exposed |= promql.exposed_names(resp.text)
    used = {f"rule {n}": e for n, e in promql.rule_exprs(RULES).items()}
    used |= {f"panel {n}": e for n, e in promql.dashboard_exprs(DASHBOARD).items()}
    missing = {where: sorted(promql.metric_names(e) - exposed) for where, e in used.items()}
    missing = {k: v for k, v in missing.items() if v}
    assert not missing, f"PromQL names no service exports: {json.dumps(missing, indent=1)}"


def writer_applied(writer_url: str, op: str, timeout_s: float = 20) -> bool:
    """True once the writer's metrics count ``op`` as applied or answered (any outcome)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = httpx.get(writer_url + "/metrics", timeout=5).text
        if any(line.startswith(("aimem_writer_commands_total", "aimem_writer_errors_total")) and f'op="{op}"' in line
               for line in text.splitlines()):
            return True
        time.sleep(0.3)
    return False


# -- tracing ---------------------------------------------------------------------------
class OtlpReceiver(LoopbackHTTP):
    """A tiny OTLP/HTTP trace receiver on loopback: POST /v1/traces (protobuf) → spans."""

    def __init__(self):
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

        self.spans: list[dict] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(QuietHandler):
            def do_POST(self):  # noqa: N802 - http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                req = trace_service_pb2.ExportTraceServiceRequest()
                req.ParseFromString(body)
                with outer._lock:
                    for rs in req.resource_spans:
                        attrs = {a.key: a.value.string_value for a in rs.resource.attributes}
                        for ss in rs.scope_spans:
                            for s in ss.spans:
                                outer.spans.append({
                                    "service": attrs.get("service.name"), "name": s.name,
                                    "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                                    "parent_id": s.parent_span_id.hex(), "kind": s.kind,
                                })
                out = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                reply(self, 200, out, "application/x-protobuf")

        super().__init__(Handler)

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.spans)


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_one_hook_is_one_trace_from_ingress_to_writer_apply(services, shared_dir):
    with OtlpReceiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        procs = services("writer", "ingress", extra_env=env)
        resp = post_hook(procs["ingress"].url, shared_dir)
        assert resp.status_code == 202, resp.text
        assert writer_applied(procs["writer"].url, "observation.append"), "the writer applied no observation.append"

        deadline = time.monotonic() + 30
        chain = None
        while time.monotonic() < deadline and chain is None:
            spans = receiver.snapshot()
            for hook in (s for s in spans if s["service"] == "aimem-ingress" and s["name"] == "POST /hook"):
                same = [s for s in spans if s["trace_id"] == hook["trace_id"]]
                publish = [s for s in same if s["service"] == "aimem-ingress" and s["name"].endswith(" publish")]
                apply = [s for s in same if s["service"] == "aimem-writer" and s["name"].startswith("aimem.writer.apply")]
                if publish and apply:
                    chain = hook, publish[0], apply[0]
            time.sleep(0.2)
        spans = receiver.snapshot()
        assert chain, "no ingress→writer trace; spans seen:\n" + "\n".join(
            f"{s['service']} {s['name']} {s['trace_id']}" for s in spans)
        hook, publish, apply = chain
        assert publish["parent_id"] != "" and apply["parent_id"] == publish["span_id"]  # traceparent over NATS
        assert {hook["trace_id"], publish["trace_id"], apply["trace_id"]} == {hook["trace_id"]}
