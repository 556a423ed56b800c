"""Installers: merge aimem's hook commands and MCP entry into each agent CLI's own settings.

Every installer returns ``FileChange`` plans (path, old text, new text); ``apply`` writes
them atomically and ``diff`` renders them for ``--dry-run``. Plans are pure functions of
the current file contents, so running an install twice yields no change the second time,
and uninstall removes only the handlers whose command is ours (``is_ours``).
"""

from __future__ import annotations

from aimem_cli.installers.base import (  # noqa: F401  (public API)
    FileChange,
    InstallError,
    apply,
    diff,
    hook_command,
    is_ours,
)
from aimem_cli.installers.plans import plan_hooks, plan_mcp, plan_unhooks, plan_unmcp  # noqa: F401
