"""`aimem hook`: caps, spool, output formats, exit 0, time bound with a down/hung server."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from aimem_cli.hookclient import PROMPT_CAP_BYTES, cap_payload, cap_utf8, format_context
from aimem_cli.hookspool import Spool

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "hooks"
DEFAULT_BUDGET = {"AIMEM_HOOK_BUDGET_MS": "150"}  # the shipped default, for the timing tests
PROMPT = {"session_id": "s-1", "cwd": "/home/dev/projects/acme-api", "hook_event_name": "UserPromptSubmit",
          "prompt": "add pagination", "transcript_path": "/home/dev/.claude/projects/x/s-1.jsonl"}


def spooled(data_dir: Path) -> list[dict]:
    return Spool(data_dir / "spool").pending()


def test_cap_utf8_never_splits_a_code_point(hook):
    text = "é" * 5000
    out = cap_utf8(text, 2048)
    assert len(out.encode()) <= 2048 and out.endswith("…")
    assert cap_utf8("short", 10) == "short"


def test_cap_payload_caps_prompts_excerpts_lists_and_depth(hook):
    deep: dict = {}
    cur = deep
    for _ in range(40):
        cur["x"] = {}
        cur = cur["x"]
    p = cap_payload({"prompt": "a" * 40_000, "tool_response": {"stdout": "b" * 10_000},
                     "edits": list(range(500)), "deep": deep, "n": 3})
    assert len(p["prompt"].encode()) <= PROMPT_CAP_BYTES
    assert len(p["tool_response"]["stdout"].encode()) <= 2048
    assert len(p["edits"]) == 64 and p["n"] == 3
    assert "…" in json.dumps(p["deep"], ensure_ascii=False)


def baseline_wall(tmp_path, hook, fake_ingress) -> float:
    """Median wall time of the same hook against a server that answers at once: process
    start-up on this machine right now, so the bounds below hold on a loaded CI box too."""
    walls = []
    for _ in range(3):
        proc, wall = hook(["--agent", "claude-code", "--event", "UserPromptSubmit"], PROMPT,
                          data_dir=tmp_path / "baseline", url=fake_ingress.url, extra_env=DEFAULT_BUDGET)
        assert proc.returncode == 0
        walls.append(wall)
    return sorted(walls)[1]


def test_server_down_exits_zero_fast_and_spools(tmp_path, hook, fake_ingress):
    base = baseline_wall(tmp_path, hook, fake_ingress)
    proc, wall = hook(["--agent", "claude-code", "--event", "UserPromptSubmit"], PROMPT,
                          data_dir=tmp_path, url="http://127.0.0.1:9", extra_env=DEFAULT_BUDGET)
    assert proc.returncode == 0 and proc.stdout == b""
    assert wall < base + 0.2, (wall, base)
    [entry] = spooled(tmp_path)
    assert entry["agent"] == "claude-code" and entry["p"]["prompt"] == "add pagination"
    assert entry["k"].startswith("claude-code:")


def test_hanging_server_costs_at_most_200ms(tmp_path, hanging_server, hook, fake_ingress):
    base = baseline_wall(tmp_path, hook, fake_ingress)
    walls = []
    for _ in range(3):
        proc, wall = hook(["--agent", "claude-code", "--event", "UserPromptSubmit"], PROMPT,
                              data_dir=tmp_path, url=hanging_server.url, extra_env=DEFAULT_BUDGET)
        assert proc.returncode == 0
        walls.append(wall)
    # The client's deadline is 150 ms from its start: a hung server may cost at most 200 ms
    # over the same hook against a server that answers at once (the baseline).
    assert sorted(walls)[1] < base + 0.2 and max(walls) < base + 0.5, (walls, base)
    assert len(spooled(tmp_path)) == 3
    start = {**PROMPT, "hook_event_name": "SessionStart"}
    proc, wall = hook(["--agent", "claude-code", "--event", "SessionStart"], start,
                          data_dir=tmp_path, url=hanging_server.url, extra_env=DEFAULT_BUDGET)
    assert proc.returncode == 0 and proc.stdout == b"" and wall < base + 0.2, (wall, base)


def test_garbage_stdin_still_exits_zero(tmp_path, hook):
    for data in (b"not json", b"", b"\xff\xfe", b"[1,2]"):
        proc, _ = hook(["--agent", "claude-code"], data, data_dir=tmp_path, url="http://127.0.0.1:9")
        assert proc.returncode == 0
    assert spooled(tmp_path) == []


def test_delivered_event_leaves_the_spool_and_carries_its_key(tmp_path, fake_ingress, hook):
    proc, _ = hook(["--agent", "claude-code", "--event", "UserPromptSubmit"], PROMPT,
                       data_dir=tmp_path, url=fake_ingress.url, cwd=tmp_path)
    assert proc.returncode == 0
    [req] = fake_ingress.hook_requests()
    assert "agent=claude-code" in req["path"] and "event=UserPromptSubmit" in req["path"]
    assert req["headers"]["Idempotency-Key"].startswith("claude-code:")
    assert json.loads(req["body"])["prompt"] == "add pagination"
    assert spooled(tmp_path) == []
    assert (tmp_path / "spool" / "hooks.jsonl").stat().st_size == 0


def test_spooled_events_are_drained_once_the_server_is_back(tmp_path, fake_ingress, hook):
    for i in range(3):
        hook(["--agent", "claude-code"], {**PROMPT, "prompt": f"p{i}"}, data_dir=tmp_path,
                 url="http://127.0.0.1:9")
    keys = {e["k"] for e in spooled(tmp_path)}
    assert len(keys) == 3
    time.sleep(2.1)  # older than DRAIN_MIN_AGE_S: they belong to no running hook any more
    hook(["--agent", "claude-code"], {**PROMPT, "prompt": "p3"}, data_dir=tmp_path, url=fake_ingress.url)
    sent = [r["headers"]["Idempotency-Key"] for r in fake_ingress.hook_requests()]
    assert keys <= set(sent) and len(sent) == 4
    assert spooled(tmp_path) == []


def test_4xx_drops_the_entry_but_429_and_5xx_keep_it(tmp_path, hook, ingress_factory):
    for status, kept in ((400, 0), (429, 1), (503, 1)):
        d = tmp_path / str(status)
        with ingress_factory(status=status) as f:
            hook(["--agent", "claude-code"], PROMPT, data_dir=d, url=f.url)
        assert len(spooled(d)) == kept, status


@pytest.mark.parametrize("agent,expect", [
    ("claude-code", {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "CTX"}}),
    ("gemini-cli", {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "CTX"}}),
    ("codex", {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "CTX"}}),
    ("cursor", {"additional_context": "CTX"}),
])
def test_session_start_prints_context_in_the_clients_format(tmp_path, agent, expect, hook, ingress_factory):
    start = {**PROMPT, "hook_event_name": "SessionStart", "source": "startup"}
    event = "sessionStart" if agent == "cursor" else "SessionStart"
    with ingress_factory(context="CTX") as f:
        proc, _ = hook(["--agent", agent, "--event", event], start, data_dir=tmp_path, url=f.url)
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == expect


def test_session_start_without_context_prints_nothing_and_copilot_never(tmp_path, hook, ingress_factory):
    start = {**PROMPT, "hook_event_name": "SessionStart"}
    with ingress_factory(context="") as f:
        proc, _ = hook(["--agent", "claude-code", "--event", "SessionStart"], start, data_dir=tmp_path, url=f.url)
    assert proc.stdout == b""
    with ingress_factory(context="CTX") as f:
        proc, _ = hook(["--agent", "copilot-cli", "--event", "sessionStart"], start, data_dir=tmp_path, url=f.url)
        assert not any("context" in r["path"] for r in f.requests)
    assert proc.stdout == b""


def test_format_context_is_valid_json_and_generic_is_text(hook):
    assert json.loads(format_context("claude-code", 'a "q"'))["hookSpecificOutput"]["additionalContext"] == 'a "q"'
    assert format_context("generic", "plain") == "plain"


def test_session_end_hands_off_to_a_detached_drain(tmp_path, fake_ingress, hook):
    base = baseline_wall(tmp_path, hook, fake_ingress)
    fake_ingress.requests.clear()
    end = {**PROMPT, "hook_event_name": "SessionEnd", "reason": "exit"}
    proc, wall = hook(["--agent", "claude-code", "--event", "SessionEnd"], end, data_dir=tmp_path,
                          url=fake_ingress.url, extra_env=DEFAULT_BUDGET)
    assert proc.returncode == 0 and wall < base + 0.2, (wall, base)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not fake_ingress.hook_requests():
        time.sleep(0.05)
    [req] = fake_ingress.hook_requests()
    assert "event=SessionEnd" in req["path"]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and spooled(tmp_path):
        time.sleep(0.05)
    assert spooled(tmp_path) == []


def test_config_toml_supplies_url_and_token(tmp_path, fake_ingress, hook):
    (tmp_path / "config.toml").write_text(f'ingress_url = "{fake_ingress.url}"\n[auth]\ntoken = "tok"\n')
    proc, _ = hook(["--agent", "claude-code"], PROMPT, data_dir=tmp_path, url="")
    [req] = fake_ingress.hook_requests()
    assert req["headers"]["Authorization"] == "Bearer tok"


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared fixtures absent")
def test_every_fixture_is_sent_verbatim_within_caps(tmp_path, fake_ingress, hook):
    files = sorted(p for p in FIXTURES.glob("*/*.json") if not p.name.startswith("_"))
    for path in files:
        agent = {"gemini-cli": "gemini-cli"}.get(path.parent.name, path.parent.name)
        proc, _ = hook(["--agent", agent], path.read_bytes(), data_dir=tmp_path, url=fake_ingress.url)
        assert proc.returncode == 0
    assert len(fake_ingress.hook_requests()) >= len(files)


def test_lone_surrogates_become_replacement_chars_and_the_event_is_delivered(tmp_path, fake_ingress, hook):
    raw = b'{"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": "x\\ud800y", "k\\udc00": 1}'
    down, _ = hook(["--agent", "claude-code"], raw, data_dir=tmp_path / "a", url="http://127.0.0.1:9")
    assert down.returncode == 0, down.stderr
    [entry] = spooled(tmp_path / "a")  # kept for later, not dropped
    assert entry["p"]["prompt"] == "x\ufffdy" and "k\ufffd" in entry["p"]
    up, _ = hook(["--agent", "claude-code"], raw, data_dir=tmp_path / "b", url=fake_ingress.url, cwd=tmp_path)
    assert up.returncode == 0
    [req] = fake_ingress.hook_requests()
    assert json.loads(req["body"])["prompt"] == "x\ufffdy"


def test_identity_travels_with_the_event_and_capture_rules_drop_in_the_client(tmp_path, fake_ingress, hook):
    from urllib.parse import parse_qs, urlsplit

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text('[remote "origin"]\n\turl = git@github.com:acme/repo.git\n')
    (repo / "sub").mkdir()
    prompt = {**PROMPT, "cwd": str(repo / "sub")}
    proc, _ = hook(["--agent", "claude-code", "--event", "UserPromptSubmit"], prompt, data_dir=tmp_path / "c",
                   url=fake_ingress.url)
    [req] = fake_ingress.hook_requests()
    q = {k: v[0] for k, v in parse_qs(urlsplit(req["path"]).query).items()}
    assert (q["project"], q["root"], q["origin"]) == ("repo", str(repo), "github.com/acme/repo")
    assert "named" not in q and float(q["ts"]) > 0

    (repo / ".aimem.toml").write_text('project = "named"\nexclude = ["secrets/**"]\n')
    read = {**PROMPT, "cwd": str(repo), "hook_event_name": "PreToolUse", "tool_name": "Read",
            "tool_input": {"file_path": str(repo / "secrets" / "k.txt")}}
    patch = {**PROMPT, "cwd": str(repo), "hook_event_name": "PreToolUse", "tool_name": "apply_patch",
             "tool_input": {"input": "*** Begin Patch\n*** Update File: secrets/k.txt\n@@\n-a\n+b\n"}}
    for payload in (read, patch):
        hook(["--agent", "claude-code", "--event", "PreToolUse"], payload, data_dir=tmp_path / "c",
             url=fake_ingress.url)
    assert len(fake_ingress.hook_requests()) == 1 and spooled(tmp_path / "c") == []
    hook(["--agent", "claude-code", "--event", "UserPromptSubmit"], {**PROMPT, "cwd": str(repo)},
         data_dir=tmp_path / "c", url=fake_ingress.url)
    q = parse_qs(urlsplit(fake_ingress.hook_requests()[-1]["path"]).query)
    assert q["project"] == ["named"] and q["named"] == ["1"]

    (repo / ".aimem.toml").write_text("capture = false\n")
    before = len(fake_ingress.requests)
    start = {**PROMPT, "cwd": str(repo), "hook_event_name": "SessionStart"}
    proc, _ = hook(["--agent", "claude-code", "--event", "SessionStart"], start, data_dir=tmp_path / "c",
                   url=fake_ingress.url)
    assert proc.stdout == b"" and len(fake_ingress.requests) == before
    assert not (tmp_path / "c" / "spool" / "last-session.claude-code.json").exists()


def test_token_order_env_installed_copy_config_then_the_servers_file(tmp_path):
    from aimem_cli.hookconfig import client_config

    def token(env: dict) -> str | None:
        return client_config(env, tmp_path)["token"]

    auth = tmp_path / "auth"
    auth.mkdir()
    assert token({}) is None
    (auth / "token").write_text("generated-by-up\n")  # this is also the server's data dir
    assert token({}) == "generated-by-up"
    (tmp_path / "config.toml").write_text('[auth]\ntoken = "from-config"\n')
    assert token({}) == "from-config"
    (auth / "client-token").write_text("aim_installed-key\n")  # `install-hooks --api-key`
    assert token({}) == "aim_installed-key"
    assert token({"AIMEM_AUTH__TOKEN": "from-env"}) == "from-env"


def test_refused_events_keep_their_reason_and_hook_status_counts_them(tmp_path, hook, ingress_factory):
    """401/403 keep the event with the reason noted; 410 (purged) drops it for good."""
    import os
    import subprocess
    import sys

    with ingress_factory(status=410) as f:
        hook(["--agent", "claude-code"], PROMPT, data_dir=tmp_path / "gone", url=f.url)
    assert spooled(tmp_path / "gone") == []
    for status in (401, 403, 401):  # (a slow hook may re-send an older entry: it gets the same kind of answer)
        with ingress_factory(status=status) as f:
            hook(["--agent", "claude-code"], PROMPT, data_dir=tmp_path, url=f.url)
    held = [e["refused"]["status"] for e in spooled(tmp_path)]
    assert len(held) == 3 and set(held) <= {401, 403} and held[-1] == 401
    hook(["--agent", "claude-code"], PROMPT, data_dir=tmp_path, url="http://127.0.0.1:9")  # down: no answer
    info = Spool(tmp_path / "spool").status()
    assert info["pending"] == 4 and info["oldest_age_s"] >= 0
    names = {401: "unauthorized (401: the key is unknown or revoked)", 403: "forbidden (403: no write grant)"}
    expect = {"not sent yet": 1}
    for status in held:
        expect[names[status]] = expect.get(names[status], 0) + 1
    assert info["by_reason"] == expect
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")} | {"AIMEM_DATA_DIR": str(tmp_path)}
    aimem = str(Path(sys.executable).with_name("aimem"))
    out = subprocess.run([aimem, "hook", "status", "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["pending"] == 4 and doc["path"] == str(tmp_path / "spool" / "hooks.jsonl")
    assert doc["by_reason"] == expect
    text = subprocess.run([aimem, "hook", "status"], capture_output=True, text=True, env=env, timeout=60).stdout
    assert "pending: 4 event(s)" in text and "unauthorized (401" in text and "refuses this client's credential" in text
    doctor = subprocess.run([aimem, "doctor", "--json"], capture_output=True, text=True, timeout=120,
                            env=env | {"AIMEM_PORT_BASE": "9", "AIMEM_BUS__NATS_URL": "nats://127.0.0.1:9"})
    spool_check = next(c for c in json.loads(doctor.stdout)["checks"] if c["check"] == "hook-spool")
    assert spool_check["ok"] is False and "unauthorized (401" in spool_check["detail"] and doctor.returncode == 1


def test_a_child_of_aimem_run_names_its_run_on_every_call(tmp_path, fake_ingress, hook):
    run_id = "0123456789abcdef0123456789abcdef"
    for env in ({"AIMEM_RUN_ID": run_id}, {"AIMEM_RUN_ID": "../not-a-run"}, {}):
        proc, _ = hook(["--agent", "claude-code", "--event", "UserPromptSubmit"], PROMPT, data_dir=tmp_path,
                       url=fake_ingress.url, cwd=tmp_path, extra_env=env)
        assert proc.returncode == 0
    paths = [r["path"] for r in fake_ingress.hook_requests()]
    assert len(paths) == 3 and f"run_id={run_id}" in paths[0]
    assert "run_id" not in paths[1] and "run_id" not in paths[2]  # a malformed id is not sent


def test_an_event_from_a_gone_directory_keeps_the_place_its_session_began_in(tmp_path, fake_ingress, hook):
    """A checkout renamed under a running agent (its `cwd` no longer exists) below an ancestor
    marker: resolved afresh the gone directory would be named by the marker above it; the
    client sends the repository its session began in (root and repository id), so the server
    follows the id to the repository's project."""
    from urllib.parse import parse_qs, urlsplit

    home = tmp_path / "home"
    repo = home / "rb"
    (repo / ".git").mkdir(parents=True)
    (home / ".aimem.toml").write_text('project = "home"\nexclude = ["*.pem"]\n')
    data = tmp_path / "c"

    def sent(payload: dict, event: str) -> dict:
        hook(["--agent", "claude-code", "--event", event], {**payload, "hook_event_name": event}, data_dir=data,
             url=fake_ingress.url)
        return {k: v[0] for k, v in parse_qs(urlsplit(fake_ingress.hook_requests()[-1]["path"]).query).items()}

    start = sent({**PROMPT, "session_id": "s-gone", "cwd": str(repo), "source": "startup"}, "SessionStart")
    rid = (repo / ".git" / "aimem-id").read_text().strip()
    assert (start["project"], start["root"], start["repo_id"]) == ("rb", str(repo), rid)
    repo.rename(home / "rb-renamed")
    later = sent({**PROMPT, "session_id": "s-gone", "cwd": str(repo)}, "UserPromptSubmit")
    assert (later["project"], later["root"], later["repo_id"]) == ("rb", str(repo), rid) and "named" not in later
    other = sent({**PROMPT, "session_id": "s-unknown", "cwd": str(repo)}, "UserPromptSubmit")
    assert other["project"] == "home"  # a session this client never saw start: resolved as before
    before = len(fake_ingress.hook_requests())
    sent({**PROMPT, "session_id": "s-gone", "cwd": str(repo), "hook_event_name": "PreToolUse",
          "tool_name": "Read", "tool_input": {"file_path": str(repo / "k.pem")}}, "PreToolUse")
    assert len(fake_ingress.hook_requests()) == before  # the marker's exclude still applies


