"""OpenClaw's own config file, ``~/.openclaw/openclaw.json``: the plugin switch aimem flips.

OpenClaw discovers the plugin folder aimem generates (``~/.openclaw/extensions/aimem/``) but
loads a plugin only when its config enables it: ``plugins.entries.<id>.enabled = true`` (what
``openclaw plugins enable <id>`` writes), and, when the user keeps an allowlist
(``plugins.allow``), only plugins named there. A plugin not bundled with OpenClaw gets the
conversation hooks (``before_prompt_build``, ``agent_end``, ...) only with
``plugins.entries.<id>.hooks.allowConversationAccess = true``; without it OpenClaw loads the
plugin, logs "typed hook ... blocked" and delivers only the session and tool hooks, so the
prompt, the final answer and the context injection would be lost.
``install-hooks --client openclaw`` sets all three for ``aimem``; ``uninstall-hooks`` takes
exactly those out again, and the objects that held nothing else, so a file aimem created goes
and a user's file is as it was. The MCP server
entry (``mcp.servers.aimem``) lives in the same file (``plans.plan_mcp``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aimem_cli.installers.base import FileChange, InstallError, json_change, load_json, nested_table, prune_empty, \
    read_text

CONFIG = ".openclaw/openclaw.json"  # under HOME; OpenClaw has no project-scope config
PLUGIN_ID = "aimem"
ENTRIES = ("plugins", "entries")
CONVERSATION_ACCESS = "allowConversationAccess"  # under plugins.entries.aimem.hooks


def enable(home: Path) -> FileChange:
    """The change that enables aimem's plugin in ``<home>/.openclaw/openclaw.json`` (idempotent).

    Raises:
        InstallError: the file is not plain JSON, or ``plugins`` / ``plugins.entries`` is not
            an object, or ``plugins.entries.aimem.hooks`` is not an object, or the user disabled aimem's plugin themselves (``enabled: false`` with
            other settings: their choice to undo).
    """
    path = home / CONFIG
    text = read_text(path)
    doc = load_json(path, text)
    entries = nested_table(path, doc, ENTRIES, create=True)
    entry = entries.get(PLUGIN_ID)
    if entry is not None and not isinstance(entry, dict):
        raise InstallError(f"{path}: plugins.entries.{PLUGIN_ID} is not an object")
    hooks = (entry or {}).get("hooks", {})
    if not isinstance(hooks, dict):
        raise InstallError(f"{path}: plugins.entries.{PLUGIN_ID}.hooks is not an object")
    entries[PLUGIN_ID] = {**(entry or {}), "enabled": True, "hooks": {**hooks, CONVERSATION_ACCESS: True}}
    allow = doc["plugins"].get("allow")
    if isinstance(allow, list) and allow and PLUGIN_ID not in allow:
        allow.append(PLUGIN_ID)  # a (non-empty) allowlist loads only what it names
    return json_change(path, text, doc)


def disable(home: Path) -> list[FileChange]:
    """The change that takes aimem's plugin switch (and allowlist name) out again; nothing when
    the file has none. A file left as ``{}`` is deleted (aimem created it)."""
    path = home / CONFIG
    text = read_text(path)
    if text is None:
        return []
    doc = load_json(path, text)
    plugins: Any = doc.get("plugins")
    if not isinstance(plugins, dict):
        return []
    entries = plugins.get("entries")
    touched = False
    if isinstance(entries, dict) and isinstance(entries.get(PLUGIN_ID), dict):
        entry = {k: v for k, v in entries[PLUGIN_ID].items() if k != "enabled"}
        if isinstance(entry.get("hooks"), dict):
            hooks = {k: v for k, v in entry["hooks"].items() if k != CONVERSATION_ACCESS}
            if hooks:
                entry["hooks"] = hooks  # the user's other hook policies stay
            else:
                del entry["hooks"]
        if entry:
            entries[PLUGIN_ID] = entry  # the user's own plugin settings stay
        else:
            del entries[PLUGIN_ID]
        touched = True
    if isinstance(plugins.get("allow"), list) and PLUGIN_ID in plugins["allow"]:
        plugins["allow"] = [p for p in plugins["allow"] if p != PLUGIN_ID]
        touched = True
    if not touched:
        return []
    prune_empty(doc, ENTRIES)
    return [json_change(path, text, doc, delete_if_empty=True)]
