"""Node-loss drill: replicate to a local S3 (moto) and a bare git remote, lose the node, restore.

Node A runs ``aimem up`` with ``[replication]`` configured: its writer pushes the wiki to a
bare repository after each checkpoint and ``aimem up`` runs ``litestream replicate`` to a
moto S3 bucket on loopback. Phase 1 writes pages and hook sessions and waits until both
copies have caught up (the replication point): search results, counts and the remote's
history are captured. Phase 2 keeps hooks flowing, then every process of node A gets SIGKILL
at once and its data dir is deleted. ``aimem restore --from-replica`` rebuilds a new data
dir, a new stack starts on it, and: every page and search result of the replication point
is back, git history is intact, and of the phase-2 hooks what is lost is at most the last
few seconds (the measured RPO); the restore + start time is the RTO. Figures are printed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import httpx
import pytest

from aimem_common import config
from aimem_common.natsserver import free_port, wait_port
from aimem_testing.stack import LocalStack, free_port_block

pytestmark = pytest.mark.timeout(300)

BUCKET = "aimem-drill"
PHASE2_S = 4.0
PHASE2_RATE = 20  # hooks per second after the replication point
RPO_BOUND_S = 6.0  # Litestream syncs every second here; slack for a loaded box
QUERIES = ["cursor pagination invoices", "retry budget flaky", "postgres migration lock", "deploy rollback"]
TOPICS = ["cursor pagination for invoices", "retry budget for flaky tests", "postgres migration lock timeout",
          "deploy rollback procedure", "redis eviction policy"]


@pytest.fixture
def s3(tmp_path):
    """A moto S3 server on loopback with the drill's bucket; yields its endpoint URL."""
    port = free_port()
    exe = Path(sysconfig.get_path("scripts")) / "moto_server"
    log = open(tmp_path / "moto.log", "wb")
    proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log,
                            start_new_session=True)
    try:
        assert wait_port("127.0.0.1", port, 30), "moto_server did not listen"
        import boto3

        boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id="test",
                     aws_secret_access_key="test", region_name="us-east-1").create_bucket(Bucket=BUCKET)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def _config(data_dir: Path, remote: Path, endpoint: str) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "config.toml").write_text(
        "[replication]\n"
        f'git_remote = "{remote}"\n'
        f's3_bucket = "{BUCKET}"\n'
        f's3_endpoint = "{endpoint}"\n'
        "sync_interval_s = 1.0\n"
        "lag_poll_s = 0.5\n"
    )


ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}


def _hook(c: httpx.Client, sid: str, event: str, **extra) -> int:
    body = {"session_id": sid, "transcript_path": f"/tmp/{sid}.jsonl", "cwd": "/home/dev/projects/drill",
            "permission_mode": "default", "hook_event_name": event, **extra}
    return c.post("/hook?agent=claude-code", json=body).status_code


def _searches(query_url: str, headers: dict[str, str]) -> dict:
    out = {}
    with httpx.Client(base_url=query_url, timeout=10, headers=headers) as c:
        for q in QUERIES:
            r = c.get("/api/v1/search", params={"q": q, "project": "drill", "limit": 10})
            r.raise_for_status()
            out[q] = [(h["path"], h["title"]) for h in r.json()["hits"]]
    return out


def _db_rows(db: Path, sql: str) -> list:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def _descendants(pid: int) -> list[int]:
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            kids = Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
        except OSError:
            continue
        for k in map(int, kids):
            out += [k, *_descendants(k)]
    return out


def _node_loss(stack: LocalStack) -> float:
    """SIGKILL the supervisor and every process under it at once; return the moment."""
    pids = [stack.proc.pid, *_descendants(stack.proc.pid)]
    t = time.time()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    stack.proc.wait(10)
    return t


