"""Assembles dist/jax-ipu-<version>.zip: a folder that installs jax and jaxlib with the IPU backend without network.

    jax-ipu-0.4.13+ipu.1/
      jax-…whl, jaxlib-…whl               our two wheels (dist/, rebuilt first if stale)
      numpy-…whl, scipy-…whl, …           every runtime dependency for cp38 manylinux x86_64, from the hash lock
                                          build_tools/test-requirements.txt (the wheels the test venvs install)
      SHA256SUMS                          `sha256sum -c SHA256SUMS` format, every other file of the folder
      wheels.html                         one <a href> per wheel (pip install -f wheels.html)
      simple/                             a PEP 503 index of those wheels, with PEP 691's JSON beside each page
                                          (pip install --index-url file://<folder>/simple)
      INSTALL                             the exact commands
      LICENSES/                           the notices of everything redistributed

The zip is deterministic: sorted entries, fixed timestamps and permissions, so the same wheels give the same zip.
Also written: dist/SHA256SUMS (our wheels and the zip: what a GitHub Release attaches) and, with --pages-url,
dist/pages/wheels.html (our wheels linked at their release URLs; pip takes their dependencies from the index). The
current series' (jax, jaxlib and jax-ipu-plugin for Python 3.12) go to dist/<series>/ and dist/pages/<series>/.
"""

from __future__ import annotations

import email.parser
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from build_tools import build
from build_tools import wheels as wheels_mod
from build_tools.fetch import cache_dir, sha256_of
from build_tools.pins import REPO, Pins, Series, load

LOCK = REPO / "build_tools" / "test-requirements.txt"
ZIP_DATE = (1980, 1, 1, 0, 0, 0)
# What the markers of Requires-Dist are evaluated against: the wheels' target, not the host that assembles the zip.
LICENSE_FILE = re.compile(r"(^|/)(LICEN[CS]E|COPYING|NOTICE|AUTHORS)[^/]*$|/licenses/", re.I)

INSTALL_TEXT = """\
jax-ipu {version}: jax and jaxlib {jax_version} with a Graphcore IPU backend (the `ipu` device, an emulated IPU),
for Python {python} on Linux x86-64 (glibc >= {glibc}). This folder holds every wheel needed; no network is used.

1. Check that the files are the released ones (run in this folder; every line must say OK):

    sha256sum -c SHA256SUMS

2. Install into a fresh Python {python} environment, from this folder only:

    python{python} -m venv venv && . venv/bin/activate
    pip install --no-index --find-links . {packages}

   (`pip install --no-index -f wheels.html {packages}` does the same through the index page, and
   `pip install --index-url "file://$PWD/simple" {packages}` through the PEP 503 index in simple/.)

3. Run the minimal example:

    python - <<'EOF'
{example}EOF

   It prints [ 2.  5. 10.] and the ipu device it ran on.

Licences: LICENSES/README lists every wheel with its licence and the files holding the notices.
Source and how to rebuild these wheels bit for bit: {url} (README, "Release").
"""

EXAMPLE = """\
from functools import partial
import jax
import numpy as np

@partial(jax.jit, backend="ipu")
def ipu_function(data):
    return data**2 + 1

data = np.array([1, -2, 3], np.float32)
output = ipu_function(data)
print(output, next(iter(output.devices())))
"""

