"""Builds jax_ipu/lib/libjax_ipu.so: the emulator and the PJRT layer, one portable shared library.

Compiler: ``python -m ziglang c++ -target x86_64-linux-gnu.<glibc>`` (libc++ linked statically; the result is tagged
manylinux2014 by auditwheel). ``--cxx`` / ``$JAX_IPU_CXX`` (e.g. ``g++``) gives a quick development build that is not
portable. Objects compile in parallel and are cached by a content hash (source, the headers it includes directly or
through other headers, the generated PJRT header, the pinned TF headers, compiler and flags), so an unchanged rebuild
only links and a changed header recompiles only the sources that include it. The emulator's
sources reach no series' headers: they compile once, for the oldest pinned glibc, and every series links those objects.

Reproducible: no absolute path reaches a cache key or an object. Keys name files relative to the repository or the
cache, and the compiler maps the repository, the cache and zig's own directory to fixed names
(``-ffile-prefix-map``), so a worktree, the main checkout and the container's /src share objects and give the same
bytes. ``python -m build_tools reproduce`` builds twice from scratch and compares.
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from build_tools.fetch import cache_dir, extract_header_tree
from build_tools.pins import REPO, Series, load

SHIM = REPO / "jax_ipu_shim"
EMULATOR_SOURCES = SHIM / "emulator" / "src"
SOURCE_DIRS = (EMULATOR_SOURCES, SHIM / "pjrt")
EXPORTS_MAP = SHIM / "pjrt" / "exports.map"
GENERATOR = REPO / "build_tools" / "gen_pjrt_api.py"
LIBRARY_NAME = "libjax_ipu.so"
# -ffp-contract=off: only the std::fma calls the emulator writes are fused multiply-adds (where XLA:CPU fuses them);
# the compiler may not fuse others, whatever the target (g++ -std=c++17 and clang differ in their defaults).
CXXFLAGS = ["-std=c++17", "-O2", "-fPIC", "-Wall", "-Wextra", "-fvisibility=hidden", "-ffp-contract=off"]
# glibc before 2.34 keeps dlopen (custom codelet libraries, ipu/codelet_library.h) and threads in their own libraries.
SYSTEM_LIBS = ["-ldl", "-lpthread"]
HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".inc", ".def")
# A sanitizer build (build_tools/sanitize.py) adds these to CXXFLAGS (the last -O wins): -O0, as the instrumented
# templates of the kernels compile in a third of -O1's time (ASan+UBSan: reduce.cc 67 instead of 213 CPU seconds; the
# whole library in a few CPU minutes instead of ~15), which keeps a cold build inside CI's budget, and the suites'
# time goes to jax and Python, not to our kernels; frame pointers for stacks that match the source; -g1 (line tables
# and inlined frames) is all a report needs.
SANITIZE_CXXFLAGS = ["-O0", "-g1", "-fno-omit-frame-pointer"]


class NativeBuildError(RuntimeError):
    pass


def compiler(series: Series, cxx: Optional[str]) -> List[str]:
    """The compiler command: zig targeting target_glibc() (every series), or the development override."""
    cxx = cxx or os.environ.get("JAX_IPU_CXX")
    if cxx:
        return shlex.split(cxx)
    return [sys.executable, "-m", "ziglang", "c++", "-target", f"x86_64-linux-gnu.{target_glibc()}"]


def target_glibc() -> str:
    """The glibc every series' library targets: the oldest pinned one. A library built for it runs on every newer
    glibc, so each series' wheel stays within its platform tag (pins: a series' glibc is the newest its wheels may
    need); and one zig target means one libc++ build in a cold build (about a minute of CPU per target), the
    emulator's objects compiled once for every series, and one toolchain for custom codelets."""
    return min((s.glibc for s in load().all_series()), key=lambda v: tuple(int(x) for x in v.split(".")))


def is_shared(src: Path) -> bool:
    """A source of the emulator: it reaches no series' headers (PJRT, TF), so one object serves every series."""
    return EMULATOR_SOURCES in src.parents


def is_portable(cxx: Optional[str]) -> bool:
    return not (cxx or os.environ.get("JAX_IPU_CXX"))


