"""fp8 on an IPU that has it (ipu21, the C600's Mk2 IPU with FP8): every float8 type jax has, converted, moved,
multiplied and computed on, bit for bit as cpu computes it; and refused by name on an ipu2.

Run as a script (``python test_float8.py BACKEND N OUT``) it computes every case on BACKEND (the ipu's process on
ipu21) into OUT.npz and OUT.json; the tests compare the ipu's values with cpu's: bit for bit, the sign of a zero
included, a NaN matching any NaN (as the fuzzer compares: XLA:CPU's NaN signs and payloads follow its instruction
selection); dots as values.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, List

import numpy as np
import pytest
from _conformance import BACKEND, numbered, save_results, script_runs

IPU21 = {"JAX_IPU_MODEL_VERSION": "ipu21"}
FORMATS = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz")
VALUES = ("dot", "dot_to_f8", "batched_dot")  # compared as values


def _formats() -> List[str]:
    """The fp8 types this jax has (jax 0.4.13: e4m3fn and e5m2)."""
    import jax
    import jax.numpy as jnp

    out = []
    for name in FORMATS:
        try:
            jax.eval_shape(lambda name=name: jnp.zeros(1, getattr(jnp, name)))  # traced only: no device runs it
        except (AttributeError, TypeError):
            continue
        out.append(name)
    return out


def _every(f8: Any) -> np.ndarray:
    return np.arange(256, dtype=np.uint8).view(f8)


def _finite(f8: Any) -> np.ndarray:
    x = _every(f8)
    with np.errstate(invalid="ignore"):
        return x[np.isfinite(x.astype(np.float32))]


def _normal_in_f16(f8: Any) -> np.ndarray:
    """The finite values that are 0 or at least binary16's smallest normal. XLA:CPU computes e5m2fnuz's lowest
    binade, [2^-15, 2^-14), as 2^-14 inside loops and sort comparators (0x04 + 0 gives 0x08 in a fori_loop; the
    ipu gives 0x04, the correctly rounded sum); the cases that meet it keep to the other values."""
    x = _finite(f8)
    return x[(x.astype(np.float32) == 0) | (np.abs(x.astype(np.float32)) >= 2.0 ** -14)]


def _dense_f32(f8: Any) -> np.ndarray:
    """Each tie between neighbouring values of the format, one ulp either side, values beyond its largest, the
    specials, and a spread of magnitudes."""
    f = np.unique(np.abs(_finite(f8).astype(np.float64)))
    mids = (f[1:] + f[:-1]) / 2
    edge = np.concatenate([mids, [f[-1] * 1.0625, f[-1] * 1.125, f[-1] * 2, f[1] / 2, f[1] / 4, 1e30, 1e-30]])
    e32 = edge.astype(np.float32)
    rng = np.random.default_rng(0)
    spread = (rng.standard_normal(4000) * 10.0 ** rng.integers(-6, 6, 4000)).astype(np.float32)
    x = np.concatenate([e32, np.nextafter(e32, np.float32(np.inf)), np.nextafter(e32, np.float32(0)),
                        f.astype(np.float32), spread])
    x = np.concatenate([x, -x, np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1e-45], np.float32)])
    payload = np.array([0x7FA00001, 0xFFC00010], np.uint32).view(np.float32)  # NaNs with payloads
    return np.concatenate([x, payload])


def _as_f64(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # the NaNs with payloads
        return x.astype(np.float64)


def _reversed(a: Any) -> np.ndarray:
    return np.asarray(a)[::-1].copy()


def _cases(backend: str = "cpu") -> Dict[str, Callable[[], Any]]:
    import jax
    import jax.numpy as jnp
    import ml_dtypes
    from jax import lax

    cases: Dict[str, Callable[[], Any]] = {}
    f16_all = np.arange(65536, dtype=np.uint16).view(np.float16)
    bf16_all = np.arange(65536, dtype=np.uint16).view(ml_dtypes.bfloat16)
    ints = np.concatenate([np.arange(-600, 600), np.arange(-70000, 70000, 97)]).astype(np.int32)
    for name in _formats():
        f8 = getattr(jnp, name)
        every, finite = _every(f8), _finite(f8)

        def case(fn: Callable[..., Any], *args: Any, key: str, name: str = name) -> None:
            if key in _F8_CONSTANTS and _series_0_4():
                return
            cases[f"{key}/{name}"] = lambda: jax.jit(fn)(*jax.device_put(args, jax.devices(backend)[0]))

        x64 = _x64()
        wide = [jnp.float16, jnp.bfloat16, jnp.float32] + ([jnp.float64] if x64 else [])
        ints_to = [jnp.int8, jnp.uint8, jnp.int32, jnp.uint32, jnp.bool_] + ([jnp.int64] if x64 else [])
        case(lambda v, wide=wide: [v.astype(t) for t in wide], every, key="to_float")
        case(lambda v, ints_to=ints_to: [v.astype(t) for t in ints_to], every, key="to_int")
        case(lambda v, f8=f8: v.astype(f8), _dense_f32(f8), key="from_f32")
        if x64:
            case(lambda v, f8=f8: v.astype(f8), _as_f64(_dense_f32(f8)), key="from_f64")
        case(lambda v, f8=f8: v.astype(f8), f16_all, key="from_f16")
        case(lambda v, f8=f8: v.astype(f8), bf16_all, key="from_bf16")
        case(lambda v, f8=f8: [v.astype(f8), v.astype(jnp.uint8).astype(f8), v.astype(jnp.int16).astype(f8)],
             ints, key="from_int")
        # (jaxlib 0.4.13's PJRT C API has no buffer type for e4m3b11fnuz: no program returns it there)
        targets = [f for f in _formats() if not (_series_0_4() and f == "float8_e4m3b11fnuz")]
        case(lambda v, targets=targets: [v.astype(getattr(jnp, other)) for other in targets], every, key="between")
        a, b = np.meshgrid(every, every)
        case(lambda x, y: [x + y, x - y, x * y, x / y, jnp.maximum(x, y), x < y, jnp.where(x < y, x, y)],
             a.ravel(), b.ravel(), key="binary")
        case(lambda v: [-v, jnp.abs(v), jnp.exp(v), jnp.sqrt(v), jnp.tanh(v), jnp.floor(v), jnp.sign(v), v * v + v],
             every, key="unary")
        normal = _normal_in_f16(f8)
        rows = normal[: (len(normal) // 8) * 8].reshape(8, -1)
        case(lambda v: [jnp.sum(v, axis=1), jnp.max(v, axis=0), jnp.cumsum(v, axis=1), jnp.sort(v, axis=1)], rows,
             key="reduce")
        m = finite[:96].reshape(8, 12)
        n = finite[-96:].reshape(12, 8)
        case(lambda x, y: lax.dot(x, y, preferred_element_type=np.dtype("float32")), m, n, key="dot")
        case(lambda x, y: [lax.dot(x, y), lax.dot(x, y, preferred_element_type=np.dtype("float16"))], m, n,
             key="dot_to_f8")
        case(lambda x, y: jnp.einsum("bij,bjk->bik", x, y, preferred_element_type=np.dtype("float32")),
             every[:192].reshape(2, 8, 12), every[64:256].reshape(2, 12, 8), key="batched_dot")
        grid = every.reshape(16, 16)
        case(lambda v: [v.T, jnp.concatenate([v, v[::-1]]), v[3:9, 2:14:3], jnp.pad(v, 2), v[jnp.array([5, 0, 15])],
                        lax.dynamic_update_slice(v, v[:4, :4], (6, 7)), jnp.broadcast_to(v[0], (3, 16)),
                        lax.bitcast_convert_type(v, jnp.uint8), lax.bitcast_convert_type(v.view(jnp.int8), v.dtype),
                        v[::-1, ::-1], lax.dynamic_slice(v, (3, 5), (4, 9)), jnp.where(v > 0, v, v.T)],
             grid, key="moves")

        case(lambda v: jax.pure_callback(_reversed, jax.ShapeDtypeStruct(v.shape, v.dtype), v * v), every,
             key="callback")

        def loop(v: Any) -> Any:
            return lax.fori_loop(0, 5, lambda i, c: (c[0] * c[1], c[1] + c[0]), (v, v))

        case(loop, normal[:32], key="loop")
    return cases


def _main(backend: str, out: str) -> None:
    import jax

    if _x64():
        jax.config.update("jax_enable_x64", True)
    arrays: Dict[str, np.ndarray] = {}
    info: Dict[str, Any] = {"errors": {}, "dtypes": {}, "cycles": {}}
    for name, case in _cases(backend).items():
        try:
            leaves = jax.tree_util.tree_leaves(case())
            jax.block_until_ready(leaves)
            for index, leaf in enumerate(leaves):
                value = np.asarray(leaf)
                info["dtypes"][f"{name}/{index}"] = str(value.dtype)
                # the bits: npz keeps numpy's own dtypes only
                arrays[f"{name}/{index}"] = value.view(f"u{value.dtype.itemsize}") if value.dtype.kind in "fV" \
                    else value
        except Exception as error:  # noqa: BLE001 - reported per case by the test side
            info["errors"][name] = f"{type(error).__name__}: {error}"
    if backend == "ipu":
        info["dot_cycles"] = {name: _dot_cycles(name) for name in ("float8_e4m3fn", "float16")}
    save_results(out, arrays, info)


# ---------------------------------------------------------------------------------------------- the test side

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return script_runs(tmp_path_factory, __file__, 1, "float8", 900, ipu_env=IPU21)


# Cases whose programs hold fp8 constants (a sum's zero, a pad value, the zero an fp8 -> bool or int conversion
# compares with): jax 0.4.13 cannot lower them on any backend (it writes the constant through numpy's buffer
# protocol, which ml_dtypes' types refuse: "cannot include dtype '4' in a buffer").
_F8_CONSTANTS = ("to_int", "reduce", "moves")


def _x64() -> bool:
    """The 64-bit conversions too (not with jaxlib 0.4.13, whose cpu arrays of them fail numpy's buffer protocol
    here: "cannot include dtype 'L' in a buffer")."""
    return not _series_0_4()


def _series_0_4() -> bool:
    import jax

    return jax.__version__.startswith("0.4.")


def _case_names() -> List[str]:
    return list(_cases())


@pytest.mark.skipif(BACKEND != "ipu", reason="compares the ipu with cpu")
@pytest.mark.parametrize("case", _case_names())
def test_float8_on_ipu21_matches_cpu(runs, case):
    (got, got_info), (want, want_info) = runs("ipu"), runs("cpu")
    assert case not in want_info["errors"], f"cpu: {want_info['errors'][case]}"
    if case.endswith("/float8_e4m3b11fnuz") and _series_0_4():  # no PJRT buffer type for it in jaxlib 0.4.13
        error = got_info["errors"].get(case, "")
        assert "has no buffer type for f8e4m3b11fnuz" in error or "not one of the buffer types of this jaxlib" in \
            error, error
        return
    assert case not in got_info["errors"], got_info["errors"][case]
    got_values, want_values = numbered(got, case + "/"), numbered(want, case + "/")
    assert len(got_values) == len(want_values) > 0
    for index, (g, w) in enumerate(zip(got_values, want_values)):
        key = f"{case}/{index}"
        where = f"{case}, output {index} ({want_info['dtypes'][key]}{list(w.shape)})"
        assert got_info["dtypes"][key] == want_info["dtypes"][key], f"{where}: ipu gave {got_info['dtypes'][key]}"
        assert g.shape == w.shape, where
        if case.split("/")[0] in VALUES:
            import ml_dtypes

            dtype = np.dtype(getattr(ml_dtypes, want_info["dtypes"][key], want_info["dtypes"][key]))
            np.testing.assert_array_equal(g.view(dtype).astype(np.float64), w.view(dtype).astype(np.float64),
                                          err_msg=where)
        else:  # the same bits; a NaN matches any NaN (as the fuzzer compares)
            import ml_dtypes

            dtype = np.dtype(getattr(ml_dtypes, want_info["dtypes"][key], want_info["dtypes"][key]))
            nan = np.zeros(g.size, bool)
            if dtype.kind in "fV":
                with np.errstate(invalid="ignore"):
                    nan = np.isnan(g.view(dtype).astype(np.float64).ravel()) & \
                        np.isnan(w.view(dtype).astype(np.float64).ravel())
            bad = np.flatnonzero((g.ravel() != w.ravel()) & ~nan)
            assert bad.size == 0, f"{where}: {bad.size} elements differ; first at {bad[:5].tolist()}: ipu " \
                f"{[hex(int(v)) for v in g.ravel()[bad[:5]]]}, cpu {[hex(int(v)) for v in w.ravel()[bad[:5]]]}"


def _dot_cycles(dtype: str) -> int:
    """Cycles of a square dot on the ipu with operands of ``dtype`` and an f32 result: [1024, 1024]^2 on a whole chip,
    [256, 256]^2 on an IPU Model of a few tiles (the 7-tile lane), where the AMP's share is as large."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    import jax_ipu

    device = jax.devices("ipu")[0]
    n = 1024 if device.num_tiles >= 1024 else 256
    x = jax.device_put(np.ones((n, n), np.dtype(getattr(jnp, dtype))), device)
    jax.block_until_ready(jax.jit(lambda a: lax.dot(a, a, preferred_element_type=np.dtype("float32")))(x))
    return int(jax_ipu.last_execution()["total_cycles"])