JAXLIB_CONTENTS = """\
jax and jaxlib {version}, as built by jax-ipu.

jax {version}: the upstream jax {jax_version} source release (Apache-2.0, Google LLC) with the patches of
  patches/jax/{jax_version}/ applied. Its licence: jax/LICENSE.

jaxlib {version}: the upstream jaxlib {jax_version} wheel for cp38 manylinux2014 (Apache-2.0, Google LLC), unchanged
  but for its version label (patches/jaxlib/{jax_version}/ patches nothing), plus jax-ipu's backend:
  - jaxlib/, the upstream binaries (XLA, the cpu backend, MLIR and their bundled third-party code) and Python files;
    the upstream wheel's notices, including those third-party licences: jaxlib/LICENSE.txt;
  - jax_ipu/ and jax_plugins/ipu/, jax-ipu's Python packages (the PJRT plugin, the StableHLO compiler front end),
    distributed under Apache-2.0 like the wheel they ship in;
  - jax_ipu/lib/libjax_ipu.so, jax-ipu's native library (PJRT C API layer and IPU emulator), Apache-2.0; it links
    LLVM's libc++, libc++abi and libunwind statically (Apache-2.0 WITH LLVM-exception): jaxlib/libcxx-LICENSE.TXT.
"""

PLUGIN_CONTENTS = """\
jax, jaxlib and jax-ipu-plugin {version}, as built by jax-ipu.

jax {version}: the upstream jax {jax_version} source release (Apache-2.0, Google LLC) with the patches of
  patches/jax/{jax_version}/ applied (the version label). Its licence: jax/LICENSE.

jaxlib {version}: the upstream jaxlib {jax_version} wheel (Apache-2.0, Google LLC), unchanged but for its version
  label in the wheel's metadata; its notices: jaxlib/LICENSE.txt.

jax-ipu-plugin {version}: jax-ipu's backend, found by jax through its `jax_plugins` entry point:
  - jax_ipu/, the PJRT plugin's Python package and the StableHLO compiler front end, Apache-2.0;
  - jax_ipu/lib/libjax_ipu.so, the native library (PJRT C API 0.90 layer and IPU emulator), Apache-2.0; it links
    LLVM's libc++, libc++abi and libunwind statically (Apache-2.0 WITH LLVM-exception): its notices,
    jax-ipu-plugin/licenses/LICENSE and jax-ipu-plugin/licenses/libcxx-LICENSE.TXT.
"""


class ReleaseError(RuntimeError):
    pass


# ----------------------------------------------------------------------------------------------------- the lock

def read_lock(path: Path = LOCK) -> Dict[str, Tuple[str, List[str]]]:
    """{normalised name: (version, [sha256, ...])} from a pip requirements file of `name==version --hash=...` lines."""
    text = path.read_text().replace("\\\n", " ")
    lock = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"([A-Za-z0-9_.-]+)==([^\s;]+)", line)
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", line)
        if not m or not hashes:
            raise ReleaseError(f"{path.name}: not a hash-locked requirement: {line}")
        lock[normalise(m.group(1))] = (m.group(2), hashes)
    return lock


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        return email.parser.Parser().parsestr(zf.read(name).decode("utf-8"))


def runtime_requirements(wheel: Path, series: Series) -> List[str]:
    """Names a wheel requires at run time on the target (Python of the series, Linux, no extras)."""
    from packaging.requirements import Requirement  # build_tools/requirements.txt

    env = {"python_version": series.python, "python_full_version": series.python + ".0", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}
    names = []
    for spec in _metadata(wheel).get_all("Requires-Dist") or []:
        req = Requirement(spec)
        if req.marker is None or req.marker.evaluate(env):
            names.append(normalise(req.name))
    return names


def series_lock(series: Series) -> Path:
    """The series' test lock, which the release ships the runtime part of: test-requirements.txt for the default
    series, test-requirements-<python>.txt for the others (noxfile._lock)."""
    if series.name == load().default_series:
        return LOCK
    return LOCK.with_name(f"{LOCK.stem}-{series.python}{LOCK.suffix}")


