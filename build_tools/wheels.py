"""Writes the two wheels: jax from the patched sdist, jaxlib repacked from the upstream wheel plus our backend.
Each carries its software bill of materials (PEP 770: build_tools/sbom.py).

Both are written by one deterministic writer: entries sorted (``*.dist-info/`` last, RECORD last), fixed timestamps,
normalised permissions, RECORD regenerated with sha256 and sizes. The same inputs give the same bytes.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from build_tools import native, sbom
from build_tools.fetch import fetch, sha256_of
from build_tools.pins import REPO, Pins, Series

SHIM_PYTHON = REPO / "jax_ipu_shim" / "python"
# Our packages as they sit in jax_ipu_shim/python/. jax_plugins is a namespace package: it must have no __init__.py.
OUR_PACKAGES = ("jax_ipu", "jax_plugins")
LIBRARY_IN_WHEEL = "jax_ipu/lib/libjax_ipu.so"
TOOLCHAIN_IN_WHEEL = "jax_ipu/_toolchain.json"  # read by jax_ipu.codelets
ZIP_DATE = (1980, 1, 1, 0, 0, 0)
SKIP_DIRS = {"__pycache__", ".mypy_cache", ".pytest_cache"}
SKIP_SUFFIXES = (".pyc", ".pyo", ".so", ".o")
LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


class WheelError(RuntimeError):
    pass


# ---------------------------------------------------------------------------------------------------------- writing

def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


Entry = Tuple[str, Callable[[], bytes], bool]  # (archive name, reader, executable)


class UpstreamMember:
    """An Entry's reader for a member of a verified upstream wheel that goes into ours unchanged: write_wheel copies
    its compressed bytes as they are instead of inflating and deflating them again (most of a warm build's time:
    jaxlib's shared objects), and takes its RECORD line from the upstream wheel's RECORD, which the wheel's pinned
    sha256 vouches for. Called, it reads the member (where it cannot be copied raw)."""

    def __init__(self, wheel: zipfile.ZipFile, info: zipfile.ZipInfo, record: Optional[str]) -> None:
        self.wheel, self.info, self.record = wheel, info, record

    def __call__(self) -> bytes:
        return self.wheel.read(self.info)

    def raw(self) -> bytes:
        """The member's compressed bytes, read from after its local file header."""
        fp = self.wheel.fp
        if fp is None:
            raise WheelError(f"{self.wheel.filename}: closed while its members were being copied")
        fp.seek(self.info.header_offset)
        header = fp.read(30)
        if len(header) != 30 or header[:4] != b"PK\x03\x04":
            raise WheelError(f"{self.wheel.filename}: {self.info.filename} has no local file header where its "
                             "directory says")
        name_length, extra_length = int.from_bytes(header[26:28], "little"), int.from_bytes(header[28:30], "little")
        fp.seek(self.info.header_offset + 30 + name_length + extra_length)
        data = fp.read(self.info.compress_size)
        if len(data) != self.info.compress_size:
            raise WheelError(f"{self.wheel.filename}: {self.info.filename} is truncated")
        return data


def upstream_records(wheel: zipfile.ZipFile, dist_info: str) -> Dict[str, str]:
    """name -> "sha256=...,size" from a wheel's RECORD (sha256 lines only)."""
    try:
        text = wheel.read(f"{dist_info}/RECORD").decode()
    except KeyError:
        return {}
    records = {}
    for line in text.splitlines():
        name, _, rest = line.partition(",")
        if rest.startswith("sha256="):
            records[name] = rest
    return records


def _copy_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, member: UpstreamMember) -> None:
    """Writes `member`'s compressed bytes under `info` (its name, date and mode) at the end of `zf`, as
    ZipFile.writestr would write them after compressing (zipfile has no public raw copy)."""
    source = member.info
    info.compress_type, info.CRC = source.compress_type, source.CRC
    info.compress_size, info.file_size = source.compress_size, source.file_size
    data = member.raw()
    zip64 = info.file_size > zipfile.ZIP64_LIMIT or info.compress_size > zipfile.ZIP64_LIMIT
    zf._writecheck(info)  # type: ignore[attr-defined]
    zf._didModify = True  # type: ignore[attr-defined]
    assert zf.fp is not None
    zf.fp.seek(zf.start_dir)  # type: ignore[attr-defined]
    info.header_offset = zf.fp.tell()
    zf.fp.write(info.FileHeader(zip64))
    zf.fp.write(data)
    zf.filelist.append(info)
    zf.NameToInfo[info.filename] = info
    zf.start_dir = zf.fp.tell()  # type: ignore[attr-defined]


