"""Every IPU dtype across the PJRT layer: device_put / device_get round trips, results of jitted programs, donation,
infeed/outfeed and host callbacks. Each row of the dtype table the front end reads from the native library
(jax_ipu.compiler.types.ipu_dtypes: the emulator's kDTypeTable, its numpy names derived) is round-tripped here."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _series import CURRENT_SERIES, needs_feeds
from jax import lax
from jax._src.lib import xla_client

from jax_ipu.compiler import types

# The types every IPU computes on (fp8 only the ipu21 does: tests/conformance/test_float8.py) that the series' PJRT API
# names (jaxlib 0.4.13's has no sub-byte integers: they reach its programs through feeds alone, test_infeed_outfeed.py).
DTYPES = [d for d, name in types.ipu_numpy_dtypes().items()
          if not d.name.startswith("float8_") and (CURRENT_SERIES or name not in types.sub_byte_bits())]
IDS = [d.name for d in DTYPES]


@pytest.fixture(autouse=True)
def x64():
    """64-bit types enabled: jax carries f64, int64 and uint64 only then (the ipu emulates them)."""
    if hasattr(jax, "enable_x64"):  # the current series
        with jax.enable_x64(True):
            yield
    else:
        from jax.experimental import enable_x64

        with enable_x64():
            yield


@pytest.fixture(scope="module")
def ipu():
    return jax.devices("ipu")[0]


def sample(dtype: np.dtype, shape=(3, 5)) -> np.ndarray:
    """Every bit pattern a type's low byte(s) can take, extremes included (NaN payloads for floats)."""
    if dtype == np.bool_:
        return (np.arange(np.prod(shape)) % 3 == 0).reshape(shape)
    raw = np.random.default_rng(0).integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    bits = types.sub_byte_bits().get(types.ipu_numpy_dtypes().get(dtype, ""))
    if bits:  # a sub-byte integer's byte holds its bits in the low bits, the rest zero (as jax hands it over)
        raw &= (1 << bits) - 1
    return raw.view(dtype).reshape(shape)


def same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_device_put_get_round_trip_keeps_every_bit(ipu, dtype):
    x = sample(dtype)
    y = jax.device_put(x, ipu)
    assert y.dtype == dtype and next(iter(y.devices())) == ipu
    same_bits(np.asarray(y), x)
    same_bits(np.asarray(jax.device_put(x[:, 1:4].T, ipu)), np.ascontiguousarray(x[:, 1:4].T))  # strided source


# Element types jax has that this IPU (an ipu2) does not compute on: buffers of them are held as jax hands them over
# (one element per byte) and come back unchanged, as jax's own device_put tests expect of every device; a program on
# them is refused by name (fp8: on an ipu2; an ipu21 computes it). The current series' PJRT API names them (jaxlib
# 0.4.13's does not).
STORAGE_ONLY = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                "float8_e4m3b11fnuz", "float8_e4m3", "float8_e3m4", "float8_e8m0fnu", "float4_e2m1fn"]


@pytest.mark.parametrize("name", STORAGE_ONLY)
def test_types_the_ipu_does_not_compute_on_are_stored_and_come_back(ipu, name):
    import ml_dtypes

    if not hasattr(ml_dtypes, name) or not hasattr(jnp, name):
        pytest.skip(f"{name}: not a type of jax {jax.__version__}")
    if name not in ("float8_e4m3fn", "float8_e5m2") and not CURRENT_SERIES:
        pytest.skip(f"{name}: jaxlib {jax.__version__}'s PJRT API does not name it")
    dtype = np.dtype(getattr(ml_dtypes, name))
    unsigned = name == "float8_e8m0fnu"
    x = (np.arange(12) if unsigned else np.arange(-4, 8)).reshape(3, 4).astype(dtype)
    y = jax.device_put(x, ipu)
    assert y.dtype == dtype and next(iter(y.devices())) == ipu
    same_bits(np.asarray(y), x)
    if CURRENT_SERIES:  # (jax 0.4.13 itself fails first, reading the array through numpy's buffer protocol)
        fp8 = name in {np_name for _, _, np_name in types.ipu_dtypes()}
        with pytest.raises(Exception, match="ipu2 has no fp8" if fp8 else "not supported on the ipu backend"):
            jax.jit(lambda a: a * 2)(y)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_program_results_and_donation(ipu, dtype):
    x = jax.device_put(sample(dtype), ipu)
    want = np.asarray(x)[::-1]
    f = jax.jit(lambda x: (x[::-1], jnp.zeros((2,), dtype)), donate_argnums=0)
    got, zeros = f(x)
    assert x.is_deleted()
    same_bits(np.asarray(got), want)
    same_bits(np.asarray(zeros), np.zeros((2,), dtype))


