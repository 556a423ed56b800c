"""Project identity and capture rules, resolved where the files are (stdlib only, no ``git``).

The hook client runs this on every agent event, so it only reads a few small files while
walking up from the working directory. Public API (also used by transcript import, so a
replayed session lands exactly where its live hooks would have):

``resolve(cwd) -> Identity``
    Identity of the directory ``cwd`` (absolute or relative, need not exist):

    1. the nearest ``.aimem.toml`` marker at or above ``cwd`` wins: its ``workspace`` and
       ``project`` keys name the scope (``explicit`` when it names the project), its
       ``capture``/``exclude`` keys are the capture rules. A marker *above* the repository
       holding ``cwd`` (``~/.aimem.toml`` over ``~/src/api``) stops at that repository
       boundary: its names do not apply there (the repository is its own project) unless
       it says ``scope = "tree"``; its rules that only ever record less (``capture =
       false``, ``exclude``, a broken marker) still apply (fail safe);
    2. else (and for whatever the marker leaves out) the git top level: the directory
       holding ``.git``. A linked worktree (``.git`` file → ``gitdir`` with a
       ``commondir``) resolves to its main repository; a submodule (``.git`` file →
       ``.git/modules/…`` without ``commondir``) is its own project. The ``origin`` URL
       is read from the repository's ``config`` file and normalised (``origin``);
    3. else the cwd's basename, with no root and no origin.

    The directory is taken physically (``realpath``): a checkout reached through a
    symlink and through its real path is one root. A Windows path given on another
    system (a payload from a Windows agent) is never looked up on disk: its project is
    its last folder (``aimem_common.locations``). A git repository also carries a stable
    id (``repo_id``: 32 hex digits in ``<git common dir>/aimem-id``, written by the first
    resolve; worktrees share it, a move or rename keeps it, a fresh clone gets its own) so
    the server recognises a moved checkout that has no ``origin``.

``Identity.should_capture(path) -> bool`` / ``should_capture(path, cwd=None) -> bool``
    False when the marker says ``capture = false``, or when ``path`` (absolute, or relative
    to ``cwd``) matches one of the marker's ``exclude`` globs.

Marker format (TOML; every key optional)::

    workspace = "acme"           # default: "default"
    project = "billing-api"      # default: the git top level's name, else the cwd's
    capture = true               # false (or any non-boolean): nothing from here is recorded
    exclude = ["secrets/**", "*.pem", ".env*"]
    scope = "repository"         # "tree": the names also apply inside repositories below

Globs follow ``.gitignore`` habits: ``*`` and ``?`` stay inside one path segment, ``**``
spans segments, a pattern without ``/`` matches a file or directory name at any depth, a
pattern with ``/`` is anchored at the marker's directory, and a directory match excludes
everything below it. A broken (unparseable) marker records nothing: it fails safe.

Names derived from directories are made safe for the server (``My Repo`` → ``My-Repo``);
a name written in a marker is sent as is (the server refuses an invalid one with 400).
"""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath

from aimem_common import locations  # stdlib only (the hot path stays light)

MARKER = ".aimem.toml"
MAX_MARKER_BYTES = 64 * 1024
MAX_CONFIG_BYTES = 1024 * 1024
MAX_NAME_CHARS = 128
REPO_ID_FILE = "aimem-id"  # in the repository's (common) git directory: <repo>/.git/aimem-id
_REPO_ID = re.compile(r"^[0-9a-f]{32}$")
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_SCP_URL = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")  # git@host:owner/repo.git


