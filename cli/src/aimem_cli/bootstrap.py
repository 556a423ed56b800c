"""``aimem bootstrap``: a first overview page of a repository from what is already there.

Rule-based and local (no LLM, no network): ``survey(root)`` reads the README and docs
headings, the components (``services/``, ``packages/``, ``apps/``, ``libs/``, ``crates/``,
``cmd/`` folders and ``compose.yaml`` services), the build and test commands from the
manifests (``Makefile`` targets — those the README shows first —, ``pyproject.toml``
scripts, ``package.json`` scripts, ``Cargo.toml`` binaries, ``go.mod``), and the recent
``git log`` (themes of the commit subjects, the most-changed files, the most active
folders). ``render(survey)`` turns that into the body of ``bootstrap.md``; every list is
bounded so the page stays well under the 16 KiB page cap.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PAGE_PATH = "bootstrap.md"
GIT_COMMITS = 300
COMPONENT_DIRS = ("services", "packages", "apps", "libs", "crates", "cmd", "plugins", "modules")
MAX_HEADINGS, MAX_DOC_FILES, MAX_COMPONENTS, MAX_COMMANDS = 30, 15, 40, 25
MAX_HOT_FILES, MAX_ACTIVE, MAX_THEMES = 15, 10, 15
README_CHARS = 1200
STOPWORDS = frozenset(
    "the a an and or of to in on for with from by is are be as at it its this that into not no use uses "
    "used when then than via per add adds added fix fixes fixed make makes made now new also more one two "
    "all any each get gets set sets only was were has have had but can will before after over under "
    "out up off so too our your their them they we you i merge branch main master wip".split())
_HEADING = re.compile(r"^(#{1,3})\s+(.+?)\s*#*\s*$")
_MAKE_TARGET = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)\s*:(?!=)([^#\n]*)(?:#+\s*(.*))?$")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]{3,}")


@dataclass
class Survey:
    """What ``survey`` found; every list is bounded and ordered by relevance."""

    name: str
    summary: str = ""
    headings: list[str] = field(default_factory=list)
    docs: list[tuple[str, str]] = field(default_factory=list)  # (path, first heading)
    components: list[tuple[str, str]] = field(default_factory=list)  # (name, where/description)
    commands: list[tuple[str, str]] = field(default_factory=list)  # (command, what it does)
    commits: int = 0
    first_commit: str = ""
    last_commit: str = ""
    themes: list[tuple[str, int]] = field(default_factory=list)
    hot_files: list[tuple[str, int]] = field(default_factory=list)
    active_paths: list[tuple[str, int]] = field(default_factory=list)


def survey(root: Path) -> Survey:
    """Read ``root`` (a repository or any folder) into a ``Survey``; missing parts stay empty."""
    root = root.resolve()
    s = Survey(name=_project_name(root) or root.name)
    readme = next((p for p in (root / n for n in ("README.md", "README.rst", "README.txt", "README"))
                   if p.is_file()), None)
    if readme:
        text = _read(readme)
        found = _headings(text)
        s.headings = [h for _, h in found][:MAX_HEADINGS]
        s.summary = _first_paragraph(text)
        if not _project_name(root) and found and found[0][0] == 1:
            s.name = found[0][1][:80]  # the README's title names the project better than a folder
    docs = root / "docs"
    if docs.is_dir():
        for p in sorted(docs.rglob("*.md"))[:MAX_DOC_FILES]:
            first = next((h for _, h in _headings(_read(p))), p.stem)
            s.docs.append((str(p.relative_to(root)), first))
    s.components = _components(root)[:MAX_COMPONENTS]
    s.commands = _commands(root, _read(readme) if readme else "")[:MAX_COMMANDS]
    _git(root, s)
    return s


def _read(path: Path, limit: int = 512 * 1024) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(limit)
    except OSError:
        return ""


def _headings(text: str) -> list[tuple[int, str]]:
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (m := _HEADING.match(line)):
            out.append((len(m.group(1)), m.group(2).strip()))
    return out


def _first_paragraph(text: str) -> str:
    para: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("#", "<", "[!", "![", "```", "|", "=", "-" * 3)) and not para:
            continue
        if not stripped:
            if para:
                break
            continue
        para.append(stripped)
    out = " ".join(para)
    return out[:README_CHARS] + ("…" if len(out) > README_CHARS else "")


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(_read(path)) if path.is_file() else {}
    except ValueError:
        return {}


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(_read(path)) if path.is_file() else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _project_name(root: Path) -> str | None:
    for name in ((_toml(root / "pyproject.toml").get("project") or {}).get("name"),
                 _json(root / "package.json").get("name"),
                 (_toml(root / "Cargo.toml").get("package") or {}).get("name")):
        if isinstance(name, str) and name:
            return name
    return None


def _describe(path: Path) -> str:
    """A component's own one-line description (pyproject, package.json, Cargo.toml), if any."""
    for desc in ((_toml(path / "pyproject.toml").get("project") or {}).get("description"),
                 _json(path / "package.json").get("description"),
                 (_toml(path / "Cargo.toml").get("package") or {}).get("description")):
        if isinstance(desc, str) and desc:
            return desc
    return ""


def _components(root: Path) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for folder in COMPONENT_DIRS:
        base = root / folder
        if not base.is_dir():
            continue
        for sub in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
            desc = _describe(sub)
            out.append((sub.name, f"`{folder}/{sub.name}/`" + (f": {desc}" if desc else "")))
            seen.add(sub.name)
    for compose in ("compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml"):
        for name in _compose_services(root / compose):
            if name not in seen:
                out.append((name, f"service in `{compose}`"))
                seen.add(name)
    return out