def write_wheel(path: Path, entries: Iterable[Entry], dist_info: str) -> Path:
    """Writes ``entries`` (plus a fresh RECORD) to ``path`` deterministically. An UpstreamMember that is deflated,
    with its upstream RECORD line, is copied compressed as it is."""
    items = sorted(entries, key=lambda e: (e[0].startswith(dist_info + "/"), e[0]))
    dupes = [n for n, count in collections.Counter(e[0] for e in items).items() if count > 1]
    if dupes:
        raise WheelError(f"{path.name}: duplicate entries {sorted(dupes)}")
    record_name = f"{dist_info}/RECORD"
    record_lines = []
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for name, read, executable in items:
            if name == record_name:
                continue
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            info.create_system = 3
            if isinstance(read, UpstreamMember) and read.record is not None and \
                    read.info.compress_type == zipfile.ZIP_DEFLATED and \
                    read.record.rpartition(",")[2] == str(read.info.file_size):
                _copy_member(zf, info, read)
                record_lines.append(f"{name},{read.record}")
                continue
            data = read()
            zf.writestr(info, data, compresslevel=6)
            record_lines.append(f"{name},{record_hash(data)},{len(data)}")
        record_lines.append(f"{record_name},,")
        info = zipfile.ZipInfo(record_name, date_time=ZIP_DATE)
        info.external_attr = 0o100644 << 16
        info.create_system = 3
        zf.writestr(info, "\n".join(record_lines) + "\n", compress_type=zipfile.ZIP_DEFLATED, compresslevel=6)
    os.replace(tmp, path)
    return path


def _replace_version_in_metadata(text: str, new_version: str) -> str:
    out, n = re.subn(r"^Version: .*$", f"Version: {new_version}", text, count=1, flags=re.M)
    if n != 1:
        raise WheelError("METADATA has no 'Version:' line")
    return out


def _our_package_files() -> List[Tuple[str, Path]]:
    """(name in wheel, file) for jax_ipu/ and jax_plugins/ in jax_ipu_shim/python/, checking the layout first."""
    ns_init = SHIM_PYTHON / "jax_plugins" / "__init__.py"
    if ns_init.exists():
        raise WheelError(f"{ns_init.relative_to(REPO)} must not exist: jax_plugins is a namespace package shared with "
                         "other plugins (an __init__.py there hides them)")
    for required in ("jax_ipu/__init__.py", "jax_plugins/ipu/__init__.py"):
        if not (SHIM_PYTHON / required).exists():
            raise WheelError(
                f"jax_ipu_shim/python/{required} is missing; the jaxlib wheel would ship no working plugin")
    files = []
    for pkg in OUR_PACKAGES:
        for root, dirs, names in os.walk(SHIM_PYTHON / pkg):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for n in sorted(names):
                if n.endswith(SKIP_SUFFIXES):
                    continue
                p = Path(root) / n
                files.append((p.relative_to(SHIM_PYTHON).as_posix(), p))
    return files