def _wait(cond, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_node_loss_drill_restores_everything_before_the_replication_point(tmp_path, s3):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--bare", "--quiet", "--initial-branch=main", str(remote)], check=True)
    node_a, node_b = tmp_path / "node-a", tmp_path / "node-b"
    _config(node_a, remote, s3)
    stack = LocalStack(node_a, tmp_path / "logs-a", extra_env=ENV).start()
    try:
        # -- phase 1: pages and hook sessions, then wait for the replication point ------------
        with httpx.Client(base_url=stack.url("query"), timeout=30, headers=stack.headers) as q:
            for i in range(20):
                topic = TOPICS[i % len(TOPICS)]
                r = q.post("/admin/pages", json={"workspace": "default", "project": "drill",
                                                 "path": f"concepts/note-{i:02d}.md",
                                                 "body": f"# Note {i}: {topic}\n\nWhat we learned about {topic} (#{i}).\n"})
                assert r.status_code == 200, r.text
        phase1_keys = []
        with httpx.Client(base_url=stack.url("ingress"), timeout=10, headers=stack.headers) as c:
            for s in range(3):
                sid = f"drill-s{s}"
                assert _hook(c, sid, "SessionStart", source="startup") == 202
                for p in range(5):
                    key = f"p1-{s}-{p}"
                    assert _hook(c, sid, "UserPromptSubmit", prompt=f"{key} fix the {TOPICS[p]}") == 202
                    phase1_keys.append(key)
                assert _hook(c, sid, "SessionEnd", reason="exit") == 202
        db_a = node_a / "db" / "memory.sqlite"
        _wait(lambda: len(_db_rows(db_a, "SELECT 1 FROM pages WHERE is_latest = 1 AND path LIKE 'sessions/%'")) == 3,
              60, "three session pages")
        t_written = time.time()

        def caught_up():
            st = httpx.get(stack.url("query") + "/admin/status", timeout=5, headers=stack.headers).json()["replication"]
            wiki, db = st.get("wiki", {}), st.get("db", {})
            return (wiki.get("head") and wiki.get("head") == wiki.get("pushed")
                    and (db.get("last_sync_at") or 0) > t_written + 1.5 and st)

        status_a = _wait(caught_up, 60, "both replicas to catch up")
        searches = _searches(stack.url("query"), stack.headers)
        pages_a = sorted(_db_rows(db_a, "SELECT path, content_hash FROM pages WHERE is_latest = 1"))
        remote_head = _git(remote, "rev-parse", "main")
        remote_log = _git(remote, "log", "--format=%H %s", "main").splitlines()
        assert remote_head == status_a["wiki"]["head"]
        assert all(hits for hits in searches.values()), searches

        # -- phase 2: hooks keep coming; then the node is lost -------------------------------
        acked: list[tuple[float, str]] = []
        with httpx.Client(base_url=stack.url("ingress"), timeout=10, headers=stack.headers) as c:
            t_end = time.time() + PHASE2_S
            i = 0
            while time.time() < t_end:
                key = f"p2-{i:04d}"
                if _hook(c, "drill-p2", "UserPromptSubmit", prompt=f"{key} keep going") == 202:
                    acked.append((time.time(), key))
                i += 1
                time.sleep(1 / PHASE2_RATE)
        t_loss = _node_loss(stack)
    finally:
        stack.stop()
    shutil.rmtree(node_a)

    # -- restore on a new node ---------------------------------------------------------------
    _config(node_b, remote, s3)
    # a port block nobody uses: the restore refuses while "this config's" ports answer
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")} | ENV | {
        "AIMEM_PORT_BASE": str(free_port_block())}
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "aimem_cli", "restore", "--from-replica", "--data-dir", str(node_b)],
                       capture_output=True, text=True, env=env, timeout=180)
    restore_s = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    stack_b = LocalStack(node_b, tmp_path / "logs-b", extra_env=ENV)
    t1 = time.monotonic()
    with stack_b:
        start_s = time.monotonic() - t1
        db_b = node_b / "db" / "memory.sqlite"
        pages_b = sorted(_db_rows(db_b, "SELECT path, content_hash FROM pages WHERE is_latest = 1"))
        searches_b = _searches(stack_b.url("query"), stack_b.headers)
        bodies = " ".join(b for (b,) in _db_rows(db_b, "SELECT body FROM observations"))
        history_b = _git(node_b / "wiki", "log", "--format=%H %s").splitlines()
        # the restored node refuses a second restore while its writer runs
        again = subprocess.run([sys.executable, "-m", "aimem_cli", "restore", "--from-replica", "--data-dir",
                                str(node_b)], capture_output=True, text=True, env=env, timeout=60)
        # and keeps replicating: its checkpoints reach the same remote
        _wait(lambda: httpx.get(stack_b.url("query") + "/admin/status", headers=stack_b.headers).json()[
              "replication"]["wiki"].get("pushed"),
              30, "the new node's first push")

    restored = {k for _, k in acked if k in bodies.split()}
    lost = [(t, k) for t, k in acked if k not in restored]
    # RPO: from the node loss back to the newest ack before which nothing was lost
    first_lost = min((t for t, _ in lost), default=t_loss)
    rpo_s = t_loss - first_lost
    figures = {
        "phase2_acked": len(acked), "phase2_restored": len(restored), "phase2_lost": len(lost),
        "rpo_s": round(rpo_s, 3), "restore_s": round(restore_s, 3), "start_s": round(start_s, 3),
        "rto_s": round(restore_s + start_s, 3), "restore_output": r.stdout.strip(),
    }
    print("\nDRILL " + json.dumps(figures))
    assert pages_b == pages_a, "pages of the replication point differ after the restore"
    assert searches_b == searches, "search results differ after the restore"
    assert all(k in bodies.split() for k in phase1_keys), "a hook before the replication point was lost"
    assert history_b[-len(remote_log):] == remote_log, "git history of the remote is not intact in the restore"
    assert again.returncode == 1 and "writer" in again.stderr, again.stderr
    assert rpo_s <= RPO_BOUND_S, figures
    # what was restored is a prefix of what was acknowledged (no holes before the loss window)
    assert all(t >= first_lost for t, _ in lost)