class Identity:
    """Where an agent's working directory belongs (a plain class: ``dataclasses`` would add
    ~10 ms of imports to every hook call).

    ``workspace``/``project``: the names to send (``workspace`` None = the server's default).
    ``explicit``: a marker (or the user) named the project; the server then keys the
    project by that name alone. ``root``: the project's root directory (the marker's
    directory when the marker names the project, else the repository's top level; in a
    linked worktree both are seen from the main repository; None without either; physical,
    symlinks resolved). ``origin``: the normalised ``remote "origin"`` URL
    (``host/owner/repo``) or None. ``repo_id``: the repository's stable id (None outside a
    git repository, or when its git directory cannot be written). ``source``: ``marker``,
    ``git`` or ``cwd`` (``session``: the hook client kept the place its session began in,
    because the directory is gone; ``aimem_cli.hookclient.session_place``). ``marker``: the marker file's path. ``capture``/``exclude``: the
    capture rules. ``cwd``: the resolved working directory.
    """

    __slots__ = ("project", "workspace", "explicit", "root", "origin", "source", "marker", "capture", "exclude",
                 "cwd", "repo_id", "_patterns")

    def __init__(self, project: str | None, workspace: str | None = None, explicit: bool = False,
                 root: str | None = None, origin: str | None = None, source: str = "cwd",
                 marker: str | None = None, capture: bool = True, exclude: tuple[str, ...] = (),
                 cwd: str | None = None, repo_id: str | None = None):
        self.project, self.workspace, self.explicit = project, workspace, explicit
        self.root, self.origin, self.source, self.marker = root, origin, source, marker
        self.capture, self.exclude, self.cwd, self.repo_id = capture, tuple(exclude), cwd, repo_id
        self._patterns = tuple(_glob_regex(g) for g in self.exclude)

    def _fields(self) -> tuple:
        return tuple(getattr(self, k) for k in self.__slots__[:-1])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Identity) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return "Identity(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__[:-1]) + ")"

    def should_capture(self, path: str | None = None) -> bool:
        """False when nothing here may be recorded, or ``path`` matches an ``exclude`` glob.

        ``path`` is absolute or relative to ``cwd``. Globs are relative to the marker's
        directory; a path outside it is matched by its own name only (a name pattern such
        as ``*.pem`` still applies).
        """
        if not self.capture:
            return False
        if not path or not self._patterns:
            return True
        base = os.path.dirname(self.marker) if self.marker else self.root
        rel = _relative(path, base, self.cwd)
        return not any(p.match(rel) for p in self._patterns)

    def as_query(self) -> dict[str, str]:
        """The ``/hook`` query fields carrying this identity (empty values left out)."""
        out = {"project": self.project, "workspace": self.workspace, "root": self.root, "origin": self.origin,
               "repo_id": self.repo_id}
        q = {k: v for k, v in out.items() if v}
        if self.explicit:
            q["named"] = "1"
        return q


def resolve(cwd: str | os.PathLike[str]) -> Identity:
    """Return the ``Identity`` of ``cwd`` (see the module docstring; never raises on I/O)."""
    raw_cwd = os.fspath(cwd)
    if os.name != "nt" and locations.is_windows(raw_cwd):
        # A Windows agent's path seen here: nothing to look up on this disk; name it by its folder.
        return Identity(project=_safe_name(locations.name(raw_cwd) or ""), cwd=locations.normalize(raw_cwd))
    start = os.path.realpath(os.path.abspath(raw_cwd))  # physical: a symlinked checkout is one root
    marker_path, marker = _find_marker(start)
    top, common = _git_top(start)
    origin = _origin(common) if common else None
    repo_root = _repo_root(top, common) if top else None
    repo_id = _repo_id(common) if common else None
    capture, exclude = True, ()
    workspace = project = None
    if marker is not None:
        # Across a repository boundary an ancestor's names stop (scope = "tree" opts in);
        # its rules that only record less still apply.
        names = not (top and _strictly_above(os.path.dirname(marker_path), top)) or marker.get("scope") == "tree"
        if names:
            workspace = _str(marker.get("workspace"))
            project = _str(marker.get("project"))
        capture = marker.get("capture", True) is True  # anything but true/absent fails safe
        raw = marker.get("exclude") or ()
        exclude = tuple(g for g in (raw if isinstance(raw, list) else [raw]) if isinstance(g, str) and g)
    if project:
        root, source, explicit = _marker_root(os.path.dirname(marker_path), top, repo_root), "marker", True
    elif repo_root:
        project, root, source, explicit = _safe_name(os.path.basename(repo_root)), repo_root, "git", False
    else:
        # locations.name: a Windows folder's name is lower-case, however the cwd was typed.
        project, root, source, explicit = _safe_name(locations.name(start) or ""), None, "cwd", False
    return Identity(
        project=project or None, workspace=workspace, explicit=explicit, root=root, origin=origin,
        source=source, marker=marker_path, capture=capture, exclude=exclude, cwd=start, repo_id=repo_id,
    )


def _strictly_above(marker_dir: str, top: str) -> bool:
    """True when ``marker_dir`` is an ancestor of the repository top ``top`` (not ``top`` itself)."""
    return marker_dir != top and _under(top, marker_dir)


def _marker_root(marker_dir: str, top: str | None, repo_root: str | None) -> str:
    """The root of a marker-named project: the marker's directory, seen from the main
    repository when the marker is inside a linked worktree (so every worktree of one
    repository shares one root, and one handoff chain)."""
    if top and repo_root and top != repo_root and _under(marker_dir, top):
        rel = os.path.relpath(marker_dir, top)
        return repo_root if rel == "." else os.path.join(repo_root, rel)
    return marker_dir