def build_jaxlib_wheel(pins: Pins, series: Series, patched_py: Path, library: Optional[Path], out_dir: Path) -> Path:
    """Upstream jaxlib wheel + patched Python files, relabelled; + our packages and the native library when
    ``library`` is given (0.4.13; the current series ships them in the plugin wheel instead)."""
    art = series.jaxlib
    upstream = fetch(art)
    version = pins.labelled(art.version)
    old_di = f"jaxlib-{art.version}.dist-info"
    new_di = f"jaxlib-{version}.dist-info"
    ours = _our_package_files() if library is not None else []
    our_tops = set(OUR_PACKAGES) if library is not None else set()
    entries: List[Entry] = []
    zf = zipfile.ZipFile(upstream)
    records = upstream_records(zf, old_di)
    upstream_names = set()
    for info in zf.infolist():
        name = info.filename
        if info.is_dir():
            continue
        upstream_names.add(name)
        executable = bool((info.external_attr >> 16) & 0o111)
        if name.startswith(old_di + "/"):
            base = name[len(old_di) + 1:]
            if base == "RECORD":
                continue
            data = zf.read(info)
            if base == "METADATA":
                data = _replace_version_in_metadata(data.decode(), version).encode()
            elif base == "top_level.txt":
                tops = set(data.decode().split()) | our_tops
                data = ("\n".join(sorted(tops)) + "\n").encode()
            entries.append((f"{new_di}/{base}", _constant(data), False))
        elif name.endswith(".py") and (patched_py / name).exists():
            entries.append((name, (patched_py / name).read_bytes, executable))
        else:
            entries.append((name, UpstreamMember(zf, info, records.get(name)), executable))
    for name, path in ours:
        if name in upstream_names:
            raise WheelError(f"{name} from jax_ipu_shim/python would overwrite a file of upstream jaxlib")
        entries.append((name, path.read_bytes, False))
    components = [sbom.upstream(art)]
    if library is not None:
        entries += _native_entries(pins, series, library)
        components += sbom.backend(pins, series, sha256_of(library))
    entries.append((f"{new_di}/{sbom.SBOM_NAME}", _constant(sbom.document("jaxlib", version, components)), False))

    out_dir.mkdir(parents=True, exist_ok=True)
    _, _, py, abi, plat = art.filename[: -len(".whl")].split("-")
    wheel = out_dir / f"jaxlib-{version}-{py}-{abi}-{plat}.whl"
    try:
        write_wheel(wheel, entries, new_di)
    finally:
        zf.close()
    return wheel



PLUGIN_DISTRIBUTION = "jax_ipu_plugin"  # pip name jax-ipu-plugin


def _native_entries(pins: Pins, series: Series, library: Path) -> List[Entry]:
    """The native library, and what jax_ipu.codelets compiles custom vertices with: the zig version to install
    (the plugin's "vertices" extra) and the glibc the library targets, which codelet libraries target too."""
    toolchain = json.dumps({"ziglang": pins.tools["ziglang"], "glibc": native.target_glibc()}, sort_keys=True) + "\n"
    return [(LIBRARY_IN_WHEEL, library.read_bytes, True), (TOOLCHAIN_IN_WHEEL, _constant(toolchain.encode()), False)]