@pytest.mark.skipif(BACKEND != "ipu", reason="the ipu's estimate")
def test_an_fp8_matmul_runs_at_twice_the_f16_rate_on_ipu21(runs):
    cycles = runs("ipu")[1]["dot_cycles"]
    # the AMP's share halves; the vertices' fixed costs, the exchange and the sync stay
    assert cycles["float8_e4m3fn"] < 0.8 * cycles["float16"], cycles


@pytest.mark.skipif(BACKEND != "ipu", reason="the ipu's refusal")
def test_float8_is_refused_by_name_on_ipu2():
    import jax
    import jax.numpy as jnp

    if jax.devices("ipu")[0].device_kind.find("ipu21") >= 0:
        pytest.skip("this session runs an ipu21")
    x = jax.device_put(np.ones(8, jnp.float8_e4m3fn), jax.devices("ipu")[0])  # a buffer of it moves to the ipu2;
    with pytest.raises(Exception) as error:                                   # a program on it is refused
        jax.block_until_ready(jax.jit(lambda v: v + v)(x))
    text = str(error.value)
    for part in ("f8e4m3fn", "float8_e4m3fn", "has no fp8", "quarter", "JAX_IPU_MODEL_VERSION=ipu21", "float16"):
        assert part in text, text


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[3])