def _compose_services(path: Path) -> list[str]:
    """Top-level service names of a compose file (keys indented once under ``services:``)."""
    names, inside, indent = [], False, None
    for line in _read(path).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith((" ", "\t")):
            inside = line.rstrip().startswith("services:")
            indent = None
            continue
        if inside:
            width = len(line) - len(line.lstrip())
            indent = indent or width
            m = re.match(r"\s*([A-Za-z0-9_.-]+)\s*:", line)
            if width == indent and m:
                names.append(m.group(1))
    return names


def _commands(root: Path, readme: str) -> list[tuple[str, str]]:
    cmds: list[tuple[str, str]] = []
    makefile = next((root / n for n in ("Makefile", "makefile", "GNUmakefile") if (root / n).is_file()), None)
    if makefile:
        targets = []
        for line in _read(makefile).splitlines():
            m = _MAKE_TARGET.match(line)
            if m and not m.group(1).startswith(".") and "%" not in m.group(1) and "=" not in m.group(2):
                targets.append((m.group(1), (m.group(3) or "").strip()))
        in_readme = [t for t in targets if f"make {t[0]}" in readme]
        in_readme.sort(key=lambda t: readme.index(f"make {t[0]}"))
        for target, note in in_readme + [t for t in targets if t not in in_readme]:
            cmds.append((f"make {target}", note or _readme_note(readme, f"make {target}")))
    py = _toml(root / "pyproject.toml")
    for script in (py.get("project") or {}).get("scripts") or {}:
        cmds.append((script, "console script (pyproject.toml)"))
    pkg = _json(root / "package.json")
    for script, body in (pkg.get("scripts") or {}).items() if isinstance(pkg.get("scripts"), dict) else ():
        cmds.append((f"npm run {script}", str(body)[:120]))
    if (root / "Cargo.toml").is_file():
        cmds += [("cargo build", "Cargo.toml"), ("cargo test", "Cargo.toml")]
    if (root / "go.mod").is_file():
        cmds += [("go build ./...", "go.mod"), ("go test ./...", "go.mod")]
    return cmds


def _readme_note(readme: str, command: str) -> str:
    """The comment the README puts after ``command`` on its line (``make up  # starts ...``)."""
    for line in readme.splitlines():
        if command in line and "#" in line.split(command, 1)[1]:
            return line.split(command, 1)[1].split("#", 1)[1].strip()[:160]
    return ""


def _git(root: Path, s: Survey) -> None:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "log", f"-{GIT_COMMITS}", "--no-merges", "--name-only",
             "--format=%x00%cs%x09%s"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return
    files: Counter[str] = Counter()
    dirs: Counter[str] = Counter()
    words: Counter[str] = Counter()
    dates: list[str] = []
    for chunk in out.split("\0")[1:]:
        head, _, names = chunk.partition("\n")
        date, _, subject = head.partition("\t")
        dates.append(date)
        words.update({w.lower() for w in _WORD.findall(subject)} - STOPWORDS)
        touched = [n.strip() for n in names.splitlines() if n.strip()]
        files.update(touched)
        dirs.update({"/".join(n.split("/")[:-1][:2]) + "/" for n in touched if "/" in n})
    s.commits = len(dates)
    if dates:
        s.last_commit, s.first_commit = dates[0], dates[-1]
    s.themes = [(w, n) for w, n in words.most_common(MAX_THEMES) if n > 1]
    s.hot_files = files.most_common(MAX_HOT_FILES)
    s.active_paths = dirs.most_common(MAX_ACTIVE)


def render(s: Survey) -> tuple[str, str]:
    """Return ``(title, markdown body)`` of the overview page (no empty sections)."""
    title = f"Overview of {s.name}"
    out = [f"# {title}", "", "Generated by `aimem bootstrap` from the repository's README, manifests and "
           "git history (rule-based). Re-run it to refresh; earlier versions stay in the page history.", ""]
    if s.summary:
        out += ["## What it is", "", s.summary, ""]
    if s.components:
        out += ["## Components", ""] + [f"- **{n}** — {d}" for n, d in s.components] + [""]
    if s.commands:
        out += ["## Build and test commands", ""]
        out += [f"- `{c}`" + (f" — {d}" if d else "") for c, d in s.commands] + [""]
    if s.headings or s.docs:
        out += ["## Documentation", ""]
        if s.headings:
            out += ["README sections: " + "; ".join(s.headings), ""]
        out += [f"- `{p}`: {h}" for p, h in s.docs] + ([""] if s.docs else [])
    if s.commits:
        out += ["## Recent activity", "",
                f"{s.commits} commits from {s.first_commit} to {s.last_commit} (latest {GIT_COMMITS} at most).", ""]
        if s.themes:
            out += ["Themes: " + ", ".join(f"{w} ({n})" for w, n in s.themes), ""]
        if s.hot_files:
            out += ["Most-changed files:", ""] + [f"- `{f}` ({n} commits)" for f, n in s.hot_files] + [""]
        if s.active_paths:
            out += ["Most active paths:", ""] + [f"- `{p}` ({n} file changes)" for p, n in s.active_paths] + [""]
    return title, "\n".join(out).rstrip() + "\n"


def with_introduction(body: str, intro: dict[str, Any]) -> str:
    """Put the LLM's introduction (``maint`` job ``bootstrap``) above the rule-based facts."""
    head, _, rest = body.partition("\n\n")  # the "# Overview of ..." line stays first
    lines = [head, "", "## Summary", "", intro["summary"].strip(), "", "## How it is put together", "",
             intro["architecture"].strip(), ""]
    points = [p.strip() for p in intro.get("how_to_work") or [] if isinstance(p, str) and p.strip()]
    if points:
        lines += ["## How to work here", ""] + [f"- {p}" for p in points[:12]] + [""]
    return "\n".join(lines) + rest