def download_dependencies(ours: List[Path], series: Series, dest: Path) -> List[Path]:
    """Every runtime dependency of ``ours`` (transitively) as the locked cp38 manylinux wheel, hash-checked by pip and
    again here. Downloads go to the cache's wheelhouse; a file already there with the locked sum is reused."""
    lock_path = series_lock(series)
    lock = read_lock(lock_path)
    wheelhouse = cache_dir() / "wheelhouse" / series.name
    wheelhouse.mkdir(parents=True, exist_ok=True)
    wanted = [n for w in ours for n in runtime_requirements(w, series)]
    # Our own wheels satisfy each other's requirements (jax-ipu-plugin requires jax and jaxlib).
    own = {normalise(_metadata(w)["Name"]): w for w in ours}
    found: Dict[str, Path] = dict(own)
    while wanted:
        name = wanted.pop(0)
        if name in found:
            continue
        if name not in lock:
            raise ReleaseError(f"{name} is a runtime dependency but not in {lock_path.relative_to(REPO)}; add it "
                               "hash-locked "
                               "(pip download --only-binary=:all: with Python 3.8, pip hash)")
        version, hashes = lock[name]
        wheel = _locked_wheel(wheelhouse, name, version, hashes) or _pip_download(wheelhouse, name, version, hashes,
                                                                                 series)
        found[name] = wheel
        wanted += runtime_requirements(wheel, series)
    dest.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy2(found[n], dest / found[n].name)) for n in sorted(found) if n not in own]


def _locked_wheel(where: Path, name: str, version: str, hashes: List[str]) -> Optional[Path]:
    for candidate in sorted(where.glob("*.whl")):
        parts = candidate.name.split("-")
        if normalise(parts[0]) == name and parts[1] == version and sha256_of(candidate) in hashes:
            return candidate
    return None


def _pip_download(where: Path, name: str, version: str, hashes: List[str], series: Series) -> Path:
    with tempfile.TemporaryDirectory(prefix="jax-ipu-release-") as tmp:
        req = Path(tmp) / "req.txt"
        req.write_text(f"{name}=={version} " + " ".join(f"--hash=sha256:{h}" for h in hashes) + "\n")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "--only-binary=:all:",
               "--python-version", series.python, "--platform", series.platform_tag, "--implementation", "cp",
               "--abi", series.python_tag, "--disable-pip-version-check", "-d", tmp, "-r", str(req)]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        got = [p for p in Path(tmp).glob("*.whl")]
        if proc.returncode != 0 or len(got) != 1:
            raise ReleaseError(f"pip download of {name}=={version} for cp{series.python} {series.platform_tag} failed "
                               f"(exit {proc.returncode}):\n{proc.stdout[-3000:]}")
        if sha256_of(got[0]) not in hashes:
            raise ReleaseError(f"{got[0].name}: sha256 {sha256_of(got[0])} is not the locked one ({LOCK.name})")
        return Path(shutil.move(str(got[0]), where / got[0].name))


# ------------------------------------------------------------------------------------------------------ contents

def sha256sums(folder: Path, names: List[str]) -> str:
    return "".join(f"{sha256_of(folder / n)}  {n}\n" for n in sorted(names))


def wheels_html(wheels: List[Path], base_url: str = "") -> str:
    """A PEP 503-style flat page: one link per wheel with its sha256 (pip checks it), relative unless base_url."""
    links = []
    for w in sorted(wheels, key=lambda p: p.name):
        href = base_url + urllib.parse.quote(w.name) + "#sha256=" + sha256_of(w)
        links.append(f'    <a href="{html.escape(href)}">{html.escape(w.name)}</a><br>')
    return ("<!DOCTYPE html>\n<html>\n  <head><meta charset=\"utf-8\"><title>jax-ipu wheels</title></head>\n"
            "  <body>\n" + "\n".join(links) + "\n  </body>\n</html>\n")


SIMPLE_JSON = {"api-version": "1.0"}  # PEP 691's meta


