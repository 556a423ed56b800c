"""A test LLM server speaking the real wire protocols over HTTP: OpenAI, Anthropic, Gemini.

It runs in a background thread of the test process, so real service subprocesses reach it
through ``base_url`` with the real ``openai`` client. It serves ``POST /v1/chat/completions``
(incl. ``response_format={"type": "json_schema", ...}``), ``POST /v1/embeddings`` (float or
base64 encoding), ``POST /v1/rerank`` (the Cohere-shaped rerank endpoint that vLLM, Jina
and Infinity serve) and ``GET /v1/models``. Beside it, for the maintainer's other providers:

* Anthropic Messages (``POST /v1/messages``, non-streamed, as the ``anthropic`` SDK's
  ``messages.create`` sends it; base URL ``root_url``): the answer is a ``tool_use`` block of
  the requested tool (``"think"``: a ``thinking`` block first; ``"plain"``: a text block);
  errors in Anthropic's ``{"type": "error", "error": {...}}`` shape (``"529"`` = overloaded).
* Gemini (``POST /v1beta/models/<m>:generateContent``, as ``google-genai`` sends it; base URL
  ``root_url``): the answer is a JSON text part (``"think"``: a ``thought`` part first);
  errors in Google's ``{"error": {"code", "message", "status"}}`` shape.

The same knobs steer all three. ``answers`` callables always receive an OpenAI-shaped view of
the request (``messages`` = [system, user], ``response_format.json_schema`` {name, schema}),
plus ``protocol`` and ``raw`` (the body as sent). Gemini requests carry no schema name: the
answer is the registered one whose keys are the schema's properties (or the only one).

Behaviour per chat request, from ``script`` (consumed first) else ``mode``:

* ``"good"``: a JSON answer for the requested schema: ``answers[schema_name]`` (a dict, or a
  callable ``(request_json) -> dict``), else a minimal instance synthesised from the schema.
* ``"plain"``: plain prose (not JSON).
* ``"think"``: the good answer wrapped as ``<think>…</think>`` + fenced JSON.
* ``"malformed"``: JSON that does not match the schema (``{"unexpected": true}``).
* ``"429"`` / ``"500"`` / ``"503"``: an OpenAI-style error body with that status.
* ``"hang"``: wait ``hang_s`` seconds (or until ``stop()``) before answering ``good``.

Embeddings follow ``script`` when it is not empty, else ``embed_mode``; vectors are
``hash_embed`` bags of words (``embed_synonyms`` lets unrelated words share a vector).
Rerank follows ``rerank_mode`` ("good" | "500" | "hang"); a document's relevance is the share
of the query's words it holds, plus ``rerank_boost[word]`` for each boosted word it holds.

Usage::

    with FakeLLM() as llm:
        llm.mode = "429"
        ... AIMEM_LLM__BASE_URL=llm.url ...
        assert llm.chat_count == 1
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]


class FakeLLM:
    """A controllable OpenAI-compatible HTTP server (thread-safe knobs)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, embed_dim: int = 8):
        self.mode: str = "good"
        self.script: list[str] = []
        self.answers: dict[str, Answer] = {}
        self.embed_dim = embed_dim
        # Embeddings have their own knobs so an embedder can be down while chat works:
        # ``embed_mode`` "good" | "429"/"500"/"503" | "hang"; ``embed_synonyms`` maps a word
        # to another before hashing, so texts with no word in common can share a vector.
        self.embed_mode: str = "good"
        self.embed_synonyms: dict[str, str] = {}
        self.rerank_mode: str = "good"
        self.rerank_boost: dict[str, float] = {}
        self.hang_s = 60.0
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------
    @property
    def url(self) -> str:
        """Base URL for the ``openai`` client (``http://127.0.0.1:<port>/v1``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def root_url(self) -> str:
        """Base URL for the ``anthropic`` and ``google-genai`` clients (``http://127.0.0.1:<port>``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "FakeLLM":
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FakeLLM":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- inspection ------------------------------------------------------------------
    def chat_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if _is_chat(r["path"])]

    @property
    def chat_count(self) -> int:
        return len(self.chat_requests())

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.script.clear()
        self.mode = "good"

    # -- behaviour -------------------------------------------------------------------
    def _next_mode(self) -> str:
        with self._lock:
            if self.script:
                return self.script.pop(0)
        return self.mode

    def _record(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append({"path": path, "headers": headers, "body": body, "at": time.time()})

    def good_answer(self, req: dict[str, Any]) -> dict[str, Any]:
        """The JSON object a well-behaved model returns for ``req``'s schema."""
        rf = req.get("response_format") or {}
        js = rf.get("json_schema") or {}
        name = js.get("name", "")
        schema = js.get("schema") or {"type": "object"}
        if not name and self.answers:  # Gemini: no schema name on the wire
            props = set((schema.get("properties") or {}))
            for candidate in self.answers.values():
                out = candidate(req) if callable(candidate) else candidate
                if len(self.answers) == 1 or set(out) == props:
                    return out
        answer = self.answers.get(name)
        if callable(answer):
            return answer(req)
        if answer is not None:
            return answer
        return synthesize(schema)

    def _handler_class(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                return

            def _send(self, status: int, obj: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _error(self, status: int, message: str, etype: str) -> None:
                headers = {"retry-after": "0"} if status == 429 else None
                self._send(status, {"error": {"message": message, "type": etype, "param": None, "code": None}}, headers)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "test"}]})
                else:
                    self._error(404, "not found", "invalid_request_error")

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    req = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._error(400, "invalid JSON body", "invalid_request_error")
                    return
                fake._record(self.path, {k.lower(): v for k, v in self.headers.items()}, req)
                path = self.path.split("?", 1)[0].rstrip("/")
                if path.endswith("/messages"):
                    self._anthropic(req)
                elif path.endswith(":generateContent"):
                    self._gemini(req)
                elif self.path.rstrip("/").endswith("/embeddings"):
                    self._embeddings(req)
                elif self.path.rstrip("/").endswith("/chat/completions"):
                    self._chat(req)
                elif self.path.rstrip("/").endswith("/rerank"):
                    self._rerank(req)
                else:
                    self._error(404, f"unknown path {self.path}", "invalid_request_error")

            def _chat(self, req: dict[str, Any]) -> None:
                mode = fake._next_mode()
                if mode in {"429", "500", "502", "503"}:
                    status = int(mode)
                    self._error(status, f"fake {status}", "rate_limit_error" if status == 429 else "server_error")
                    return
                if mode == "hang":
                    fake._stop.wait(fake.hang_s)
                    mode = "good"
                if mode == "plain":
                    content = "Sure! Here is a summary of the session in prose, not JSON."
                elif mode == "malformed":
                    content = json.dumps({"unexpected": True})
                elif mode == "think":
                    content = (
                        "<think>The user wants JSON. Let me think {not json}.</think>\n```json\n"
                        + json.dumps(fake.good_answer(req))
                        + "\n```"
                    )
                else:
                    content = json.dumps(fake.good_answer(req))
                self._send(
                    200,
                    {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": req.get("model", "fake-model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content, "refusal": None},
                                "finish_reason": "stop",
                                "logprobs": None,
                            }
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                    },
                )

            def _wait_or_error(self, protocol: str) -> str | None:
                """Apply the next mode's failure/hang; return the content mode, or None if answered."""
                mode = fake._next_mode()
                if mode in {"429", "500", "502", "503", "529"}:
                    status = int(mode)
                    if protocol == "anthropic":
                        etype = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
                        headers = {"retry-after": "0"} if status == 429 else None
                        self._send(status, {"type": "error", "error": {"type": etype, "message": f"fake {status}"}},
                                   headers)
                    else:
                        gstatus = {429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}.get(status, "INTERNAL")
                        self._send(status, {"error": {"code": status, "message": f"fake {status}", "status": gstatus}})
                    return None
                if mode == "hang":
                    fake._stop.wait(fake.hang_s)
                    mode = "good"
                return mode

            def _anthropic(self, body: dict[str, Any]) -> None:
                tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
                choice = body.get("tool_choice") or {}
                tool = next((t for t in tools if t.get("name") == choice.get("name")), tools[0] if tools else None)
                system = body.get("system") or ""
                if isinstance(system, list):
                    system = "".join(b.get("text", "") for b in system if isinstance(b, dict))
                user = _text_of((body.get("messages") or [{}])[0].get("content"))
                view = {"model": body.get("model"), "protocol": "anthropic", "raw": body,
                        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                        "response_format": {"type": "json_schema", "json_schema": {
                            "name": (tool or {}).get("name", ""), "schema": (tool or {}).get("input_schema") or {}}}}
                mode = self._wait_or_error("anthropic")
                if mode is None:
                    return
                blocks: list[dict[str, Any]] = []
                if mode == "think":
                    blocks.append({"type": "thinking", "thinking": "The user wants the tool. {not json}",
                                   "signature": "fake-signature"})
                if mode == "plain" or tool is None:
                    blocks.append({"type": "text", "text": "Sure! Here is a summary in prose, not JSON."})
                else:
                    answer = {"unexpected": True} if mode == "malformed" else fake.good_answer(view)
                    blocks.append({"type": "tool_use", "id": f"toolu_{int(time.time() * 1e6):x}",
                                   "name": tool["name"], "input": answer})
                self._send(200, {"id": "msg_fake", "type": "message", "role": "assistant",
                                 "model": body.get("model", "claude-fake"), "content": blocks,
                                 "stop_reason": "tool_use" if blocks[-1]["type"] == "tool_use" else "end_turn",
                                 "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 10}})

            def _gemini(self, body: dict[str, Any]) -> None:
                gen = body.get("generationConfig") or {}
                schema = gen.get("responseJsonSchema") or gen.get("responseSchema") or {}
                system = _text_of(((body.get("systemInstruction") or {}).get("parts")))
                user = _text_of(((body.get("contents") or [{}])[0].get("parts")))
                view = {"model": self.path.split("/models/", 1)[-1].split(":", 1)[0], "protocol": "gemini",
                        "raw": body,
                        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                        "response_format": {"type": "json_schema", "json_schema": {"name": "", "schema": schema}}}
                mode = self._wait_or_error("gemini")
                if mode is None:
                    return
                parts: list[dict[str, Any]] = []
                if mode == "think":
                    parts.append({"text": "Let me think {not json}.", "thought": True})
                if mode == "plain":
                    parts.append({"text": "Sure! Here is a summary in prose, not JSON."})
                elif mode == "malformed":
                    parts.append({"text": json.dumps({"unexpected": True})})
                else:
                    parts.append({"text": json.dumps(fake.good_answer(view))})
                self._send(200, {"candidates": [{"content": {"role": "model", "parts": parts},
                                                 "finishReason": "STOP", "index": 0}],
                                 "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10,
                                                   "totalTokenCount": 20},
                                 "modelVersion": view["model"] or "gemini-fake"})

            def _rerank(self, req: dict[str, Any]) -> None:
                if fake.rerank_mode == "500":
                    self._error(500, "fake 500", "server_error")
                    return
                if fake.rerank_mode == "hang":
                    fake._stop.wait(fake.hang_s)
                q = set(re.findall(r"\w+", str(req.get("query", "")).lower()))
                results = []
                for i, doc in enumerate(req.get("documents") or []):
                    words = set(re.findall(r"\w+", str(doc).lower()))
                    rel = len(q & words) / max(len(q), 1) + sum(b for w, b in fake.rerank_boost.items() if w in words)
                    results.append({"index": i, "relevance_score": rel})
                results.sort(key=lambda x: -x["relevance_score"])
                top_n = int(req.get("top_n") or len(results))
                self._send(200, {"id": "rerank-fake", "model": req.get("model", "fake-rerank"),
                                 "results": results[:top_n]})

            def _embeddings(self, req: dict[str, Any]) -> None:
                mode = fake._next_mode() if fake.script else fake.embed_mode
                if mode in {"429", "500", "503"}:
                    self._error(int(mode), f"fake {mode}", "server_error")
                    return
                if mode == "hang":
                    fake._stop.wait(fake.hang_s)
                inputs = req.get("input")
                if isinstance(inputs, str):
                    inputs = [inputs]
                dim = int(req.get("dimensions") or fake.embed_dim)
                data = []
                for i, text in enumerate(inputs or []):
                    vec = hash_embed(str(text), dim, fake.embed_synonyms)
                    if req.get("encoding_format") == "base64":
                        emb: Any = base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode()
                    else:
                        emb = vec
                    data.append({"object": "embedding", "index": i, "embedding": emb})
                self._send(
                    200,
                    {"object": "list", "data": data, "model": req.get("model", "fake-embed"),
                     "usage": {"prompt_tokens": 1, "total_tokens": 1}},
                )

        return Handler


def _is_chat(path: str) -> bool:
    p = path.split("?", 1)[0].rstrip("/")
    return p.endswith("/chat/completions") or p.endswith("/messages") or p.endswith(":generateContent")


def _text_of(content: Any) -> str:
    """The text of an Anthropic content (str or blocks) or a Gemini ``parts`` list."""
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict))


