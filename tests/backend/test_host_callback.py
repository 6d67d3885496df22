"""jax.experimental.host_callback (the jax 0.4.13 series; the current one has removed it) on the ipu: id_tap, id_print
and call give cpu's values and taps, in loops, under grad and vmap, and an exception in a tap reaches the caller.

jax lowers host_callback's primitive for "cpu" alone (gpu and tpu take an outfeed path that refuses PJRT C API
plugins); jax_ipu registers the same custom-call lowering for "ipu" (jax_ipu/_jax.py), which our host-call emitter
runs, whether host_callback is imported before the ipu backend starts or after."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _series import CURRENT_SERIES
from jax import lax

pytestmark = pytest.mark.skipif(CURRENT_SERIES, reason="jax.experimental.host_callback is gone from the current series")

if not CURRENT_SERIES:
    from jax.experimental import host_callback as hcb


def taps_of(backend, f, *args):
    """f's result jitted on ``backend`` and what its taps saw: [(values, transforms)] in order."""
    seen = []
    tap = lambda a, transforms: seen.append((jax.tree_util.tree_map(np.asarray, a), transforms))  # noqa: E731
    out = jax.jit(f(tap), backend=backend)(*args)
    out = jax.tree_util.tree_map(np.asarray, out)
    hcb.barrier_wait()
    return out, seen


def same(a, b):
    assert len(a) == len(b)
    for (x, tx), (y, ty) in zip(a, b):
        jax.tree_util.tree_map(np.testing.assert_array_equal, x, y)
        assert tx == ty


def test_id_tap_and_call_give_cpus_values_and_taps():
    def f(tap):
        def g(x):
            y = hcb.id_tap(tap, x * 2)
            z = hcb.call(np.sin, y, result_shape=jax.ShapeDtypeStruct(y.shape, y.dtype))
            return hcb.id_tap(tap, z + 1, result=z * 3)
        return g

    x = np.linspace(-2, 2, 7, dtype=np.float32)
    want, want_taps = taps_of("cpu", f, x)
    got, got_taps = taps_of("ipu", f, x)
    np.testing.assert_array_equal(got, want)
    same(got_taps, want_taps)
    assert len(got_taps) == 2


def test_a_tap_in_a_loop_fires_once_per_trip_in_order():
    def f(tap):
        def g(x):
            return lax.fori_loop(0, 4, lambda i, c: hcb.id_tap(tap, (i, c * 2))[1], x)
        return g

    x = np.ones(3, np.float32)
    want, want_taps = taps_of("cpu", f, x)
    got, got_taps = taps_of("ipu", f, x)
    np.testing.assert_array_equal(got, want)
    same(got_taps, want_taps)
    assert [int(v[0]) for v, _ in got_taps] == [0, 1, 2, 3]


def test_taps_under_grad_and_vmap_see_cpus_transforms():
    def f(tap):
        def g(x):
            per_row = jax.vmap(lambda r: jnp.sum(hcb.id_tap(tap, r * r)))
            return jax.grad(lambda x: jnp.sum(per_row(x)))(x)
        return g

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    want, want_taps = taps_of("cpu", f, x)
    got, got_taps = taps_of("ipu", f, x)
    np.testing.assert_array_equal(got, want)
    same(got_taps, want_taps)
    assert got_taps and all("batch" in str(t) for _, t in got_taps)


def test_id_print_prints_what_cpu_prints(capfd):
    def f(x):
        return hcb.id_print(x * 2, what="doubled") + 1

    x = np.array([1.5, -2.0], np.float32)
    jax.block_until_ready(jax.jit(f, backend="cpu")(x))
    hcb.barrier_wait()
    want = capfd.readouterr().out
    np.testing.assert_array_equal(jax.jit(f, backend="ipu")(x), x * 2 + 1)
    hcb.barrier_wait()
    assert capfd.readouterr().out == want and "doubled" in want


def test_an_exception_in_a_tap_reaches_the_caller_with_its_message():
    def bad(a, transforms):
        raise ValueError("no taps today")

    with pytest.raises(Exception, match="ValueError: no taps today"):
        np.asarray(jax.jit(lambda x: hcb.id_tap(bad, x) + 1, backend="ipu")(np.ones(3, np.float32)))
    hcb.barrier_wait()  # the failure was reported once, to the caller


def test_host_callback_imported_after_the_ipu_backend_started_works():
    code = textwrap.dedent("""
        import jax, numpy as np
        jax.devices("ipu")
        from jax.experimental import host_callback as hcb
        seen = []
        out = jax.jit(lambda x: hcb.id_tap(lambda a, t: seen.append(a), x * 2), backend="ipu")(np.arange(3.0))
        hcb.barrier_wait()
        assert np.array_equal(out, [0, 2, 4]) and np.array_equal(seen[0], [0, 2, 4]), (out, seen)
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=os.environ)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]


def test_a_tap_of_prng_keys_sees_their_bits():
    """A key array (an extended dtype) reaches the tap as what the program holds: its uint32 words, as on cpu (jax's
    host_callback_test.py::test_tap_id_tap_random_key)."""
    def f(tap):
        def g(key):
            return jax.random.key_data(hcb.id_tap(tap, key, result=key))
        return g

    with jax.enable_custom_prng():
        key = jax.random.split(jax.random.PRNGKey(123), 3)
        want, want_taps = taps_of("cpu", f, key)
        got, got_taps = taps_of("ipu", f, key)
    np.testing.assert_array_equal(got, want)
    assert got_taps[0][0].dtype == np.uint32 and got_taps[0][0].shape == (3, 2)
    same(got_taps, want_taps)
