"""The whole build: pinned upstream files -> patched trees -> native library -> two wheels in dist/, checked.

A stamp (build/<series>/stamp.json) records a digest of every input and the sums of the wheels written, so
``--if-stale`` (used by ``nox -s tests``) reuses dist/ when nothing changed.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from build_tools import native, patches, wheels
from build_tools.fetch import fetch, sha256_of
from build_tools.pins import REPO, Artifact, Pins, Series, load

# $JAX_IPU_BUILD_DIR moves the work trees elsewhere (`python -m build_tools reproduce` builds twice side by side).
BUILD = Path(os.environ.get("JAX_IPU_BUILD_DIR") or REPO / "build")
DIST = REPO / "dist"
# Everything that can change a wheel. Build outputs and caches are excluded below.
INPUT_PATHS = ("build_tools", "patches", "jax_ipu_shim", "noxfile.py")
IGNORED_PARTS = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


class BuildError(RuntimeError):
    pass


def stamp_path(series: Series) -> Path:
    return BUILD / series.name / "stamp.json"


def inputs_digest(cxx: Optional[str]) -> str:
    h = hashlib.sha256()
    for top in INPUT_PATHS:
        root = REPO / top
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []
        for p in files:
            rel = p.relative_to(REPO)
            if IGNORED_PARTS & set(rel.parts) or p.suffix in (".pyc", ".so", ".o"):
                continue
            h.update(str(rel).encode() + b"\0" + p.read_bytes() + b"\0")
    h.update(("cxx=" + (cxx or os.environ.get("JAX_IPU_CXX") or "zig")).encode())
    return h.hexdigest()


def is_up_to_date(series: Series, out_dir: Path, cxx: Optional[str]) -> bool:
    path = stamp_path(series)
    if not path.exists():
        return False
    stamp = json.loads(path.read_text())
    if stamp.get("inputs") != inputs_digest(cxx) or stamp.get("dist") != str(out_dir.resolve()):
        return False
    for name, digest in stamp.get("wheels", {}).items():
        wheel = out_dir / name
        if not wheel.exists() or sha256_of(wheel) != digest:
            return False
    return bool(stamp.get("wheels"))


def check_version_patch(artifact: Artifact, tree: Path, label: str) -> None:
    """`<package>.__version__` stays upstream's, which libraries parse as dot-separated integers; the label is the
    wheel's alone: in the jax wheel it comes from the patched setup.py (checked here against the pin), the jaxlib
    wheel's metadata is rewritten (wheels.py)."""
    version_py = tree / artifact.package / "version.py"
    # jax 0.4.13 spells it `__version__ = "..."`; later series compute __version__ from `_release_version`.
    text = version_py.read_text()
    m = (re.search(r'^__version__ = "([^"]+)"', text, flags=re.M)
         or re.search(r"^_release_version: str = '([^']+)'", text, flags=re.M))
    found = m.group(1) if m else None
    where = patches.series_dir(artifact).relative_to(REPO)
    if found != artifact.version:
        raise BuildError(f"{artifact.package}/version.py says __version__ = {found!r} after patching, but "
                         f"build_tools/pins.toml pins {artifact.version!r}: the patches in {where} must leave it as "
                         "upstream's (patches/README.md)")
    if artifact.package == "jax" and f"+{label}'" not in (tree / "setup.py").read_text():
        raise BuildError(f"jax's setup.py does not add the label '+{label}' (build_tools/pins.toml) to the wheel's "
                         f"version after patching: refresh the version patch in {where} (patches/README.md)")


def series_dist(pins: Pins, series: Series, out_dir: Path = DIST) -> Path:
    """Where a series' wheels go: dist/ itself for the default series (0.4.13: `pip install dist/*.whl`), and
    dist/<series>/ for every other (`pip install dist/0.12.0.1/*.whl`)."""
    return out_dir if series.name == pins.default_series else out_dir / series.name


def build_all(out_dir: Path = DIST, series_names: Optional[List[str]] = None, cxx: Optional[str] = None,
              jobs: Optional[int] = None, if_stale: bool = False) -> List[Dict[str, object]]:
    """Every series (pins.toml order), or those named; each into its own place under ``out_dir``."""
    pins = load()
    chosen = [pins.get_series(n) for n in series_names] if series_names else pins.all_series()
    # A cold build: the emulator's objects compile and zig's libc++ for the target builds while the first series
    # downloads, and the later series' downloads go on while the first one compiles (network and CPU side by side).
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as background:
        if not (if_stale and all(is_up_to_date(s, series_dist(pins, s, out_dir), cxx) for s in chosen)):
            background.submit(native.compile_emulator, chosen[0], cxx, jobs)
        background.submit(native.warm_toolchain, chosen, cxx)
        fetched: Dict[str, concurrent.futures.Future[None]] = {}

        def fetch_later() -> None:
            fetched.update({s.name: background.submit(_fetch_all, s) for s in chosen[1:]})

        return [build(series_dist(pins, s, out_dir), s.name, cxx, jobs, if_stale, fetched.get(s.name),
                      fetch_later if i == 0 else None) for i, s in enumerate(chosen)]


def _fetch_all(series: Series) -> None:
    for artifact in series.artifacts:
        fetch(artifact)