def warm_toolchain(series_list: Sequence[Series], cxx: Optional[str] = None) -> None:
    """zig builds libc++ and the glibc stubs for a target the first time it links for it: about a minute of CPU per
    target, which in a cold build came after every object had compiled. build_all calls this at the outset, beside
    the downloads, so that each series' link finds them in zig's cache (a no-op when they are there already). A
    development compiler has nothing to warm; a failure here is left for the real link to report."""
    if not is_portable(cxx):
        return
    commands = {tuple(compiler(s, cxx)): None for s in series_list}
    with tempfile.TemporaryDirectory(prefix="jax-ipu-warm-") as tmp:
        src, obj, lib = Path(tmp) / "warm.cc", Path(tmp) / "warm.o", Path(tmp) / "warm.so"
        src.write_text('#include <string>\nstd::string warm() { return std::to_string(1); }\n')
        for command in commands:
            # Compiled, then linked with the library's own link options: zig's libc++ build depends on them (its
            # strip setting among them), so a warm link with other options builds a variant the real link cannot use.
            for step in (["-fPIC", "-c", str(src), "-o", str(obj)], ["-shared", "-o", str(lib), str(obj)] +
                         link_options(cxx)):
                subprocess.run(list(command) + step, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(),
                               check=False)


def sanitize_flags(sanitizers: Sequence[str]) -> List[str]:
    """Compile and link flags of a sanitizer build (-fsanitize= names: "address", "undefined", "thread", ...); none
    for a normal build. Every finding aborts with its report rather than printing it and going on (=all: g++'s
    "undefined" group leaves out float-cast-overflow, which recovers otherwise)."""
    if not sanitizers:
        return []
    return SANITIZE_CXXFLAGS + [f"-fsanitize={','.join(sanitizers)}", "-fno-sanitize-recover=all"]


TABLES = SHIM / "pjrt" / "tables"


def table_of(series: Series) -> str:
    """The PJRT_Api table a series fills: "0.4.13" or an API version such as "0.90" (pins: pjrt_header.table)."""
    return str(series.pjrt_header.extra.get("table", "0.4.13"))


def sources(series: Optional[Series] = None) -> List[Path]:
    """The emulator, the shared PJRT objects, and the one table source of ``series`` (pjrt/tables/api_<t>.cc)."""
    table = TABLES / f"api_{table_of(series).replace('.', '_')}.cc" if series is not None else None
    found = sorted(p for d in SOURCE_DIRS if d.is_dir() for p in d.rglob("*.cc")
                   if TABLES not in p.parents or p == table)
    if not found:
        where = ", ".join(str(d.relative_to(REPO)) for d in SOURCE_DIRS)
        raise NativeBuildError(f"no C++ sources (*.cc) under {where}")
    return found


def _env() -> dict:
    env = dict(os.environ)
    # zig's own cache (its libc++ build for the target takes minutes once) lives in ours, so one directory caches all.
    env.setdefault("ZIG_GLOBAL_CACHE_DIR", str(cache_dir() / "zig"))
    env.setdefault("ZIG_LOCAL_CACHE_DIR", str(cache_dir() / "zig-local"))
    return env


def _run(cmd: List[str], what: str) -> str:
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env())
    if proc.returncode != 0:
        raise NativeBuildError(f"{what} failed (exit {proc.returncode}):\n$ {shlex.join(cmd)}\n{proc.stdout}")
    return proc.stdout


def generate_pjrt_header(series: Series, tf_include: Path, gen_dir: Path) -> Path:
    if not GENERATOR.exists():
        raise NativeBuildError(f"{GENERATOR.relative_to(REPO)} is missing: it generates the PJRT_Api table header")
    gen_dir.mkdir(parents=True, exist_ok=True)
    out = gen_dir / series.pjrt_header.extra["generated"]
    header = tf_include / series.pjrt_header.extra["header"]
    _run([sys.executable, str(GENERATOR), "--table", table_of(series), "--header", str(header), "--out", str(out)],
         "gen_pjrt_api.py")
    if not out.exists():
        raise NativeBuildError(f"gen_pjrt_api.py exited 0 but did not write {out}")
    return out


def _tree_digest(roots: List[Path], suffixes: tuple) -> str:
    """Digest of the files under ``roots`` by their paths relative to each root (never where the tree lies)."""
    h = hashlib.sha256()
    for root in roots:
        if not root.exists():
            continue
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in suffixes)
        for p in files:
            h.update(p.relative_to(root if root.is_dir() else root.parent).as_posix().encode() + b"\0")
            h.update(p.read_bytes() + b"\0")
    return h.hexdigest()


def path_maps(cxx: List[str]) -> List[tuple]:
    """(absolute prefix, fixed name) for every directory whose location differs between checkouts and machines: the
    repository, the cache, and zig's package (inside a per-checkout nox venv). Longest first, so nested ones win."""
    maps = [(str(REPO), "/jax-ipu"), (str(cache_dir().resolve()), "/jax-ipu-cache")]
    if cxx[:3] == [sys.executable, "-m", "ziglang"]:
        import ziglang  # installed from build_tools/requirements.txt

        maps.append((str(Path(ziglang.__file__).resolve().parent), "/zig"))
        maps.append((str(Path(sys.executable).parent.parent), "/python"))
    return sorted(maps, key=lambda m: -len(m[0]))


