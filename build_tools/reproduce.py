"""Two clean builds of the committed tree must give byte-identical wheels (``python -m build_tools reproduce``).

Each build runs on its own ``git archive`` export of HEAD, at a different path, with its own cache
($JAX_IPU_CACHE: objects, zig's caches, generated headers) and build directory. Only the pinned downloads are shared
(inputs, verified by their sums). The sums of the wheels are compared, then every file inside differing wheels.

``--share-cache`` uses this checkout's cache ($JAX_IPU_CACHE or ~/.cache/jax-ipu) for both: a quick check that
objects compiled in this checkout are reused by exports at other paths (0 compiled), and that linking and writing
the wheels give the same bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Optional

from build_tools.fetch import cache_dir, sha256_of
from build_tools.pins import REPO


def _export_head(dest: Path) -> str:
    dest.mkdir(parents=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, stdout=subprocess.PIPE, text=True,
                            check=True).stdout.strip()
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=REPO, stdout=subprocess.PIPE, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return commit


@dataclasses.dataclass
class Build:
    dist: Path
    wheels: Dict[str, str]  # name -> sha256
    compiled: int  # objects compiled (0: every object came from the cache)
    seconds: int


def _build(src: Path, cache: Path, work: Path, jobs: Optional[int]) -> Build:
    dist = work / "dist"
    env = dict(os.environ, JAX_IPU_CACHE=str(cache), JAX_IPU_BUILD_DIR=str(work / "build"))
    for name in ("ZIG_GLOBAL_CACHE_DIR", "ZIG_LOCAL_CACHE_DIR", "JAX_IPU_CXX"):
        env.pop(name, None)
    cmd = [sys.executable, "-m", "build_tools", "build", "--out", str(dist)] + (["--jobs", str(jobs)] if jobs else [])
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=src, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"build in {src} failed (exit {proc.returncode}):\n{proc.stdout[-5000:]}")
    compiled = sum(1 for ln in proc.stdout.splitlines() if ln.startswith("[native] compiled"))
    wheels = {p.name: sha256_of(p) for p in sorted(dist.glob("*.whl"))}
    return Build(dist, wheels, compiled, round(time.monotonic() - started))


def differing_files(a: Path, b: Path) -> List[str]:
    """Entries of two wheels (zips) whose bytes or metadata differ, or that only one has."""
    def entries(path: Path) -> Dict[str, str]:
        with zipfile.ZipFile(path) as zf:
            return {i.filename: hashlib.sha256(zf.read(i)).hexdigest() + f" {i.date_time} {i.external_attr:o}"
                    for i in zf.infolist()}
    ea, eb = entries(a), entries(b)
    return sorted(n for n in set(ea) | set(eb) if ea.get(n) != eb.get(n))


def compare(dir_a: Path, dir_b: Path) -> int:
    """Every wheel name present in both folders must have the same bytes; prints what differs inside."""
    common = sorted({p.name for p in dir_a.glob("*.whl")} & {p.name for p in dir_b.glob("*.whl")})
    if not common:
        print(f"[compare] FAIL no wheel name is in both {dir_a} and {dir_b}", flush=True)
        return 1
    failures = 0
    for name in common:
        a, b = sha256_of(dir_a / name), sha256_of(dir_b / name)
        if a == b:
            print(f"[compare] identical {a}  {name}", flush=True)
        else:
            failures += 1
            print(f"[compare] DIFFERENT {name}: {', '.join(differing_files(dir_a / name, dir_b / name))}", flush=True)
    return 1 if failures else 0


def reproduce(jobs: Optional[int] = None, share_cache: bool = False, keep: Optional[Path] = None) -> int:
    root = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="jax-ipu-reproduce-"))
    try:
        results = []
        shared = cache_dir()
        for run in ("a", "b-elsewhere"):
            src = root / run / "src"
            commit = _export_head(src)
            cache = shared if share_cache else root / run / "cache"
            # The pinned upstream files are inputs (each checked against its sum before use), not build outputs.
            downloads = cache / "downloads"
            if not downloads.exists():
                shutil.copytree(cache_dir() / "downloads", downloads)
            print(f"[reproduce] build {run}: {commit[:12]} exported to {src}, cache {cache}", flush=True)
            result = _build(src, cache, root / run, jobs)
            print(f"[reproduce] build {run}: {result.compiled} objects compiled, {result.seconds} s", flush=True)
            for name, digest in result.wheels.items():
                print(f"[reproduce]   {digest}  {name}", flush=True)
            results.append(result)
        a, b = results
        if a.wheels == b.wheels and a.wheels:
            print(f"[reproduce] OK: both builds of {commit[:12]} gave byte-identical wheels", flush=True)
            return 0
        for name in sorted(set(a.wheels) | set(b.wheels)):
            pa, pb = a.dist / name, b.dist / name
            if not (pa.exists() and pb.exists()):
                print(f"[reproduce] DIFFERENT: {name} only in one build", flush=True)
            elif sha256_of(pa) != sha256_of(pb):
                print(f"[reproduce] DIFFERENT: {name}: {', '.join(differing_files(pa, pb)) or 'zip structure'}",
                      flush=True)
        return 1
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
