"""The sanitizer lanes of `nox -s sanitize` (build_tools/sanitize.py): what they build and what they run."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from build_tools import native, sanitize
from build_tools.pins import Series

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(sanitize.LANES))
def test_every_lane_runs_tests_that_exist(name: str) -> None:
    lane = sanitize.LANES[name]
    for t in lane.tests + lane.ci_tests:
        assert (REPO / t).exists(), f"{name}: {t} does not exist"
    for t in lane.ci_tests:  # the CI subset is a part of the lane
        assert any(t == d or t.startswith(d + "/") for d in lane.tests), f"{name}: {t} is not in the lane"


def test_deselected_tests_exist_and_say_why() -> None:
    """A renamed test must not leave a stale name behind (nor a reason that no longer applies)."""
    sources = "\n".join(p.read_text() for p in (REPO / "tests").rglob("test_*.py"))
    for name, reason in sanitize.TSAN_DESELECTED.items():  # every lane's, DESELECTED included
        assert re.search(rf"^def {name}\(", sources, flags=re.M), f"no test function {name}"
        assert len(reason) > 20
    args = sanitize.LANES["asan"].pytest_args()
    assert args[args.index("-k") + 1].startswith("not (")


def test_sanitizer_objects_are_never_a_normal_builds(series: Series) -> None:
    """The sanitizer flags are part of every object's key, so the object cache never mixes the two builds."""
    _, normal_flags, normal_key = native.compile_plan(series, "g++")
    _, flags, key = native.compile_plan(series, "g++", ("address", "undefined"))
    assert key != normal_key
    assert flags[:len(native.CXXFLAGS)] == native.CXXFLAGS == normal_flags[:len(native.CXXFLAGS)]
    assert "-fsanitize=address,undefined" in flags and "-fno-sanitize-recover=all" in flags
    assert native.sanitize_flags(()) == []
    assert native.sanitize_flags(("thread",)) == native.SANITIZE_CXXFLAGS + ["-fsanitize=thread",
                                                                             "-fno-sanitize-recover=all"]


@pytest.mark.skipif(not shutil.which("g++"), reason="no g++ on this host")
def test_the_runtime_is_preloaded_first(tmp_path: Path) -> None:
    env = sanitize.run_env(sanitize.LANES["asan"], tmp_path / "libjax_ipu.so")
    first, *rest = env["LD_PRELOAD"].split(" ")
    assert Path(first).name.startswith("libasan.so") and any("libstdc++" in p for p in rest)
    assert env["JAX_IPU_LIBRARY"] == str(tmp_path / "libjax_ipu.so")
    assert "detect_leaks=0" in env["ASAN_OPTIONS"] and "halt_on_error=1" in env["UBSAN_OPTIONS"]


# Each lane must catch a bug of its kind in a library built as the lane builds ours (native's flags, the lane's
# sanitizers) and loaded as ours is (by an uninstrumented Python, the runtime preloaded, the lane's options).
BUGS = {
    "asan": ("""
        #include <cstdlib>
        extern "C" __attribute__((visibility("default"))) int bug(int n) {
          int* p = static_cast<int*>(std::malloc(sizeof(int) * n));
          for (int i = 0; i < n; ++i) p[i] = i;
          const int r = p[n];  // one past the end
          std::free(p);
          return r;
        }""", "ERROR: AddressSanitizer: heap-buffer-overflow"),
    # float-cast-overflow: not in g++'s "undefined" group, so the lane names it (the finding of xla_math.h's floor_).
    "ubsan": ("""
        #include <cmath>
        extern "C" __attribute__((visibility("default"))) int bug(int n) {
          volatile float x = std::nanf("") * static_cast<float>(n);
          return static_cast<int>(x);
        }""", "runtime error: nan is outside the range of representable values of type 'int'"),
    "tsan": ("""
        #include <thread>
        static long counter;
        extern "C" __attribute__((visibility("default"))) int bug(int n) {
          // The race repeats with new threads: TSan's runtime once let the single race go unreported in CI (stop 34),
          // and a real race in the engine recurs too. halt_on_error stops the process at the first report.
          for (int round = 0; round < 16; ++round) {
            std::thread t([n] { for (int i = 0; i < n; ++i) ++counter; });
            for (int i = 0; i < n; ++i) ++counter;  // unsynchronised with the thread's increments
            t.join();
          }
          return static_cast<int>(counter);
        }""", "WARNING: ThreadSanitizer: data race"),
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_the_lane_catches_a_bug_in_a_library_loaded_by_python(bug: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    lane = sanitize.LANES["tsan" if bug == "tsan" else "asan"]
    try:
        env = sanitize.run_env(lane, tmp_path / "libbug.so")
    except sanitize.SanitizeError as e:
        pytest.skip(str(e))  # g++ without this sanitizer's runtime
    source, report = BUGS[bug]
    (tmp_path / "bug.cc").write_text(source)
    flags = native.CXXFLAGS + native.sanitize_flags(lane.sanitizers)
    subprocess.run([sanitize.DEFAULT_CXX, *flags, "-shared", "-o", env["JAX_IPU_LIBRARY"], str(tmp_path / "bug.cc")],
                   check=True)
    script = "import ctypes, os; print('returned', ctypes.CDLL(os.environ['JAX_IPU_LIBRARY']).bug(1000))"
    run_env = {k: v for k, v in os.environ.items() if not k.endswith("SAN_OPTIONS")}
    proc = subprocess.run([*sanitize.launcher(lane), sys.executable, "-c", script], env={**run_env, **env},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert report in proc.stderr, proc.stderr[-3000:]
    assert "returned" not in proc.stdout and proc.returncode != 0, "the finding did not stop the process"