def portable(text: str, maps: List[tuple]) -> str:
    """``text`` with every mapped absolute prefix replaced by its fixed name (cache keys must not depend on them)."""
    for prefix, name in maps:
        text = text.replace(prefix, name)
    return text


def _compiler_identity(cxx: List[str]) -> str:
    try:
        out = _run(cxx + ["--version"], "compiler --version")
    except (NativeBuildError, OSError) as e:
        raise NativeBuildError(f"C++ compiler not usable: {shlex.join(cxx)}: {e}") from e
    # clang prints "InstalledDir: <where zig is>": a location, not an identity.
    return "\n".join(ln for ln in out.splitlines() if not ln.startswith("InstalledDir:"))


def compile_plan(series: Series, cxx: Optional[str] = None, sanitizers: Sequence[str] = (),
                 shared: bool = False) -> Tuple[List[str], List[str], str]:
    """(compiler command, flags, the key part every object shares). The key names no absolute path; it has the
    flags, so a sanitizer build's objects never stand in for a normal build's. ``shared``: the plan of the
    emulator's sources (is_shared), the same for every series: no PJRT or TF headers on the include path (an
    emulator source that reaches for one fails to compile), and nothing of the series in the key."""
    cxx_cmd = compiler(series, cxx)
    includes = [SHIM / "include", SHIM / "emulator" / "include"]
    if not shared:
        tf_include = extract_header_tree(series.pjrt_header)
        gen_dir = cache_dir() / "generated" / series.name
        generate_pjrt_header(series, tf_include, gen_dir)
        includes += [tf_include, gen_dir]
    includes.append(SHIM)
    maps = path_maps(cxx_cmd)
    # Paths in objects (__FILE__, debug info before --strip-all) name the fixed prefixes, not this checkout. The flags
    # go in the order of the fixed names: an order by path length would differ between checkouts, and so would keys.
    prefix_maps = [f"-ffile-prefix-map={prefix}={name}" for prefix, name in sorted(maps, key=lambda m: m[1])]
    flags = CXXFLAGS + sanitize_flags(sanitizers) + prefix_maps + [f"-I{p}" for p in includes]
    series_part = [] if shared else [_tree_digest([gen_dir], HEADER_SUFFIXES), series.pjrt_header.sha256]
    base_key = "\0".join([_compiler_identity(cxx_cmd), portable(shlex.join(cxx_cmd), maps),
                          portable(shlex.join(flags), maps), *series_part])
    return cxx_cmd, flags, base_key


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)


def _includes_of(path: Path) -> Tuple[str, ...]:
    """The names a source or header #includes, every one (under any #if: a superset is only more careful)."""
    stat = path.stat()
    return _includes_in(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=None)
def _includes_in(path: Path, mtime_ns: int, size: int) -> Tuple[str, ...]:
    return tuple(_INCLUDE.findall(path.read_text(errors="replace")))


def header_digest(src: Path, include_dirs: Sequence[Path]) -> str:
    """Digest of the headers `src` includes, directly or through other headers, that are files in its own directory
    or `include_dirs` (the compiler's -I; the system's headers belong to the compiler's identity): each by the name
    it is included as and its bytes, in the order they are first reached, so no checkout's location enters it."""
    h = hashlib.sha256()
    seen = set()
    stack = [src]
    while stack:
        current = stack.pop()
        for name in _includes_of(current):
            for directory in (current.parent, *include_dirs):
                header = directory / name
                if header.is_file():
                    resolved = header.resolve()
                    if resolved not in seen:
                        seen.add(resolved)
                        h.update(name.encode() + b"\0" + resolved.read_bytes() + b"\0")
                        stack.append(resolved)
                    break
    return h.hexdigest()


def object_key(base_key: str, src: Path, include_dirs: Sequence[Path] = ()) -> str:
    rel = src.relative_to(REPO).as_posix()
    headers = header_digest(src, include_dirs)
    return hashlib.sha256((base_key + "\0" + rel + "\0" + headers + "\0").encode() + src.read_bytes()).hexdigest()


# Compiles run at a lower priority than the rest of the build: in a cold build zig's libc++ for the target (about a
# minute, mostly one process; warm_toolchain, in the background from the start) then finishes first, instead of
# being starved by the compiles and holding up the first link for half a minute after the last object.
NICE = ["nice", "-n", "10"] if shutil.which("nice") else []