def should_capture(path: str | None, cwd: str | os.PathLike[str] | None = None) -> bool:
    """True when ``path`` may be recorded under the rules that apply at ``cwd``.

    ``cwd`` defaults to ``path``'s own directory (``path`` must then be absolute).
    """
    base = cwd if cwd is not None else os.path.dirname(os.path.abspath(path or "."))
    return resolve(base).should_capture(path)


def checkout_top(cwd: str | os.PathLike[str]) -> str | None:
    """The top level of the checkout holding ``cwd`` (a linked worktree's own directory)."""
    top, _ = _git_top(os.path.abspath(os.fspath(cwd)))
    return top


def workstream_root(cwd: str | os.PathLike[str], ident: Identity | None = None) -> str | None:
    """The checkout root of ``cwd``'s managed workstream: the project root (``ident``, else
    ``resolve(cwd)``) seen from the checkout that holds ``cwd``.

    A linked worktree is its own workstream: where the project root points into the main
    repository (every worktree shares one project root), the same place inside the linked
    worktree is answered, so a run there keeps its own ledger, checkpoint and transcripts.
    In the main checkout (or a subdirectory of it) this is the project root itself; None
    when the project has no root (a plain directory).
    """
    ident = ident or resolve(cwd)
    if ident.root is None or ident.cwd is None or locations.is_windows(ident.cwd):
        return ident.root
    top, common = _git_top(ident.cwd)
    if top is None or common is None:
        return ident.root
    repo_root = _repo_root(top, common)
    if top == repo_root or not _under(ident.root, repo_root):
        return ident.root
    rel = os.path.relpath(ident.root, repo_root)
    return top if rel == "." else os.path.join(top, rel)


def render_marker(*, project: str, workspace: str | None = None, capture: bool = True,
                  exclude: list[str] | tuple[str, ...] = ()) -> str:
    """Return the text of a ``.aimem.toml`` marker (TOML, with a comment per key)."""
    def q(v: str) -> str:
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["# aimem: where this repository's agent sessions are remembered, and what is never recorded.",
             "# Agents (and `aimem` commands run here) use these names for memory_* tools.",
             f"workspace = {q(workspace or 'default')}",
             f"project = {q(project)}",
             "# false: nothing from this repository is ever recorded (no spool, transport, log or storage).",
             f"capture = {'true' if capture else 'false'}",
             "# File-tool events on paths matching these globs are dropped before they leave this machine.",
             "exclude = [" + ", ".join(q(g) for g in exclude) + "]", ""]
    return "\n".join(lines)


# -- files ------------------------------------------------------------------------------------
def _find_marker(start: str) -> tuple[str | None, dict | None]:
    """The nearest readable ``.aimem.toml`` at or above ``start``: ``(path, table)``."""
    d = start
    while True:
        path = os.path.join(d, MARKER)
        try:
            with open(path, "rb") as fh:
                raw = fh.read(MAX_MARKER_BYTES + 1)
        except OSError:
            raw = None
        if raw is not None and len(raw) <= MAX_MARKER_BYTES:
            import tomllib  # only when a marker exists (~2 ms)

            try:
                return path, tomllib.loads(raw.decode("utf-8", "replace"))
            except ValueError:
                # A broken marker still marks the place: fail safe, record nothing from here.
                return path, {"capture": False}
        parent = os.path.dirname(d)
        if parent == d:
            return None, None
        d = parent


def _git_top(start: str) -> tuple[str | None, str | None]:
    """``(top level, common git dir)`` of the repository holding ``start``; Nones outside one."""
    d = start
    while True:
        dot = os.path.join(d, ".git")
        if os.path.isdir(dot):
            return d, dot
        if os.path.isfile(dot):
            gitdir = _gitdir_of_file(dot)
            if gitdir is None:
                return d, None
            common = _read_small(os.path.join(gitdir, "commondir"))
            if common is not None:  # a linked worktree: the main repository's git dir
                common = common.strip()
                return d, os.path.normpath(os.path.join(gitdir, common))
            return d, gitdir  # a submodule or a separate git dir: its own repository
        parent = os.path.dirname(d)
        if parent == d:
            return None, None
        d = parent


def _gitdir_of_file(dot_git_file: str) -> str | None:
    text = _read_small(dot_git_file)
    if not text or not text.startswith("gitdir:"):
        return None
    target = text[len("gitdir:"):].strip()
    return os.path.normpath(os.path.join(os.path.dirname(dot_git_file), target))


def _repo_root(top: str, common: str | None) -> str:
    """The main repository's top level: the parent of a ``.git`` common dir, else ``top``."""
    if common and os.path.basename(common) == ".git" and os.path.dirname(common) != top:
        return os.path.dirname(common)  # a linked worktree of <main>/.git
    return top


