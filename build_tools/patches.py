"""Pristine upstream trees and the patch series applied to them.

patches/<project>/<version>/series lists ``git format-patch`` files in order (blank lines and ``#`` comments ignored).
They apply with ``git apply`` to:
- jax: the sdist tree (the ``jax-<version>/`` top directory stripped);
- jaxlib: the Python files (``*.py``) of the wheel, at their paths inside the wheel.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path
from typing import List

from build_tools.fetch import fetch
from build_tools.pins import REPO, Artifact

PATCHES = REPO / "patches"
REQUIRED_HEADER_WORDS = ("What:", "Why:", "When to drop:")


class PatchError(RuntimeError):
    pass


def series_dir(artifact: Artifact) -> Path:
    return PATCHES / artifact.package / artifact.version


def read_series(artifact: Artifact) -> List[Path]:
    directory = series_dir(artifact)
    series = directory / "series"
    if not series.exists():
        raise PatchError(f"missing {series}: every pinned upstream source needs a series file (may list no patches)")
    names = [ln.split("#", 1)[0].strip() for ln in series.read_text().splitlines()]
    paths = [directory / n for n in names if n]
    for p in paths:
        if not p.exists():
            raise PatchError(f"{series} lists {p.name}, which does not exist")
    return paths


def extract_pristine(artifact: Artifact, dest: Path) -> Path:
    """Writes the pristine tree that the series of ``artifact`` applies to into ``dest`` (replaced if present)."""
    src = fetch(artifact)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    if artifact.is_sdist:
        top = f"{artifact.package}-{artifact.version}/"
        with tarfile.open(src) as tf:
            for m in tf.getmembers():
                if not m.name.startswith(top) or not (m.isfile() or m.isdir()):
                    continue
                rel = m.name[len(top):]
                if not rel or rel.startswith("/") or ".." in Path(rel).parts:
                    continue
                target = dest / rel
                if m.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with tf.extractfile(m) as f:  # type: ignore[union-attr]
                    target.write_bytes(f.read())
    else:
        with zipfile.ZipFile(src) as zf:
            for info in zf.infolist():
                if info.filename.endswith(".py"):
                    target = dest / info.filename
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(zf.read(info))
    return dest


def _git_apply(tree: Path, patch: Path, check: bool) -> subprocess.CompletedProcess:
    cmd = ["git", "apply", "--verbose", "-p1"] + (["--check"] if check else []) + [str(patch)]
    env = dict(os.environ)
    # Never let git discover an enclosing repository (e.g. build/ inside this one): it would apply paths relative
    # to that repository's root and silently skip ours.
    env["GIT_CEILING_DIRECTORIES"] = str(tree.resolve().parent)
    return subprocess.run(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def apply_series(artifact: Artifact, tree: Path) -> List[Path]:
    """Applies the series of ``artifact`` to ``tree`` in order; raises PatchError naming the patch that failed."""
    applied: List[Path] = []
    for patch in read_series(artifact):
        proc = _git_apply(tree, patch, check=True)
        if proc.returncode == 0:
            proc = _git_apply(tree, patch, check=False)
        if proc.returncode != 0:
            raise PatchError(
                f"{patch.relative_to(REPO)} does not apply to pristine {artifact.filename} "
                f"(after {len(applied)} earlier patch(es) of the series):\n{proc.stdout}\n"
                f"Refresh it against the pinned source (README.md: 'Changing a patch')."
            )
        applied.append(patch)
    return applied


def check_headers(artifact: Artifact) -> List[str]:
    """Problems with the patch files' headers and the series: each needs What / Why / When to drop."""
    problems = []
    listed = read_series(artifact)
    for patch in listed:
        text = patch.read_text(errors="replace")
        message = text.split("\n---\n", 1)[0]
        for word in REQUIRED_HEADER_WORDS:
            if word not in message:
                problems.append(f"{patch.relative_to(REPO)}: commit message lacks '{word}'")
    on_disk = sorted(p for p in series_dir(artifact).glob("*.patch"))
    for p in on_disk:
        if p not in listed:
            problems.append(f"{p.relative_to(REPO)} is not listed in its series file")
    return problems


def patched_tree(artifact: Artifact, dest: Path) -> Path:
    """The pristine tree of ``artifact`` with its series applied, in ``dest``; kept from the last build when neither
    the (verified) upstream file nor a patch has changed since (its marker is written once the series applied)."""
    digest = hashlib.sha256(artifact.sha256.encode())
    for patch in [series_dir(artifact) / "series", *read_series(artifact)]:
        digest.update(b"\0" + patch.name.encode() + b"\0" + patch.read_bytes())
    marker = dest / ".patched"
    if marker.exists() and marker.read_text() == digest.hexdigest():
        return dest
    extract_pristine(artifact, dest)
    apply_series(artifact, dest)
    marker.write_text(digest.hexdigest())
    return dest