@needs_feeds
def test_infeed_and_outfeed_of_every_dtype(ipu):
    values = [sample(d, (4,)) for d in DTYPES]
    shapes = tuple(jax.core.ShapedArray(v.shape, v.dtype) for v in values)

    def f(x):
        token = lax.create_token(x)
        got, token = lax.infeed(token, shape=shapes)
        lax.outfeed(token, tuple(g[::-1] for g in got))
        return x

    ipu.transfer_to_infeed(tuple(values))
    jax.jit(f, backend="ipu")(np.float32(0)).block_until_ready()
    out_shape = xla_client.shape_from_pyval(tuple(values)).with_major_to_minor_layout_if_absent()
    got = ipu.transfer_from_outfeed(out_shape)
    for g, v in zip(got, values):
        same_bits(np.asarray(g), v[::-1])


def test_host_callbacks_see_and_return_every_dtype():
    values = [sample(d, (4,)) for d in DTYPES]
    seen = []

    def host(*args):
        seen.extend(np.asarray(a) for a in args)
        return tuple(np.asarray(a)[::-1] for a in args)

    specs = tuple(jax.ShapeDtypeStruct(v.shape, v.dtype) for v in values)
    got = jax.jit(lambda *xs: jax.pure_callback(host, specs, *xs), backend="ipu")(*values)
    for s, g, v in zip(seen, got, values):
        same_bits(s, v)
        same_bits(np.asarray(g), v[::-1])


def test_the_table_covers_exactly_what_the_backend_computes_on():
    rows = {name: (spellings, np_name) for name, spellings, np_name in types.ipu_dtypes()}
    assert list(rows) == ["bool", "i8", "u8", "i16", "u16", "i32", "u32", "f16", "bf16", "f32", "c64", "f64", "i64",
                          "u64", "c128", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz", "i4", "u4",
                          "i2", "u2"]
    # MLIR's spellings and numpy's names as jax writes and reads them, derived from the emulator's rows.
    assert rows["i8"] == (("i8", "si8"), "int8") and rows["u16"] == (("ui16",), "uint16")
    assert rows["bool"] == (("i1",), "bool") and rows["bf16"] == (("bf16",), "bfloat16")
    assert rows["c64"] == (("complex<f32>",), "complex64") and rows["f16"] == (("f16",), "float16")
    # JAX's own tests (nox -s upstream_tests) generate the same dtype cases on ipu as on cpu: jax's test_util has
    # no ipu branch. c64 is emulated as pairs of f32, f64/i64/u64 in software and c128 as pairs of f64 (test_x64.py).
    assert rows["f64"] == (("f64",), "float64") and rows["i64"] == (("i64", "si64"), "int64")
    assert rows["u64"] == (("ui64",), "uint64") and rows["c128"] == (("complex<f64>",), "complex128")
    # fp8 (on an ipu21): MLIR's f8E4M3FN... and ml_dtypes' float8_e4m3fn...
    assert rows["f8e4m3fn"] == (("f8E4M3FN",), "float8_e4m3fn") and rows["f8e5m2"] == (("f8E5M2",), "float8_e5m2")
    assert rows["f8e4m3b11fnuz"] == (("f8E4M3B11FNUZ",), "float8_e4m3b11fnuz")
    # the sub-byte integers (computed in 8 bits: tests/conformance/test_sub_byte.py): MLIR's i4..., ml_dtypes' int4...
    assert rows["i4"] == (("i4", "si4"), "int4") and rows["u2"] == (("ui2",), "uint2")
    assert types.sub_byte_bits() == {"i4": 4, "u4": 4, "i2": 2, "u2": 2}


def test_collectives_of_narrow_types(python):
    """psum/pmax/all_gather over 2 emulated IPUs wrap (i8), stay unsigned (u16) and round once (bf16) as numpy."""
    result = python(
        """
        import jax, jax.numpy as jnp, numpy as np
        for dt in (np.int8, np.uint16, jnp.bfloat16):
            x = (np.arange(8).reshape(2, 4) * 37 - 100).astype(dt)
            f = jax.pmap(lambda v: (jax.lax.psum(v, "i"), jax.lax.pmax(v, "i"), jax.lax.all_gather(v, "i")),
                         axis_name="i", backend="ipu")
            s, m, g = (np.asarray(r) for r in f(x))
            want_s, want_m = (x[0] + x[1]).astype(dt), np.maximum(x[0], x[1])
            assert s.dtype == dt and m.dtype == dt and g.dtype == dt, (s.dtype, m.dtype, g.dtype)
            np.testing.assert_array_equal(s, np.stack([want_s, want_s]))
            np.testing.assert_array_equal(m, np.stack([want_m, want_m]))
            np.testing.assert_array_equal(g, np.stack([x, x]))
        print("ok")
        """,
        {"JAX_IPU_DEVICE_COUNT": "2"},
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]
