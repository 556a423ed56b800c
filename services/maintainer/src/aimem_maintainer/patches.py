"""Auto-improve proposals as bounded patches, and the executable eval gate.

A proposal edits one page: a list of ``{find, replace}`` edits, each replacing the single
occurrence of ``find`` in the live body (a new page is one edit with an empty ``find``). One
review is bounded by ``[auto_improve]`` limits: pages it may touch
(``max_proposals_per_run``), edits over all its pages (``max_edits_per_proposal``) and changed
characters (removed + added, ``max_changed_chars``). A patch over a limit, or one that does
not apply exactly, is refused and kept as a rejected proposal with its reason.

The gate (``[auto_improve.eval]``) runs a project-supplied executable for proposals under
chosen prefixes (default ``_rules/`` and ``procedures/``): it gets the proposal as JSON on
stdin and answers JSON on stdout. It runs only in the maintainer, never on a hook path.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

log = logging.getLogger("aimem.maintainer.patches")

EVAL_OUTPUT_CAP = 64 * 1024  # bytes of the executable's stdout read; the rest is ignored
EVAL_STDERR_TAIL = 300  # characters of stderr quoted in a refusal


class PatchError(ValueError):
    """A patch that does not apply to the page it names (the message is the reason)."""


def apply_patch(base: str | None, edits: list[dict[str, str]]) -> str:
    """Return the body after ``edits`` (``[{find, replace}]``) applied to ``base``.

    ``base`` None means the page does not exist: exactly one edit with an empty ``find``
    whose ``replace`` is the new body. On an existing page every ``find`` must occur exactly
    once in the body as the previous edits left it.

    Raises:
        PatchError: no edits, an empty ``find`` on an existing page, a ``find`` that is
            missing or occurs more than once, or a patch that changes nothing.
    """
    if not edits:
        raise PatchError("no edits")
    if base is None:
        if len(edits) != 1 or edits[0].get("find"):
            raise PatchError("a new page is one edit with an empty find holding the whole body")
        body = edits[0].get("replace") or ""
        if not body.strip():
            raise PatchError("a new page needs a body")
        return body
    body = base
    for i, e in enumerate(edits):
        find, replace = e.get("find") or "", e.get("replace") or ""
        if not find:
            raise PatchError(f"edit {i + 1}: empty find on an existing page (patch it, do not rewrite it)")
        n = body.count(find)
        if n != 1:
            raise PatchError(f"edit {i + 1}: find text occurs {n} times in the page (must be exactly once)")
        body = body.replace(find, replace, 1)
    if body == base:
        raise PatchError("the patch changes nothing")
    return body


def changed_chars(edits: list[dict[str, str]]) -> int:
    """Characters removed plus characters added by ``edits``."""
    return sum(len(e.get("find") or "") + len(e.get("replace") or "") for e in edits)


class Budget:
    """What is left of one review's limits (pages, edits, changed characters)."""

    def __init__(self, cfg: Any) -> None:
        self.pages, self.edits, self.chars = cfg.max_proposals_per_run, cfg.max_edits_per_proposal, cfg.max_changed_chars

    def take(self, edits: list[dict[str, str]]) -> str | None:
        """Charge one page's patch; return the refusal reason instead when it does not fit."""
        n, c = len(edits), changed_chars(edits)
        if self.pages < 1:
            return "over max_proposals_per_run (pages per proposal)"
        if n > self.edits:
            return f"{n} edits over the {self.edits} left of max_edits_per_proposal"
        if c > self.chars:
            return f"{c} changed characters over the {self.chars} left of max_changed_chars"
        self.pages, self.edits, self.chars = self.pages - 1, self.edits - n, self.chars - c
        return None


def gated(cfg: Any, path: str) -> bool:
    """True when the eval gate is on and ``path`` is under one of its prefixes."""
    return bool(cfg.enabled) and any(path.startswith(p) for p in cfg.prefixes)


async def run_eval(cfg: Any, proposal: dict[str, Any]) -> dict[str, Any]:
    """Run the eval executable on one proposal; return ``{accept: bool, reason: str, ...}``.

    stdin: the proposal as JSON ``{workspace, project, session_id, path, title, before,
    after, patch, rationale, confidence}`` (``before`` null for a new page). stdout: JSON
    ``{"decision": "accept"|"reject", "reason"?: str, "score_before"?: number,
    "score_after"?: number}``. A proposal is accepted only when the decision is ``accept``
    and, when both scores are given, the score after is not lower than before (the eval did
    not get worse). A non-zero exit, a timeout (``timeout_s``, the process is killed),
    unreadable output or an unstartable command is a rejection, never an acceptance.
    """
    data = json.dumps(proposal, ensure_ascii=False).encode("utf-8")
    try:
        proc = await asyncio.create_subprocess_exec(
            *cfg.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
    except OSError as exc:
        return {"accept": False, "reason": f"eval could not start: {exc.strerror or exc}"}
    try:
        out, err = await asyncio.wait_for(proc.communicate(data), timeout=cfg.timeout_s)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        return {"accept": False, "reason": f"eval timed out after {cfg.timeout_s:g} s"}
    if proc.returncode != 0:
        tail = err.decode("utf-8", "replace").strip()[-EVAL_STDERR_TAIL:]
        return {"accept": False, "reason": f"eval exited {proc.returncode}" + (f": {tail}" if tail else "")}
    try:
        answer = json.loads(out[:EVAL_OUTPUT_CAP].decode("utf-8"))
        if not isinstance(answer, dict) or answer.get("decision") not in ("accept", "reject"):
            raise ValueError("decision must be accept or reject")
    except ValueError as exc:
        return {"accept": False, "reason": f"eval answered no valid JSON: {str(exc)[:200]}"}
    res: dict[str, Any] = {"decision": answer["decision"], "reason": str(answer.get("reason") or "")[:1000]}
    scores = {}
    for k in ("score_before", "score_after"):
        v = answer.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            scores[k] = float(v)
    res.update(scores)
    worse = len(scores) == 2 and scores["score_after"] < scores["score_before"]
    res["accept"] = answer["decision"] == "accept" and not worse
    if worse:
        res["reason"] = (f"eval got worse: {scores['score_before']:g} → {scores['score_after']:g}"
                         + (f" ({res['reason']})" if res["reason"] else ""))
    elif not res["reason"]:
        res["reason"] = "accepted by eval" if res["accept"] else "rejected by eval"
    return res