# Objects being compiled in this process, so that two callers (build_all's early compile of the emulator and a
# series' build_library) never compile one object twice: the second waits for the first.
_compiling: Dict[Path, threading.Event] = {}
_compiling_lock = threading.Lock()


def _claim(obj: Path) -> bool:
    """True: the caller compiles ``obj`` and then calls _release. False: it exists (perhaps after waiting for
    another thread's compile of it). A compile that failed leaves no object, so the next claimant compiles it again
    and reports the error itself."""
    while not obj.exists():
        with _compiling_lock:
            pending = _compiling.get(obj)
            if pending is None:
                _compiling[obj] = threading.Event()
                return True
        pending.wait()
    return False


def _release(obj: Path) -> None:
    with _compiling_lock:
        _compiling.pop(obj).set()


def compile_emulator(series: Series, cxx: Optional[str] = None, jobs: Optional[int] = None) -> None:
    """The emulator's objects (is_shared): they need no download, so build_all starts them at once, beside the
    downloads and the patching; each series' build_library then finds them made or being made."""
    compile_objects(series, [s for s in sources(series) if is_shared(s)], cxx, jobs)


def compile_objects(series: Series, srcs: Sequence[Path], cxx: Optional[str] = None, jobs: Optional[int] = None,
                    sanitizers: Sequence[str] = ()) -> Tuple[List[str], Dict[Path, Path]]:
    """Compiles ``srcs`` (cached by content hash, in parallel; the emulator's once for every series, see
    compile_plan) and prints each compile's time; returns the series' compiler command (to link) and each source's
    object."""
    plans = {shared: compile_plan(series, cxx, sanitizers, shared) for shared in {is_shared(s) for s in srcs}}
    obj_cache = cache_dir() / "objects"
    obj_cache.mkdir(parents=True, exist_ok=True)

    def compile_one(src: Path) -> Path:
        cxx_cmd, flags, base_key = plans[is_shared(src)]
        key = object_key(base_key, src, [Path(f[2:]) for f in flags if f.startswith("-I")])
        obj = obj_cache / f"{src.stem}-{key[:24]}.o"
        if not _claim(obj):
            return obj
        try:
            tmp = obj.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp.o")
            started = time.monotonic()
            _run(NICE + cxx_cmd + flags + ["-c", str(src), "-o", str(tmp)], f"compiling {src.relative_to(REPO)}")
            os.replace(tmp, obj)
            print(f"[native] compiled {src.relative_to(REPO)} in {time.monotonic() - started:.1f} s", flush=True)
        finally:
            _release(obj)
        return obj

    jobs = jobs or os.cpu_count() or 2
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        # The biggest sources first (their compiles take longest), so that no long compile starts last.
        futures = {pool.submit(compile_one, s): s for s in sorted(srcs, key=lambda p: -p.stat().st_size)}
        errors = []
        objs = {}
        for fut in concurrent.futures.as_completed(futures):
            try:
                objs[futures[fut]] = fut.result()
            except NativeBuildError as e:
                errors.append(str(e))
        if errors:
            raise NativeBuildError(
                f"{len(errors)} of {len(srcs)} C++ sources failed to compile:\n\n" + "\n\n".join(errors))
    return compiler(series, cxx), objs


def link_options(cxx: Optional[str], sanitizers: Sequence[str] = ()) -> List[str]:
    """What a library's link adds after its objects (besides its exports and soname)."""
    options = list(SYSTEM_LIBS)
    if sanitizers:
        # The sanitizer's runtime is linked in (it is preloaded: Python is not instrumented); debug info stays for
        # its reports; libstdc++ stays shared, so that the runtime's operator new/delete replace its own.
        return options + sanitize_flags(sanitizers)
    options.append("-Wl,--strip-all")  # users get no debug info from a wheel; keep it small
    if not is_portable(cxx):
        options += ["-static-libstdc++", "-static-libgcc"]
    return options


