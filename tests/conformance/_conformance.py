"""The conformance harness: run a function on the ipu backend and on cpu with the same inputs, and compare.

Tolerances are stated per dtype and per kind of op (see EXACT, TRANSCENDENTAL), or, for sums of many terms (reduce,
dot, conv), per output in ulps of that output's scale (``check(..., scale_ulps=N)``). Set
JAX_IPU_CONFORMANCE_BACKEND=cpu to debug the harness itself (cpu against cpu); the default, and what the suite is for,
is "ipu".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from typing import Any, Dict, List, Optional, Tuple

import jax
import numpy as np

BACKEND = os.environ.get("JAX_IPU_CONFORMANCE_BACKEND", "ipu")
REFERENCE = "cpu"

# Tolerances: exact for bool/ints and for exactly rounded float ops (add, multiply, divide, compare, convert, ...);
# f16 arithmetic is done in f32 and rounded once, so it is exact where f32 is.
EXACT: Dict[str, float] = {"rtol": 0.0, "atol": 0.0}
TRANSCENDENTAL = {  # a few ulp of the result
    "float32": {"rtol": 1e-5, "atol": 1e-6},
    "float16": {"rtol": 2e-3, "atol": 1e-3},
}

FLOAT_DTYPES = ("float32", "float16")
INT_DTYPES = ("int32", "uint32")
ALL_DTYPES = ("float32", "float16", "int32", "uint32", "bool")

# Values that find edge-case bugs: signed zeros, infinities, NaN, extremes, halves (rounding), shift counts >= 32.
SPECIAL = {
    "float32": [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 2.5, 3.5, -7.75, 123.456, 1e-30, 3.4e38, -3.4e38,
                np.inf, -np.inf, np.nan],
    "float16": [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 2.5, 3.5, -7.75, 123.4, 1e-3, 65504.0, -65504.0,
                np.inf, -np.inf, np.nan],
    "int32": [0, 1, -1, 2, -2, 7, -7, 31, 32, 33, 12345, -12345, 2**31 - 1, -2**31],
    "uint32": [0, 1, 2, 7, 31, 32, 33, 12345, 2**31 - 1, 2**31, 2**32 - 1],
    "bool": [False, True],
}

# Shapes an elementwise op meets: scalar, empty, one element, odd sizes, a matrix, and one big enough to spread
# unevenly over every tile of a chip (1472 tiles).
SHAPES = [(), (0,), (3, 0), (1,), (7,), (37, 53), (100_003,)]


def special(dtype: str) -> np.ndarray:
    return np.array(SPECIAL[dtype], dtype=dtype)


def random(dtype: str, shape: Any, seed: int = 0, low: float = -4.0, high: float = 4.0) -> np.ndarray:
    """Random values of a dtype; floats in [low, high), ints over their whole range, bools half true."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in INT_DTYPES:
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    with np.errstate(over="ignore"):  # a range beyond float16's gives infinities on purpose
        return rng.uniform(low, high, size=shape).astype(dtype)


def small_ints(dtype: str, shape: Any, seed: int = 0) -> np.ndarray:
    """Ints (or floats) in [-50, 50) ([0, 100) unsigned): sums and products of these stay far from overflow."""
    rng = np.random.default_rng(seed)
    offset = 0 if dtype in ("uint32", "bool") else -50
    return (rng.integers(0, 100, size=shape) + offset).astype(dtype)


def away_from_zero(dtype: str, shape: Any, seed: int = 0, low: float = 0.5, high: float = 2.0) -> np.ndarray:
    """Non-integer floats of random sign with magnitudes in [low, high): every term of a sum of them counts, so
    dropping one (or rounding the sum coarsely) moves the result by more than a few ulps of its scale."""
    rng = np.random.default_rng(seed)
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    return (sign * rng.uniform(low, high, size=shape)).astype(dtype)


def assert_ran_on(leaves: Any, platform: str) -> None:
    """Every result array lives on ``platform``: a suite that says it tests the ipu must not quietly run on cpu."""
    for leaf in leaves:
        devices = leaf.devices() if hasattr(leaf, "devices") else {leaf.device()}
        assert {d.platform for d in devices} == {platform}, f"ran on {devices}, not on {platform}"


def host_facts() -> Dict[str, Any]:
    """What the ipu backend knows of this host's XLA:CPU (``wide_vectors``, ``avx512``: ipu/cpu_features.h), where a
    test must know which of cpu's host-dependent behaviours to expect."""
    from jax_ipu.compiler import ops

    return ops.host()


def skip_unless_memory(nbytes: int, what: str) -> None:
    """Skip a test whose program keeps ``nbytes`` live when the ipu devices' tiles together hold less: the suite's
    7-tile IPU Model lane (4.4 MB) cannot hold what a whole chip (940 MB) runs; on the chip the test runs."""
    if BACKEND != "ipu":
        return
    device = jax.devices(BACKEND)[0]
    have = device.num_tiles * device.bytes_per_tile
    if have < nbytes:
        import pytest
        pytest.skip(f"{what} keeps about {nbytes} bytes live; {device.num_tiles} tiles hold {have}")


