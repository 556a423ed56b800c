"""Codex CLI: what besides ``hooks.json`` makes the real binary run aimem's hooks.

Codex (0.171 checked) runs a non-managed command hook only when ``~/.codex/config.toml``
trusts its exact definition: ``[hooks.state."<hooks.json path>:<event label>:<group>:<handler>"]``
with ``trusted_hash = "sha256:<hex>"``, the SHA-256 of the handler's normalised identity
(``{"event_name", "matcher"?, "hooks": [handler]}`` as compact JSON with sorted keys; the
timeout always present, ``600`` s by default and clamped to 1–3 s for ``SessionEnd`` and
``Interrupt``; ``async`` always present; ``matcher`` dropped for ``UserPromptSubmit`` and
``Stop``). An untrusted or changed hook is skipped silently. Hooks must also be switched on
(``[features] hooks = true``; on by default in current versions), and hooks in a project's
``.codex/`` load only when that project is trusted (``[projects."<dir>"] trust_level``).

The installer writes all of it into one marked block of ``config.toml`` (shown by
``--dry-run``) and ``uninstall-hooks`` removes that block again. Only user-layer state
counts, so a project install also writes its trust into the user's ``config.toml``.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any

from aimem_cli.installers.base import InstallError, is_ours
from aimem_common.clients import codex as codex_client

BEGIN = "# >>> aimem install-hooks (managed block: `aimem uninstall-hooks --client codex` removes it)"
END = "# <<< aimem install-hooks"
ADDED = "# added by aimem install-hooks"
LABELS = codex_client.TRUST_LABELS
_SHORT_TIMEOUT = codex_client.CLIENT.short_timeout_events  # Codex clamps these to 1..3 s (default 1)
_NO_MATCHER = codex_client.NO_MATCHER_EVENTS
_BLOCK_RE = re.compile(r"\n*" + re.escape(BEGIN) + r".*?" + re.escape(END) + r"[^\n]*\n?", re.DOTALL)


def hook_hash(event: str, group: dict[str, Any], handler: dict[str, Any]) -> str:
    """Return Codex's ``trusted_hash`` for one command ``handler`` of ``group`` under ``event``.

    Mirrors the normalisation Codex applies before hashing (see the module docstring).
    """
    timeout = handler.get("timeout", handler.get("timeoutSec"))
    if event in _SHORT_TIMEOUT:
        timeout = min(max(int(timeout or 1), 1), 3)
    else:
        timeout = max(int(timeout or 600), 1)
    normalised: dict[str, Any] = {"type": "command", "command": handler["command"], "timeout": timeout,
                                  "async": bool(handler.get("async", False))}
    if handler.get("statusMessage") is not None:
        normalised["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": LABELS[event], "hooks": [normalised]}
    if group.get("matcher") is not None and event not in _NO_MATCHER:
        identity["matcher"] = group["matcher"]
    data = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()


def trust_entries(hooks_path: Path, doc: dict[str, Any]) -> dict[str, str]:
    """Return ``{state key: trusted_hash}`` for every aimem handler in a ``hooks.json`` document."""
    out: dict[str, str] = {}
    source = str(hooks_path)
    for event, groups in (doc.get("hooks") or {}).items():
        if event not in LABELS or not isinstance(groups, list):
            continue
        for gi, group in enumerate(groups):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for hi, handler in enumerate(handlers if isinstance(handlers, list) else []):
                if isinstance(handler, dict) and is_ours(handler.get("command")):
                    out[f"{source}:{LABELS[event]}:{gi}:{hi}"] = hook_hash(event, group, handler)
    return out


def _toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a TOML basic string


def without_block(text: str) -> str:
    """``text`` minus aimem's managed block and the lines it added to the user's tables."""
    text = _BLOCK_RE.sub("\n", text)
    text = "\n".join(line for line in text.split("\n") if not line.rstrip().endswith(ADDED))
    return text.strip("\n") + "\n" if text.strip() else ""


def config_with_trust(text: str | None, path: Path, entries: dict[str, str],
                      trusted_project: Path | None = None) -> str:
    """Return ``config.toml`` with aimem's block: feature switch, hook trust, project trust.

    Args:
        text: The current file (None when absent).
        path: Its path (for error messages).
        entries: ``trust_entries(...)``; empty means "remove aimem's block".
        trusted_project: A project directory whose ``.codex/`` must load (``--scope project``).

    Raises:
        InstallError: the file is not valid TOML, or turns hooks off (``[features] hooks = false``).
    """
    base = without_block(text or "")
    try:
        doc = tomllib.loads(base)
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(f"{path}: not valid TOML ({exc}); add the aimem hook trust by hand") from None
    if not entries:
        return base
    features = doc.get("features") if isinstance(doc.get("features"), dict) else None
    if features is not None and (features.get("hooks") is False or features.get("codex_hooks") is False):
        raise InstallError(f"{path}: [features] turns Codex hooks off; set hooks = true there first")
    block = [BEGIN]
    if features is None:
        block += ["[features]", "hooks = true", ""]
    elif not (features.get("hooks") or features.get("codex_hooks")):
        base = re.sub(r"(?m)^\[features\][ \t]*(#.*)?$", lambda m: m.group(0) + f"\nhooks = true  {ADDED}",
                      base, count=1)
    state = (doc.get("hooks") or {}).get("state") or {}
    for key, digest in entries.items():
        if isinstance(state.get(key), dict):  # trusted by hand before: rewrite that table, not a second one
            base = re.sub(r'(?m)^\[hooks\.state\.' + re.escape(_toml_str(key)) + r'\][^\n]*\n(?:(?!\[)[^\n]*\n?)*',
                          "", base)
        block += [f"[hooks.state.{_toml_str(key)}]", f"trusted_hash = {_toml_str(digest)}", ""]
    projects = doc.get("projects") if isinstance(doc.get("projects"), dict) else {}
    if trusted_project is not None and str(trusted_project) not in projects:
        block += [f"[projects.{_toml_str(str(trusted_project))}]", 'trust_level = "trusted"', ""]
    block[-1:] = [END] if block[-1] == "" else [*block[-1:], END]
    sep = "" if not base.strip() else ("\n" if base.endswith("\n") else "\n\n")
    return (base if base.strip() else "") + sep + "\n".join(block) + "\n"


__all__ = ["BEGIN", "END", "LABELS", "config_with_trust", "hook_hash", "trust_entries", "without_block"]
