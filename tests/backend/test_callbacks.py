"""Host callbacks inside ipu-jitted code: jax.debug.print / jax.debug.callback, jax.pure_callback and
jax.experimental.io_callback fire once per call, in order, inside loops too, with the values cpu computes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _series import CURRENT_SERIES
from jax import lax
from jax.experimental import io_callback


def run_on(backend, f, *args):
    """Runs f jitted on `backend`, waits for its results and its callbacks."""
    out = jax.jit(f, backend=backend)(*args)
    jax.block_until_ready(out)
    jax.effects_barrier()
    return out


def lines(capsys):
    return capsys.readouterr().out.splitlines()


def test_debug_print_prints_the_same_lines_as_cpu_once_per_call(capsys):
    def f(x, y):
        jax.debug.print("x={x} y={y}", x=x, y=y)
        z = x * y
        jax.debug.print("sum {}", z.sum())
        return z

    x = np.array([1.5, -2.0, 3.25], np.float32)
    y = np.int32(3)
    run_on("cpu", f, x, y)
    expected = lines(capsys)
    assert expected == ["x=[ 1.5  -2.    3.25] y=3", "sum 8.25"]
    for _ in range(2):
        run_on("ipu", f, x, y)
        assert lines(capsys) == expected


def test_debug_print_in_fori_loop_and_scan_once_per_iteration_in_order(capsys):
    def f(x):
        def body(i, c):
            jax.debug.print("step {i}: {c}", i=i, c=c)
            return c * 2 + i.astype(jnp.float32)
        c = lax.fori_loop(0, 5, body, x)

        def scan_body(carry, v):
            jax.debug.print("scan {v} {carry}", v=v, carry=carry, ordered=True)
            return carry + v, carry * v
        carry, ys = lax.scan(scan_body, c, jnp.arange(4, dtype=jnp.float32))
        return carry, ys

    x = np.float32(0.5)
    cpu_out = run_on("cpu", f, x)
    expected = lines(capsys)
    assert len(expected) == 9 and expected[0] == "step 0: 0.5" and expected[5].startswith("scan 0.0 ")
    ipu_out = run_on("ipu", f, x)
    assert lines(capsys) == expected
    for got, want in zip(jax.tree_util.tree_leaves(ipu_out), jax.tree_util.tree_leaves(cpu_out)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_debug_callback_gets_numpy_arrays_of_every_dtype():
    seen = []

    def f(a, b, c, d, e):
        jax.debug.callback(lambda *args: seen.append(args), a, b, c, d, e)
        return a

    args = (np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3), np.array([-3, 4], np.int32),
            np.array([True, False]), np.array([0.5, -1.0], np.float16), np.array([2**31 + 5], np.uint32))
    run_on("ipu", f, *args)
    assert len(seen) == 1
    for got, want in zip(seen[0], args):
        if CURRENT_SERIES:  # the current series hands debug callbacks jax Arrays on the cpu, not numpy arrays
            got = np.asarray(got)
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_pure_callback_results_match_numpy():
    def host_fn(x, y):
        return np.sin(x) * y, (x > 0).sum(dtype=np.int32).reshape(1)

    def f(x, y):
        shapes = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct((1,), jnp.int32))
        a, b = jax.pure_callback(host_fn, shapes, x * 2, y)
        return a + 1, b * 10

    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    y = np.float32(3)
    a, b = run_on("ipu", f, x, y)
    want_a, want_b = host_fn(x * 2, y)
    np.testing.assert_allclose(np.asarray(a), want_a + 1, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(b), want_b * 10)


def test_pure_callback_inside_a_loop_under_grad_matches_cpu():
    def f(w):
        def body(i, acc):
            host = jax.pure_callback(lambda v: np.cos(v).astype(np.float32), jax.ShapeDtypeStruct((), jnp.float32),
                                     i.astype(jnp.float32))
            return acc + jnp.sum(w * host)
        return lax.fori_loop(0, 4, body, jnp.float32(0))

    w = np.array([1.0, 2.0, -0.5], np.float32)
    np.testing.assert_allclose(np.asarray(run_on("ipu", jax.grad(f), w)), np.asarray(run_on("cpu", jax.grad(f), w)),
                               rtol=1e-6)
    np.testing.assert_allclose(float(run_on("ipu", f, w)), float(run_on("cpu", f, w)), rtol=1e-6)


def test_pure_callback_with_a_wrong_result_fails_the_call():
    f = jax.jit(lambda x: jax.pure_callback(lambda v: v.astype(np.float64), jax.ShapeDtypeStruct((3,), jnp.float32), x),
                backend="ipu")
    if CURRENT_SERIES:  # the current series' pure_callback converts the result to the declared dtype, as on cpu
        got = jax.block_until_ready(f(np.arange(3, dtype=np.float32)))
        assert got.dtype == np.float32 and np.array_equal(np.asarray(got), np.arange(3, dtype=np.float32))
        return
    with pytest.raises(Exception,
                       match=r"Incorrect output dtype for return value 0: Expected: float32, Actual: float64"):
        jax.block_until_ready(f(np.zeros(3, np.float32)))


@pytest.mark.parametrize("ordered", [True, False])
def test_io_callback_fires_in_order(ordered):
    log = []

    def record(i, x):
        log.append((int(i), float(x)))
        return np.float32(len(log))

    def f(x):
        def body(i, acc):
            count = io_callback(record, jax.ShapeDtypeStruct((), jnp.float32), i, acc, ordered=ordered)
            return acc + count
        return lax.fori_loop(0, 6, body, x)

    x = np.float32(0.25)
    out = run_on("ipu", f, x)
    # Each call sees the accumulator of the calls before it: the calls ran once each, in program order.
    acc, expected = 0.25, []
    for i in range(6):
        expected.append((i, acc))
        acc += len(expected)
    assert log == expected
    assert float(out) == acc


def test_ordered_callback_in_a_loop_whose_product_feeds_two_adds_matches_cpu():
    """The streams example's shape: an ordered callback (a token crossing main, on jaxlib 0.12) in a loop whose body
    reads a product in two adds (copied into each add, as XLA:CPU's fusion does). The token's new bool[0] parameter
    was once numbered after main's own ops only, reusing the copy's id: "value %N is defined twice"."""
    seen = []

    def record(x):
        seen.append(np.array(x))
        return np.float32(len(seen))

    def f(x, c):
        def body(i, acc):
            t = acc * c
            count = io_callback(record, jax.ShapeDtypeStruct((), jnp.float32), t, ordered=True)
            return (t + 1.0) - (t - count) * 0.5
        return lax.fori_loop(0, 3, body, x)

    x = np.linspace(-2, 2, 12, dtype=np.float32)
    c = np.float32(1.3)
    out = run_on("ipu", f, x, c)
    on_ipu, seen[:] = list(seen), []
    expected = run_on("cpu", f, x, c)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(expected))
    assert len(on_ipu) == len(seen) == 3
    for a, b in zip(on_ipu, seen):
        np.testing.assert_array_equal(a, b)


def test_callback_errors_name_the_exception():
    def boom(x):
        raise ValueError("no host for you")

    f = jax.jit(lambda x: jax.pure_callback(boom, jax.ShapeDtypeStruct((), jnp.float32), x), backend="ipu")
    with pytest.raises(Exception, match="ValueError: no host for you"):
        jax.block_until_ready(f(np.float32(1)))


DROPPED = """
import sys
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import io_callback

def f(x):
    jax.debug.print("dropped {x}", x=x)
    y = jax.pure_callback(lambda v: v * 2, jax.ShapeDtypeStruct((3,), jnp.float32), x)
    io_callback(lambda v: print(f"io {v.sum()}"), None, y, ordered=True)
    return y + 1

g = jax.jit(f, backend="ipu")
for i in range(3):
    g(np.full(3, i, np.float32))   # results never read
print("main done", file=sys.stderr, flush=True)  # stdout is the callbacks' (they print from a worker thread)
"""


def test_callbacks_whose_results_are_never_read_do_not_deadlock(python):
    result = python(DROPPED, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "main done" in result.stderr
    # Every callback fired, in order, even though nothing waited for them before the process exited.
    assert result.stdout.splitlines() == ["dropped [0. 0. 0.]", "io 0.0", "dropped [1. 1. 1.]", "io 6.0",
                                          "dropped [2. 2. 2.]", "io 12.0"]


def test_a_call_with_callbacks_returns_when_they_are_done():
    """A vmap of an unordered io_callback (and a pure_callback) leaves jax no effect token to wait on. As cpu's
    call, the ipu's returns once the program's callbacks have run (jax's python_callback_test.py
    test_io_callback_can_be_batched_if_unordered), so jax.effects_barrier has nothing left to wait for."""
    import threading

    calls = []
    release = threading.Event()

    def slow(x):
        release.wait(0.1)  # long enough to be seen unfinished by a call that does not wait
        calls.append(int(x))
        return x

    f = jax.vmap(lambda x: io_callback(slow, jax.ShapeDtypeStruct((), x.dtype), x))
    x = jax.device_put(jnp.arange(4), jax.devices("ipu")[0])
    for n in (4, 8):
        f(x)
        assert len(calls) == n, f"the call returned with {len(calls) - n + 4} of its 4 callbacks made"
        jax.effects_barrier()
    assert sorted(calls) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_effects_barrier_waits_for_callbacks_of_a_pmap(python):
    """A launch over several IPUs stays asynchronous (its errors are its results'): jax.effects_barrier waits for
    the callbacks queued on every ipu device."""
    result = python("""
        import threading, jax, jax.numpy as jnp, numpy as np
        from jax.experimental import io_callback
        calls = []
        def slow(x):
            threading.Event().wait(0.2)
            calls.append(int(x))
            return x
        f = jax.pmap(lambda x: io_callback(slow, jax.ShapeDtypeStruct((), x.dtype), x), devices=jax.devices("ipu"))
        f(jnp.arange(2))
        jax.effects_barrier()
        print(sorted(calls))
        """, {"JAX_IPU_DEVICE_COUNT": "2", "JAX_PLATFORMS": "ipu,cpu"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[0, 1]"


def _failing(x):
    raise ValueError("the callback's own error")


@pytest.mark.parametrize("kind", ["pure_callback", "io_callback", "debug_callback"])
def test_a_callbacks_error_is_the_calls_error(kind):
    """As on cpu, a callback's exception is raised where the jitted function is called, whether or not its
    results are read (equinox's error_if, jax's own callback tests), and the next call runs normally."""
    spec = jax.ShapeDtypeStruct((3,), jnp.float32)
    body = {"pure_callback": lambda x: jax.pure_callback(_failing, spec, x) + 1,
            "io_callback": lambda x: io_callback(_failing, spec, x) + 1,
            "debug_callback": lambda x: (jax.debug.callback(_failing, x), x + 1)[1]}[kind]
    f = jax.jit(body, backend="ipu")
    with pytest.raises(Exception, match="the callback's own error") as raised:
        f(jnp.ones(3))  # the results are never read
    assert isinstance(raised.value, RuntimeError)  # XlaRuntimeError / JaxRuntimeError, as on cpu
    g = jax.jit(lambda x: jax.pure_callback(lambda v: np.asarray(v) * 2, spec, x), backend="ipu")
    np.testing.assert_array_equal(g(jnp.ones(3)), [2, 2, 2])


def test_a_callback_may_compute_on_the_ipu_its_program_runs_on(python):
    """A callback that runs jax on the same IPU (device_put, a jitted function) and reads the result: the IPU's
    queue is busy with the program that waits for the callback, so that work runs at once on the callback's thread
    instead of waiting behind it (which never ended), also when another program was queued first. In a child
    process, so that a hang fails the test instead of the suite."""
    result = python("""
        import numpy as np, jax, jax.numpy as jnp
        ipu = jax.devices("ipu")[0]
        def inner(x):
            d = jax.device_put(np.asarray(x) * 10, ipu)
            return np.asarray(jax.jit(lambda v: jnp.sin(v) + v)(d))
        spec = jax.ShapeDtypeStruct((3,), jnp.float32)
        f = jax.jit(lambda x: jax.pure_callback(inner, spec, x) * 2)
        x = jax.device_put(jnp.arange(3, dtype=jnp.float32), ipu)
        want = 2 * (np.sin(np.arange(3) * 10.0) + np.arange(3) * 10.0)
        np.testing.assert_allclose(f(x), want, rtol=1e-6)
        a = jax.device_put(jnp.ones((256, 256)) / 256, ipu)
        busy = jax.jit(lambda a: jnp.tanh(a @ a) @ a)(a)  # queued ahead of f's run
        np.testing.assert_allclose(f(x), want, rtol=1e-6)
        busy.block_until_ready()
        print("ok")
        """, {"JAX_PLATFORMS": "ipu,cpu"}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "ok"


def test_checkify_checks_run_on_the_ipu():
    """checkify's check primitive: functionalised by checkify.checkify, or (with
    jax_experimental_unsafe_xla_runtime_errors) a host callback that fails the call with the check's message, as on
    cpu; debug_check is a no-op outside checkify."""
    from jax.experimental import checkify

    def f(x):
        checkify.check(jnp.all(x > 0), "x must be positive, got {x}", x=x)
        checkify.debug_check(jnp.all(x < 100), "never raised outside checkify")
        return jnp.log(x)

    bad, good = np.array([1.0, -1.0], np.float32), np.array([1.0, 200.0], np.float32)
    err, _ = jax.jit(checkify.checkify(f), backend="ipu")(bad)
    assert "x must be positive, got [ 1. -1.]" in err.get()
    previous = jax.config.jax_experimental_unsafe_xla_runtime_errors
    jax.config.update("jax_experimental_unsafe_xla_runtime_errors", True)
    try:
        with pytest.raises(Exception, match=r"x must be positive, got \[ 1. -1.\]"):
            np.asarray(jax.jit(f, backend="ipu")(bad))
        # (jax 0.4.13's cpu fails a passing check there: "CPU callback expected a tuple result, got []")
        np.testing.assert_allclose(jax.jit(f, backend="ipu")(good), np.log(good), rtol=1e-6)
    finally:
        jax.config.update("jax_experimental_unsafe_xla_runtime_errors", previous)


@pytest.mark.skipif(not CURRENT_SERIES, reason="jax 0.4.13 takes a callback's result as it is (its cpu refuses these)")
def test_callback_results_are_canonicalised_as_jax_does():
    """A Python literal, or a 64-bit array without jax_enable_x64, returned for a 32-bit result is the 32-bit array,
    as jax's own emitter makes it (jax's python_callback_test.py test_callback_returning_python_literal and
    test_callback_with_wrong_dtype_outputs)."""
    f = jax.jit(lambda x: jax.pure_callback(lambda x: 2.0, jax.ShapeDtypeStruct((), jnp.float32), x))
    g = jax.jit(lambda: io_callback(lambda: np.array([1, 2], np.int64), jax.ShapeDtypeStruct((2,), jnp.int32)))
    for backend in ("cpu", "ipu"):
        with jax.default_device(jax.devices(backend)[0]):
            got_f, got_g = np.asarray(f(np.float32(1))), np.asarray(g())
        assert got_f.dtype == np.float32 and got_f == 2.0
        assert got_g.dtype == np.int32 and got_g.tolist() == [1, 2]


def test_sparse_spsolve_runs_scipy_from_the_ipu():
    """jax.experimental.sparse.linalg.spsolve: jax lowers it for cpu as a host callback to scipy's spsolve, and the
    ipu lowers it the same way (jax's sparse_test.py test_sparse_qr_linear_solver)."""
    import scipy.sparse as sps
    import scipy.sparse.linalg
    from jax.experimental.sparse.linalg import spsolve

    a = (sps.random(20, 20, density=0.3, random_state=1, format="csr") + 5 * sps.eye(20, format="csr")).tocsr()
    a = a.astype(np.float32)
    b = np.random.default_rng(0).standard_normal(20).astype(np.float32)
    ipu = jax.devices("ipu")[0]
    args = [jax.device_put(v, ipu) for v in (a.data, a.indices.astype(np.int32), a.indptr.astype(np.int32), b)]
    x = jax.jit(spsolve)(*args)
    assert {d.platform for d in x.devices()} == {"ipu"}
    np.testing.assert_allclose(np.asarray(x), scipy.sparse.linalg.spsolve(a.astype(np.float64), b), rtol=1e-4,
                               atol=1e-5)


def test_callbacks_run_with_the_ipu_as_the_only_platform(python):
    """With JAX_PLATFORMS=ipu there is no cpu backend: jax.debug.print / callback, jax.pure_callback and io_callback
    still run, and get their operands as numpy arrays (the current series' own impls place them on a cpu device
    first, and fail without one; jax 0.4.13 passes numpy arrays)."""
    result = python("""
        import jax, jax.numpy as jnp, numpy as np
        from jax.experimental import io_callback
        assert [d.platform for d in jax.devices()] == ["ipu"]
        seen = []
        def f(x):
            jax.debug.print("sum {s}", s=x.sum())
            jax.debug.callback(lambda v: seen.append(float(np.sum(v))), x)
            y = jax.pure_callback(lambda v: np.asarray(v) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
            return io_callback(lambda v: np.asarray(v) + 1, jax.ShapeDtypeStruct(x.shape, x.dtype), y)
        print(jax.jit(f)(jnp.arange(3.0)).tolist())
        jax.effects_barrier()
        print(seen)
        """, {"JAX_PLATFORMS": "ipu"}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-3:] == ["sum 3.0", "[1.0, 3.0, 5.0]", "[3.0]"]


def test_a_callbacks_thread_keeps_its_python_state_between_calls():
    """Callbacks of a device run on one thread, whose Python thread state lives as long as it does: what a callback
    keeps in a threading.local is there at the next call (and jax's thread-local configuration is not made afresh
    per call). ctypes would otherwise make and destroy the state around every call."""
    import threading

    local = threading.local()
    threads = []

    def count(i):
        local.calls = getattr(local, "calls", 0) + 1
        threads.append(threading.get_ident())
        return np.int32(local.calls)

    def f(x):
        def body(i, total):
            return total + io_callback(count, jax.ShapeDtypeStruct((), jnp.int32), i, ordered=True)
        return lax.fori_loop(0, 5, body, x)

    assert int(run_on("ipu", f, np.int32(0))) == 1 + 2 + 3 + 4 + 5
    assert len(set(threads)) == 1
