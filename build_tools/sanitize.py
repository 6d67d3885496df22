"""Sanitizer lanes: libjax_ipu.so built with AddressSanitizer + UndefinedBehaviorSanitizer, or ThreadSanitizer, and
the tests each lane runs under it (``nox -s sanitize``).

    python -m build_tools build-sanitized --lane asan [--series 0.4.13] [--out DIR] [--jobs N] [--cxx g++]

The library is compiled by the host's g++ (its libasan/libtsan), with native.py's sources, includes and object cache
(the sanitizer flags are part of each object's key). Only our library is instrumented: Python and jaxlib are not, so
the sanitizer's runtime is preloaded into the interpreter (``LD_PRELOAD``) and the installed wheels' library is
replaced through ``$JAX_IPU_LIBRARY``. A finding aborts the process with the sanitizer's report on stderr; pytest's
faulthandler then prints the Python stack of the test that ran.
"""

from __future__ import annotations

import dataclasses
import platform
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from build_tools import native
from build_tools.pins import REPO, Series

DEFAULT_CXX = "g++"
SUPPRESSIONS = REPO / "build_tools" / "sanitizer-suppressions"


@dataclasses.dataclass(frozen=True)
class Lane:
    name: str
    sanitizers: Tuple[str, ...]  # -fsanitize=
    runtime: str  # the runtime's shared library, preloaded into the uninstrumented interpreter
    options: Dict[str, str]  # its *SAN_OPTIONS variables
    tests: Tuple[str, ...]  # pytest paths, relative to the repository
    ci_tests: Tuple[str, ...]  # the subset CI runs (`--ci`)
    deselected: Dict[str, str] = dataclasses.field(default_factory=dict)  # test function name: why not here
    no_aslr: bool = False  # run the tests with address space randomisation off (launcher())

    def pytest_args(self, ci: bool = False) -> List[str]:
        """The tests to run (absolute paths) and a -k expression leaving out the deselected ones. pytest captures
        Python's sys.stdout/stderr only: a report the sanitizer writes to file descriptor 2 just before it aborts the
        process would otherwise be lost with pytest's capture buffer."""
        args = ["--capture=sys"] + [str(REPO / t) for t in (self.ci_tests if ci else self.tests)]
        if self.deselected:
            args += ["-k", "not (" + " or ".join(sorted(self.deselected)) + ")"]
        return args


# The conformance files run under ASan: the emulator's kernels of every op family (the rest of the conformance suite
# repeats these kernels with other shapes and dtypes, at ~5x the sanitizer's cost; see the session's docstring).
CONFORMANCE_SLICE = tuple(f"tests/conformance/test_{name}.py" for name in (
    "elementwise", "reduce", "dot", "conv", "gather_scatter", "control_flow", "shapes", "sort", "window",
    "collectives", "fft", "linalg", "fusion"))
# The tests where host threads meet: asynchronous dispatch and errors, several Python threads, several IPUs and
# pmap (a worker per device), host callbacks and streams (the device worker calls back into Python).
THREAD_TESTS = tuple(f"tests/backend/test_{name}.py" for name in (
    "async", "threads", "multi_device", "callbacks", "infeed_outfeed", "donation", "run_reuse")) + (
    "tests/emulator/test_emulator_row_chains.py",)  # the host threads sharing a chain's rows

# Tests whose subject a sanitizer changes: none of them is left out for a finding.
DESELECTED = {
    "test_compile_time_does_not_grow_with_elements":
        "compares compile times of a small and a large program; instrumentation slows them by different factors",
    "test_a_failed_run_surfaces_where_the_result_is_waited_on_or_read":
        "makes a run fail with std::bad_alloc under RLIMIT_AS; the sanitizers' shadow memory needs far more address "
        "space, and AddressSanitizer's operator new aborts with an out-of-memory report instead of throwing",
}

# ThreadSanitizer delivers an asynchronous signal to its handler only when the thread that took it next enters code
# the runtime sees (an instrumented function or an intercepted call); the test's main thread waits inside jaxlib,
# which is not instrumented, so the SIGINT it sends is never handled there and nothing of ours can see Ctrl-C.
TSAN_DESELECTED = dict(DESELECTED, test_ctrl_c_raises_keyboard_interrupt_in_the_wait=(
    "sends SIGINT to a process whose main thread waits inside uninstrumented jaxlib; ThreadSanitizer defers the "
    "handler until that thread enters instrumented or intercepted code, so the Ctrl-C is never seen"))

