"""Downloads pinned upstream files from PyPI into the cache, verifying each sha256 before it is used.

Cache: ``$JAX_IPU_CACHE`` or ``~/.cache/jax-ipu``. A file in ``downloads/`` is trusted only after its sum matches the
pin; a second build needs no network. Downloads use pip (so the user's index, proxy and certificate settings apply):
``pip download --no-deps --only-binary`` for wheels (with the wheel's own python/platform tags) and ``--no-binary``
for the sdist.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from build_tools.pins import PINS_FILE, Artifact

SDIST_BUILD_REQUIRES = ("setuptools", "wheel")


class FetchError(RuntimeError):
    pass


def cache_dir() -> Path:
    root = os.environ.get("JAX_IPU_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "jax-ipu")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(path: Path, artifact: Artifact) -> None:
    """Raises FetchError naming the file, both sums and the way out if ``path`` is not the pinned file."""
    actual = sha256_of(path)
    if actual != artifact.sha256:
        raise FetchError(
            f"sha256 mismatch for {path.name} ({path}):\n"
            f"  expected {artifact.sha256} (pinned in {PINS_FILE})\n"
            f"  actual   {actual}\n"
            f"If the cached file is corrupt, delete it and rebuild: rm '{path}'. If upstream really changed, check the "
            f"new "
            f"file on PyPI and update sha256 in build_tools/pins.toml (README.md: 'Bumping an upstream version')."
        )


def _pip_download_args(artifact: Artifact) -> list[str]:
    spec = f"{artifact.package}=={artifact.version}"
    if artifact.is_sdist:
        # --no-build-isolation: pip prepares the sdist's metadata with the setuptools already installed (no extra
        # download).
        # --ignore-requires-python: the download only, on the build host's Python (jax 0.12 wants 3.12).
        return [spec, "--no-binary", ":all:", "--no-build-isolation", "--ignore-requires-python"]
    # jaxlib-0.4.13-cp38-cp38-manylinux2014_x86_64.whl -> python tag, abi tag, platform tags (may be compressed: a.b)
    name_ver_py_abi_plat = artifact.filename[: -len(".whl")].split("-")
    py, abi, plats = name_ver_py_abi_plat[-3], name_ver_py_abi_plat[-2], name_ver_py_abi_plat[-1]
    args = [spec, "--only-binary", ":all:", "--implementation", py[:2], "--abi", abi]
    args += ["--python-version", py[2:3] + "." + py[3:]] if py.startswith("cp") else []
    for plat in plats.split("."):
        args += ["--platform", plat]
    return args


def download(artifact: Artifact, dest_dir: Path) -> Path:
    with tempfile.TemporaryDirectory(dir=dest_dir, prefix=".download-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-d", tmp]
        cmd += _pip_download_args(artifact)
        print(f"[fetch] downloading {artifact.filename} from PyPI: {' '.join(cmd[3:])}", flush=True)
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        got = Path(tmp) / artifact.filename
        if proc.returncode != 0 or not got.exists():
            found = ", ".join(sorted(os.listdir(tmp))) or "nothing"
            raise FetchError(
                f"could not download {artifact.filename} (pip exit {proc.returncode}; got {found}).\n"
                f"{proc.stdout[-3000:]}\n"
                f"Without network, place the file by hand at {dest_dir / artifact.filename}; it is verified against "
                f"the pin."
            )
        verify(got, artifact)
        final = dest_dir / artifact.filename
        os.replace(got, final)
        return final


def fetch(artifact: Artifact, *, offline: bool = False) -> Path:
    """Returns the verified cached path of ``artifact``, downloading it first if needed."""
    downloads = cache_dir() / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    path = downloads / artifact.filename
    if path.exists():
        verify(path, artifact)
        return path
    if offline or os.environ.get("JAX_IPU_OFFLINE"):
        raise FetchError(f"{artifact.filename} is not in the cache ({downloads}) and downloads are disabled (offline).")
    return download(artifact, downloads)


def extract_header_tree(artifact: Artifact) -> Path:
    """Extracts only the pinned header members of the TF wheel; returns the include root (cached by the wheel's sum
    and the members: a pin that adds one extracts again)."""
    members_key = hashlib.sha256("\n".join(artifact.extra["members"]).encode()).hexdigest()[:8]
    out = cache_dir() / "headers" / f"{artifact.package}-{artifact.version}-{artifact.sha256[:16]}-{members_key}"
    include_root = out / artifact.extra["include_root"]
    marker = out / ".complete"
    if marker.exists():
        return include_root
    wheel = fetch(artifact)
    members = tuple(artifact.extra["members"])
    if out.exists():
        shutil.rmtree(out)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    n = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir() or not info.filename.startswith(members):
                continue
            target = tmp / info.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            n += 1
    header = tmp / artifact.extra["include_root"] / artifact.extra["header"]
    if not header.exists():
        raise FetchError(
            f"{artifact.filename} has no {artifact.extra['header']} under {artifact.extra['include_root']}")
    (tmp / ".complete").write_text(f"{n} files from {artifact.filename}\n")
    os.replace(tmp, out)
    print(f"[fetch] extracted {n} header files from {artifact.filename}", flush=True)
    return include_root