def build(out_dir: Path = DIST, series_name: Optional[str] = None, cxx: Optional[str] = None,
          jobs: Optional[int] = None, if_stale: bool = False,
          fetched: Optional[concurrent.futures.Future[None]] = None,
          after_fetch: Optional[Callable[[], None]] = None) -> Dict[str, object]:
    """One series' wheels into ``out_dir``. ``fetched``: its downloads, already under way; ``after_fetch``: called
    once its own downloads are done (build_all: the next series' start then)."""
    pins: Pins = load()
    series = pins.get_series(series_name)
    if if_stale and is_up_to_date(series, out_dir, cxx):
        stamp = json.loads(stamp_path(series).read_text())
        print(f"[build] dist/ is up to date with the sources ({', '.join(stamp['wheels'])}); not rebuilding",
              flush=True)
        return stamp
    started = time.monotonic()
    digest = inputs_digest(cxx)
    if fetched is not None:
        fetched.result()  # its downloads, verified already (its error, if any, is this series' own)
    else:
        _fetch_all(series)
    if after_fetch is not None:
        after_fetch()

    work = BUILD / series.name
    work.mkdir(parents=True, exist_ok=True)
    jax_tree = patches.patched_tree(series.jax, work / "jax-sdist")
    jaxlib_tree = patches.patched_tree(series.jaxlib, work / "jaxlib-py")
    check_version_patch(series.jax, jax_tree, pins.label)
    check_version_patch(series.jaxlib, jaxlib_tree, pins.label)
    print("[build] patch series applied", flush=True)

    library = native.build_library(series, work / "lib", cxx=cxx, jobs=jobs)

    out_dir.mkdir(parents=True, exist_ok=True)
    for old in [p for pattern in ("jax-*.whl", "jaxlib-*.whl", "jax_ipu_plugin-*.whl") for p in out_dir.glob(pattern)]:
        old.unlink()
    plugin = series.packaging == "plugin"
    jaxlib_wheel = wheels.build_jaxlib_wheel(pins, series, jaxlib_tree, None if plugin else library, out_dir)
    print(f"[build] wrote {jaxlib_wheel}", flush=True)
    jax_wheel = _jax_wheel(pins, series, jax_tree, out_dir)
    print(f"[build] wrote {jax_wheel}", flush=True)
    built = [jax_wheel, jaxlib_wheel]
    native_wheel = jaxlib_wheel
    if plugin:
        native_wheel = wheels.build_plugin_wheel(pins, series, library, out_dir)
        built.append(native_wheel)
        print(f"[build] wrote {native_wheel}", flush=True)
    tag, line = _check_platform(native_wheel, series, library, cxx)
    print(f"[build] auditwheel: {native_wheel.name} {line}", flush=True)

    stamp = {
        "series": series.name,
        "inputs": digest,
        "dist": str(out_dir.resolve()),
        "portable": native.is_portable(cxx),
        "auditwheel": line,
        "platform_tag": tag,
        "wheels": {w.name: sha256_of(w) for w in built},
        "seconds": round(time.monotonic() - started, 1),
    }
    stamp_path(series).write_text(json.dumps(stamp, indent=2) + "\n")
    for w in built:
        print(f"[build] {w.name}: {w.stat().st_size / 1e6:.1f} MB", flush=True)
    print(f"[build] series {series.name} built in {stamp['seconds']:.0f} s", flush=True)
    return stamp


def _jax_wheel(pins: Pins, series: Series, jax_tree: Path, out_dir: Path) -> Path:
    """wheels.build_jax_wheel, whose pip run takes seconds: pure Python, and byte-reproducible, so the wheel last built
    from the same patched tree (its marker names the upstream file and the patches), label and wheel code is kept in
    build/<series>/ and copied (a change to the native library alone rebuilds in less time)."""
    key = hashlib.sha256("\0".join([(jax_tree / ".patched").read_text(), pins.labelled(series.jax.version),
                                     sha256_of(REPO / "build_tools" / "pins.toml"),
                                     *(sha256_of(Path(str(m.__file__))) for m in (wheels, wheels.sbom))]).encode())
    kept = BUILD / series.name / "jax-wheel" / key.hexdigest()[:16]
    wheel = next(iter(sorted(kept.glob("jax-*.whl"))), None) if kept.is_dir() else None
    if wheel is None:
        shutil.rmtree(kept.parent, ignore_errors=True)
        wheel = wheels.build_jax_wheel(pins, series, jax_tree, kept)
    out_dir.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy2(wheel, out_dir / wheel.name))


def _check_platform(wheel: Path, series: Series, library: Path, cxx: Optional[str]) -> Tuple[str, str]:
    """wheels.check_platform, whose auditwheel run reads every shared object of the wheel (seconds for jaxlib's):
    for a portable build its verdict is kept in build/<series>/ for the same library and upstream wheel, the only
    ELF files the wheel holds."""
    strict = native.is_portable(cxx)
    if not strict:  # (a development compiler's warning is printed every time)
        return wheels.check_platform(wheel, series, strict=False)
    key = hashlib.sha256("\0".join([series.jaxlib.sha256, sha256_of(library), series.platform_tag, str(strict),
                                     wheel.name]).encode()).hexdigest()
    kept = BUILD / series.name / "auditwheel.json"
    if kept.exists():
        verdict = json.loads(kept.read_text())
        if verdict.get("key") == key:
            return verdict["tag"], verdict["line"]
    tag, line = wheels.check_platform(wheel, series, strict=strict)
    kept.write_text(json.dumps({"key": key, "tag": tag, "line": line}) + "\n")
    return tag, line


def clean() -> List[Path]:
    removed = []
    for p in (BUILD, DIST):
        if p.exists():
            shutil.rmtree(p)
            removed.append(p)
    return removed