def build_plugin_wheel(pins: Pins, series: Series, library: Path, out_dir: Path) -> Path:
    """jax-ipu-plugin: jax_ipu/ and its native library, found by jax through the ``jax_plugins`` entry point.

    Python-independent (the library is loaded with ctypes, no CPython ABI): ``py3-none-<platform>``. Its version is
    the jaxlib series' with our label, and it requires exactly that jax and jaxlib (public versions, so our
    relabelled wheels and upstream's both satisfy it)."""
    version = pins.labelled(series.jaxlib.version)
    di = f"{PLUGIN_DISTRIBUTION}-{version}.dist-info"
    files = [(name, path) for name, path in _our_package_files() if name.startswith("jax_ipu/")]
    python = series.python
    metadata = "\n".join([
        "Metadata-Version: 2.1",
        "Name: jax-ipu-plugin",
        f"Version: {version}",
        "Summary: The ipu backend for jax: a PJRT plugin whose runtime is a tile-level Graphcore IPU Model emulator",
        "License: Apache-2.0",
        "Description-Content-Type: text/markdown",  # the description below (twine check --strict asks for it)
        f"Requires-Python: >={python}",
        f"Requires-Dist: jax=={series.jax.version}",
        f"Requires-Dist: jaxlib=={series.jaxlib.version}",
        "Provides-Extra: vertices",
        f"Requires-Dist: ziglang=={pins.tools['ziglang']}; extra == \"vertices\"",
        "",
        "`jax.devices('ipu')`, `jax.jit(f, backend='ipu')`: see the jax-ipu README.",
        "",
    ])
    wheel_meta = "\n".join(["Wheel-Version: 1.0", "Generator: jax-ipu build_tools", "Root-Is-Purelib: false",
                             f"Tag: py3-none-{series.platform_tag}", ""])
    entries: List[Entry] = [(name, path.read_bytes, False) for name, path in files]
    entries += _native_entries(pins, series, library)
    entries.append((f"{di}/METADATA", _constant(metadata.encode()), False))
    entries.append((f"{di}/WHEEL", _constant(wheel_meta.encode()), False))
    entries.append((f"{di}/entry_points.txt", _constant(b"[jax_plugins]\nipu = jax_ipu.backend.plugin\n"), False))
    # Its notices: the project's licence, and LLVM's for the libc++ the library links statically (zig's).
    entries.append((f"{di}/licenses/LICENSE", (REPO / "LICENSE").read_bytes, False))
    libcxx = _zig_libcxx_licence()
    if libcxx is not None:
        entries.append((f"{di}/licenses/libcxx-LICENSE.TXT", libcxx.read_bytes, False))
    entries.append((f"{di}/top_level.txt", _constant(b"jax_ipu\n"), False))
    bom = sbom.document("jax-ipu-plugin", version, sbom.backend(pins, series, sha256_of(library)))
    entries.append((f"{di}/{sbom.SBOM_NAME}", _constant(bom), False))
    out_dir.mkdir(parents=True, exist_ok=True)
    return write_wheel(out_dir / f"{PLUGIN_DISTRIBUTION}-{version}-py3-none-{series.platform_tag}.whl", entries, di)


def _zig_libcxx_licence() -> Optional[Path]:
    try:
        import ziglang  # the compiler whose libc++ libjax_ipu.so links statically
    except ImportError:
        return None
    path = Path(ziglang.__file__).parent / "lib" / "libcxx" / "LICENSE.TXT"
    return path if path.exists() else None


def _constant(data: bytes) -> Callable[[], bytes]:
    """An Entry's reader for bytes already in memory."""
    return lambda: data

def build_jax_wheel(pins: Pins, series: Series, patched_sdist: Path, out_dir: Path) -> Path:
    """``pip wheel`` of the patched sdist tree (its version comes from the patched jax/version.py), then normalised."""
    version = pins.labelled(series.jax.version)
    # setuptools builds in the tree, which patches.patched_tree keeps between builds: start from no build/ as a
    # freshly extracted tree does
    shutil.rmtree(patched_sdist / "build", ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="jax-wheel-") as tmp:
        env = dict(os.environ, SOURCE_DATE_EPOCH="315532800", PYTHONDONTWRITEBYTECODE="1")
        # --ignore-requires-python: the wheel is pure Python and the build host's Python may be older than the
        # series' (jax 0.12 needs 3.12; the build tools run on 3.11).
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--disable-pip-version-check",
               "--ignore-requires-python", "-w", tmp, str(patched_sdist)]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        built = sorted(Path(tmp).glob("jax-*.whl"))
        if proc.returncode != 0 or len(built) != 1:
            raise WheelError(f"building the jax wheel failed (exit {proc.returncode}):\n{proc.stdout[-5000:]}")
        expected = f"jax-{version}-py3-none-any.whl"
        if built[0].name != expected:
            raise WheelError(f"pip built {built[0].name}, expected {expected}: is the version patch applied?")
        di = f"jax-{version}.dist-info"
        with zipfile.ZipFile(built[0]) as zf:
            entries: List[Entry] = [
                (i.filename, _constant(zf.read(i)), bool((i.external_attr >> 16) & 0o111))
                for i in zf.infolist() if not i.is_dir() and i.filename != f"{di}/RECORD"
            ]
        entries.append((f"{di}/{sbom.SBOM_NAME}", _constant(sbom.document("jax", version, [sbom.upstream(series.jax)])),
                        False))
        out_dir.mkdir(parents=True, exist_ok=True)
        return write_wheel(out_dir / expected, entries, di)


