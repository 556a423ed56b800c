"""``aimem_cli.identity``: marker, git top level (worktree, submodule), origin, capture globs.

Real repositories made with the ``git`` binary (the resolver itself never runs it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aimem_testing.gitrepo import git, make_repo
from aimem_cli.identity import normalize_origin, render_marker, resolve, should_capture

def test_subdirectory_resolves_to_the_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "acme-api", "git@github.com:Acme/acme-api.git")
    (repo / "services" / "web").mkdir(parents=True)
    ident = resolve(repo / "services" / "web")
    assert (ident.project, ident.root, ident.origin, ident.source, ident.explicit) == (
        "acme-api", str(repo), "github.com/Acme/acme-api", "git", False)
    assert ident.as_query() == {"project": "acme-api", "root": str(repo), "origin": "github.com/Acme/acme-api",
                                "repo_id": ident.repo_id}
    assert ident.repo_id == (repo / ".git" / "aimem-id").read_text().strip()


def test_linked_worktree_resolves_to_its_main_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "acme-api", "https://github.com/acme/acme-api.git")
    git(repo, "worktree", "add", "-q", str(tmp_path / "acme-api-feature"))
    wt = resolve(tmp_path / "acme-api-feature")
    assert (wt.project, wt.root, wt.origin) == ("acme-api", str(repo), "github.com/acme/acme-api")


def test_a_committed_marker_gives_every_worktree_one_root(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api")
    (repo / ".aimem.toml").write_text('project = "billing"\n')
    git(repo, "add", ".aimem.toml")
    git(repo, "commit", "-q", "-m", "marker")
    git(repo, "worktree", "add", "-q", str(tmp_path / "api-hotfix"))
    main, wt = resolve(repo / "x"), resolve(tmp_path / "api-hotfix")
    assert wt.marker == str(tmp_path / "api-hotfix" / ".aimem.toml")
    assert (main.project, main.root) == (wt.project, wt.root) == ("billing", str(repo))


def test_submodule_is_its_own_project(tmp_path: Path) -> None:
    lib = make_repo(tmp_path / "payments-src")
    repo = make_repo(tmp_path / "acme-api")
    git(repo, "submodule", "add", "-q", str(lib), "libs/payments")
    sub = resolve(repo / "libs" / "payments")
    assert (sub.project, sub.root, sub.origin) == ("payments", str(repo / "libs" / "payments"), str(lib))
    assert (repo / "libs" / "payments" / ".git").is_file()  # the case under test: a .git file


def test_marker_overrides_and_its_rules_apply(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "mono", "git@example.com:team/mono.git")
    tools = repo / "tools"
    tools.mkdir()
    (tools / ".aimem.toml").write_text(render_marker(project="mono-tools", workspace="team",
                                                     exclude=["secrets/**", "*.pem"]))
    ident = resolve(tools / "deep" / "er")
    assert (ident.project, ident.workspace, ident.explicit, ident.root, ident.source) == (
        "mono-tools", "team", True, str(tools), "marker")
    assert ident.origin == "example.com/team/mono"
    assert ident.as_query()["named"] == "1"
    assert not ident.should_capture(str(tools / "secrets" / "prod" / "db.txt"))
    assert not ident.should_capture(str(repo / "elsewhere" / "key.pem"))  # name globs match anywhere
    assert not ident.should_capture("../../secrets/x")  # relative paths start at the cwd (tools/deep/er)
    assert ident.should_capture(str(tools / "src" / "main.py"))
    assert should_capture(str(tools / "secrets" / "a.txt")) is False
    # Outside the marker's tree the repository's own identity applies.
    assert resolve(repo).project == "mono" and resolve(repo).explicit is False


def test_capture_false_and_a_broken_marker_record_nothing(tmp_path: Path) -> None:
    off = tmp_path / "private"
    off.mkdir()
    (off / ".aimem.toml").write_text("capture = false\n")
    assert resolve(off / "x").capture is False and not resolve(off).should_capture("a.py")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / ".aimem.toml").write_text("project = [unterminated\n")
    assert resolve(broken).capture is False
    (broken / ".aimem.toml").write_text('capture = "false"\n')  # a string is not "true": fail safe
    assert resolve(broken).capture is False


def test_no_repository_falls_back_to_the_directory_name(tmp_path: Path) -> None:
    d = tmp_path / "My Notes"
    d.mkdir()
    ident = resolve(d)
    assert (ident.project, ident.root, ident.origin, ident.source) == ("My-Notes", None, None, "cwd")


@pytest.mark.parametrize(("url", "want"), [
    ("git@github.com:Acme/API.git", "github.com/Acme/API"),
    ("ssh://git@GitHub.com:22/Acme/API", "github.com/Acme/API"),
    ("https://user:s3cret@github.com/Acme/API.git/", "github.com/Acme/API"),
    ("file:///srv/git/api.git", "/srv/git/api"),
    ("/srv/git/api", "/srv/git/api"),
    ("", None),
])
def test_origin_normalisation_drops_credentials_and_suffix(url: str, want: str | None) -> None:
    assert normalize_origin(url) == want


@pytest.mark.parametrize(("glob", "path", "excluded"), [
    ("secrets/**", "secrets/a/b.txt", True),
    ("secrets/**", "src/secrets/a", False),
    ("secrets", "src/secrets/a", True),  # a bare name matches a directory at any depth
    ("*.pem", "deep/dir/key.pem", True),
    ("*.pem", "deep/dir/key.pem.txt", False),
    ("docs/*.md", "docs/a.md", True),
    ("docs/*.md", "docs/sub/a.md", False),
    ("**/fixtures/*.json", "a/b/fixtures/x.json", True),
    (".env*", ".env.local", True),
])
def test_globs(tmp_path: Path, glob: str, path: str, excluded: bool) -> None:
    (tmp_path / ".aimem.toml").write_text(render_marker(project="p", exclude=[glob]))
    assert resolve(tmp_path).should_capture(str(tmp_path / path)) is not excluded


def test_aimem_init_writes_a_marker_at_the_checkout_top(tmp_path: Path) -> None:
    import subprocess
    import sys

    repo = make_repo(tmp_path / "acme-api")
    (repo / "services" / "web").mkdir(parents=True)
    aimem = str(Path(sys.executable).with_name("aimem"))
    run = lambda *a: subprocess.run([aimem, "init", *a], cwd=repo / "services" / "web",  # noqa: E731
                                    capture_output=True, text=True, timeout=60)
    out = run("--exclude", "secrets/**")
    assert out.returncode == 0, out.stderr
    ident = resolve(repo / "services" / "web")
    assert (ident.project, ident.workspace, ident.explicit, ident.exclude) == ("acme-api", "default", True,
                                                                               ("secrets/**",))
    again = run("--project", "other")
    assert again.returncode == 1 and "exists" in again.stderr
    assert run("--project", "bad name!", "--force").returncode == 1
    for flag, blank in (("--project", ""), ("--project", "  "), ("--workspace", "")):
        refused = run(flag, blank, "--force")  # never silently the folder's (or the default) name
        assert refused.returncode == 1 and refused.stderr.strip() == (
            f"aimem: {flag} is blank; give a name or leave the option out"), refused.stderr
    assert resolve(repo).project == "acme-api" and 'project = "acme-api"' in (repo / ".aimem.toml").read_text()
    assert run("--no-capture", "--force").returncode == 0 and resolve(repo).capture is False