def simple_index(wheels: List[Path]) -> Dict[str, bytes]:
    """A static PEP 503 index of ``wheels`` (which sit two levels above its project pages), with PEP 691's JSON form
    beside each page: simple/index.html and index.json list the projects; simple/<project>/index.html and index.json
    list its files with their sha256 and Requires-Python. pip reads a file:// index's index.html pages, so
    ``pip install --index-url file://<folder>/simple jax`` installs from the folder alone; a static server that maps
    ``Accept: application/vnd.pypi.simple.v1+json`` to index.json serves the JSON form."""
    projects: Dict[str, List[Path]] = {}
    for w in wheels:
        projects.setdefault(normalise(w.name.split("-")[0]), []).append(w)
    out: Dict[str, bytes] = {}

    def page(title: str, links: List[str]) -> bytes:
        return ("<!DOCTYPE html>\n<html>\n  <head><meta name=\"pypi:repository-version\" content=\"1.0\">"
                f"<title>{html.escape(title)}</title></head>\n  <body>\n" + "\n".join(links) +
                "\n  </body>\n</html>\n").encode()

    names = sorted(projects)
    out["simple/index.html"] = page("Simple index", [f'    <a href="{n}/">{n}</a><br>' for n in names])
    out["simple/index.json"] = (json.dumps({"meta": SIMPLE_JSON, "projects": [{"name": n} for n in names]},
                                           indent=1, sort_keys=True) + "\n").encode()
    for name in names:
        files, links = [], []
        for w in sorted(projects[name], key=lambda p: p.name):
            url = "../../" + urllib.parse.quote(w.name)
            digest = sha256_of(w)
            requires = _metadata(w).get("Requires-Python")
            attr = f' data-requires-python="{html.escape(requires)}"' if requires else ""
            links.append(f'    <a href="{html.escape(url)}#sha256={digest}"{attr}>{html.escape(w.name)}</a><br>')
            entry = {"filename": w.name, "url": url, "hashes": {"sha256": digest}}
            if requires:
                entry["requires-python"] = requires
            files.append(entry)
        out[f"simple/{name}/index.html"] = page(f"Links for {name}", links)
        out[f"simple/{name}/index.json"] = (json.dumps({"meta": SIMPLE_JSON, "name": name, "files": files},
                                                       indent=1, sort_keys=True) + "\n").encode()
    return out