def build_library(series: Series, out_dir: Path, cxx: Optional[str] = None, jobs: Optional[int] = None,
                  sanitizers: Sequence[str] = ()) -> Path:
    """Compiles and links the library into ``out_dir/libjax_ipu.so``; returns its path. ``sanitizers`` (e.g.
    ("address", "undefined")) gives a sanitizer build for testing, never for a wheel (build_tools/sanitize.py)."""
    if not EXPORTS_MAP.exists():
        raise NativeBuildError(f"{EXPORTS_MAP.relative_to(REPO)} is missing: the linker version script (exports)")
    srcs = sources(series)
    cxx_cmd, objs = compile_objects(series, srcs, cxx, jobs, sanitizers)
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / LIBRARY_NAME
    tmp_lib = out_dir / (LIBRARY_NAME + ".tmp")
    objects = [objs[s] for s in srcs]
    options = link_options(cxx, sanitizers)
    id_src = build_id_source(objects, options)
    objects.append(compile_objects(series, [id_src], cxx, jobs, sanitizers)[1][id_src])
    link = cxx_cmd + ["-shared", "-o", str(tmp_lib)] + [str(o) for o in objects]
    # --no-undefined: a symbol no object defines fails the link here, not dlopen() in the user's process.
    link += [f"-Wl,--version-script={EXPORTS_MAP}", f"-Wl,-soname,{LIBRARY_NAME}", "-Wl,--no-undefined"]
    link += options
    # The objects' names carry their content keys: the same command links the same library, which is kept.
    link_key = hashlib.sha256((shlex.join(link) + "\0").encode() + EXPORTS_MAP.read_bytes()).hexdigest()
    key_file = out_dir / (LIBRARY_NAME + ".link-key")
    if lib.exists() and key_file.exists() and key_file.read_text() == link_key:
        print(f"[native] {lib} is linked from these objects already", flush=True)
        return lib
    key_file.unlink(missing_ok=True)
    _run(link, "linking libjax_ipu.so")
    os.replace(tmp_lib, lib)
    key_file.write_text(link_key)
    print(f"[native] linked {lib} ({lib.stat().st_size} bytes) from {len(srcs)} sources", flush=True)
    return lib


GENERATED_DIR = REPO / "build" / "generated"


def build_id_source(objects: Sequence[Path], options: Sequence[str]) -> Path:
    """A generated source defining JaxIpu_BuildId: a hash of what the library is linked from (the objects' names,
    which carry the hashes of their sources and compile commands, the link options and the exports), so that the
    library knows its own identity (the executable cache keys on it; zig's linker writes no GNU build id into a
    shared library). No path of this checkout enters it: the wheels stay byte-reproducible."""
    h = hashlib.sha256()
    for part in [o.name for o in objects] + list(options):
        h.update(part.encode() + b"\0")
    h.update(EXPORTS_MAP.read_bytes())
    identity = h.hexdigest()
    src = GENERATED_DIR / f"build_id-{identity[:16]}.cc"
    text = (
        "// Generated by build_tools/native.py (build_id_source): the identity of the library this is linked into.\n"
        "#include <cstdlib>\n#include <cstring>\n\n#include \"jax_ipu/c_api.h\"\n\n"
        "char* JaxIpu_BuildId(void) {\n"
        f"  static const char id[] = \"{identity}\";\n"
        "  char* out = static_cast<char*>(std::malloc(sizeof id));\n"
        "  if (out) std::memcpy(out, id, sizeof id);\n"
        "  return out;\n"
        "}\n")
    if not src.exists() or src.read_text() != text:
        GENERATED_DIR.mkdir(parents=True, exist_ok=True)
        tmp = src.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, src)
    return src


PROGRAMS_DIR = REPO / "build" / "programs"


def build_program(series: Series, program_sources: Sequence[Path], out: Optional[Path] = None,
                  cxx: Optional[str] = None, jobs: Optional[int] = None, sanitizers: Sequence[str] = ()) -> Path:
    """A C++ program of the graph API (ipu/poplar.h) linked with the emulator's objects, the same (cached) objects
    as the wheel's library: only the program's own sources compile. Returns the executable's path
    (``build/programs/<first source's stem>`` unless ``out``)."""
    emulator = sorted((SHIM / "emulator" / "src").rglob("*.cc"))
    program_sources = [Path(p).resolve() for p in program_sources]
    cxx_cmd, objs = compile_objects(series, emulator + program_sources, cxx, jobs, sanitizers)
    out = out or PROGRAMS_DIR / program_sources[0].stem
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    link = cxx_cmd + ["-o", str(tmp)] + [str(objs[s]) for s in program_sources + emulator] + SYSTEM_LIBS
    link += sanitize_flags(sanitizers) if sanitizers else ([] if is_portable(cxx) else ["-static-libstdc++",
                                                                                         "-static-libgcc"])
    _run(link, f"linking {out.name}")
    os.replace(tmp, out)
    print(f"[native] linked {out}", flush=True)
    return out


def exported_symbols(lib: Path) -> List[str]:
    """Dynamic symbols the library defines (for checks); empty if no nm-like tool is around."""
    nm = shutil.which("nm") or shutil.which("llvm-nm")
    if not nm:
        return []
    out = subprocess.run([nm, "-D", "--defined-only", str(lib)], stdout=subprocess.PIPE, text=True).stdout
    return sorted(ln.split()[-1] for ln in out.splitlines() if ln.strip())
