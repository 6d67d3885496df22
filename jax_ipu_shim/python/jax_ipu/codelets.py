"""Custom vertices: Poplar codelets written in C++, compiled on first use and run per tile by the emulator.

A codelet is a class deriving from ``poplar::Vertex`` (``include/poplar/Vertex.hpp``, shipped with this package,
says what it may contain). :func:`compile_codelets` reads the classes' fields from the source, writes the glue that
binds them (one ``extern "C"`` entry per class, whose field list the emulator reads back from the library), and
compiles both into a shared library with the zig C++ compiler (the ``ziglang`` package, at the version the wheel
names: ``pip install 'jax-ipu-plugin[vertices]'`` on the current series). Libraries are cached by the sha256 of
everything that goes into them (the source, the glue, the header, the flags, the compiler's version and target), under
``$JAX_IPU_CODELET_CACHE`` or ``~/.cache/jax_ipu/codelets``; a cached library whose bytes no longer match the sum
recorded with it is compiled again.

The emulator loads a library by path (``ipu/codelet_library.h``): the same library is what ``poplar::Graph::
addCodelets`` takes in C++. :func:`jax_ipu.tile.vertex` is the JAX user's entry point.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple, Union

__all__ = ["CodeletError", "Field", "ELEMENT_TYPES", "parse", "compile_codelets"]

# The glue's interface with the emulator (ipu/codelet_library.h checks it when it loads a library).
ABI = "jax_ipu.codelet.1"
INCLUDE_DIR = Path(__file__).resolve().parent / "include"
# The facts the wheel was built with (build_tools/wheels.py writes them from pins.toml): the zig version the
# "vertices" extra installs and the glibc the plugin's own library targets, which codelet libraries target too.
_TOOLCHAIN_FILE = Path(__file__).resolve().parent / "_toolchain.json"
CXXFLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-ffp-contract=off")

# C++ element types of fields -> the program format's dtype name. Fixed-width spellings are aliases.
ELEMENT_TYPES: Dict[str, str] = {
    "float": "f32", "int": "i32", "unsigned": "u32", "unsigned int": "u32", "short": "i16",
    "unsigned short": "u16", "signed char": "i8", "unsigned char": "u8", "bool": "bool",
    **{f"{ns}{t}": d for ns in ("", "std::") for t, d in (
        ("int32_t", "i32"), ("uint32_t", "u32"), ("int16_t", "i16"), ("uint16_t", "u16"), ("int8_t", "i8"),
        ("uint8_t", "u8"))},
}
DIRECTIONS = {"Input": "in", "Output": "out", "InOut": "inout"}


class CodeletError(RuntimeError):
    """A codelet that cannot be read or compiled, or no compiler to compile it with."""


class Field(NamedTuple):
    name: str
    direction: str  # "in", "out", "inout" (connected fields) or "value" (a constant given when mapped)
    vector: bool    # a Vector<T> (the tile's row) rather than one element
    dtype: str      # the program format's name: "f32", "i32", ...

    @property
    def numpy_dtype(self) -> Any:
        # The one dtype table (imported here: this module is also imported without numpy or jax, by the graph API's
        # C++ test).
        from jax_ipu.compiler import types

        return types.numpy_dtype(next(np_name for name, _, np_name in types.ipu_dtypes() if name == self.dtype))

    def describe(self) -> str:
        return f"{self.name}:{self.direction}:{'vector' if self.vector else 'scalar'}:{self.dtype}"


def _strip_comments(source: str) -> str:
    """The source without comments (kept as spaces, so offsets stay) and with string literals blanked."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)


_CLASS = re.compile(r"\b(?:class|struct)\s+(\w+)\s*(?:final\s*)?:\s*(?:public\s+)?(?:::)?(?:poplar::)?"
                    r"(Vertex|MultiVertex|SupervisorVertex)\b[^{;]*\{")
