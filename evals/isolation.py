"""How model-written code is isolated: bubblewrap (`bwrap`), found and tried once, or nothing (`--unsafe-exec`).

Under bubblewrap the program sees a read-only filesystem holding only /usr, the Python interpreter's standard
library (its site-packages hidden) and numpy, the sandbox's two scripts, a private /proc of its own PID
namespace, a minimal /dev, and private size-limited /tmp, /dev/shm and /var/tmp; no network, IPC or UTS of the
host; no environment beyond a few fixed variables; no run directory, dataset or home. Run as root, bubblewrap
keeps only CAP_SETUID/CAP_SETGID for the child, which drops to a fresh unprivileged uid before it loads the
program (so RLIMIT_NPROC holds and every capability is gone); otherwise bubblewrap makes a user namespace.
`EVALKIT_BWRAP` names the binary (default: `bwrap` on PATH; `none` = as if missing).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from evalkit.errors import UsageError

HERE = Path(__file__).resolve().parent
CHILD = HERE / "sandbox_child.py"
CODEC = HERE / "plain_values.py"
BOX = "/sandbox"  # where the two scripts appear inside the sandbox
BOX_SITE = "/sandbox/site"  # numpy, the one third-party package a program may import
TMPFS_BYTES = 64 * 1024**2

_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


class IsolationJson(TypedDict, total=False):
    """The manifest's `code_isolation`: which sandbox ran model-written code, and how (or why none did)."""

    tool: str | None
    version: str | None
    unsafe_exec: bool
    uid: str
    namespaces: list[str]
    note: str


@dataclass(frozen=True)
class Isolation:
    """The isolation model-written code runs under: `bubblewrap` (with its binary) or `none`."""

    tool: str
    binary: str | None = None
    version: str | None = None

    @property
    def isolated(self) -> bool:
        """Whether a real sandbox is in use."""
        return self.tool == "bubblewrap"

    def manifest(self) -> IsolationJson:
        """What the manifest records as `code_isolation`."""
        if not self.isolated:
            return {
                "tool": "none",
                "unsafe_exec": True,
                "note": "model-written code ran with resource limits only (--unsafe-exec)",
            }
        return {
            "tool": "bubblewrap",
            "version": self.version,
            "unsafe_exec": False,
            "uid": "fresh unprivileged uid" if os.getuid() == 0 else "user namespace",
            "namespaces": ["mount", "pid", "net", "ipc", "uts"] + ([] if os.getuid() == 0 else ["user"]),
        }

    def site(self) -> str | None:
        """The directory the child adds to `sys.path` for numpy (None when numpy is not installed)."""
        dirs = _numpy_dirs()
        if not dirs:
            return None
        return BOX_SITE if self.isolated else str(Path(dirs[0]).parent)

    def argv(self) -> tuple[list[str], dict[str, str] | None]:
        """The command line that starts the child (and the environment to start it with)."""
        python = os.path.realpath(sys.executable)
        if not self.isolated:
            return [python, "-I", str(CHILD)], dict(_ENV)
        # -S: no site module (the interpreter's site-packages are hidden; the child puts numpy on the path)
        return [*self._bwrap(python), python, "-I", "-S", f"{BOX}/{CHILD.name}"], {}

    def _bwrap(self, python: str) -> list[str]:
        a = [self.binary or "bwrap", "--ro-bind", "/usr", "/usr"]
        for top in ("bin", "lib", "lib64", "lib32", "sbin"):
            p = Path("/") / top
            if p.is_symlink():
                a += ["--symlink", os.readlink(p), str(p)]
            elif p.is_dir():
                a += ["--ro-bind", str(p), str(p)]
        binds = _python_dirs(python)
        made: set[str] = {"/", "/usr"}
        for d in binds:
            a += _parents(d, made) + ["--ro-bind", d, d]
        for hidden in _site_dirs():  # empty, read-only to the program, and a page at most even if written
            a += ["--perms", "0555", "--size", "4096", "--tmpfs", hidden]
        site = _numpy_dirs()
        if site:
            a += ["--dir", "/sandbox", "--dir", BOX_SITE]
            for d in site:
                a += ["--ro-bind", d, f"{BOX_SITE}/{Path(d).name}"]
        a += [
            "--ro-bind",
            str(CHILD),
            f"{BOX}/{CHILD.name}",
            "--ro-bind",
            str(CODEC),
            f"{BOX}/{CODEC.name}",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
        ]
        for tmp in ("/tmp", "/dev/shm", "/var/tmp"):
            if tmp == "/var/tmp":
                a += ["--dir", "/var"]
            a += ["--perms", "1777", "--size", str(TMPFS_BYTES), "--tmpfs", tmp]
        a += [
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--chdir",
            "/tmp",
        ]
        if os.getuid() == 0:
            a += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            a += ["--unshare-user"]
        for k, v in _ENV.items():
            a += ["--setenv", k, v]
        return a + ["--remount-ro", "/", "--"]