def eps(dtype: Any) -> float:
    """The spacing of a float dtype's numbers at 1.0 (one ulp of 1)."""
    return float(np.finfo(dtype).eps)


def run_both(f, *args, **jit_kwargs) -> Tuple[Any, Any]:
    """``f`` under jit on the backend under test and on cpu, with the same args: (got, want). Every result of the
    first must live on the backend under test."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "backend and device argument on jit is deprecated", DeprecationWarning)
        got = jax.jit(f, backend=BACKEND, **jit_kwargs)(*args)
        want = jax.jit(f, backend=REFERENCE, **jit_kwargs)(*args)
    assert_ran_on(jax.tree_util.tree_leaves(got), BACKEND)
    return got, want


def check(f, *args, rtol: float = 0.0, atol: float = 0.0, scale_ulps: Optional[float] = None, **jit_kwargs) -> None:
    """Runs ``f`` under jit on the ipu backend and on cpu with the same args; compares structure, dtypes, shapes and
    values.

    NaNs must match NaNs. With rtol == atol == 0 (exact), the signs of zeros must match too.

    ``scale_ulps=N``: each float output element may differ by N ulps of its own scale, ``N * eps * f(|args|)``, on top
    of rtol/atol, instead of one tolerance for all. For ``f`` built of sums and products of its inputs (sum, mean,
    prod, dot, conv) ``f(|args|)`` is the sum of the magnitudes of that output's terms (|prod| for a product): the
    rounding of a sum in another order, or of an f32 accumulator rounded once to f16, stays within a few ulps of it,
    while one term more or less moves the output by far more unless that term is tiny, so tests that use it draw
    inputs bounded away from zero (``away_from_zero``).
    """
    got, want = run_both(f, *args, **jit_kwargs)
    scales = None
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "backend and device argument on jit is deprecated", DeprecationWarning)
        if scale_ulps is not None:
            magnitudes = jax.tree_util.tree_map(lambda a: np.abs(np.asarray(a)), args)
            scales = jax.tree_util.tree_leaves(jax.jit(f, backend=REFERENCE, **jit_kwargs)(*magnitudes))
    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    assert got_tree == want_tree
    for index, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        g, w = np.asarray(g), np.asarray(w)
        where = f"output {index} ({w.dtype}{list(w.shape)})"
        assert g.dtype == w.dtype, f"{where}: ipu gave dtype {g.dtype}"
        assert g.shape == w.shape, f"{where}: ipu gave shape {g.shape}"
        if w.dtype == np.bool_ or np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(g, w, err_msg=where)
            continue
        pairs = np.iscomplexobj(w)
        if pairs:  # both parts compared (widening a complex to f64 would drop the imaginary one)
            g, w = np.stack([g.real, g.imag], -1), np.stack([w.real, w.imag], -1)
        with np.errstate(invalid="ignore"):  # widening a signalling NaN raises the invalid flag; it stays a NaN
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
        if scales is not None:
            scale = np.abs(np.asarray(scales[index]).astype(np.complex128 if pairs else np.float64))
            scale = scale[..., None] if pairs else scale  # a complex output's two parts: the scale of |z|
            allowed = atol + rtol * np.abs(w64) + scale_ulps * eps(w.dtype) * scale
            with np.errstate(invalid="ignore"):
                bad = ~((np.abs(g64 - w64) <= allowed) | (np.isnan(g64) & np.isnan(w64)) | (g64 == w64))
            if bad.any():
                first = tuple(int(i) for i in np.argwhere(bad)[0])
                raise AssertionError(
                    f"{where}: {int(bad.sum())} of {bad.size} elements differ by more than {scale_ulps} ulps of their "
                    f"scale; first at {first}: ipu {g64[first]!r}, cpu {w64[first]!r}, difference "
                    f"{abs(g64[first] - w64[first])!r} > {allowed[first]!r} (scale {scale[first]!r})")
            continue
        np.testing.assert_allclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True, err_msg=where)
        if rtol == 0.0 and atol == 0.0:
            zeros = w == 0
            np.testing.assert_array_equal(np.signbit(g[zeros]), np.signbit(w[zeros]), err_msg=f"{where}: sign of zero")


# ---------------------------------------------------------------------------------------------------- both series
# The public spellings that moved between jax 0.4.13 and the current series, for tests that run on both.

def enable_x64() -> Any:
    """A context manager with 64-bit types enabled."""
    if hasattr(jax, "enable_x64"):  # the current series
        return jax.enable_x64(True)
    from jax.experimental import enable_x64 as experimental_enable_x64  # jax 0.4.13

    return experimental_enable_x64()


def optimization_barrier(values: Any) -> Any:
    if hasattr(jax.lax, "optimization_barrier"):
        return jax.lax.optimization_barrier(values)
    from jax._src.ad_checkpoint import _optimization_barrier  # jax 0.4.13

    return _optimization_barrier(values)


def _jaxlib_version() -> Tuple[int, ...]:
    from jaxlib import version

    return tuple(int(p) for p in version.__version__.split("+")[0].split(".")[:3])


# The current series (jax/jaxlib 0.5 and newer): pmap is a jit over a mesh, infeed/outfeed are gone, and MLIR text
# in jax 0.4.13's spelling no longer parses.
CURRENT_SERIES = _jaxlib_version() >= (0, 5)


def text_of_jax_0_4_13(reason: str = "") -> Any:
    """Skips a test built on MLIR text in jax 0.4.13's StableHLO spelling (the current series' parser rejects it)."""
    import pytest

    return pytest.mark.skipif(CURRENT_SERIES, reason="module text in jax 0.4.13's StableHLO spelling" +
                              (f": {reason}" if reason else ""))


def compile_text(text: str, options: Any = None, backend: str = BACKEND) -> Any:
    """Compiles StableHLO text through the backend's client, as jaxlib of either series spells it."""
    from jax._src import xla_bridge
    from jax._src.lib import xla_client

    client = xla_bridge.get_backend(backend)
    options = options or xla_client.CompileOptions()
    if hasattr(client, "compile_and_load"):  # the current series: loaded onto a device list
        count = max(1, options.num_replicas * options.num_partitions)
        return client.compile_and_load(text, xla_client.DeviceList(tuple(jax.devices(backend)[:count])), options)
    return client.compile(text, options)