def licence_files(wheels: List[Path], series: Series) -> Dict[str, bytes]:
    """LICENSES/<project>/<file> from each wheel's dist-info, the jaxlib wheel's contents and a README index."""
    files: Dict[str, bytes] = {}
    index = ["Licences of the wheels in this folder (from each wheel's metadata; notices in the folders named).", ""]
    for wheel in sorted(wheels, key=lambda p: p.name):
        meta = _metadata(wheel)
        project = normalise(meta["Name"])
        licence = meta.get("License-Expression") or meta.get("License") or ""
        if not licence or len(licence) > 80:  # some projects paste their whole licence into License:
            classifiers = [c.split(" :: ")[-1] for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
            licence = ", ".join(classifiers) or "see the notices"
        with zipfile.ZipFile(wheel) as zf:
            for name in sorted(zf.namelist()):
                top = name.split("/", 1)
                if name.endswith("/"):  # a directory entry (PEP 639 wheels keep licences under licenses/)
                    continue
                if len(top) == 2 and top[0].endswith(".dist-info") and LICENSE_FILE.search("/" + top[1]):
                    files[f"{project}/{top[1]}"] = zf.read(name)
        index.append(f"{wheel.name}\n    {licence}; LICENSES/{project}/")
    jaxlib_dir = "jaxlib"
    libcxx = _libcxx_licence()
    if libcxx is not None and series.packaging == "jaxlib":  # the plugin wheel carries its own (wheels.py)
        files[f"{jaxlib_dir}/libcxx-LICENSE.TXT"] = libcxx
    if "jax/LICENSE" not in files:  # the jax wheel carries the sdist's LICENSE; if a build ever drops it, take it there
        jax_licence = _jax_sdist_licence(series)
        if jax_licence is not None:
            files["jax/LICENSE"] = jax_licence
    contents = PLUGIN_CONTENTS if series.packaging == "plugin" else JAXLIB_CONTENTS
    files["CONTENTS"] = contents.format(version=load().labelled(series.jax.version),
                                        jax_version=series.jax.version).encode()
    index += ["", "CONTENTS says what the jax and jaxlib wheels are made of."]
    files["README"] = ("\n".join(index) + "\n").encode()
    return files


def _libcxx_licence() -> Optional[bytes]:
    path = wheels_mod._zig_libcxx_licence()
    return path.read_bytes() if path is not None else None


def _jax_sdist_licence(series: Series) -> Optional[bytes]:
    """The jax sdist's LICENSE (the jax wheel built from it may carry none in its dist-info)."""
    import tarfile

    from build_tools.fetch import fetch

    with tarfile.open(fetch(series.jax)) as tf:
        for member in tf.getmembers():
            if re.fullmatch(r"[^/]+/LICENSE", member.name):
                f = tf.extractfile(member)
                return f.read() if f else None
    return None


def write_zip(path: Path, top: str, files: Dict[str, Path]) -> Path:
    """Deterministic zip: entries sorted under ``top/``, fixed time, 0644, the same compression for every file."""
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w") as zf:
        for name in sorted(files):
            info = zipfile.ZipInfo(f"{top}/{name}", date_time=ZIP_DATE)
            info.external_attr = 0o100644 << 16
            info.create_system = 3
            # Wheels are compressed already: storing them keeps the zip fast to write and to check.
            info.compress_type = zipfile.ZIP_STORED if name.endswith(".whl") else zipfile.ZIP_DEFLATED
            zf.writestr(info, files[name].read_bytes(), compresslevel=6)
    os.replace(tmp, path)
    return path


# ---------------------------------------------------------------------------------------------------- the whole

def release(dist: Path = build.DIST, series_name: Optional[str] = None, pages_url: Optional[str] = None,
            jobs: Optional[int] = None, url: str = "the jax-ipu repository", build_first: bool = True,
            tag: Optional[str] = None) -> Path:
    pins: Pins = load()
    series = pins.get_series(series_name)
    version = pins.labelled(series.jax.version)
    # A tag releases every series together (the toolchain's release): it names the version of one of them.
    tags = sorted(f"v{pins.labelled(s.jax.version)}" for s in pins.all_series())
    if tag is not None and tag not in tags:
        raise ReleaseError(f"tag {tag!r} does not name a version pins.toml gives: tag one of {', '.join(tags)}, or "
                           "bump [project] label in build_tools/pins.toml first")
    pages_root = dist / "pages"  # one site: the default series' page at its top, the others' in <series>/
    extra_sums = None  # the other series' sums, also beside the default's, named for a release's assets
    if series.name != pins.default_series:
        pages_root = pages_root / series.name
        extra_sums = dist / f"SHA256SUMS-{series.name}"
    if dist == build.DIST:  # each series has its place under dist/ (build.series_dist)
        dist = build.series_dist(pins, series, dist)
    if build_first:
        build.build(dist, series.name, jobs=jobs, if_stale=True)
    ours = [dist / f"jax-{version}-py3-none-any.whl"]
    ours += sorted(dist.glob(f"jaxlib-{version}-{series.python_tag}-*.whl"))
    wanted = 2
    if series.packaging == "plugin":  # the current series' backend: its own wheel
        ours += sorted(dist.glob(f"{wheels_mod.PLUGIN_DISTRIBUTION}-{version}-py3-none-*.whl"))
        wanted = 3
    missing = [p.name for p in ours if not p.exists()]
    if missing or len(ours) != wanted:
        raise ReleaseError(f"{dist} lacks our wheels ({missing or [p.name for p in ours]}); run `nox -s build_wheels`")

    top = f"jax-ipu-{version}"
    with tempfile.TemporaryDirectory(prefix="jax-ipu-release-") as tmp:
        folder = Path(tmp) / top
        folder.mkdir()
        wheels = [Path(shutil.copy2(w, folder / w.name)) for w in ours]
        wheels += download_dependencies(ours, series, folder)
        for name, data in licence_files(wheels, series).items():
            (folder / "LICENSES" / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / "LICENSES" / name).write_bytes(data)
        (folder / "wheels.html").write_text(wheels_html(wheels))
        for name, data in simple_index(wheels).items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        example = "".join("    " + ln + "\n" if ln else "\n" for ln in EXAMPLE.splitlines())
        packages = "jax jaxlib" + (" jax-ipu-plugin" if series.packaging == "plugin" else "")
        (folder / "INSTALL").write_text(INSTALL_TEXT.format(
            version=version, jax_version=series.jax.version, python=series.python, glibc=series.glibc,
            example=example, url=url, packages=packages))
        names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        (folder / "SHA256SUMS").write_text(sha256sums(folder, names))
        files = {n: folder / n for n in names + ["SHA256SUMS"]}
        out = write_zip(dist / f"{top}.zip", top, files)
        for w in wheels:
            print(f"[release] {w.name}  {sha256_of(w)}", flush=True)
    (dist / "SHA256SUMS").write_text(sha256sums(dist, [p.name for p in ours] + [out.name]))
    if extra_sums is not None and extra_sums.parent.is_dir():
        extra_sums.write_text((dist / "SHA256SUMS").read_text())
    if pages_url:
        pages = pages_root
        pages.mkdir(parents=True, exist_ok=True)
        base = urllib.parse.quote(pages_url.rstrip("/"), safe=":/") + "/"
        (pages / "wheels.html").write_text(wheels_html(ours, base))
        (pages / "index.html").write_text((pages / "wheels.html").read_text())
        print(f"[release] wrote {pages / 'wheels.html'} (links under {pages_url})", flush=True)
    print(f"[release] wrote {out} ({out.stat().st_size / 1e6:.1f} MB, sha256 {sha256_of(out)}) and "
          f"{dist / 'SHA256SUMS'}", flush=True)
    return out


# ------------------------------------------------------------------------------------------------- offline runs

# Every hash lock the sessions install from, and the Python it is for ("host": the tools' Python running this).
LOCKS = (("build_tools/requirements.txt", "host"), ("build_tools/lint-requirements.txt", "host"),
         ("build_tools/test-requirements.txt", "target"), ("build_tools/report-test-requirements.txt", "target"),
         ("build_tools/upstream-test-requirements.txt", "target"), ("examples/requirements.txt", "target"))


def wheelhouse(dest: Optional[Path] = None, series_name: Optional[str] = None) -> Path:
    """Downloads every locked wheel (for the tools' Python and for the wheels' Python 3.8 manylinux) into one folder,
    hash-checked, so that `PIP_NO_INDEX=1 PIP_FIND_LINKS=<folder> nox -s tests` runs without network."""
    series = load().get_series(series_name)
    dest = dest or cache_dir() / "wheelhouse" / "all"
    dest.mkdir(parents=True, exist_ok=True)
    host = f"{sys.version_info.major}.{sys.version_info.minor}"
    for lock, which in LOCKS:
        python = host if which == "host" else series.python
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "--only-binary=:all:",
               "--python-version", python, "--implementation", "cp", "--disable-pip-version-check", "-d", str(dest),
               "-r", str(REPO / lock)]
        for tag in ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64", "linux_x86_64"):
            cmd += ["--platform", tag]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            raise ReleaseError(f"pip download -r {lock} (Python {python}) failed:\n{proc.stdout[-3000:]}")
        print(f"[wheelhouse] {lock} (Python {python}): ok", flush=True)
    print(f"[wheelhouse] {len(list(dest.glob('*.whl')))} wheels in {dest}; offline: "
          f"PIP_NO_INDEX=1 PIP_FIND_LINKS={dest} nox -s tests", flush=True)
    return dest