_CONNECTED = re.compile(r"^(?:::)?(?:poplar::)?(Input|Output|InOut)\s*<\s*(.*)>\s*(\w+)$", re.S)
_VECTOR = re.compile(r"^(?:::)?(?:poplar::)?Vector\s*<\s*([^,<>]+?)\s*(?:,[^<>]*)?>$", re.S)
_VALUE = re.compile(r"^([A-Za-z_][\w:\s]*?)\s+(\w+)\s*(?:=[^;]*|\{[^;]*\})?$", re.S)
_NOT_DATA = re.compile(r"^(?:static|using|typedef|template|friend|enum|class|struct|union)\b|\(")


def _element(text: str, where: str) -> str:
    spelled = " ".join(text.split())
    if spelled not in ELEMENT_TYPES:
        known = ", ".join(sorted({k for k in ELEMENT_TYPES if "::" not in k and "_t" not in k}))
        raise CodeletError(f"{where} has element type '{spelled}': codelet fields are of {known} (or the "
                           f"fixed-width int types); half and float vectors of other widths are not supported")
    return ELEMENT_TYPES[spelled]


def _members(body: str) -> List[str]:
    """The body's declarations at class level: function bodies, nested braces and access specifiers left out."""
    out, depth, start = [], 0, 0
    i = 0
    while i < len(body):
        c = body[i]
        if c == "{":
            if depth == 0:
                head = body[start:i].strip()
                if "(" in head or not head:  # a function's body (or a bare block): not a field
                    start = -1
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0 and start == -1:
                start = i + 1
        elif c == ";" and depth == 0:
            if start >= 0:
                out.append(body[start:i])
            start = i + 1
        i += 1
    cleaned = []
    for m in out:
        m = re.sub(r"\b(?:public|private|protected)\s*:", " ", m).strip()
        if m:
            cleaned.append(m)
    return cleaned


