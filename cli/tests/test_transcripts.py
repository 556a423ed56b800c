"""Transcript readers and the importer engine, without a server (a recording sender).

Shapes follow each client's own files (see each reader's docstring); the shared fixtures
are a real-shaped Claude Code transcript and Codex rollout.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from aimem_cli.importer import BATCH_BYTES, Importer, classify, files_under, project_identity
from aimem_cli.transcripts import claude_code, codex, copilot, gemini, opencode
from aimem_cli.transcripts.base import FileState, ReadStats

FIXTURES = next((p / "shared" / "fixtures" / "transcripts" for p in Path(__file__).resolve().parents[3:5]
                 if (p / "shared" / "fixtures" / "transcripts").is_dir()), None)


class Recorder:
    def __init__(self):
        self.batches: list[dict] = []
        self.sizes: list[int] = []

    def __call__(self, body: bytes) -> dict:
        self.sizes.append(len(body))
        batch = json.loads(body)
        self.batches.append(batch)
        return {"accepted": len(batch["events"]), "duplicates": 0, "rejected": []}

    @property
    def events(self) -> list[dict]:
        return [e for b in self.batches for e in b["events"]]


def kinds(events) -> list[str]:
    return [e.payload["hook_event_name"] for e in events]


@pytest.mark.skipif(FIXTURES is None, reason="shared fixtures absent")
def test_fixture_transcripts_map_to_the_shared_vocabulary():
    st, rs = FileState(), ReadStats()
    evs = list(claude_code.read(FIXTURES / "claude-code-session.sample.jsonl", st, rs))
    assert kinds(evs) == ["user-prompt", "post-tool-use", "post-tool-use", "stop", "post-compaction"]
    assert rs.lines == 14 and rs.malformed == 0 and st.offset == (FIXTURES / "claude-code-session.sample.jsonl").stat().st_size
    read = evs[1].payload
    assert read["tool_name"] == "Read" and read["tool_input"]["file_path"].endswith("paginate.ts")
    assert "export function paginate" in read["tool_response"]
    assert evs[3].payload["message"].startswith("Pagination is in place") and evs[3].payload["model"]
    assert evs[0].key == "claude-code:a0000000-0000-4000-8000-000000000002:0"
    st, rs = FileState(), ReadStats()
    evs = list(codex.read(FIXTURES / "codex-rollout.sample.jsonl", st, rs))
    assert kinds(evs) == ["user-prompt", "post-tool-use", "stop"]
    assert evs[1].payload["tool_input"]["command"][-1] == "npm test -- src/routes/invoices.test.ts"
    assert evs[1].payload["tool_response"].startswith("PASS")
    assert {e.session_id for e in evs} == {"019d036d-c7fa-72d2-b6fd-78878bfe34e4"}
    assert all(e.cwd == "/home/dev/projects/acme-api" for e in evs)


def _claude_line(uuid: str, kind: str, content, **extra) -> str:
    return json.dumps({"type": kind, "uuid": uuid, "sessionId": "s1", "cwd": "/w/app",
                       "timestamp": "2026-03-01T10:00:00Z", "message": {"role": kind, "content": content}, **extra})


def test_incremental_reads_resume_at_the_offset_with_pending_tool_calls(tmp_path):
    f = tmp_path / "s1.jsonl"
    head = (_claude_line("u1", "user", "run the tests") + "\n"
            + _claude_line("u2", "assistant", [{"type": "tool_use", "id": "t1", "name": "Bash",
                                                "input": {"command": "pytest"}}]) + "\n" + "{broken\n")
    result = _claude_line("u3", "user", [{"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                                          "content": "1 failed"}]) + "\n"
    f.write_text(head + result[:60])  # the client is still writing the last line
    st, rs = FileState(), ReadStats()
    assert kinds(claude_code.read(f, st, rs)) == ["user-prompt"]
    assert (rs.lines, rs.malformed, rs.truncated) == (3, 1, 1)  # the cut last line waits
    state = FileState.from_json(json.loads(json.dumps(st.to_json())))  # through the state file
    f.write_text(head + result)
    rs2 = ReadStats()
    evs = list(claude_code.read(f, state, rs2))
    assert kinds(evs) == ["post-tool-use"] and rs2.lines == 1
    assert evs[0].payload["tool_name"] == "Bash" and evs[0].payload["tool_response"] == "Error: 1 failed"
    assert list(claude_code.read(f, state, ReadStats())) == []


def test_other_clients_readers(tmp_path):
    g = tmp_path / ".gemini" / "tmp" / gemini.project_hash("/w/app") / "chats" / "session-1.json"
    g.parent.mkdir(parents=True)
    g.write_text(json.dumps({"sessionId": "g1", "projectHash": gemini.project_hash("/w/app"), "messages": [
        {"id": "m1", "timestamp": "2026-03-01T10:00:00Z", "type": "user", "content": "list files"},
        {"id": "m2", "timestamp": "2026-03-01T10:00:05Z", "type": "gemini", "content": "Here they are.",
         "toolCalls": [{"id": "c1", "name": "run_shell_command", "args": {"command": "ls"}, "status": "success",
                        "resultDisplay": "a.py"}]}]}))
    st = FileState()
    evs = list(gemini.read(g, st, ReadStats(), {gemini.project_hash("/w/app"): "/w/app"}))
    assert kinds(evs) == ["user-prompt", "post-tool-use", "stop"] and evs[0].cwd == "/w/app"
    assert list(gemini.read(g, st, ReadStats(), {})) == []  # unchanged file: nothing
    c = tmp_path / ".copilot" / "session-state" / "c1" / "events.jsonl"
    c.parent.mkdir(parents=True)
    c.write_text("\n".join(json.dumps(x) for x in [
        {"type": "session.start", "id": "e0", "data": {"sessionId": "c1", "context": {"cwd": "/w/app"}}},
        {"type": "user.message", "id": "e1", "timestamp": "2026-03-01T10:00:00Z", "data": {"content": "fix it"}},
        {"type": "tool.execution_start", "id": "e2", "data": {"toolCallId": "k", "toolName": "bash",
                                                              "arguments": {"command": "make"}}},
        {"type": "tool.execution_complete", "id": "e3", "data": {"toolCallId": "k", "success": False,
                                                                 "error": {"message": "make: *** failed"}}},
        {"type": "assistant.message", "id": "e4", "data": {"content": "Fixed."}}]) + "\n")
    evs = list(copilot.read(c, FileState(), ReadStats()))
    assert kinds(evs) == ["user-prompt", "post-tool-use", "stop"]
    assert evs[1].payload["tool_response"].startswith("Error: make") and evs[0].cwd == "/w/app"
    storage = tmp_path / ".local" / "share" / "opencode" / "storage"
    for rel, obj in {"session/p1/ses_1.json": {"id": "ses_1", "directory": "/w/app"},
                     "message/ses_1/msg_1.json": {"id": "msg_1", "role": "user", "time": {"created": 1772359200000}},
                     "part/msg_1/prt_1.json": {"type": "text", "text": "add a test"},
                     "message/ses_1/msg_2.json": {"id": "msg_2", "role": "assistant", "time": {"created": 1772359205000}},
                     "part/msg_2/prt_2.json": {"type": "tool", "tool": "bash", "callID": "x",
                                               "state": {"status": "completed", "input": {"command": "pytest"},
                                                         "output": "ok"}},
                     "part/msg_2/prt_3.json": {"type": "text", "text": "Added."}}.items():
        (storage / rel).parent.mkdir(parents=True, exist_ok=True)
        (storage / rel).write_text(json.dumps(obj))
    st = FileState()
    evs = list(opencode.read(storage / "session/p1/ses_1.json", st, ReadStats()))
    assert kinds(evs) == ["user-prompt", "post-tool-use", "stop"] and st.ctx["last"] == "msg_2"
    assert list(opencode.read(storage / "session/p1/ses_1.json", st, ReadStats())) == []
    assert {c for c, _ in files_under(tmp_path, "all")} == {"gemini-cli", "copilot-cli", "opencode"}
    assert classify(tmp_path / "x" / "rollout-2026-03-01T10-00-00-abc.jsonl") == "codex"


def test_capture_rules_filters_and_batches(tmp_path):
    repo, off = tmp_path / "app", tmp_path / "private"
    (repo / "sub").mkdir(parents=True)
    off.mkdir()
    (repo / ".aimem.toml").write_text('workspace = "team"\nproject = "shop"\n')
    (off / ".aimem.toml").write_text("capture = false\n")
    assert project_identity(str(repo / "sub")).project == "shop"
    assert project_identity("/elsewhere/My Repo!").project == "My-Repo"
    lines = []
    for i, cwd in enumerate((repo / "sub", off, repo)):
        for n in range(3):
            ts = f"2026-03-0{n + 1}T10:00:00Z"
            lines.append(json.dumps({"type": "user", "uuid": f"u{i}{n}", "sessionId": f"s{i}", "cwd": str(cwd),
                                     "timestamp": ts, "message": {"role": "user", "content": "x" * 9000}}))
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(lines) + "\n")
    rec = Recorder()
    stats = Importer(sender=rec, state_path=tmp_path / "state.json").run([("claude-code", f)])
    assert stats.sessions_skipped_capture == 1 and stats.events == 6 and stats.sessions == 2
    assert {(b["workspace"], b["project"]) for b in rec.batches} == {("team", "shop")}
    assert not any(str(off) in json.dumps(b) for b in rec.batches)  # never sent
    ends = [e for e in rec.events if e.get("end")]
    assert sorted(e["payload"]["session_id"] for e in ends) == ["s0", "s2"]
    assert ends[0]["payload"]["timestamp"] == "2026-03-03T10:00:00Z"  # the last event's time
    rec2 = Recorder()
    since = Importer(sender=rec2, since=datetime(2026, 3, 2, tzinfo=UTC)).run([("claude-code", f)])
    assert since.events == 4
    big = tmp_path / "big.jsonl"
    big.write_text("\n".join(json.dumps({"type": "user", "uuid": f"b{n}", "sessionId": "b", "cwd": str(repo),
                                          "message": {"role": "user", "content": f"{n} " + "y " * 9000}})
                             for n in range(400)) + "\n")
    rec3 = Recorder()
    Importer(sender=rec3).run([("claude-code", big)])
    assert len(rec3.batches) > 1 and max(rec3.sizes) <= BATCH_BYTES
    assert sum(len(b["events"]) for b in rec3.batches) == 401


def test_identity_is_the_hook_clients_root_origin_and_excludes(tmp_path):
    from aimem_cli.hookclient import event_identity
    from aimem_testing.gitrepo import make_repo

    repo = make_repo(tmp_path / "api", "git@github.com:acme/api.git")
    (repo / ".aimem.toml").write_text('exclude = ["secrets/**", "*.pem"]\n')
    sub = repo / "src" / "deep"
    sub.mkdir(parents=True)
    live = event_identity({"cwd": str(sub)}, {})  # what `aimem hook` sends from there
    assert live.as_query() == {"project": "api", "root": str(repo), "origin": "github.com/acme/api",
                               "repo_id": live.repo_id}

    def call(uid: str, path: str) -> list[str]:
        use = {"type": "assistant", "uuid": f"{uid}a", "sessionId": "s", "cwd": str(sub), "message": {
            "role": "assistant", "content": [{"type": "tool_use", "id": uid, "name": "Read",
                                              "input": {"file_path": path}}]}}
        res = {"type": "user", "uuid": f"{uid}r", "sessionId": "s", "cwd": str(sub), "message": {
            "role": "user", "content": [{"type": "tool_result", "tool_use_id": uid, "content": "body of " + path}]}}
        return [json.dumps(use), json.dumps(res)]

    lines = [json.dumps({"type": "user", "uuid": "p", "sessionId": "s", "cwd": str(sub),
                         "message": {"role": "user", "content": "look"}})]
    lines += call("t1", "main.py") + call("t2", str(repo / "secrets" / "db.txt")) + call("t3", "certs/x.pem")
    f = tmp_path / "s.jsonl"
    f.write_text("\n".join(lines) + "\n")
    rec = Recorder()
    stats = Importer(sender=rec).run([("claude-code", f)])
    assert stats.events == 2 and stats.events_excluded == 2
    assert [(b["workspace"], b["project"], b["root"], b["origin"], b["named"]) for b in rec.batches] == [
        ("default", "api", str(repo), "github.com/acme/api", False)]
    sent = json.dumps(rec.batches)
    assert "main.py" in sent and "secrets" not in sent and ".pem" not in sent
    assert Importer(sender=None, project="named").run([("claude-code", f)]).sessions_skipped_filter == 1


@pytest.mark.skipif(FIXTURES is None, reason="shared fixtures absent")
def test_session_end_transcript_tail_is_opt_in_and_bounded(tmp_path):
    from aimem_cli.hookclient import transcript_tail, tail_enabled

    assert not tail_enabled({}, tmp_path)
    assert tail_enabled({"AIMEM_HOOK_TRANSCRIPT_TAIL": "1"}, tmp_path)
    (tmp_path / "config.toml").write_text("[hooks]\ntranscript_tail = true\n")
    assert tail_enabled({}, tmp_path) and not tail_enabled({"AIMEM_HOOK_TRANSCRIPT_TAIL": "0"}, tmp_path)
    tail = transcript_tail("claude-code", str(FIXTURES / "claude-code-session.sample.jsonl"))
    assert tail.startswith("Final message:\nPagination is in place")
    assert "Last tool results:\n- Read: 1 export function paginate" in tail and "- Edit: The file" in tail
    codex_tail = transcript_tail("codex", str(FIXTURES / "codex-rollout.sample.jsonl"))
    assert "All 14 invoice tests pass" in codex_tail and "- shell: PASS" in codex_tail
    big = tmp_path / "big.jsonl"  # only the end is read: the session id comes from the first line
    lines = (FIXTURES / "codex-rollout.sample.jsonl").read_text().splitlines()
    big.write_text("\n".join([lines[0]] + [lines[1]] * 3000 + lines[2:]) + "\n")
    assert "All 14 invoice tests pass" in transcript_tail("codex", str(big))
    assert len(transcript_tail("claude-code", str(FIXTURES / "claude-code-session.sample.jsonl"))) < 6000
    assert transcript_tail("gemini-cli", str(big)) is None and transcript_tail("codex", "/nope") is None


def test_gemini_line_based_recordings_are_read(tmp_path):
    g = tmp_path / ".gemini" / "tmp" / gemini.project_hash("/w/app") / "chats" / "session-2.jsonl"
    g.parent.mkdir(parents=True)
    lines = [{"sessionId": "g2", "projectHash": gemini.project_hash("/w/app"), "startTime": "2026-03-01T10:00:00Z"},
             {"$set": {"messages": [{"id": "m0", "timestamp": "t0", "type": "user",
                                     "content": [{"text": "<session_context>\nThis is the Gemini CLI."}]}]}},
             {"id": "m1", "timestamp": "2026-03-01T10:00:01Z", "type": "user", "content": [{"text": "list the files"}]},
             {"$set": {"lastUpdated": "2026-03-01T10:00:02Z"}},
             {"id": "m2", "timestamp": "2026-03-01T10:00:03Z", "type": "gemini", "content": "Here they are.",
              "model": "gemini-2.5-pro"}]
    g.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert g in list(gemini.discover(tmp_path))
    st = FileState()
    evs = list(gemini.read(g, st, ReadStats(), {gemini.project_hash("/w/app"): "/w/app"}))
    assert [(e.payload["hook_event_name"], e.cwd) for e in evs] == [("user-prompt", "/w/app"), ("stop", "/w/app")]
    assert evs[0].payload["prompt"] == "list the files" and evs[1].key == "gemini-cli:g2:m2:stop"
    assert list(gemini.read(g, st, ReadStats(), {})) == []  # nothing new
