"""The session page and the automatic handoff read like a colleague's notes (no LLM)."""

from __future__ import annotations

import json

from aimem_writer.session_page import digest, meaningful_line, next_step, relative, render_handoff, render_page

ROOT = "/home/dev/acme"
ROW = {"agent": "claude-code", "cwd": f"{ROOT}/api", "started_at": "2026-03-14T09:00:00Z"}


def obs(kind: str, title: str, body: str = "", tool: str | None = None, cwd: str = f"{ROOT}/api") -> dict:
    return {"kind": kind, "agent": "claude-code", "title": title, "body": body, "tool_name": tool, "cwd": cwd}


def tool(kind: str, name: str, inp: dict | str, *, out: str | None = None, error: str | None = None,
         title: str | None = None) -> dict:
    raw = inp if isinstance(inp, str) else json.dumps(inp)
    body = f"tool: {name}\ninput: {raw}" + (f"\noutput: {out}" if out is not None else "")
    body += f"\nerror: {error}" if error is not None else ""
    summary = title or (inp.get("command") or inp.get("file_path") if isinstance(inp, dict) else inp)
    return obs(kind, f"{name}{' failed' if error is not None else ''}: {summary}", body, name)


SESSION = [
    obs("session-start", "Session start (new): Make retries idempotent", "Make retries idempotent"),
    tool("post-tool-use", "Bash", {"command": "pytest -q"}, error="Exit code 1\n....F\nE   AssertionError: retry sent twice"),
    tool("post-tool-use", "Write", {"file_path": f"{ROOT}/api/src/queue.py", "content": "x"}, out="{}"),
    tool("pre-tool-use", "Bash", {"command": "apply_patch <<'P'\n*** Begin Patch\n*** Update File: src/retry.py\n@@\n-a\n+b\n"
         "*** Add File: tests/test_retry.py\n+ok\n*** End Patch\nP"}, title="apply_patch src/retry.py"),
    tool("post-tool-use", "Read", {"file_path": f"{ROOT}/README.md"}, out="# acme"),
    obs("stop", "Stop: Retries carry a key now.", "Retries carry a key now. Next: run the load test against staging."),
]


def test_page_leads_with_the_task_and_keeps_paths_relative_to_the_repository():
    d = digest(SESSION, [ROOT, f"{ROOT}/api"])
    title, body = render_page("s1", ROW, d, "2026-03-14T10:00:00Z", 8, [ROOT, f"{ROOT}/api"], "exit")
    assert title == "Session s1: Make retries idempotent"
    assert body.index("## Task") < body.index("claude-code in `api`")  # the task comes first
    assert "- api/src/queue.py" in body and "- api/src/retry.py" in body and "- api/tests/test_retry.py" in body
    assert "## Files read\n\n- README.md" in body
    assert "`pytest -q` (exit 1): E AssertionError: retry sent twice" in body  # the line, not only the code
    assert "## Final message\n\nRetries carry a key now." in body
    assert ROOT not in body.replace("`api`", "")
    for empty in ("## Later prompts", "## Subagents", "## Compaction summary", "## Waiting on"):
        assert empty not in body  # no placeholder sections


def test_handoff_says_what_was_done_changed_failed_and_next():
    d = digest(SESSION, [ROOT])
    title, body = render_handoff("s1", ROW, d, "sessions/s1.md", [ROOT], "exit")
    assert title == "Continue: Make retries idempotent"
    assert "Task: Make retries idempotent" in body
    assert "Changed: api/src/queue.py, api/src/retry.py, api/tests/test_retry.py" in body
    assert "Failed: `pytest -q` (exit 1): E AssertionError: retry sent twice" in body
    assert "Where it stopped: Retries carry a key now." in body
    # the last failure was never followed by a passing run of the same command
    assert "Next: fix what failed last: `pytest -q`" in body and "Summary page: sessions/s1.md" in body


def test_next_step_rules():
    done = digest([obs("user-prompt", "Prompt: a", "a"), obs("stop", "Stop", "Done. Still need to update docs.")],
                  [ROOT])
    assert next_step(done) == "Still need to update docs."
    # the agent's own "Next:" label is not repeated by the handoff's
    for stop, want in (("Done. Next: add tests.", "add tests."), ("next steps - wire the CLI", "wire the CLI"),
                       ("Next step: ship it", "ship it"), ("The next release needs docs.", "The next release needs docs.")):
        d = digest([obs("user-prompt", "Prompt: a", "a"), obs("stop", "Stop", stop)], [ROOT])
        assert next_step(d) == want
    labelled = digest([obs("user-prompt", "Prompt: a", "a"), obs("stop", "Stop", "Done. Next: add tests.")], [ROOT])
    _, body = render_handoff("s2", ROW, labelled, "sessions/s2.md", [ROOT], "exit")
    assert "\nNext: add tests.\n" in body and "Next: Next" not in body
    cut = digest([obs("user-prompt", "Prompt: a", "migrate the db")], [ROOT])
    assert next_step(cut) == "the last request may be unfinished: migrate the db"
    waiting = digest([obs("permission-request", "Permission: Bash: rm -rf build",
                          'tool: Bash\ninput: {"command": "rm -rf build"}', "Bash")], [ROOT])
    assert next_step(waiting).startswith("the session stopped waiting for permission: Bash: rm -rf build")
    fixed = digest([tool("post-tool-use", "Bash", {"command": "make"}, out="error: x", title="make"),
                    tool("post-tool-use", "Bash", {"command": "make"}, out="built", title="make")], [ROOT])
    assert fixed.errors and fixed.last_failure is None  # a later success of the same command clears it


def test_meaningful_line_and_relative():
    assert meaningful_line("Exit code 2\nls: cannot access 'x': No such file or directory") == (
        "ls: cannot access 'x': No such file or directory", "2")
    assert meaningful_line("warning: slow\nall good") == ("all good", None)
    assert relative("src/a.py", [ROOT], f"{ROOT}/api") == "api/src/a.py"
    assert relative("/elsewhere/b.py", [ROOT], ROOT) == "/elsewhere/b.py"


def test_a_session_with_more_commands_than_the_page_lists_says_how_many_more():
    rows = [SESSION[0]] + [tool("post-tool-use", "Bash", {"command": f"make step-{i}"}, out="ok") for i in range(55)]
    rows += [tool("pre-tool-use", "Bash", {"command": "make step-60"}),  # started, never finished
             tool("post-tool-use", "Bash", {"command": "make step-3"}, out="ok")]  # a repeat is not "more"
    d = digest(rows, [ROOT])
    _, body = render_page("s1", ROW, d, "2026-03-14T10:00:00Z", len(rows), [ROOT], "exit")
    commands = body.split("## Commands\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert commands[0] == "- `make step-0`" and "- `make step-39`" in commands
    assert "- `make step-40`" not in commands
    assert commands[-1] == "- … and 16 more"  # step-40..54 and step-60