def _class_body(text: str, open_brace: int) -> str:
    depth = 0
    for i in range(open_brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[open_brace + 1:i]
    raise CodeletError("the codelet source ends inside a class body (a '{' without its '}')")


def parse(source: str) -> Dict[str, List[Field]]:
    """Every ``poplar::Vertex`` class of ``source`` and its fields, in declaration order."""
    text = _strip_comments(source)
    classes: Dict[str, List[Field]] = {}
    for match in _CLASS.finditer(text):
        name, base = match.group(1), match.group(2)
        if base != "Vertex":
            raise CodeletError(f"codelet '{name}' derives from poplar::{base}: the emulator runs poplar::Vertex "
                               f"codelets (one worker each); write it as a Vertex")
        fields: List[Field] = []
        for member in _members(_class_body(text, match.end() - 1)):
            if _NOT_DATA.search(member):
                continue
            member = " ".join(member.split())
            where = f"codelet '{name}': field '{member}'"
            connected = _CONNECTED.match(member)
            if connected:
                direction, inner, field = connected.groups()
                vector = _VECTOR.match(inner.strip())
                where = f"codelet '{name}': field '{field}'"
                dtype = _element(vector.group(1) if vector else inner, where)
                fields.append(Field(field, DIRECTIONS[direction], vector is not None, dtype))
                continue
            value = _VALUE.match(member)
            if value and " ".join(value.group(1).split()) in ELEMENT_TYPES:
                fields.append(Field(value.group(2), "value", False, ELEMENT_TYPES[" ".join(value.group(1).split())]))
                continue
            raise CodeletError(f"{where}: a codelet's data members are poplar::Input/Output/InOut<Vector<T>> or "
                               f"<T>, or values of type T (float, int, unsigned, ...), one per declaration")
        if not any(f.direction != "in" and f.direction != "value" for f in fields):
            raise CodeletError(f"codelet '{name}' has no Output or InOut field: it would compute nothing")
        if name in classes:
            raise CodeletError(f"codelet '{name}' is defined twice in the source")
        classes[name] = fields
    if not classes:
        raise CodeletError("the source defines no codelet: a codelet is a class deriving from poplar::Vertex "
                           "(#include <poplar/Vertex.hpp>)")
    return classes


def glue(classes: Dict[str, List[Field]], source_name: str) -> str:
    """The translation unit compiled for ``classes``: the source, then per class its field list, whether it has a
    cycles() estimate, and entries that bind a vertex's fields and run compute() or cycles()."""
    lines = [
        f'#include "{source_name}"',
        "#include <cstdint>",
        "#include <type_traits>",
        "#include <utility>",
        "#define JAX_IPU_EXPORT extern \"C\" __attribute__((visibility(\"default\")))",
        "namespace {",
        "struct JaxIpuField { void* data; std::uint64_t size; };",
        "template <class V, class = void> struct JaxIpuHasCycles : std::false_type {};",
        "template <class V> struct JaxIpuHasCycles<V, decltype((void)std::declval<const V&>().cycles())>"
        " : std::true_type {};",
        "template <class V> std::uint64_t jaxIpuCycles(const V& v) {",
        "  if constexpr (JaxIpuHasCycles<V>::value) return static_cast<std::uint64_t>(v.cycles());",
        "  else return 0;",
        "}",
        "template <class V> int jaxIpuCompute(V& v) {",
        "  if constexpr (std::is_void<decltype(v.compute())>::value) { v.compute(); return 1; }",
        "  else return v.compute() ? 1 : 0;",
        "}",
        "template <class E, class T>",
        "constexpr bool jaxIpuIs = std::is_same<std::remove_cv_t<std::remove_reference_t<E>>, T>::value;",
        "}  // namespace",
        f'JAX_IPU_EXPORT const char* jax_ipu_codelet_abi() {{ return "{ABI}"; }}',
        f'JAX_IPU_EXPORT const char* jax_ipu_codelet_names() {{ return "{",".join(classes)}"; }}',
    ]
    cxx_of = {d: c for c, d in reversed(list(ELEMENT_TYPES.items())) if "::" not in c and "_t" not in c}
    for name, fields in classes.items():
        binds = []
        for i, f in enumerate(fields):
            t = cxx_of[f.dtype]
            if f.direction == "value":
                binds.append(f"  static_assert(jaxIpuIs<decltype({name}::{f.name}), {t}>, \"{name}::{f.name} must be "
                             f"{t}\");")
                binds.append(f"  v.{f.name} = *static_cast<const {t}*>(f[{i}].data);")
            else:
                element = f"v.{f.name}[0]" if f.vector else f"*v.{f.name}"
                binds.append(f"  static_assert(jaxIpuIs<decltype({element}), {t}>, \"the elements of {name}::{f.name}"
                             f" must be {t}\");")
                binds.append(f"  v.{f.name}.jaxIpuBind({{f[{i}].data, static_cast<std::size_t>(f[{i}].size)}});")
        described = ",".join(f.describe() for f in fields)
        lines += [
            f'JAX_IPU_EXPORT const char* jax_ipu_codelet_{name}_fields() {{ return "{described}"; }}',
            f"JAX_IPU_EXPORT int jax_ipu_codelet_{name}_has_cycles() {{ return JaxIpuHasCycles<{name}>::value; }}",
            f"static void jaxIpuBind_{name}({name}& v, const JaxIpuField* f) {{",
            *binds,
            "}",
            f"JAX_IPU_EXPORT int jax_ipu_codelet_{name}_compute(const JaxIpuField* f) {{",
            f"  try {{ {name} v; jaxIpuBind_{name}(v, f); return jaxIpuCompute(v); }} catch (...) {{ return -1; }}",
            "}",
            f"JAX_IPU_EXPORT std::uint64_t jax_ipu_codelet_{name}_cycles(const JaxIpuField* f) {{",
            f"  {name} v; jaxIpuBind_{name}(v, f); return jaxIpuCycles(v);",
            "}",
        ]
    return "\n".join(lines) + "\n"


def toolchain() -> Dict[str, str]:
    """The zig version and glibc target the installed wheel was built with ({} outside a wheel)."""
    try:
        return dict(json.loads(_TOOLCHAIN_FILE.read_text()))
    except (OSError, ValueError):
        return {}


def _compiler(what: str) -> Tuple[List[str], str]:
    """The compile command and the compiler's identity (for the cache key)."""
    facts = toolchain()
    try:
        import ziglang  # noqa: F401  (the "vertices" extra)
    except ImportError:
        pin = f"=={facts['ziglang']}" if "ziglang" in facts else ""
        raise CodeletError(
            f"{what}: compiling a codelet needs the zig C++ compiler (the Python package ziglang), which is not "
            f"installed: pip install ziglang{pin} (on the current series, the extra jax-ipu-plugin[vertices])"
        ) from None
    cmd = [sys.executable, "-m", "ziglang", "c++"]
    target = f"x86_64-linux-gnu.{facts['glibc']}" if "glibc" in facts else ""
    if target:
        cmd += ["-target", target]
    try:
        version = _zig_version()
    except (OSError, subprocess.SubprocessError) as e:
        raise CodeletError(f"{what}: the zig compiler does not run ({e})") from None
    return cmd, f"zig {version} {target}"


@functools.lru_cache(maxsize=None)
def _zig_version() -> str:
    """zig's version, asked once per process (every compile, cached or not, keys on it)."""
    return subprocess.run([sys.executable, "-m", "ziglang", "version"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120).stdout.strip()


def cache_dir() -> Path:
    where = os.environ.get("JAX_IPU_CODELET_CACHE")
    if where:
        return Path(where)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jax_ipu" / "codelets"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def compile_codelets(source: Union[str, Path], flags: Sequence[str] = ()) -> Tuple[Path, Dict[str, List[Field]]]:
    """The shared library of ``source`` (C++ text, or a path to a file of it) and its codelets' fields. Compiled
    once per distinct input; raises CodeletError with the compiler's messages when it does not compile."""
    text = Path(source).read_text() if isinstance(source, Path) else str(source)
    classes = parse(text)
    what = f"codelets {', '.join(classes)}"
    cmd, identity = _compiler(what)
    unit = glue(classes, "vertex_source.cc")
    header = (INCLUDE_DIR / "poplar" / "Vertex.hpp").read_bytes()
    key = hashlib.sha256(b"\0".join([ABI.encode(), text.encode(), unit.encode(), header, identity.encode(),
                                     " ".join(list(CXXFLAGS) + list(flags)).encode()])).hexdigest()
    entry = cache_dir() / key[:32]
    library, digest = entry / "libcodelets.so", entry / "libcodelets.so.sha256"
    if library.exists() and digest.exists() and digest.read_text().strip() == _sha256(library):
        return library, classes
    entry.mkdir(parents=True, exist_ok=True)
    (entry / "vertex_source.cc").write_text(text)
    (entry / "codelets.cc").write_text(unit)
    env = dict(os.environ)
    env.setdefault("ZIG_GLOBAL_CACHE_DIR", str(cache_dir() / "zig"))
    env.setdefault("ZIG_LOCAL_CACHE_DIR", str(cache_dir() / "zig-local"))
    fd, tmp = tempfile.mkstemp(prefix="libcodelets-", suffix=".so", dir=entry)
    os.close(fd)
    full = cmd + list(CXXFLAGS) + list(flags) + ["-I", str(INCLUDE_DIR), str(entry / "codelets.cc"), "-o", tmp]
    try:
        proc = subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                              cwd=str(entry))
        if proc.returncode != 0:
            raise CodeletError(f"{what} did not compile (zig c++ exited {proc.returncode}; the source is "
                               f"{entry / 'vertex_source.cc'}):\n{proc.stdout.strip()}")
        os.replace(tmp, library)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    digest.write_text(_sha256(library) + "\n")
    return library, classes