def test_antigravity_only_the_first_invocation_is_a_session_start(tmp_path, hook, ingress_factory):
    """Antigravity's ``PreInvocation`` fires before every model call: ``invocationNum = 0`` is
    sent as the session start and answered with ``injectSteps``; a later one is dropped before
    the spool or any request (none reaches ingress, nothing is spooled)."""
    first = {"conversationId": "c0ffee00-1111", "workspacePaths": [str(tmp_path)], "invocationNum": 0}
    with ingress_factory(context="CTX") as f:
        for num in (1, 7, None, "0", True):
            later = {**first, "invocationNum": num} if num is not None else {k: v for k, v in first.items()
                                                                             if k != "invocationNum"}
            proc, _ = hook(["--agent", "antigravity", "--event", "PreInvocation"], later, data_dir=tmp_path, url=f.url)
            assert proc.returncode == 0 and proc.stdout == b""
        assert f.hook_requests() == [] and spooled(tmp_path) == []
        assert not (tmp_path / "spool" / "hooks.jsonl").exists() or (tmp_path / "spool" / "hooks.jsonl").stat().st_size == 0
        proc, _ = hook(["--agent", "antigravity", "--event", "PreInvocation"], first, data_dir=tmp_path, url=f.url)
        [req] = f.hook_requests()
    assert "agent=antigravity" in req["path"] and json.loads(req["body"])["invocationNum"] == 0
    assert json.loads(proc.stdout) == {"injectSteps": [{"systemMessage": {"systemMessage": "CTX"}}]}