def test_read_replica_follows_the_primary_within_seconds(tmp_path, s3):
    """``aimem replica`` on another data dir serves the primary's pages about a second late."""
    primary, node_r = tmp_path / "primary", tmp_path / "replica"
    for d in (primary, node_r):
        d.mkdir()
        (d / "config.toml").write_text(f'[replication]\ns3_bucket = "{BUCKET}"\ns3_endpoint = "{s3}"\n'
                                       "sync_interval_s = 1.0\n")
    with LocalStack(primary, tmp_path / "logs-p", extra_env=ENV) as stack:
        q = httpx.Client(base_url=stack.url("query"), timeout=30, headers=stack.headers)
        assert q.post("/admin/pages", json={"project": "drill", "path": "concepts/first.md",
                                            "body": "# First\n\nreplicated before the replica starts\n"}).status_code == 200
        base = free_port_block()
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")} | ENV | {
            "AIMEM_BUS__NATS_URL": stack.nats_url, "AIMEM_BUS__TOKEN": stack.token}
        logs = tmp_path / "logs-r"
        proc = subprocess.Popen([sys.executable, "-m", "aimem_cli", "replica", "--data-dir", str(node_r),
                                 "--port-base", str(base), "--log-dir", str(logs)],
                                env=env, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "replica.err", "wb"),
                                start_new_session=True)
        try:
            r_url = f"http://127.0.0.1:{base + 1}"

            def replica_auth() -> dict[str, str]:  # the replica's own generated root token
                token = config.read_token_file(node_r)
                return {"Authorization": f"Bearer {token}"} if token else {}

            def found(text: str):
                try:
                    hits = httpx.get(r_url + "/api/v1/search", params={"q": text, "project": "drill"}, timeout=5,
                                     headers=replica_auth())
                except httpx.HTTPError:
                    return None
                return hits.status_code == 200 and [h["path"] for h in hits.json()["hits"]]

            assert _wait(lambda: found("replicated before"), 90, "the replica to serve the first page") == [
                "concepts/first.md"]
            lags = []
            for i in range(3):
                word = f"quokka{i}zebra"
                assert q.post("/admin/pages", json={"project": "drill", "path": f"concepts/late-{i}.md",
                                                    "body": f"# Late {i}\n\n{word}\n"}).status_code == 200
                t = time.monotonic()
                _wait(lambda: found(word), 30, f"{word} on the replica")
                lags.append(time.monotonic() - t)
            # the replica's writes go to the primary's writer over the bus
            r = httpx.post(r_url + "/admin/pages", json={"project": "drill", "path": "concepts/from-replica.md",
                                                         "body": "# From the replica\n\nwritten through it\n"},
                           timeout=30, headers=replica_auth())
            assert r.status_code == 200, r.text
            assert _wait(lambda: found("written through it"), 30, "the replica's own write to come back")
            assert _wait(lambda: q.get("/api/v1/search", params={"q": "written through", "project": "drill"}).json()[
                "hits"], 10, "the write on the primary")
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        q.close()
    print("\nREPLICA " + json.dumps({"write_to_visible_on_replica_s": [round(x, 2) for x in lags]}))
    assert max(lags) < 10, lags
    assert not (node_r / "wiki").exists() or not any((node_r / "wiki").iterdir())  # a replica never writes the wiki
