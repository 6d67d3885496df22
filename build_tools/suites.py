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
# The conformance suite runs again on an IPU Model of 7 tiles, where every tensor spreads unevenly over few tiles:
# the files whose programs the tile count changes (tile mappings, exchanges, matmul and convolution plans, partial
# results per tile), each with what it exercises there. Every other file is listed below with why the tile count
# cannot change what it tests (tests/toolchain checks that each file of the suite is in one of the two).
SEVEN_TILE_CONFORMANCE = {
    "test_collectives.py": "collectives between IPUs whose tensors lie on few tiles",
    "test_complex.py": "pairs of f32 planes mapped and exchanged together; complex dots and reductions",
    "test_control_flow.py": "loop carries and branch results copied between mappings",
    "test_conv.py": "convolution plans over 7 tiles",
    "test_dot.py": "matmul plans over 7 tiles",
    "test_dtypes.py": "8/16-bit elements packed per tile, through every op family",
    "test_fft.py": "transforms of rows spread over few tiles",
    "test_float8.py": "1-byte elements packed per tile, converted, moved and multiplied across few tiles",
    "test_fusion.py": "fused compute sets whose broadcast operands are exchanged to each tile",
    "test_gather_scatter.py": "indexed reads and writes across tiles",
    "test_partitioning.py": "shards of a partitioned jit on few tiles",
    "test_reduce.py": "partial results per tile, folded across tiles",
    "test_shapes.py": "slices, transposes and pads exchanged between uneven mappings",
    "test_sort.py": "sorting rows that span tiles",
    "test_sub_byte.py": "sub-byte integers held a byte each, moved, widened, summed and sorted across few tiles",
    "test_window.py": "windows that straddle tile boundaries",
    "test_x64.py": "8-byte elements mapped, exchanged, reduced and multiplied across few tiles",
}
FULL_CHIP_CONFORMANCE = {
    "test_denormals.py": "element by element: the tile count only chooses which tile computes an element",
    "test_elementwise.py": "element by element: the tile count only chooses which tile computes an element",
    "test_special.py": "element by element: the tile count only chooses which tile computes an element",
    "test_xla_bits.py": "element by element: the tile count only chooses which tile computes an element",
    "test_random.py": "threefry is element-wise integer arithmetic on counters",
    "test_rng.py": "Philox in u32 arithmetic on each element's counter (jax_ipu/backend/rng.py): element-wise",
    "test_linalg.py": "built of dots, reductions, loops and dynamic slices, which the 7-tile files above run",
    "test_errors.py": "refusals at compile time, before any tile mapping",
    "test_frontend.py": "the front end alone (StableHLO to program), before any tile mapping",
    "test_constant_folding.py": "constants folded by the front end, before any tile mapping; the rest elementwise",
}
AMBIENT_PREFIXES = ("JAX_", "XLA_FLAGS", "TF_POPLAR_FLAGS", "POPLAR_", "PVTI_OPTIONS")
# Where the harness finds things, not what it tests: passed through.
HARNESS_VARIABLES = ("JAX_IPU_CHROMIUM",)
# The build's own variables: kept for the host toolchain tests, which check that build.
BUILD_VARIABLES = ("JAX_IPU_CACHE", "JAX_IPU_CXX", "JAX_IPU_BUILD_DIR")


# What `nox -s upstream_canary` runs against the newest jax and jaxlib on the registry with our current-series
# plugin: the files that test what a user does with the backend (devices, jit, donation, feeds, callbacks, the seeds'
# programs), none that compares bits with XLA:CPU, whose numerics a newer jaxlib is free to change.
CANARY_FILES = ("tests/backend/test_devices.py", "tests/backend/test_seed_example.py", "tests/backend/test_donation.py",
                "tests/backend/test_infeed_outfeed.py", "tests/backend/test_callbacks.py")


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


def seven_tile_files(repo: Path = REPO) -> List[str]:
    """The conformance files the 7-tile lane runs (SEVEN_TILE_CONFORMANCE), as paths."""
    return [str(repo / "tests" / "conformance" / name) for name in SEVEN_TILE_CONFORMANCE]