LANES = {
    "asan": Lane(
        name="asan",
        # float-cast-overflow: a float converted to an integer type that cannot hold it is undefined in C++, and
        # g++'s "undefined" does not check it.
        sanitizers=("address", "undefined", "float-cast-overflow"),
        runtime="libasan.so",
        # detect_leaks=0: CPython and jaxlib keep much of what they allocate until exit by design, and LeakSanitizer
        # cannot tell their allocations from ours (every stack passes through the interpreter).
        options={"ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=1:"
                                 "check_initialization_order=1:strict_init_order=1",
                 "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:abort_on_error=1"},
        tests=("tests/emulator", "tests/backend") + CONFORMANCE_SLICE,
        ci_tests=("tests/emulator",) + THREAD_TESTS + ("tests/conformance/test_elementwise.py",),
        deselected=DESELECTED,
    ),
    "tsan": Lane(
        name="tsan",
        sanitizers=("thread",),
        runtime="libtsan.so",
        # ignore_noninstrumented_modules=1: what Python and jaxlib do through the runtime's interceptors (malloc,
        # free, memcpy, ...) is not checked. jaxlib synchronises its threads with atomics TSan cannot see (it is not
        # instrumented), e.g. tsl::AsyncValue's waiters, allocated on the main thread and freed on our worker thread
        # when it completes an event: reported as a race on operator new/delete, which is jaxlib's own affair. Their
        # mutexes (pthread) are still seen, and so is every access our library makes.
        options={"TSAN_OPTIONS": f"halt_on_error=1:abort_on_error=1:second_deadlock_stack=1:"
                                 f"ignore_noninstrumented_modules=1:suppressions={SUPPRESSIONS / 'tsan.txt'}"},
        tests=("tests/emulator", "tests/backend"),  # the emulator's thread pool runs a compute set's tiles at once
        ci_tests=THREAD_TESTS,
        deselected=TSAN_DESELECTED,
        # TSan's shadow memory layout allows at most 30 bits of mmap randomisation; kernels from 6.5 on default to
        # 32 on some distributions (GitHub's runners among them), and the runtime then stops with "FATAL:
        # ThreadSanitizer: unexpected memory mapping" (google/sanitizers#1716). g++'s runtime does not re-execute
        # itself without randomisation as newer LLVM does: setarch -R does it for the test process.
        no_aslr=True,
    ),
}


class SanitizeError(native.NativeBuildError):
    pass


def lane(name: str) -> Lane:
    try:
        return LANES[name]
    except KeyError:
        raise SanitizeError(f"no sanitizer lane {name!r}; the lanes are {', '.join(LANES)}") from None


def compiler_library(name: str, cxx: Optional[str] = None) -> Path:
    """A shared library of the compiler's (``g++ -print-file-name=libasan.so``)."""
    cmd = shlex.split(cxx or DEFAULT_CXX) + [f"-print-file-name={name}"]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout.strip()
    path = Path(out)
    if not path.is_absolute() or not path.exists():
        raise SanitizeError(f"{shlex.join(cmd)} does not know {name} (said {out!r}): install the compiler's "
                            f"sanitizer runtimes (Debian: libasan8, libubsan1, libtsan2, with g++)")
    return path.resolve()


def preload(chosen: Lane, cxx: Optional[str] = None) -> str:
    """LD_PRELOAD: the sanitizer's runtime first, as it requires, then libstdc++: the runtime looks up the
    __cxa_throw it wraps when it starts, and the interpreter has no C++ library loaded then (jaxlib brings one later;
    without it, jaxlib's first exception stops the process with a failed CHECK of AddressSanitizer's)."""
    return " ".join(str(compiler_library(name, cxx)) for name in (chosen.runtime, "libstdc++.so"))


def default_out(chosen: Lane, series: Series) -> Path:
    from build_tools.build import BUILD

    return BUILD / "sanitize" / chosen.name / series.name


def build(chosen: Lane, series: Series, out_dir: Optional[Path] = None, jobs: Optional[int] = None,
          cxx: Optional[str] = None) -> Path:
    """The lane's libjax_ipu.so (in build/sanitize/<lane>/<series>/ unless ``out_dir`` says otherwise)."""
    return native.build_library(series, out_dir or default_out(chosen, series), cxx=cxx or DEFAULT_CXX, jobs=jobs,
                                sanitizers=chosen.sanitizers)


def launcher(chosen: Lane) -> List[str]:
    """What the test command runs under: ``setarch <machine> -R`` for a lane that needs randomisation off (when
    util-linux's setarch is there; else nothing, and a kernel with 32 random bits will stop TSan at start)."""
    setarch = shutil.which("setarch")
    return [setarch, platform.machine(), "-R"] if chosen.no_aslr and setarch else []


def run_env(chosen: Lane, library: Path, cxx: Optional[str] = None) -> Dict[str, str]:
    """The variables a test process needs to run ``library`` under the lane's sanitizer."""
    return {"JAX_IPU_LIBRARY": str(library), "LD_PRELOAD": preload(chosen, cxx), **chosen.options}
