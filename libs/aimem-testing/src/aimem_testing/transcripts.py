"""Generate a corpus of Claude Code and Codex transcripts (for import tests and ``bench/``).

Everything is made up here, in each client's line format (Claude Code
``~/.claude/projects/<escaped cwd>/<session>.jsonl`` message lines with ``uuid``,
``sessionId``, ``cwd``, ``message.content`` blocks; Codex ``rollout-*.jsonl`` with
``session_meta``, ``turn_context``, ``response_item``, ``event_msg`` and ``compacted``).
Every ``special_every``-th session of a kind carries one special case: a huge tool output,
a secret, an invalid line, a compaction record, a truncated last line; some Claude Code
sessions are resumed into a new file that repeats their lines (same uuids).

``make_corpus`` returns a ``Corpus`` with what an import must store: per session the
number of observations (one per prompt, tool result, end-of-turn message and compaction
summary), which sessions belong to a ``capture = false`` repository, how many invalid
lines and truncated files there are, and the secrets that must never be stored.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

SECRETS = (
    "ghp_" + "Zq8" * 12,  # GitHub token shape
    "AKIA" + "QX7RZ2LMK9WEHT4B",  # AWS access key id shape
    "sk-proj-" + "Tb3kF9xWq2LmZp7Rv5Ns" * 2,  # OpenAI project key shape
)
HUGE_OUTPUT_BYTES = 1_200_000
TOOLS = (("Bash", {"command": "pytest -q tests/test_{n}.py"}),
         ("Read", {"file_path": "{cwd}/src/module_{n}.py"}),
         ("Edit", {"file_path": "{cwd}/src/module_{n}.py", "old_string": "a = 1", "new_string": "a = 2"}))
WORDS = ("invoice pagination cursor retry backoff parser cache index migration schema token queue "
         "worker deploy helm compose metrics tracing search ranking handoff session").split()


@dataclass
class Corpus:
    """What was generated and what an import of it must produce."""

    home: Path
    repos: Path
    expected: dict[str, int] = field(default_factory=dict)  # session id -> observations
    capture_off: set[str] = field(default_factory=set)  # session ids in capture = false repos
    projects: dict[str, str] = field(default_factory=dict)  # session id -> project name
    malformed_lines: int = 0
    truncated_files: int = 0
    files: list[Path] = field(default_factory=list)
    lines: int = 0

    @property
    def sessions(self) -> int:
        return len(self.expected)


class _Clock:
    def __init__(self, start: datetime):
        self.t = start

    def tick(self, seconds: float = 3.0) -> str:
        self.t += timedelta(seconds=seconds)
        return self.t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def make_corpus(root: Path, *, claude: int = 120, codex: int = 100, seed: int = 7,
                special_every: int = 9, turns: tuple[int, int] = (1, 4)) -> Corpus:
    """Write ``claude`` Claude Code and ``codex`` Codex sessions under ``root``; return the ``Corpus``.

    ``root/home`` holds the clients' folders, ``root/repos/<project>`` the working
    directories (real folders, one of them with ``.aimem.toml`` ``capture = false``).
    """
    rng = random.Random(seed)
    corpus = Corpus(home=root / "home", repos=root / "repos")
    names = ["acme-api", "billing-svc", "web-ui", "infra", "secret-lab"]
    for name in names:
        (corpus.repos / name).mkdir(parents=True, exist_ok=True)
    (corpus.repos / "secret-lab" / ".aimem.toml").write_text("capture = false\n")
    clock = _Clock(datetime(2026, 3, 1, 9, 0, tzinfo=UTC))
    claude_files: list[tuple[Path, str, list[str]]] = []
    for i in range(claude):
        cwd = str(corpus.repos / names[i % len(names)])
        path, sid, lines = _claude_session(corpus, rng, clock, cwd, i, special_every, turns)
        claude_files.append((path, sid, lines))
    plain = [f for i, f in enumerate(claude_files) if i % special_every >= 6]  # no special case
    for j, (path, sid, lines) in enumerate(plain[: max(1, claude // 20)]):
        _claude_resume(corpus, rng, clock, path, sid, lines, j)
    for i in range(codex):
        cwd = str(corpus.repos / names[(i + 2) % len(names)])
        _codex_session(corpus, rng, clock, cwd, i, special_every, turns)
    return corpus


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _register(corpus: Corpus, sid: str, cwd: str, count: int) -> None:
    name = Path(cwd).name
    corpus.projects[sid] = name
    if name == "secret-lab":
        corpus.capture_off.add(sid)
    corpus.expected[sid] = corpus.expected.get(sid, 0) + count


def _write(path: Path, lines: list[str], *, truncate_last: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(line + "\n" for line in lines)
    if truncate_last:
        text = text.rstrip("\n")
        text = text[: len(text) - len(lines[-1]) // 2]
    path.write_text(text, encoding="utf-8")


# -- Claude Code ----------------------------------------------------------------------------


def claude_turn(sid: str, cwd: str, clock: _Clock, rng: random.Random, n: int, *,
                tool_output: str | None = None, prompt_extra: str = "", tools: int = 1) -> list[str]:
    """Lines of one Claude Code turn: prompt, ``tools`` tool calls with results, final text.

    Stores as ``2 + tools`` observations (prompt, each tool result, the end-of-turn text).
    """
    common = {"isSidechain": False, "userType": "external", "entrypoint": "cli", "cwd": cwd,
              "sessionId": sid, "version": "2.1.210", "gitBranch": "main"}
    out: list[dict] = []
    parent = None

    def add(obj: dict) -> None:
        nonlocal parent
        obj = {"parentUuid": parent, **common, **obj, "uuid": str(uuid.UUID(int=rng.getrandbits(128))),
               "timestamp": clock.tick()}
        parent = obj["uuid"]
        out.append(obj)

    add({"type": "user", "message": {"role": "user", "content": f"Please fix the {_words(rng, 4)} in "
                                                                f"module {n}. {prompt_extra}".strip()}})
    add({"type": "assistant", "message": {"model": "claude-sonnet-4-5", "role": "assistant", "type": "message",
                                          "content": [{"type": "text", "text": "Looking at it first."}],
                                          "stop_reason": None}})
    for t in range(tools):
        name, args = TOOLS[(n + t) % len(TOOLS)]
        args = {k: v.format(n=n, cwd=cwd) for k, v in args.items()}
        tool_id = f"toolu_{rng.getrandbits(64):016x}"
        add({"type": "assistant", "message": {"model": "claude-sonnet-4-5", "role": "assistant",
                                              "content": [{"type": "tool_use", "id": tool_id, "name": name,
                                                           "input": args}], "stop_reason": "tool_use"}})
        result = tool_output if (tool_output is not None and t == 0) else f"ok: {_words(rng, 6)}"
        add({"type": "user", "message": {"role": "user", "content": [
            {"tool_use_id": tool_id, "type": "tool_result", "content": result}]}})
    add({"type": "assistant", "message": {"model": "claude-sonnet-4-5", "role": "assistant",
                                          "content": [{"type": "text", "text": f"Done: {_words(rng, 8)}."}],
                                          "stop_reason": "end_turn"}})
    add({"type": "system", "subtype": "turn_duration", "durationMs": 1200})
    return [json.dumps(o) for o in out]


def _claude_session(corpus: Corpus, rng: random.Random, clock: _Clock, cwd: str, i: int, every: int,
                    turns: tuple[int, int]) -> tuple[Path, str, list[str]]:
    sid = str(uuid.UUID(int=rng.getrandbits(128)))
    special = i % every if i % every < 6 else None
    path = corpus.home / ".claude" / "projects" / cwd.replace("/", "-") / f"{sid}.jsonl"
    lines = [json.dumps({"type": "permission-mode", "permissionMode": "default", "sessionId": sid})]
    count = 0
    for t in range(rng.randint(*turns)):
        extra = f"The token is {SECRETS[i % len(SECRETS)]} keep it" if special == 1 and t == 0 else ""
        output = "x" * HUGE_OUTPUT_BYTES if special == 0 and t == 0 else None
        tools = rng.randint(1, 3)
        lines += claude_turn(sid, cwd, clock, rng, i * 10 + t, tool_output=output, prompt_extra=extra, tools=tools)
        count += 2 + tools
    if special == 2:  # an invalid line in the middle
        lines.insert(len(lines) // 2, '{"type": "user", "message": {oops not json')
        corpus.malformed_lines += 1
    if special == 3:  # compaction: boundary + summary
        lines.append(json.dumps({"parentUuid": None, "type": "system", "subtype": "compact_boundary",
                                 "sessionId": sid, "cwd": cwd, "uuid": str(uuid.uuid4()), "timestamp": clock.tick(),
                                 "compactMetadata": {"trigger": "auto", "preTokens": 150000}}))
        lines.append(json.dumps({"parentUuid": None, "type": "user", "isCompactSummary": True, "sessionId": sid,
                                 "cwd": cwd, "uuid": str(uuid.uuid4()), "timestamp": clock.tick(),
                                 "message": {"role": "user", "content": f"Summary: {_words(rng, 12)}"}}))
        count += 1
    truncated = special == 4
    if truncated:  # a cut last line: a prompt of a turn that never finished
        lines.append(claude_turn(sid, cwd, clock, rng, 999)[0])
        corpus.truncated_files += 1
    _write(path, lines, truncate_last=truncated)
    _register(corpus, sid, cwd, count)
    corpus.files.append(path)
    corpus.lines += len(lines)
    return path, sid, lines


def _claude_resume(corpus: Corpus, rng: random.Random, clock: _Clock, original: Path, old_sid: str,
                   old_lines: list[str], j: int) -> None:
    """A resumed session: a new file repeating the old lines (same uuids), then new turns."""
    sid = str(uuid.UUID(int=rng.getrandbits(128)))
    cwd = json.loads(next(ln for ln in old_lines if '"cwd"' in ln))["cwd"]
    copied = [ln for ln in old_lines if ln.startswith("{") and _valid(ln)]
    new = claude_turn(sid, cwd, clock, rng, 5000 + j, tools=1)
    path = original.with_name(f"{sid}.jsonl")
    _write(path, copied + new)
    _register(corpus, sid, cwd, 3)
    corpus.files.append(path)
    corpus.lines += len(copied) + len(new)


def _valid(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


# -- Codex ----------------------------------------------------------------------------------


def codex_turn(cwd: str, clock: _Clock, rng: random.Random, n: int, *, tool_output: str | None = None,
               prompt_extra: str = "", failing: bool = False) -> list[str]:
    """Lines of one Codex turn: prompt, one shell call with its output, task_complete (3 observations)."""
    turn_id = str(uuid.UUID(int=rng.getrandbits(128)))
    prompt = f"Run the {_words(rng, 3)} tests for case {n}. {prompt_extra}".strip()
    call_id = f"call_{rng.getrandbits(64):016x}"
    output = tool_output if tool_output is not None else f"PASS {_words(rng, 4)}"
    final = f"Finished: {_words(rng, 7)}."
    rows = [
        ("turn_context", {"turn_id": turn_id, "cwd": cwd, "model": "gpt-5-codex", "approval_policy": "on-request"}),
        ("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}),
        ("event_msg", {"type": "user_message", "message": prompt, "images": []}),
        ("response_item", {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA"}),
        ("response_item", {"type": "function_call", "name": "shell", "call_id": call_id,
                           "arguments": json.dumps({"command": ["bash", "-lc", f"pytest -q case_{n}"],
                                                    "workdir": cwd})}),
        ("response_item", {"type": "function_call_output", "call_id": call_id,
                           "output": json.dumps({"output": output,
                                                 "metadata": {"exit_code": 1 if failing else 0}})}),
        ("event_msg", {"type": "token_count", "info": None}),
        ("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": final}]}),
        ("event_msg", {"type": "agent_message", "message": final}),
        ("event_msg", {"type": "task_complete", "turn_id": turn_id, "last_agent_message": final}),
    ]
    return [json.dumps({"timestamp": clock.tick(0.5), "type": t, "payload": p}) for t, p in rows]


def _codex_session(corpus: Corpus, rng: random.Random, clock: _Clock, cwd: str, i: int, every: int,
                   turns: tuple[int, int]) -> None:
    sid = str(uuid.UUID(int=rng.getrandbits(128)))
    special = i % every if i % every < 6 else None
    start = clock.tick(60)
    day = clock.t.strftime("%Y/%m/%d")
    path = (corpus.home / ".codex" / "sessions" / day /
            f"rollout-{clock.t.strftime('%Y-%m-%dT%H-%M-%S')}-{sid}.jsonl")
    lines = [json.dumps({"timestamp": start, "type": "session_meta", "payload": {
        "id": sid, "timestamp": start, "cwd": cwd, "originator": "codex_cli_rs", "cli_version": "0.171.0",
        "source": "cli", "model_provider": "openai"}})]
    count = 0
    for t in range(rng.randint(*turns)):
        extra = f"use key {SECRETS[(i + 1) % len(SECRETS)]} here" if special == 1 and t == 0 else ""
        output = ("y" * HUGE_OUTPUT_BYTES) if special == 0 and t == 0 else None
        lines += codex_turn(cwd, clock, rng, i * 10 + t, tool_output=output, prompt_extra=extra,
                            failing=special == 5 and t == 0)
        count += 3
    if special == 2:
        lines.insert(2, "not json at all {")
        corpus.malformed_lines += 1
    if special == 3:
        lines.append(json.dumps({"timestamp": clock.tick(), "type": "compacted",
                                 "payload": {"message": f"Summary of the work: {_words(rng, 10)}"}}))
        count += 1
    truncated = special == 4
    if truncated:
        lines.append(codex_turn(cwd, clock, rng, 999)[2])  # a cut user_message
        corpus.truncated_files += 1
    _write(path, lines, truncate_last=truncated)
    _register(corpus, sid, cwd, count)
    corpus.files.append(path)
    corpus.lines += len(lines)