# ------------------------------------------------------------------------------------------------------- inspecting

def read_record(wheel: Path) -> Dict[str, Tuple[str, str]]:
    with zipfile.ZipFile(wheel) as zf:
        record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        rows = [ln.rsplit(",", 2) for ln in zf.read(record).decode().splitlines() if ln]
    return {name: (h, size) for name, h, size in rows}


def verify_record(wheel: Path) -> List[str]:
    """Problems with RECORD: missing or extra entries, wrong sha256 or size."""
    problems = []
    record = read_record(wheel)
    with zipfile.ZipFile(wheel) as zf:
        names = [i.filename for i in zf.infolist() if not i.is_dir()]
        for name in names:
            if name not in record:
                problems.append(f"{name} not in RECORD")
                continue
            h, size = record[name]
            if name.endswith("/RECORD"):
                continue
            data = zf.read(name)
            if h != record_hash(data) or size != str(len(data)):
                problems.append(f"{name}: RECORD says {h},{size}; file is {record_hash(data)},{len(data)}")
    problems += [f"RECORD lists missing file {n}" for n in sorted(set(record) - set(names))]
    return problems


def _glibc_of_tag(tag: str) -> Optional[Tuple[int, int]]:
    for legacy, ver in LEGACY_MANYLINUX.items():
        if tag.startswith(legacy + "_"):
            return ver
    m = re.match(r"manylinux_(\d+)_(\d+)_", tag)
    return (int(m.group(1)), int(m.group(2))) if m else None


def auditwheel_show(wheel: Path) -> Tuple[str, str]:
    """Runs ``auditwheel show``; returns (platform tag, the sentence that says it)."""
    cmd = [sys.executable, "-m", "auditwheel", "show", str(wheel)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    text = " ".join(proc.stdout.split())
    m = re.search(r'is consistent with the following platform tag: "([^"]+)"', text)
    if proc.returncode != 0 or not m:
        raise WheelError(f"auditwheel show {wheel.name} failed (exit {proc.returncode}):\n{proc.stdout}")
    return m.group(1), m.group(0)


def check_platform(wheel: Path, series: Series, strict: bool = True) -> Tuple[str, str]:
    """Fails if auditwheel finds the wheel needs a newer platform than the pin (e.g. manylinux_2_34 > manylinux2014)."""
    tag, line = auditwheel_show(wheel)
    found, allowed = _glibc_of_tag(tag), _glibc_of_tag(series.platform_tag)
    if found is None or allowed is None or found > allowed:
        msg = (f"{wheel.name}: auditwheel says the wheel is {tag}, newer than the pinned {series.platform_tag} "
               f"(glibc {series.glibc}); it would not install on older systems such as Ubuntu 20.04. "
               f"Build the native library with zig (the default; not --cxx/JAX_IPU_CXX), and check which library needs "
               f"newer symbols with: auditwheel show {wheel}")
        if strict:
            raise WheelError(msg)
        print(f"[wheels] WARNING (development compiler): {msg}", flush=True)
    return tag, line
