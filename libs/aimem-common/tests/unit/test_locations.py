"""``aimem_common.locations``: one folder is one location however it is spelled."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aimem_common.locations import inside, is_windows, name, normalize, same


@pytest.mark.parametrize(("raw", "want"), [
    (r"C:\Users\Dev\api", "c:/users/dev/api"),
    ("c:/Users/Dev/api/", "c:/users/dev/api"),
    ("C:\\Users\\Dev\\api\\\\", "c:/users/dev/api"),
    (r"C:\Users\Dev\..\Dev\.\api", "c:/users/dev/api"),
    (r"\\?\C:\Users\Dev\api", "c:/users/dev/api"),
    ("/c:/Users/Dev/api", "c:/users/dev/api"),  # Cursor's workspace_roots on Windows
    ("C:", "c:/"), ("c:\\", "c:/"), (r"C:\..", "c:/"),
    (r"\\FileServer\Share\Repo\\", "//fileserver/share/repo"),
    (r"\\?\UNC\FileServer\Share\Repo", "//fileserver/share/repo"),
    ("//FileServer/share/repo/", "//fileserver/share/repo"),
    ("/home/Dev/api/", "/home/Dev/api"), ("/home//Dev/./api", "/home/Dev/api"), ("/", "/"),
    ("relative/dir/", "relative/dir"), ("", None), ("   ", None), ("/a/b /", "/a/b "), (None, None), (".", None),
])
def test_normalize(raw: str | None, want: str | None) -> None:
    assert normalize(raw) == want


def test_windows_detection_and_names() -> None:
    assert is_windows("C:") and is_windows(r"d:\x") and is_windows(r"\\srv\share") and is_windows("//srv/share")
    assert not is_windows("/home/x") and not is_windows("relative") and not is_windows("C:relative")
    assert name("/home/Dev/My Repo/") == "My Repo"  # POSIX: case kept (Linux folders differ by case)
    # A Windows place is named from its normalised (lower-case) form: every spelling of one
    # folder must reach one project, and a cwd outside a repository is looked up by this name.
    assert name(r"C:\Users\Dev\My Repo\\") == "my repo"
    assert name(r"C:\Users\me\API") == name("c:/USERS/me/api/") == name(r"\\?\C:\users\ME\Api") == "api"
    assert name(r"\\FileServer\Share\Repo") == "repo"
    assert name("/home/dev/api/") == "api" and name("C:\\") is None and name("/") is None and name("") is None


def test_inside_and_same_respect_path_boundaries() -> None:
    assert inside(r"C:\Repo\src", "c:/repo") and inside("c:/repo", r"C:\REPO\\")
    assert not inside(r"C:\Repo-old", r"C:\Repo") and not inside("/w/App/x", "/w/app")
    assert same(r"C:\Repo\\", "c:/repo") and not same(None, None) and not same("/a", "/A")


_seg = st.text(alphabet="abcXYZ. -_", min_size=1, max_size=6)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.sampled_from(["C:", "c:", "", "/", "\\\\srv\\share", "//srv/share"]),
       st.lists(_seg, max_size=5), st.sampled_from(["/", "\\"]), st.booleans())
def test_normalize_is_idempotent_and_separator_blind(prefix: str, segs: list[str], sep: str, trail: bool) -> None:
    raw = prefix + ("" if not prefix or prefix.endswith(("/", "\\")) else sep) + sep.join(segs) + (sep if trail else "")
    once = normalize(raw)
    assert normalize(once) == once
    assert "\\" not in (once or "")
    assert normalize(raw.replace("\\", "/")) == once or prefix.startswith("\\\\")  # UNC: '//' spelled both ways
    if once and is_windows(raw):
        assert once == once.lower() and normalize(raw.upper()) == once
