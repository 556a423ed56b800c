"""Plans that install or remove aimem's managed Agent Skills for one client.

The skills (``aimem_common.skills``) go into a project or under the home; ``install-skills``,
``setup-agent`` and ``uninstall`` use these plans. A reinstall replaces only files carrying the
managed mark; a ``SKILL.md`` of the same name without it (the user's own) is never overwritten
unless forced, and never removed.
"""

from __future__ import annotations

from pathlib import Path

from aimem_common.skills import MANAGED_MARK, SKILLS, skills_dir

from aimem_cli.installers.base import FileChange, InstallError, read_text


def plan_skills(client: str, base: Path, *, remove: bool = False, force: bool = False) -> list[FileChange]:
    """The changes that install (or, with ``remove``, take out) aimem's skills for ``client``
    under ``base`` (a project directory or the home).

    Raises:
        InstallError: installing, a ``SKILL.md`` of one of our names exists and is not ours
            (and ``force`` is off); nothing is planned then.
    """
    changes: list[FileChange] = []
    for rel, text in SKILLS.items():
        path = base / skills_dir(client) / rel
        old = read_text(path)
        ours = old is not None and MANAGED_MARK in old
        if remove:
            if ours:
                changes.append(FileChange(path, old, None))
            continue
        if old is not None and not ours and not force:
            raise InstallError(f"{path} exists and was not written by aimem: move it away or pass --force")
        changes.append(FileChange(path, old, text))
    return changes


def prune_empty_dirs(changes: list[FileChange], *boundaries: Path) -> None:
    """After ``apply``, delete the folders that the removals in ``changes`` left empty (a
    skill's folder, ``.claude/skills``, ``.pi/agent/extensions``, ...), walking up from each
    deleted file and stopping at the first folder that is not empty or is one of
    ``boundaries`` (the home, the project directory: never deleted themselves). A file outside
    every boundary leaves its folders alone."""
    stops = {b.resolve() for b in boundaries}
    for ch in changes:
        if ch.new is not None:
            continue
        folder = ch.path.parent
        while folder.resolve() not in stops and stops & set(folder.resolve().parents):
            try:
                folder.rmdir()  # only an empty folder goes
            except OSError:
                break
            folder = folder.parent