def _parents(d: str, made: set[str]) -> list[str]:
    # Directories bubblewrap creates on the way to a bind are world-traversable (the host's /root is not).
    out = []
    for parent in reversed(Path(d).parents):
        s = str(parent)
        if s not in made:
            made.add(s)
            out += ["--perms", "0755", "--dir", s]
    return out


def _python_dirs(python: str) -> list[str]:
    dirs = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)}
    if not any(python.startswith(d + os.sep) for d in dirs):
        dirs.add(os.path.dirname(python))
    return sorted(d for d in dirs if d != "/usr" and not d.startswith("/usr/"))


def _site_dirs() -> list[str]:
    # The interpreter's own site-packages hold whatever was installed there (a dataset package, a cache): hidden.
    base = {
        "base": sys.base_prefix,
        "platbase": sys.base_exec_prefix,
        "installed_base": sys.base_prefix,
        "installed_platbase": sys.base_exec_prefix,
    }
    paths = {sysconfig.get_paths(vars=base)[k] for k in ("purelib", "platlib")}
    ver = f"{sys.version_info[0]}.{sys.version_info[1]}"
    paths |= {
        "/usr/lib/python3/dist-packages",
        f"/usr/local/lib/python{ver}/dist-packages",
        f"/usr/local/lib/python{ver}/site-packages",
    }
    return sorted(p for p in paths if os.path.isdir(p))


def _numpy_dirs() -> list[str]:
    try:
        import numpy
    except ImportError:
        return []
    pkg = Path(numpy.__file__).resolve().parent
    return [str(p) for p in (pkg, pkg.with_name("numpy.libs")) if p.is_dir()]


def find_bubblewrap() -> Isolation | str:
    """Bubblewrap when it is installed and works here (tried once: mount, PID and network namespaces), else why
    not, in a few words."""
    name = os.environ.get("EVALKIT_BWRAP", "bwrap")
    binary = shutil.which(name) if name and name != "none" else None
    if binary is None:
        return "bubblewrap (bwrap) is not installed"
    try:
        version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout.split()
        iso = Isolation("bubblewrap", binary, version[-1] if version else None)
        argv, _ = iso.argv()
        probe = subprocess.run(
            [*argv[:-3], "-I", "-S", "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"bubblewrap could not be started ({type(e).__name__})"
    if probe.returncode != 0 or probe.stdout.strip() != "2":
        err = " ".join(probe.stderr.split())[:160] or f"exit {probe.returncode}"
        return f"bubblewrap does not work here ({err})"
    return iso


def choose_isolation(unsafe_exec: bool) -> Isolation:
    """Bubblewrap; without it a usage error, unless `unsafe_exec` allows running code with resource limits only."""
    found = find_bubblewrap()
    if isinstance(found, Isolation):
        return found
    if unsafe_exec:
        return Isolation("none")
    raise UsageError(
        f"{found}: HumanEval+ runs model-written code and needs it (apt-get install bubblewrap), "
        "or pass --unsafe-exec to run it with resource limits only"
    )
