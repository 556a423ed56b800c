"""Static checks of the deploy files: compose, Dockerfile, Helm chart, Prometheus rules,
Grafana dashboard, OTel collector config. Each fails on a broken file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import promql

REPO = Path(__file__).resolve().parents[2]
SERVICES = ("writer", "ingress", "query", "mcp-gateway", "maintainer")
PUBLISHED = {"ingress": 8701, "query": 8702, "mcp-gateway": 8703}


# -- compose ---------------------------------------------------------------------------
def compose(compose_bin: str, *args: str, env: dict | None = None, files=("compose.yaml",)) -> subprocess.CompletedProcess:
    base = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "AIMEM_AUTH__TOKEN": "static-check-token"}
    base.update(env or {})
    cmd = [compose_bin, "--project-directory", str(REPO), "--env-file", "/dev/null"]
    for f in files:
        cmd += ["-f", str(REPO / f)]
    return subprocess.run(cmd + list(args), cwd=REPO, env=base, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("extra", [(), ("--profile", "observability")], ids=["default", "observability"])
def test_compose_config_quiet(compose_bin, extra):
    proc = compose(compose_bin, *extra, "config", "--quiet")
    assert proc.returncode == 0, proc.stderr


def test_compose_replication_and_cluster_profiles(compose_bin):
    env = {"AIMEM_NATS_URL": "nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222"}
    proc = compose(compose_bin, "--profile", "replication", "--profile", "cluster", "config", "--format", "json",
                   env=env)
    assert proc.returncode == 0, proc.stderr
    svcs = json.loads(proc.stdout)["services"]
    assert svcs["litestream"]["command"] == ["aimem", "replicate-db"]
    assert any(v["target"] == "/data" for v in svcs["litestream"]["volumes"])
    for i in (1, 2, 3):
        cmd = svcs[f"nats-{i}"]["command"]
        assert cmd[cmd.index("--name") + 1] == f"nats-{i}" and "-routes" in cmd
        assert any(v["source"] == f"nats-{i}-data" for v in svcs[f"nats-{i}"]["volumes"])
    assert svcs["writer"]["environment"]["AIMEM_BUS__NATS_URL"] == env["AIMEM_NATS_URL"]
    plain = compose(compose_bin, "config", "--services")
    assert not {"litestream", "nats-1"} & set(plain.stdout.split())  # off unless asked for


def test_compose_test_override_config(compose_bin):
    proc = compose(compose_bin, "config", "--services", files=("compose.yaml", "compose.test.yaml"))
    assert proc.returncode == 0, proc.stderr
    assert set(proc.stdout.split()) == {"nats", *SERVICES}  # prometheus/grafana left out


def test_compose_requires_auth_token(compose_bin):
    proc = compose(compose_bin, "config", "--quiet", env={"AIMEM_AUTH__TOKEN": ""})
    assert proc.returncode != 0 and "AIMEM_AUTH__TOKEN" in proc.stderr


def test_compose_shape(compose_bin):
    proc = compose(compose_bin, "--profile", "observability", "config", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    cfg = json.loads(proc.stdout)
    svcs = cfg["services"]
    images = {svcs[s]["image"] for s in SERVICES}
    assert len(images) == 1, images  # one image, the command picks the service
    assert "build" in svcs["writer"]
    for s in SERVICES:
        spec = svcs[s]
        assert spec["restart"] == "unless-stopped"
        assert spec["command"][:2] == ["python", "-m"]
        assert any(v["source"] == "aimem-data" and v["target"] == "/data" for v in spec["volumes"]), s
        assert spec["depends_on"]["nats"]["condition"] == "service_healthy"
        assert spec["environment"]["AIMEM_BUS__NATS_URL"] == "nats://nats:4222"
        ports = spec.get("ports", [])
        if s in PUBLISHED:
            assert [(p["target"], p["host_ip"], int(p["published"])) for p in ports] == [(PUBLISHED[s], "127.0.0.1", PUBLISHED[s])]
        else:
            assert not ports, f"{s} must not publish a port"
        if s != "writer":
            assert svcs[s]["depends_on"]["writer"]["condition"] == "service_healthy"
    assert "healthcheck" in svcs["nats"] and "nats-data" in {v["source"] for v in svcs["nats"]["volumes"]}
    assert {"prometheus", "grafana", "otel-collector", "jaeger"} <= set(svcs)
    targets = {t for sc in yaml.safe_load((REPO / "deploy/prometheus/prometheus.yml").read_text())["scrape_configs"]
               for st in sc["static_configs"] for t in st["targets"]}
    assert targets == {f"{s}:{8701 + i}" for i, s in enumerate(("ingress", "query", "mcp-gateway", "writer", "maintainer"))}


def test_dockerfile_and_dockerignore():
    text = (REPO / "Dockerfile").read_text()
    assert text.index("ARG BASE=") < text.index("FROM ${BASE}")
    for needle in ("USER aimem", "HEALTHCHECK", 'VOLUME ["/data"]', "AIMEM_DATA_DIR=/data"):
        assert needle in text, needle
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    assert ignore[[l.strip() for l in ignore].index("**")] == "**"  # deny by default
    allowed = [l for l in ignore if l.startswith("!")]
    assert all("src" in l or l.endswith("pyproject.toml") or l.endswith("healthcheck.py") for l in allowed), allowed
    assert "**/tests" in ignore


# -- Helm ------------------------------------------------------------------------------
NON_DEFAULT = {
    "auth": {"token": "t0ken"},
    "nats": {"enabled": False, "externalUrl": "nats://nats.messaging:4222"},
    "ingress": {"enabled": True, "className": "traefik", "host": "mem.example.org",
                "tls": [{"secretName": "mem-tls", "hosts": ["mem.example.org"]}]},
    "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "placement": {"podAffinity": False, "nodeSelector": {"kubernetes.io/hostname": "homelab-1"}},
    "llm": {"provider": "openai-compat", "model": "m", "baseUrl": "http://llm:8000/v1", "apiKey": "sk-x"},
    "otel": {"endpoint": "http://otel-collector.observability:4318"},
    "env": {"AIMEM_DECAY__LAMBDA": "0.05"},
    "persistence": {"storageClass": "local-path", "size": "20Gi"},
    "services": {"query": {"replicas": 2}},
    "image": {"repository": "registry.local/aimem", "tag": "0.1.0-test"},
}


def render(values: dict) -> list[dict]:
    helm = pytest.importorskip("helm_python.chart", reason="helm-python-sdk not installed")
    out = helm.Chart.load(REPO / "helm/aimem").render(values, name="mem", namespace="aimem", is_install=True)
    docs = []
    for path, text in out.items():
        if path.endswith("NOTES.txt"):
            assert "aimem" in text
            continue
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


@pytest.mark.parametrize("values", [{}, NON_DEFAULT], ids=["default", "non-default"])
def test_helm_render_validates(values):
    kv = pytest.importorskip("kubernetes_validate")
    docs = render(values)
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: no upstream schema; its shape is checked below
        kv.validate(doc, "1.30.0", strict=True)
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    assert set(deployments) == {f"mem-aimem-{s}" for s in SERVICES}
    writer = deployments["mem-aimem-writer"]["spec"]
    assert writer["replicas"] == 1 and writer["strategy"]["type"] == "Recreate"
    for name, dep in deployments.items():
        pod = dep["spec"]["template"]["spec"]
        c = pod["containers"][0]
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz" and c["readinessProbe"]["httpGet"]["path"] == "/healthz"
        assert c["securityContext"]["readOnlyRootFilesystem"] and pod["securityContext"]["runAsNonRoot"]
        assert c["resources"]["requests"]
        claim = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
        assert claim == {"mem-aimem-data"}
        env = {e["name"]: e for e in c["env"]}
        assert env["AIMEM_AUTH__TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "mem-aimem-auth"
        if values.get("placement", {}).get("podAffinity", True):  # one node: required podAffinity
            term = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
            assert term["topologyKey"] == "kubernetes.io/hostname"
            assert term["labelSelector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
        else:
            assert pod["nodeSelector"] == {"kubernetes.io/hostname": "homelab-1"}
    pvc = next(d for d in docs if d["kind"] == "PersistentVolumeClaim")
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert ("Secret", "mem-aimem-auth") in kinds
    if values.get("nats", {}).get("enabled", True):
        sts = next(d for d in docs if d["kind"] == "StatefulSet")
        assert "-js" in sts["spec"]["template"]["spec"]["containers"][0]["args"]
        assert sts["spec"]["volumeClaimTemplates"]
        assert env["AIMEM_BUS__NATS_URL"]["value"] == "nats://mem-aimem-nats:4222"
    else:
        assert not any(d["kind"] == "StatefulSet" for d in docs)
        assert env["AIMEM_BUS__NATS_URL"]["value"] == "nats://nats.messaging:4222"
        assert ("Ingress", "mem-aimem") in kinds
        sm = next(d for d in docs if d["kind"] == "ServiceMonitor")
        assert sm["spec"]["endpoints"][0]["path"] == "/metrics" and sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        assert deployments["mem-aimem-query"]["spec"]["replicas"] == 2
        assert env["OPENAI_API_KEY"]["valueFrom"]["secretKeyRef"]["key"] == "llm-api-key"


@pytest.mark.parametrize("bad", [
    {"nats": {"enabled": False}},                       # no NATS at all
    {"persistence": {"accessMode": "ReadWriteMany"}},   # SQLite WAL is single-host
    {"services": {"writer": {"replicas": 2}}},          # the writer is single by design
    {"unknown": True},
], ids=["no-nats", "rwx", "two-writers", "unknown-key"])
def test_helm_schema_rejects(bad):
    helm = pytest.importorskip("helm_python.chart", reason="helm-python-sdk not installed")
    with pytest.raises(Exception):
        helm.Chart.load(REPO / "helm/aimem").render(bad, name="mem", namespace="aimem", is_install=True)


CLUSTERED = {
    "nats": {"cluster": {"replicas": 3}},
    "replication": {"git": {"remote": "https://aimem:tok@git.example/aimem/wiki.git"},
                    "litestream": {"enabled": True, "bucket": "aimem-db", "endpoint": "http://minio.storage:9000",
                                   "accessKeyId": "AKIA-test", "secretAccessKey": "secret-test"}},
}


@pytest.mark.parametrize("values", [{}, CLUSTERED], ids=["single", "clustered-replicated"])
def test_helm_cluster_and_replication_render(values):
    """nats.cluster.replicas and replication.*: on and off, valid k8s, wired as documented."""
    kv = pytest.importorskip("kubernetes_validate")
    docs = render(values)
    for doc in docs:
        if not doc["apiVersion"].startswith("monitoring.coreos.com/"):
            kv.validate(doc, "1.30.0", strict=True)
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    sts = by[("StatefulSet", "mem-aimem-nats")]["spec"]
    writer = by[("Deployment", "mem-aimem-writer")]["spec"]["template"]["spec"]
    env = {e["name"]: e for e in writer["containers"][0]["env"]}
    conf = by[("ConfigMap", "mem-aimem-nats-config")]["data"]["aimem.conf"]
    if not values:
        assert sts["replicas"] == 1 and "cluster {" not in conf and "affinity" not in sts["template"]["spec"]
        assert env["AIMEM_BUS__STREAM_REPLICAS"]["value"] == "1"
        assert [c["name"] for c in writer["containers"]] == ["writer"] and "initContainers" not in writer
        assert not any(k[1] in ("mem-aimem-replication", "mem-aimem-litestream") for k in by)
        return
    assert sts["replicas"] == 3 and sts["volumeClaimTemplates"] and sts["podManagementPolicy"] == "Parallel"
    anti = sts["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    for i in range(3):
        assert f"nats://mem-aimem-nats-{i}.mem-aimem-nats-headless:6222" in conf
    assert "$(POD_NAME)" in sts["template"]["spec"]["containers"][0]["args"]
    assert env["AIMEM_BUS__NATS_URL"]["value"] == ",".join(
        f"nats://mem-aimem-nats-{i}.mem-aimem-nats-headless:4222" for i in range(3))
    assert env["AIMEM_BUS__STREAM_REPLICAS"]["value"] == "3"
    # secrets never appear as plain values in a pod spec
    assert env["AIMEM_REPLICATION__GIT_REMOTE"]["valueFrom"]["secretKeyRef"] == {"name": "mem-aimem-replication",
                                                                               "key": "git-remote"}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "mem-aimem-replication"
    assert "tok@" not in yaml.safe_dump(by[("Deployment", "mem-aimem-writer")])
    sidecar = next(c for c in writer["containers"] if c["name"] == "litestream")
    assert sidecar["command"][:2] == ["litestream", "replicate"]
    assert {m["mountPath"] for m in sidecar["volumeMounts"]} >= {"/data", "/etc/litestream"}
    ls_conf = yaml.safe_load(by[("ConfigMap", "mem-aimem-litestream")]["data"]["litestream.yml"])
    replica = ls_conf["dbs"][0]["replica"]
    assert ls_conf["dbs"][0]["path"] == "/data/db/memory.sqlite" and ls_conf["socket"]["path"] == "/data/db/litestream.sock"
    assert replica["bucket"] == "aimem-db" and replica["force-path-style"] is True
    assert writer["initContainers"][0]["name"] == "restore" and "--from-replica" in writer["initContainers"][0]["command"][-1]
    assert ("Secret", "mem-aimem-replication") in by


@pytest.mark.parametrize("bad", [
    {"nats": {"cluster": {"replicas": 2}}},                                   # no majority after a loss
    {"nats": {"enabled": False, "externalUrl": "nats://n:4222", "cluster": {"replicas": 3}}},  # nothing to cluster
    {"replication": {"litestream": {"enabled": True}}},                       # replicate to no bucket
    {"replication": {"litestream": {"accessKeyId": "AKIA-only"}}},            # half a credential
    {"replication": {"litestream": {"endpoint": "minio:9000"}}},              # not a URL
    {"replication": {"lagAlertSeconds": 1}},                                  # alert on every sync
], ids=["two-nats", "cluster-external", "no-bucket", "half-credential", "endpoint-not-url", "lag-alert-too-low"])
def test_helm_schema_rejects_unsafe_cluster_and_replication(bad):
    helm = pytest.importorskip("helm_python.chart", reason="helm-python-sdk not installed")
    with pytest.raises(Exception, match="schema"):
        helm.Chart.load(REPO / "helm/aimem").render(bad, name="mem", namespace="aimem", is_install=True)


# -- Prometheus ------------------------------------------------------------------------
def test_promtool_check_rules(promtool):
    proc = subprocess.run([promtool, "check", "rules", str(REPO / "deploy/prometheus/rules/aimem.rules.yml")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_test_rules(promtool):
    proc = subprocess.run([promtool, "test", "rules", "aimem.rules.test.yml"], cwd=REPO / "deploy/prometheus/tests",
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_check_config(promtool):
    proc = subprocess.run([promtool, "check", "config", "--syntax-only", str(REPO / "deploy/prometheus/prometheus.yml")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_alert_is_documented():
    alerts = [n for n in promql.rule_exprs(REPO / "deploy/prometheus/rules/aimem.rules.yml") if not n.startswith("aimem:")]
    readme = (REPO / "README.md").read_text()
    assert alerts and all(a in readme for a in alerts), [a for a in alerts if a not in readme]


# -- Grafana ---------------------------------------------------------------------------
def test_dashboard_parses_and_is_generated():
    path = REPO / "deploy/grafana/dashboards/aimem-overview.json"
    dash = json.loads(path.read_text())
    assert dash["uid"] == "aimem-overview" and dash["panels"]
    gen = subprocess.run([sys.executable, str(REPO / "deploy/grafana/gen_overview.py")], capture_output=True, text=True, timeout=30)
    assert gen.returncode == 0 and gen.stdout == path.read_text(), "run deploy/grafana/gen_overview.py > the JSON"
    exprs = promql.dashboard_exprs(path)
    assert len(exprs) >= 20 and all(promql.metric_names(e) or e.startswith("up{") for e in exprs.values())
    titles = " ".join(exprs).lower()
    for topic in ("hook events by kind", "202 / 429 / 5xx", "ingress latency", "bus publish", "batch size",
                  "apply latency", "writer lag", "query api latency", "mcp tool calls", "mcp tool errors",
                  "job runs", "llm calls", "llm latency"):
        assert topic in titles, topic
    ds = yaml.safe_load((REPO / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text())
    assert ds["datasources"][0]["url"] == "http://prometheus:9090"
    prov = yaml.safe_load((REPO / "deploy/grafana/provisioning/dashboards/aimem.yml").read_text())
    assert prov["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"


def test_otel_collector_config():
    cfg = yaml.safe_load((REPO / "deploy/otel/collector.yaml").read_text())
    pipe = cfg["service"]["pipelines"]["traces"]
    for kind in ("receivers", "processors", "exporters"):
        assert set(pipe[kind]) <= set(cfg[kind]), kind
    assert cfg["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")
