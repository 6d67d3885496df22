"""What the test sessions run and in which environment (noxfile.py imports this; tests/toolchain checks it).

A user's shell must not change what the suites test: every variable that redirects JAX, XLA or the backend (cpu
instead of ipu, another tile count, x64, Poplar-style engine flags, trace options) is removed for each suite run,
found by prefix in the actual environment so that a new flag is covered without editing a list here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Mapping, Optional

from build_tools.fetch import cache_dir
from build_tools.pins import REPO

# Suites that run against the installed wheels, from a directory outside the source tree. A missing one is an error.
INSTALLED_SUITES = (
    "tests/toolchain/installed", "tests/emulator", "tests/conformance", "tests/backend",
    "tests/bench",  # only test_bench_programs.py: every bench program runs once on both backends and matches (untimed)
    "tests/report",  # the profile report page in headless Chromium (skipped, saying so, where Chromium is absent)
    "tests/fuzz",  # a fixed-seed slice of the differential fuzzer (nox -s fuzz runs more)
)
AMBIENT_PREFIXES = ("JAX_", "XLA_FLAGS", "TF_POPLAR_FLAGS", "POPLAR_", "PVTI_OPTIONS")
# Where the harness finds things, not what it tests: passed through.
HARNESS_VARIABLES = ("JAX_IPU_CHROMIUM",)
# The build's own variables: kept for the host toolchain tests, which check that build.
BUILD_VARIABLES = ("JAX_IPU_CACHE", "JAX_IPU_CXX", "JAX_IPU_BUILD_DIR")


def suite_env(environ: Optional[Mapping[str, str]] = None, keep: tuple = (),
              **own: str) -> Dict[str, Optional[str]]:
    """nox's env overlay for one suite run: every ambient variable mapped to None (nox then removes it), then the
    session's own settings."""
    environ = os.environ if environ is None else environ
    env: Dict[str, Optional[str]] = {
        name: None for name in environ if name.startswith(AMBIENT_PREFIXES) and name not in HARNESS_VARIABLES + keep}
    # zig's cache for the codelets the suites compile (jax_ipu.codelets): the build's, where its libc++ for the
    # wheels' glibc target is built already (a user's own setting is kept)
    if "ZIG_GLOBAL_CACHE_DIR" not in environ:
        env["ZIG_GLOBAL_CACHE_DIR"] = str(cache_dir() / "zig")
    env.update(own)
    return env


def suite_dirs(repo: Path = REPO) -> List[str]:
    """The installed-wheel suites' folders; a folder that is missing raises, naming it (never a silent skip)."""
    missing = [s for s in INSTALLED_SUITES if not (repo / s).is_dir()]
    if missing:
        raise FileNotFoundError(f"installed-wheel suite folder(s) missing: {', '.join(missing)} (under {repo}; "
                                "build_tools/suites.py INSTALLED_SUITES lists them)")
    return [str(repo / s) for s in INSTALLED_SUITES]
