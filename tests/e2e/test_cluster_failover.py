"""A three-server JetStream cluster loses its stream leader under hook load.

``aimem up --nats-cluster 3`` on loopback; hooks at ~RATE ev/s for DURATION_S seconds; at
KILL_AT_S the server leading ``AIMEM_MUT`` gets SIGKILL (the supervisor restarts it a second
later, as a node coming back would). Every acknowledged (202) event must be stored exactly
once; a refused one (503/429) is retried with the same Idempotency-Key like the hook client's
spool does, so the JetStream dedupe window is exercised across the leader change too. Ingress
must answer every request promptly (no hang while the cluster re-elects) and the 202 rate
must come back within seconds. The figures are printed (``-s``) for the report.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import statistics
import time
from collections import Counter
from pathlib import Path

import nats
import pytest

from aimem_testing.stack import LocalStack

pytestmark = pytest.mark.timeout(240)

RATE = 300  # events per second offered
DURATION_S = 12.0
KILL_AT_S = 4.0
MAX_ANSWER_S = 3.0  # no hang: the slowest single answer (publish timeout 0.8 s; slack for a loaded box)
P99_ANSWER_S = 1.0  # 202/503 within a second while the cluster re-elects
# A follower waits 4-9 s for a lost leader before it campaigns (nats-server's raft election
# timeout; the campaign itself up to 0.8 s), for the stream and the writer's consumer alike; a
# refused client retries every 0.25 s, and while the writer's consumer has no leader the lag
# gate answers 429 until the writer moves again. The bound is that worst case plus 2 s for a
# loaded box (CI once saw the last 429 at 10.3 s after the kill with a 10 s bound).
NATS_MAX_ELECTION_S = 9.0 + 0.8
RECOVERY_BOUND_S = NATS_MAX_ELECTION_S + 0.25 + 2.0
SESSION_EVENTS = 50
CONNECTIONS = 64  # keep-alive connections to ingress (requests wait for a free one)


def _hook(key: str, i: int) -> dict:
    sid = f"fo-{i // SESSION_EVENTS}"
    return {"session_id": sid, "transcript_path": f"/tmp/{sid}.jsonl", "cwd": "/home/dev/projects/failover",
            "permission_mode": "default", "hook_event_name": "UserPromptSubmit", "prompt": f"event {key} please"}


def _nats_pid(data_dir: Path, node: int) -> int:
    """The pid of the nats-server storing under ``<data_dir>/nats/n<node>`` (from /proc)."""
    store = str(data_dir / "nats" / f"n{node}")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.decode(errors="replace") == store for a in argv) and b"-js" in argv:
            return int(entry.name)
    raise AssertionError(f"no nats-server for {store}")


async def _stream_leader(nats_url: str, token: str | None) -> str:
    nc = await nats.connect(nats_url.split(","), token=token, allow_reconnect=False, connect_timeout=2)
    try:
        info = await nc.jetstream(timeout=5).stream_info("AIMEM_MUT")
        return info.cluster.leader
    finally:
        await nc.close()


class _Conn:
    """One keep-alive HTTP/1.1 connection speaking just enough to POST a hook and read the status.

    httpx costs ~1 ms of CPU per request, which on a 2-core box starves the stack under
    test at 300 req/s; this costs a fraction of that.
    """

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes, headers: dict[str, str], timeout_s: float) -> int:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.writer.write(f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(body)}\r\n{head}\r\n".encode() + body)
        try:
            status_line = await asyncio.wait_for(self.reader.readline(), timeout_s)
            length = 0
            while True:
                line = await asyncio.wait_for(self.reader.readline(), timeout_s)
                if line in (b"\r\n", b""):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await asyncio.wait_for(self.reader.readexactly(length), timeout_s)
            return int(status_line.split()[1])
        except (asyncio.TimeoutError, OSError, IndexError, ValueError, asyncio.IncompleteReadError):
            self.close()
            return 0

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def _drive(url: str, stack: LocalStack, data_dir: Path) -> dict:
    acked: set[str] = set()
    answers: list[tuple[float, float, int]] = []  # (sent at, seconds to answer, status)
    killed: dict = {}
    host, port = url.split("//", 1)[1].split(":")
    pool: asyncio.Queue[_Conn] = asyncio.Queue()
    for _ in range(CONNECTIONS):
        pool.put_nowait(_Conn(host, int(port)))
    t0 = time.monotonic()
    deadline_retry = t0 + DURATION_S + 20

    async def one(i: int) -> None:
        key = f"ev-{i:06d}"
        body = json.dumps(_hook(key, i)).encode()
        while True:
            conn = await pool.get()
            sent = time.monotonic()
            try:
                status = await conn.post("/hook?agent=claude-code", body, {"Idempotency-Key": key, **stack.headers},
                                         10.0)
            finally:
                pool.put_nowait(conn)
            answers.append((sent - t0, time.monotonic() - sent, status))
            if status == 202:
                acked.add(key)
                return
            if time.monotonic() > deadline_retry:
                return
            await asyncio.sleep(0.25)  # the spool's retry, same Idempotency-Key

    async def killer() -> None:
        await asyncio.sleep(KILL_AT_S)
        leader = await _stream_leader(stack.nats_url, stack.token)
        node = int(leader.rsplit("-", 1)[1])
        os.kill(_nats_pid(data_dir, node), signal.SIGKILL)
        killed.update(leader=leader, at=time.monotonic() - t0)

    kill_task = asyncio.create_task(killer())
    tasks = []
    n = int(RATE * DURATION_S)
    for i in range(n):
        delay = t0 + i / RATE - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i)))
    offered_s = time.monotonic() - t0
    await asyncio.gather(*tasks)
    await kill_task
    while not pool.empty():
        pool.get_nowait().close()
    return {"acked": acked, "answers": answers, "killed": killed, "offered": n, "offered_s": offered_s}


def _stored_keys(db: Path) -> Counter:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT body FROM observations WHERE session_id LIKE 'fo-%'").fetchall()
    finally:
        conn.close()
    keys = Counter()
    for (body,) in rows:
        for word in body.split():
            if word.startswith("ev-"):
                keys[word] += 1
    return keys


def test_stream_leader_sigkill_under_hook_load_loses_nothing(tmp_path):
    data_dir = tmp_path / "data"
    with LocalStack(data_dir, tmp_path / "logs", nats_cluster=3) as stack:
        res = asyncio.run(_drive(stack.url("ingress"), stack, data_dir))
        acked = res["acked"]
        deadline = time.monotonic() + 90
        stored = Counter()
        while time.monotonic() < deadline:
            stored = _stored_keys(data_dir / "db" / "memory.sqlite")
            if acked <= set(stored):
                break
            time.sleep(0.5)

    answers = res["answers"]
    kill_at = res["killed"]["at"]
    lost = sorted(acked - set(stored))
    dupes = sorted(k for k, n in stored.items() if n > 1)
    statuses = Counter(s for _, _, s in answers)
    slowest = max(a for _, a, _ in answers)
    during = [a for t, a, s in answers if kill_at <= t <= kill_at + 5]
    # 202s per 1 s bin after the kill: back when a bin reaches 80 % of the offered rate
    bins = Counter(int(t + a - kill_at) for t, a, s in answers if s == 202 and t + a >= kill_at)
    back = next((float(b) for b in sorted(bins) if bins[b] >= 0.8 * RATE), None)
    first_refusal = min((t for t, _, s in answers if s in (429, 503) and t >= kill_at), default=None)
    # the re-election window as clients see it: from the kill to the last refusal answered
    last_refusal = max((t + a for t, a, s in answers if s in (429, 503)), default=kill_at)
    last_of = {code: max((t + a - kill_at for t, a, s in answers if s == code), default=None) for code in (429, 503)}
    figures = {
        "offered": res["offered"], "offered_rate": round(res["offered"] / res["offered_s"], 1),
        "acked": len(acked), "lost": len(lost), "duplicates": len(dupes), "statuses": dict(statuses),
        "leader_killed": res["killed"]["leader"], "kill_at_s": round(kill_at, 2),
        "slowest_answer_s": round(slowest, 3), "answers_over_1s": sum(1 for _, a, _ in answers if a > 1.0),
        "p99_answer_s_5s_after_kill": round(statistics.quantiles(during, n=100)[98], 3) if len(during) > 100 else None,
        "first_refusal_after_kill_s": None if first_refusal is None else round(first_refusal - kill_at, 3),
        "last_refusal_after_kill_s": round(last_refusal - kill_at, 3),
        "last_503_after_kill_s": None if last_of[503] is None else round(last_of[503], 3),
        "last_429_after_kill_s": None if last_of[429] is None else round(last_of[429], 3),
        "throughput_back_after_s": back,
    }
    print("\nFAILOVER " + json.dumps(figures))
    assert not lost, f"{len(lost)} acknowledged events lost, e.g. {lost[:5]}"
    assert not dupes, f"{len(dupes)} events stored twice, e.g. {dupes[:5]}"
    assert len(acked) == res["offered"], "every event must be accepted in the end (retries with the same key)"
    assert set(statuses) <= {202, 429, 503, 0}, f"ingress answered something else than 202/429/503: {statuses}"
    assert statuses[0] == 0, "a request failed at the transport level (ingress down or hung past 10 s)"
    assert slowest < MAX_ANSWER_S, f"an answer took {slowest:.2f} s: ingress must not hang during re-election"
    p99 = figures["p99_answer_s_5s_after_kill"]
    assert p99 is not None and p99 < P99_ANSWER_S, f"answers in the 5 s after the kill: p99 {p99} s"
    # every request is accepted again within seconds (the 80 %-of-offered-rate figure is printed,
    # not asserted: on a shared 2-core box it also measures the CPU left to the stack)
    assert last_refusal - kill_at <= RECOVERY_BOUND_S, f"still refusing {RECOVERY_BOUND_S} s after the kill: {figures}"