# ---------------------------------------------------------------------------------------------- one process per run

# Flags that would change the backend under test; a device script's process starts without them, plus its own.
_BACKEND_FLAGS = ("TF_POPLAR_FLAGS", "XLA_IPU_PLATFORM_DEVICE_COUNT", "JAX_PLATFORMS", "JAX_PLATFORM_NAME",
                  "JAX_IPU_USE_MODEL", "JAX_IPU_MODEL_NUM_TILES", "JAX_IPU_MODEL_VERSION", "JAX_IPU_DEVICE_COUNT",
                  "JAX_IPU_VISIBLE_DEVICES", "XLA_FLAGS", "POPLAR_ENGINE_OPTIONS")


def run_device_script(script: str, backend: str, n: int, out: str, timeout: float = 600,
                      ipu_env: Optional[Dict[str, str]] = None) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
    """Runs ``python SCRIPT BACKEND N OUT`` on N devices of BACKEND (jax makes its devices once per process: N
    ipu devices, or N forced cpu host devices); returns the arrays it saved in OUT (.npz) and its OUT.json.
    ``ipu_env``: flags of the ipu's process beside those (e.g. another IPU version)."""
    env = {k: v for k, v in os.environ.items() if k not in _BACKEND_FLAGS}
    if backend == "ipu":
        env.update(JAX_PLATFORMS="cpu,ipu", JAX_IPU_DEVICE_COUNT=str(n))
        # the conformance session may shrink the IPU Model; keep that here too
        for flag in ("JAX_IPU_MODEL_NUM_TILES", "JAX_IPU_MODEL_VERSION"):
            if flag in os.environ:
                env[flag] = os.environ[flag]
        env.update(ipu_env or {})
    else:
        env.update(JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_force_host_platform_device_count={n}")
    proc = subprocess.run([sys.executable, os.path.abspath(script), backend, str(n), out], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)
    assert proc.returncode == 0, f"{backend} x {n} failed:\n{proc.stderr[-4000:]}"
    with np.load(out) as data:
        arrays = {k: data[k] for k in data.files}
    with open(out + ".json") as f:
        return arrays, json.load(f)


def save_results(out: str, arrays: Dict[str, np.ndarray], info: Dict[str, Any]) -> None:
    """A device script's results: its arrays in OUT (.npz) and what else it says in OUT.json."""
    np.savez(out, **arrays)
    with open(out + ".json", "w") as f:
        json.dump(info, f)


def script_runs(tmp_path_factory: Any, script: str, n: int, name: str, timeout: float = 600,
                ipu_env: Optional[Dict[str, str]] = None) -> Any:
    """For a module's fixture: ``get(backend)`` runs SCRIPT on N devices of BACKEND once (run_device_script) and
    returns its results; a failed run fails every test that asks for it, without running again."""
    cache: Dict[str, Any] = {}

    def get(backend: str) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
        if backend not in cache:
            try:
                cache[backend] = run_device_script(script, backend, n,
                                                   str(tmp_path_factory.mktemp(name) / f"{backend}.npz"), timeout,
                                                   ipu_env=ipu_env)
            except AssertionError as error:
                cache[backend] = error
        if isinstance(cache[backend], AssertionError):
            raise cache[backend]
        return cache[backend]

    return get


def numbered(arrays: Dict[str, np.ndarray], prefix: str) -> List[np.ndarray]:
    """The arrays saved as PREFIX0, PREFIX1, ... in order."""
    keys = sorted((k for k in arrays if k.startswith(prefix) and k[len(prefix):].isdigit()),
                  key=lambda k: int(k[len(prefix):]))
    return [arrays[k] for k in keys]
