"""The test sessions' environment: ambient variables cleared, missing suites an error, the test venv hash-locked."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from build_tools import native, suites
from build_tools.fetch import cache_dir
from build_tools.pins import Series

REPO = Path(__file__).resolve().parents[2]


def test_ambient_variables_are_found_by_prefix() -> None:
    environ = {"JAX_PLATFORMS": "cpu", "JAX_SOMETHING_NEW": "1", "XLA_FLAGS": "--xla_dump_to=/tmp",
               "TF_POPLAR_FLAGS": "--use_ipu_model", "POPLAR_ENGINE_OPTIONS": "{}", "PVTI_OPTIONS": "{}",
               "JAX_IPU_CHROMIUM": "/usr/bin/chromium", "HOME": "/root", "PATH": "/usr/bin", "MY_JAX_THING": "x"}
    env = suites.suite_env(environ, JAX_IPU_MODEL_NUM_TILES="7")
    removed = sorted(k for k, v in env.items() if v is None)
    assert removed == ["JAX_PLATFORMS", "JAX_SOMETHING_NEW", "POPLAR_ENGINE_OPTIONS", "PVTI_OPTIONS",
                       "TF_POPLAR_FLAGS", "XLA_FLAGS"]
    assert env["JAX_IPU_MODEL_NUM_TILES"] == "7"  # the session's own setting wins
    assert "JAX_IPU_CHROMIUM" not in env and "HOME" not in env and "MY_JAX_THING" not in env


def test_build_variables_kept_only_when_asked() -> None:
    environ = {"JAX_IPU_CACHE": "/c", "JAX_IPU_CXX": "g++", "JAX_PLATFORMS": "cpu", "ZIG_GLOBAL_CACHE_DIR": "/z"}
    assert suites.suite_env(environ, keep=suites.BUILD_VARIABLES) == {"JAX_PLATFORMS": None}
    assert suites.suite_env(environ) == {"JAX_IPU_CACHE": None, "JAX_IPU_CXX": None, "JAX_PLATFORMS": None}


def test_codelets_compile_with_the_builds_zig_cache_unless_one_is_set() -> None:
    assert suites.suite_env({})["ZIG_GLOBAL_CACHE_DIR"] == str(cache_dir() / "zig")
    assert "ZIG_GLOBAL_CACHE_DIR" not in suites.suite_env({"ZIG_GLOBAL_CACHE_DIR": "/mine"})


def test_every_conformance_file_says_whether_the_tile_count_changes_it() -> None:
    """Each file of tests/conformance is in exactly one of the 7-tile lane's two lists, so a new file is placed
    on purpose (a file in neither list would silently miss the 7-tile lane)."""
    files = {p.name for p in (REPO / "tests" / "conformance").glob("test_*.py")}
    both = set(suites.SEVEN_TILE_CONFORMANCE) & set(suites.FULL_CHIP_CONFORMANCE)
    assert not both, f"in both lists: {sorted(both)}"
    listed = set(suites.SEVEN_TILE_CONFORMANCE) | set(suites.FULL_CHIP_CONFORMANCE)
    assert files == listed, f"unlisted: {sorted(files - listed)}; no such file: {sorted(listed - files)}"
    assert all(Path(f).is_file() for f in suites.seven_tile_files())


def test_missing_suite_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    for s in suites.INSTALLED_SUITES[1:]:
        (tmp_path / s).mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=re.escape(suites.INSTALLED_SUITES[0])):
        suites.suite_dirs(tmp_path)
    (tmp_path / suites.INSTALLED_SUITES[0]).mkdir(parents=True)
    assert len(suites.suite_dirs(tmp_path)) == len(suites.INSTALLED_SUITES)
    assert suites.suite_dirs() == [str(REPO / s) for s in suites.INSTALLED_SUITES]


def test_sessions_install_wheels_without_resolving() -> None:
    """Every `session.install` of noxfile.py is hash-locked or --no-deps (nothing resolved unpinned), except in
    upstream_canary, whose point is the newest jax and jaxlib (unpinned) with our plugin wheel (--no-deps)."""
    text = (REPO / "noxfile.py").read_text()
    functions = re.split(r"\n(?=def \w+\()", text)
    installs = [(f.split("(", 1)[0][4:], args) for f in functions
                for args in re.findall(r"session\.install\(([^\n]*)\)", f)]
    assert installs
    canary = [args for name, args in installs if name == "upstream_canary"]
    assert canary == ['"--only-binary=:all:", "--upgrade", "jax", "jaxlib", f"pytest=={PINS.tools[\'pytest\']}"',
                      '"--no-deps", str(plugin[0])'], canary
    for name, args in installs:
        if name != "upstream_canary":
            assert "--require-hashes" in args or '"--no-deps", *_dist_wheels(session)' in args, (name, args)


def test_object_cache_keys_name_no_absolute_path(series: Series) -> None:
    cxx, flags, key = native.compile_plan(series)
    for location in {str(REPO), str(cache_dir().resolve()), str(Path(sys.executable).parent.parent), "/work", "/tmp"}:
        assert location not in key, f"cache key contains {location}"
    assert any(f.startswith("-ffile-prefix-map=" + str(REPO) + "=") for f in flags)


def test_emulator_objects_are_shared_by_every_series() -> None:
    """The emulator's sources compile once for all series: one plan (the oldest pinned glibc, no series header on the
    include path), while the PJRT layer's plan is each series' own."""
    every = native.load().all_series()
    plans = (native.compile_plan(s, shared=True) for s in every)
    shared = {(tuple(cxx), tuple(flags), key) for cxx, flags, key in plans}
    assert len(shared) == 1
    cxx, flags, _ = shared.pop()
    if native.is_portable(None):  # zig for the oldest glibc (a development compiler has no target)
        assert cxx[-1] == f"x86_64-linux-gnu.{native.target_glibc()}"
    assert not any("headers" in f or "generated" in f for f in flags if f.startswith("-I")), flags
    if len(every) > 1:
        assert len({native.compile_plan(s)[2] for s in every}) == len(every)
    assert native.is_shared(native.EMULATOR_SOURCES / "poplar" / "graph.cc")
    assert not native.is_shared(native.SHIM / "pjrt" / "client.cc")


def test_object_keys_follow_the_headers_each_source_includes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A header change recompiles only the sources that include it, directly or through another header (a one-line
    change to a header of one kernel does not rebuild the emulator); a header that is not there (a system one) does
    not enter the key."""
    monkeypatch.setattr(native, "REPO", tmp_path)
    include = tmp_path / "include"
    (include / "ipu").mkdir(parents=True)
    (include / "ipu" / "z.h").write_text("int z;\n")
    (include / "ipu" / "x.h").write_text('#include "ipu/z.h"\n')
    (include / "ipu" / "y.h").write_text("int y;\n")
    src = tmp_path / "src"
    src.mkdir()
    (src / "local.h").write_text("int local;\n")
    (src / "a.cc").write_text('#include <vector>\n#include "ipu/x.h"\n')
    (src / "b.cc").write_text('#include "ipu/y.h"\n  #  include "local.h"\n')

    def keys() -> tuple:
        return tuple(native.object_key("base", src / n, [include]) for n in ("a.cc", "b.cc"))

    before = keys()
    (include / "ipu" / "z.h").write_text("int z = 1;\n")  # reached through x.h only
    after_z = keys()
    assert after_z[0] != before[0] and after_z[1] == before[1]
    (src / "local.h").write_text("int local = 2;\n")
    after_local = keys()
    assert after_local[0] == after_z[0] and after_local[1] != after_z[1]


def test_object_key_is_the_same_in_another_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = []
    for where in ("a", "main-checkout"):
        src = tmp_path / where / "jax_ipu_shim" / "pjrt" / "x.cc"
        src.parent.mkdir(parents=True)
        src.write_text("int x;\n")
        monkeypatch.setattr(native, "REPO", tmp_path / where)
        keys.append(native.object_key("base", src))
    assert keys[0] == keys[1]
