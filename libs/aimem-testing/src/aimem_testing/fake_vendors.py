"""Fake model endpoints for the real agent CLIs: each vendor's wire protocol, one scripted plan.

The only fake in the real-CLI tests. One ``FakeVendor`` HTTP server (a background thread
of the test process) answers, on loopback:

* Anthropic Messages API (``POST /v1/messages``, streamed SSE or JSON) for Claude Code
  (``ANTHROPIC_BASE_URL``), Pi (a ``models.json`` provider, ``api: anthropic-messages``),
  Copilot CLI (``COPILOT_PROVIDER_BASE_URL`` with ``COPILOT_PROVIDER_TYPE=anthropic``) and
  OpenCode (its ``anthropic`` provider with ``options.baseURL`` at ``<url>/v1``);
* OpenAI Responses API (``POST /v1/responses``, streamed SSE) for Codex CLI (a custom
  model provider whose ``base_url`` is ``<url>/v1``);
* Gemini API (``POST /v1beta/models/<m>:streamGenerateContent?alt=sse`` and
  ``:generateContent``) for Gemini CLI (``GOOGLE_GEMINI_BASE_URL``).

A *plan* is the same for every vendor: a list of ``Step``s the model takes in order
(``shell`` a command, ``write`` a file, call an ``mcp`` tool, then a final ``text``). Which
step comes next is read from the request itself (the number of tool results already in
the conversation), so the server keeps no per-session state and a retried request gets
the same answer. Requests without tools (titles, topic checks, next-speaker checks) get a
short plain answer, or a minimal JSON object when the request asks for JSON.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True, slots=True)
class Step:
    """One model turn: ``kind`` is ``shell`` (``arg`` = command), ``write`` (``arg`` = path,
    ``content``), ``mcp`` (``arg`` = tool name suffix, ``args``) or ``text`` (``arg`` = message)."""

    kind: str
    arg: str
    content: str = ""
    args: dict[str, Any] = field(default_factory=dict)


class FakeVendor:
    """A loopback HTTP server speaking the Anthropic, OpenAI Responses and Gemini APIs.

    ``plan`` is read on every request (set it before starting the CLI); ``requests`` keeps
    ``(path, body)`` of every request for assertions (bodies are JSON-decoded dicts).
    """

    def __init__(self, plan: list[Step] | None = None):
        self.plan: list[Step] = list(plan or [])
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        vendor = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # model listings and probes
                vendor._record(self.path, {})
                if "/models" in self.path:
                    self._json(200, {"data": [], "models": [], "object": "list"})
                else:
                    self._json(200, {})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size) if size else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                vendor._record(self.path, body)
                path = self.path.split("?", 1)[0]
                if path.endswith("/messages/count_tokens"):
                    self._json(200, {"input_tokens": 10})
                elif path.endswith("/messages"):
                    vendor._anthropic(self, body)
                elif path.endswith("/responses"):
                    vendor._responses(self, body)
                elif ":streamGenerateContent" in path or ":generateContent" in path:
                    vendor._gemini(self, body, stream=":streamGenerateContent" in path)
                elif ":countTokens" in path:
                    self._json(200, {"totalTokens": 10})
                else:
                    self._json(404, {"error": {"message": f"fake vendor: no route {path}"}})

            def _json(self, status: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def sse(self, events: list[tuple[str | None, Any]]) -> None:
                chunks = []
                for name, data in events:
                    head = f"event: {name}\n" if name else ""
                    chunks.append(f"{head}data: {json.dumps(data)}\n\n")
                payload = "".join(chunks).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-vendor", daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (no path)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeVendor:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _record(self, path: str, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append((path, body))

    def _step(self, done: int) -> Step:
        plan = self.plan or [Step("text", "Done.")]
        return plan[min(done, len(plan) - 1)]

    # --- Anthropic Messages API -------------------------------------------------------
    def _anthropic(self, h: Any, body: dict[str, Any]) -> None:
        msgs = body.get("messages") or []
        done = sum(1 for m in msgs if m.get("role") == "user" and isinstance(m.get("content"), list)
                   for c in m["content"] if isinstance(c, dict) and c.get("type") == "tool_result")
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        props = {t.get("name"): (t.get("input_schema") or {}).get("properties") or {}
                 for t in body.get("tools") or [] if isinstance(t, dict)}
        step = self._step(done) if tools else Step("text", _plain_answer(body))
        block: dict[str, Any]
        if step.kind == "shell" and "Bash" in tools:
            block = _tool_use("Bash", {"command": step.arg, "description": "run a command"})
        elif step.kind == "shell" and (name := _first(tools, ("bash", "_bash", "exec"))):  # Pi, OpenCode; OMP `_`; OpenClaw
            described = {"description": "run a command"} if "description" in props[name] else {}
            block = _tool_use(name, {"command": step.arg, **described})
        elif step.kind == "write" and "Write" in tools:
            block = _tool_use("Write", {"file_path": step.arg, "content": step.content})
        elif step.kind == "write" and (name := _first(tools, ("write", "_write"))):  # OpenCode names the file `filePath`
            key = "filePath" if "filePath" in props[name] else "path"
            block = _tool_use(name, {key: step.arg, "content": step.content})
        elif step.kind == "write" and "create" in tools:  # Copilot CLI (BYOK, provider type anthropic)
            block = _tool_use("create", {"path": step.arg, "file_text": step.content})
        elif step.kind == "mcp":
            name = next((t for t in tools if t and t.endswith(step.arg)), step.arg)
            block = _tool_use(name, step.args)
        else:
            block = {"type": "text", "text": step.arg if step.kind == "text" else "Done."}
        stop = "tool_use" if block["type"] == "tool_use" else "end_turn"
        mid = f"msg_{uuid.uuid4().hex[:24]}"
        model = body.get("model") or "claude-fake"
        usage = {"input_tokens": 10, "output_tokens": 5}
        if not body.get("stream"):
            h._json(200, {"id": mid, "type": "message", "role": "assistant", "model": model,
                          "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage})
            return
        start = dict(block, input={}) if block["type"] == "tool_use" else {"type": "text", "text": ""}
        delta = ({"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                 if block["type"] == "tool_use" else {"type": "text_delta", "text": block["text"]})
        h.sse([
            ("message_start", {"type": "message_start", "message": {
                "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 5}}),
            ("message_stop", {"type": "message_stop"}),
        ])

    # --- OpenAI Responses API ---------------------------------------------------------
    def _responses(self, h: Any, body: dict[str, Any]) -> None:
        items = body.get("input") or []
        done = sum(1 for it in items if isinstance(it, dict)
                   and it.get("type") in ("function_call_output", "custom_tool_call_output"))
        tools = {_tool_name(t): t for t in body.get("tools") or [] if isinstance(t, dict)}
        step = self._step(done) if tools else Step("text", _plain_answer(body))
        call_id = f"call_{uuid.uuid4().hex[:16]}"
        item: dict[str, Any]
        if step.kind == "shell" and (name := _first(tools, ("exec_command", "shell_command", "shell"))):
            args = {"cmd": step.arg} if name == "exec_command" else (
                {"command": step.arg} if name == "shell_command" else {"command": ["bash", "-lc", step.arg]})
            item = {"type": "function_call", "name": name, "arguments": json.dumps(args), "call_id": call_id}
        elif step.kind == "write" and (tools.keys() & {"apply_patch", "exec_command"}):
            patch = "*** Begin Patch\n*** Add File: " + step.arg + "\n" + "".join(
                f"+{line}\n" for line in step.content.splitlines()) + "*** End Patch\n"
            if "apply_patch" not in tools:  # Codex runs a shell `apply_patch` heredoc as its patch tool
                cmd = f"apply_patch <<'PATCH'\n{patch}PATCH\n"
                item = {"type": "function_call", "name": "exec_command", "arguments": json.dumps({"cmd": cmd}),
                        "call_id": call_id}
            elif tools["apply_patch"].get("type") == "custom":
                item = {"type": "custom_tool_call", "name": "apply_patch", "input": patch, "call_id": call_id}
            else:
                item = {"type": "function_call", "name": "apply_patch",
                        "arguments": json.dumps({"input": patch}), "call_id": call_id}
        else:
            text = step.arg if step.kind == "text" else "Done."
            item = {"type": "message", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}
        item = {"id": f"item_{uuid.uuid4().hex[:16]}", **item}
        if item["type"] != "message":
            item["status"] = "completed"
        rid = f"resp_{uuid.uuid4().hex[:16]}"
        base = {"id": rid, "object": "response", "model": body.get("model") or "gpt-fake", "output": []}
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
        events: list[tuple[str | None, Any]] = [
            ("response.created", {"type": "response.created", "response": {**base, "status": "in_progress"}}),
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                            "item": item}),
        ]
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(("response.output_text.delta", {"type": "response.output_text.delta", "item_id": item["id"],
                                                          "output_index": 0, "content_index": 0, "delta": text}))
        events += [
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": {
                **base, "status": "completed", "output": [item], "usage": usage}}),
        ]
        h.sse(events)

    # --- Gemini API -------------------------------------------------------------------
    def _gemini(self, h: Any, body: dict[str, Any], *, stream: bool) -> None:
        contents = body.get("contents") or []
        done = sum(1 for c in contents for p in c.get("parts") or []
                   if isinstance(p, dict) and "functionResponse" in p)
        decls = {d.get("name"): d for t in body.get("tools") or [] if isinstance(t, dict)
                 for d in t.get("functionDeclarations") or [] if isinstance(d, dict)}
        gen = body.get("generationConfig") or {}
        if gen.get("responseMimeType") == "application/json" or gen.get("responseJsonSchema") or gen.get(
                "responseSchema"):
            schema = gen.get("responseJsonSchema") or gen.get("responseSchema") or {}
            part: dict[str, Any] = {"text": json.dumps(_minimal(schema))}
        else:
            step = self._step(done) if decls else Step("text", "OK.")
            if step.kind == "shell" and "run_shell_command" in decls:
                part = {"functionCall": {"name": "run_shell_command",
                                         "args": {"command": step.arg, "description": "run a command"}}}
            elif step.kind == "write" and "write_file" in decls:
                part = {"functionCall": {"name": "write_file",
                                         "args": {"file_path": step.arg, "content": step.content}}}
            elif step.kind == "mcp" and (name := next((n for n in decls if n and n.endswith(step.arg)), None)):
                part = {"functionCall": {"name": name, "args": step.args}}
            else:
                part = {"text": step.arg if step.kind == "text" else "Done."}
        chunk = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP",
                                 "index": 0}],
                 "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
                 "modelVersion": "gemini-fake"}
        if stream:
            h.sse([(None, chunk)])
        else:
            h._json(200, chunk)


def _tool_use(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:20]}", "name": name, "input": args}


def _tool_name(tool: dict[str, Any]) -> str:
    return str(tool.get("name") or (tool.get("function") or {}).get("name") or tool.get("type") or "")


def _first(tools: dict[str, Any], names: tuple[str, ...]) -> str | None:
    return next((n for n in names if n in tools), None)


def _plain_answer(body: dict[str, Any]) -> str:
    """A short answer for tool-less side requests; JSON when the system prompt asks for it."""
    system = json.dumps(body.get("system") or body.get("instructions") or "")
    if re.search(r"(?i)json", system):
        return json.dumps({"isNewTopic": False, "title": None})
    return "OK."


def _minimal(schema: dict[str, Any]) -> Any:
    """A small instance of a JSON schema (Gemini's next-speaker check wants ``user``)."""
    kind = str(schema.get("type", "object")).lower()
    if schema.get("enum"):
        values = schema["enum"]
        return "user" if "user" in values else values[0]
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: ("user" if k == "next_speaker" else _minimal(v)) for k, v in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    return "ok"


__all__ = ["FakeVendor", "Step"]