def _repo_id(git_dir: str) -> str | None:
    """The repository's stable id from ``<git_dir>/aimem-id``, written (once, 32 hex) when
    missing; None when the git directory cannot be written. The file appears whole or not at
    all (written aside, then hard-linked into place, which fails if it exists), so two hooks
    racing agree on the first one's id."""
    path = os.path.join(git_dir, REPO_ID_FILE)
    text = (_read_small(path, 64) or "").strip()
    if text:
        return text if _REPO_ID.match(text) else None  # something else wrote it: never overwrite
    new = os.urandom(16).hex()
    tmp = f"{path}.{os.getpid()}.{new[:8]}.tmp"
    try:
        with open(tmp, "x") as fh:
            fh.write(new + "\n")
        try:
            os.link(tmp, path)
        except FileExistsError:  # another hook won the race: its id is the repository's
            text = (_read_small(path, 64) or "").strip()
            return text if _REPO_ID.match(text) else None
        return new
    except OSError:
        return None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _read_small(path: str, limit: int = 4096) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def _origin(git_dir: str) -> str | None:
    """The normalised ``[remote "origin"] url`` of the repository config in ``git_dir``."""
    text = _read_small(os.path.join(git_dir, "config"), MAX_CONFIG_BYTES)
    if not text:
        return None
    section = None
    for line in text.splitlines():
        s = line.strip()
        if not s or s[0] in "#;":
            continue
        if s.startswith("["):
            section = s[1:s.find("]")].strip() if "]" in s else None
            section = re.sub(r'\s+"', ' "', section) if section else None
            continue
        if section in ('remote "origin"',) and "=" in s:
            key, _, value = s.partition("=")
            if key.strip().lower() == "url":
                return normalize_origin(value.strip().strip('"'))
    return None


def normalize_origin(url: str) -> str | None:
    """Return ``host/owner/repo`` for a git remote URL; credentials and ``.git`` dropped.

    ``git@github.com:Acme/API.git``, ``ssh://git@github.com:22/Acme/API``,
    ``https://user:pw@github.com/Acme/API.git/`` → ``github.com/Acme/API`` (host
    lower-cased, path kept as is). A local path stays a path (normalised, absolute when it
    was). None for an empty URL.
    """
    url = url.strip()
    if not url:
        return None
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", url)
    if m and m.group(1).lower() != "file":
        rest = m.group(2)
        hostpart, _, path = rest.partition("/")
        host = hostpart.rsplit("@", 1)[-1]
        host = re.sub(r":\d+$", "", host).lower()
        return _strip_git(f"{host}/{path}")
    if m:  # file://
        return _strip_git(os.path.normpath(m.group(2)))
    scp = _SCP_URL.match(url)
    if scp and not os.path.isabs(url):
        return _strip_git(f"{scp.group(1).lower()}/{scp.group(2).lstrip('/')}")
    return _strip_git(os.path.normpath(url))


def _strip_git(s: str) -> str:
    s = s.rstrip("/")
    return s[:-4] if s.endswith(".git") else s


# -- names and globs --------------------------------------------------------------------------
def _str(v: object) -> str | None:
    return v.strip() if isinstance(v, str) and v.strip() else None


def _safe_name(name: str) -> str | None:
    return _UNSAFE_NAME.sub("-", name).strip(".-")[:MAX_NAME_CHARS] or None


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _relative(path: str, base: str | None, cwd: str | None) -> str:
    """``path`` relative to ``base`` (relative paths are taken from ``cwd``); else its name."""
    p = path.replace("\\", "/")
    if p.startswith("~"):
        p = os.path.expanduser(p)
    if not os.path.isabs(p):
        p = os.path.join(cwd or base or "/", p)
    p = os.path.realpath(p)  # the same physical view as the root and the marker
    if base and _under(p, base):
        return os.path.relpath(p, base).replace(os.sep, "/")
    return PurePosixPath(p).name


def _glob_regex(glob: str) -> re.Pattern[str]:
    """Compile one exclude glob to a regex over a root-relative path (see the module doc)."""
    g = glob.strip().replace("\\", "/")
    anchored = "/" in g.rstrip("/")
    g = g.strip("/")
    out, i = [], 0
    while i < len(g):
        c = g[i]
        if g.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif g.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(c))
            i += 1
    body = "".join(out)
    head = "" if anchored else "(?:.*/)?"
    # The path itself or anything below a matching directory.
    return re.compile(f"^{head}{body}(?:/.*)?$")


__all__ = ["MARKER", "Identity", "checkout_top", "normalize_origin", "render_marker", "resolve", "should_capture",
           "workstream_root"]