def hash_embed(text: str, dim: int, synonyms: dict[str, str] | None = None) -> list[float]:
    """A deterministic bag-of-words vector (unit length) so similar texts are similar.

    ``synonyms`` maps a lower-case word to the word it is hashed as.
    """
    vec = [0.0] * dim
    for word in re.findall(r"\w+", text.lower()):
        word = (synonyms or {}).get(word, word)
        h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        vec[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
    norm = sum(v * v for v in vec) ** 0.5 or 1.0
    return [v / norm for v in vec]


def synthesize(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """Return a minimal instance of a JSON schema (objects with every required key)."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return synthesize(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema:
        return synthesize(schema["anyOf"][0], defs)
    if "enum" in schema:
        return schema["enum"][0]
    t = schema.get("type", "object")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if t == "object":
        props = schema.get("properties", {})
        return {k: synthesize(v, defs) for k, v in props.items()}
    if t == "array":
        return [synthesize(schema.get("items", {"type": "string"}), defs)] * max(1, schema.get("minItems", 1))
    if t == "string":
        return "x" * max(1, schema.get("minLength", 1))
    if t == "integer":
        return int(schema.get("minimum", 1))
    if t == "number":
        return float(schema.get("minimum", 1.0))
    if t == "boolean":
        return True
    return None
