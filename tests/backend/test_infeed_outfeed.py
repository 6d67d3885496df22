"""Host streams on the ipu: lax.infeed / lax.outfeed with tokens, fed by device.transfer_to_infeed and drained by
device.transfer_from_outfeed, as Graphcore's users write them (seed 000) and as jax's own infeed tests do."""

from __future__ import annotations

import threading
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _series import needs_feeds
from jax import lax, tree_util
from jax._src.lib import xla_client

pytestmark = needs_feeds

ShapedArray = jax.core.ShapedArray


@pytest.fixture(scope="module")
def ipu():
    return jax.devices("ipu")[0]


def outfeed_shape(*arrays):
    return xla_client.shape_from_pyval(tuple(arrays)).with_major_to_minor_layout_if_absent()


def test_seed_training_loop_with_infeed_matches_cpu(ipu):
    """Seed 000: an MLP update with the micro-batch from the infeed, in a jitted fori_loop, state donated."""
    from jax.example_libraries import optimizers

    batch_size, features, classes, num_batches = 8, 16, 10, 5
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((batch_size, features)).astype(np.float32),
                np.eye(classes, dtype=np.float32)[rng.integers(0, classes, batch_size)]) for _ in range(num_batches)]
    params = [(0.3 * rng.standard_normal((features, 32)).astype(np.float32), np.zeros(32, np.float32)),
              (0.3 * rng.standard_normal((32, classes)).astype(np.float32), np.zeros(classes, np.float32))]
    opt_init, opt_update, get_params = optimizers.momentum(0.1, 0.9)

    def loss(params, batch):
        x, y = batch
        for w, b in params[:-1]:
            x = jnp.tanh(x @ w + b)
        w, b = params[-1]
        logits = x @ w + b
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits), axis=-1))

    to_infeed_shape = (ShapedArray((batch_size, features), jnp.float32),
                       ShapedArray((batch_size, classes), jnp.float32))

    def update(i, opt_state):
        token = lax.create_token()
        batch, token = lax.infeed(token, shape=to_infeed_shape)
        params = get_params(opt_state)
        return opt_update(i, jax.grad(loss)(params, batch), opt_state)

    @partial(jax.jit, backend="ipu", donate_argnums=(2,))
    def train_steps(start, end, opt_state):
        return lax.fori_loop(start, end, update, opt_state)

    for batch in batches:
        ipu.transfer_to_infeed(batch)
    state = jax.device_put(opt_init(params), ipu)
    trained = get_params(train_steps(0, num_batches, state))
    assert all(leaf.is_deleted() for leaf in tree_util.tree_leaves(state))

    @partial(jax.jit, backend="cpu")
    def cpu_update(i, opt_state, batch):
        return opt_update(i, jax.grad(loss)(get_params(opt_state), batch), opt_state)

    expected = opt_init(params)
    for i, batch in enumerate(batches):
        expected = cpu_update(i, expected, batch)
    expected = get_params(expected)
    for got, want in zip(tree_util.tree_leaves(trained), tree_util.tree_leaves(expected)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-4, atol=2e-5)
    # Training moved the parameters.
    assert not np.allclose(np.asarray(trained[0][0]), params[0][0])


def test_infeed_of_a_float_array(ipu):
    @partial(jax.jit, backend="ipu")
    def f(x):
        token = lax.create_token(x)
        (y,), token = lax.infeed(token, shape=(ShapedArray((3, 4), jnp.float32),))
        (z,), _ = lax.infeed(token, shape=(ShapedArray((3, 1, 1), jnp.float32),))
        return x + y + z

    x = np.float32(1.5)
    y = np.arange(12, dtype=np.float32).reshape(3, 4)
    z = np.random.default_rng(1).standard_normal((3, 1, 1)).astype(np.float32)
    ipu.transfer_to_infeed((y,))
    ipu.transfer_to_infeed(z)  # a bare array is a one-leaf pytree
    np.testing.assert_allclose(np.asarray(f(x)), x + y + z, rtol=1e-6)


def test_infeed_of_a_pytree_of_every_dtype(ipu):
    value = {
        "a": np.float32(1.5),
        "b": np.arange(12, dtype=np.int32).reshape(3, 4),
        "c": (np.array([True, False, True]), np.linspace(-2, 2, 6, dtype=np.float16).reshape(2, 3)),
        "d": np.array([0, 7, 2**32 - 1], np.uint32),
    }
    shape = tree_util.tree_map(lambda a: ShapedArray(np.shape(a), np.asarray(a).dtype), value)

    @partial(jax.jit, backend="ipu")
    def f(x):
        token = lax.create_token(x)
        res, _ = lax.infeed(token, shape=shape)
        return res

    ipu.transfer_to_infeed(value)
    got = f(np.float32(0))
    for g, want in zip(tree_util.tree_leaves(got), tree_util.tree_leaves(value)):
        assert np.asarray(g).dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(np.asarray(g), want)
    assert tree_util.tree_structure(got) == tree_util.tree_structure(value)


def test_infeed_then_outfeed(ipu):
    @partial(jax.jit, backend="ipu")
    def f(x):
        token = lax.create_token(x)
        y, token = lax.infeed(token, shape=ShapedArray((3, 4), jnp.float32))
        token = lax.outfeed(token, y + np.float32(1))
        return x - 1

    x = np.float32(7.5)
    y = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    ipu.transfer_to_infeed((y,))
    result = f(x)
    (out,) = ipu.transfer_from_outfeed(outfeed_shape(y))
    np.testing.assert_allclose(out, y + np.float32(1), rtol=1e-6)
    assert float(result) == x - 1


def test_outfeed_read_on_another_thread(ipu):
    """A reader thread waits on the outfeed before the program runs; outfeed of a tuple of two dtypes."""
    @partial(jax.jit, backend="ipu")
    def f(x):
        lax.outfeed(lax.create_token(), (x * 2, (x > 0).astype(jnp.int32)))
        return x + 1

    x = np.array([-1.0, 0.5, 3.0], np.float32)
    received = []
    reader = threading.Thread(target=lambda: received.append(
        ipu.transfer_from_outfeed(outfeed_shape(x, np.zeros(3, np.int32)))))
    reader.start()
    np.testing.assert_allclose(np.asarray(f(x)), x + 1)
    reader.join(timeout=60)
    assert not reader.is_alive(), "the outfeed reader never got its entry"
    doubled, positive = received[0]
    np.testing.assert_allclose(doubled, x * 2)
    np.testing.assert_array_equal(positive, (x > 0).astype(np.int32))
    assert positive.dtype == np.int32


def test_outfeed_of_an_array_shape_returns_an_array(ipu):
    @partial(jax.jit, backend="ipu")
    def f(x):
        lax.outfeed(lax.create_token(), x[::-1])
        return x

    x = np.arange(5, dtype=np.float32)
    f(x).block_until_ready()
    out = ipu.transfer_from_outfeed(xla_client.Shape.array_shape(np.dtype(np.float32), (5,)))
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, x[::-1])


def test_fori_loop_of_two_infeeds_and_an_outfeed(ipu):
    def body(i, carry):
        token, total = carry
        a, token = lax.infeed(token, shape=ShapedArray((3, 4), jnp.float32))
        b, token = lax.infeed(token, shape=ShapedArray((), jnp.int32))
        token = lax.outfeed(token, (a * b.astype(jnp.float32) + i.astype(jnp.float32),))
        return token, total + b

    @partial(jax.jit, backend="ipu")
    def f(n):
        token = lax.create_token(n)
        _, total = lax.fori_loop(0, n, body, (token, jnp.int32(0)))
        return total

    n = 10
    rng = np.random.default_rng(3)
    feeds = [(rng.standard_normal((3, 4)).astype(np.float32), np.int32(rng.integers(-5, 5))) for _ in range(n)]
    for a, b in feeds:
        ipu.transfer_to_infeed(a)
        ipu.transfer_to_infeed(b)
    total = f(n)
    for i, (a, b) in enumerate(feeds):
        (out,) = ipu.transfer_from_outfeed(outfeed_shape(a))
        # a * b + i is one fused multiply-add, as on cpu: the double product and sum are exact here
        np.testing.assert_array_equal(out, (a.astype(np.float64) * int(b) + i).astype(np.float32))
    assert int(total) == sum(int(b) for _, b in feeds)


def test_a_program_waiting_on_an_empty_infeed_keeps_waiting(ipu):
    """As on an IPU: no error and no result until something is fed, then the right result."""
    @partial(jax.jit, backend="ipu")
    def f(x):
        y, _ = lax.infeed(lax.create_token(), shape=ShapedArray((4,), jnp.float32))
        return x * y

    x = np.arange(4, dtype=np.float32)
    results = []
    waiter = threading.Thread(target=lambda: results.append(np.asarray(f(x))))
    waiter.start()
    waiter.join(timeout=1.5)
    assert waiter.is_alive() and not results, "the program did not wait for its infeed"
    y = np.full(4, 3, np.float32)
    ipu.transfer_to_infeed(y)
    waiter.join(timeout=60)
    assert not waiter.is_alive()
    np.testing.assert_array_equal(results[0], x * y)


def test_tokens_through_cond_and_after_all(ipu):
    @partial(jax.jit, backend="ipu")
    def f(x):
        t1, t2 = lax.create_token(), lax.create_token()
        token = lax.after_all(t1, t2)
        token = lax.cond(x > 0, lambda t: lax.outfeed(t, x), lambda t: lax.outfeed(t, -x), token)
        token = lax.after_all(token)
        return x * 3

    for x in (np.float32(2), np.float32(-5)):
        np.testing.assert_allclose(np.asarray(f(x)), x * 3)
        assert ipu.transfer_from_outfeed(xla_client.Shape.array_shape(np.dtype(np.float32), ())) == abs(x)


def test_unsupported_dtype_is_refused_by_name(ipu):
    with pytest.raises(TypeError, match=r"float128.*supported dtypes are bool, int8, uint8, int16, uint16, int32, "
                                        r"uint32, float16, bfloat16, float32, complex64, float64, int64, uint64, "
                                        r"complex128"):
        ipu.transfer_to_infeed(np.zeros(3, np.longdouble))


def test_int4_is_carried_by_the_feeds_and_computed(ipu):
    """jaxlib 0.4.13's PJRT API has no sub-byte buffers, but its feeds are the ipu's own: an int4 array goes in by
    infeed, is computed on (reversed; widened and multiplied) and comes back by outfeed."""
    import ml_dtypes

    v = np.array([-8, -1, 3, 7], ml_dtypes.int4)
    shapes = (jax.core.ShapedArray(v.shape, v.dtype),)

    def f(x):
        token = lax.create_token(x)
        (got,), token = lax.infeed(token, shape=shapes)
        lax.outfeed(token, (got[::-1], got.astype(jnp.int32) * 3))
        return x

    ipu.transfer_to_infeed((v,))
    jax.jit(f, backend="ipu")(np.float32(0)).block_until_ready()
    out = ipu.transfer_from_outfeed(
        xla_client.shape_from_pyval((v, v.astype(np.int32))).with_major_to_minor_layout_if_absent())
    assert out[0].dtype == v.dtype
    np.testing.assert_array_equal(out[0].astype(np.int32), [7, 3, -1, -8])
    np.testing.assert_array_equal(out[1], [-24, -3, 9, 21])


def test_cpu_devices_keep_jaxlibs_own_methods(ipu):
    """The class-level methods route only ipu devices to the ipu library: a cpu feed never reaches ipu 0."""
    try:
        jax.devices("cpu")[0].transfer_to_infeed((np.zeros(2, np.float32),))
    except Exception as e:  # noqa: BLE001 - jaxlib's own answer, whatever it is
        assert "ipu" not in str(e)
    else:  # cpu's infeed queue is the process's: read the entry back, or the next cpu infeed of another shape aborts
        read = jax.jit(lambda: lax.infeed(lax.create_token(), shape=(ShapedArray((2,), jnp.float32),))[0],
                       backend="cpu")
        np.testing.assert_array_equal(np.asarray(read()[0]), [0, 0])

    @partial(jax.jit, backend="ipu")
    def f():
        y, _ = lax.infeed(lax.create_token(), shape=ShapedArray((2,), jnp.float32))
        return y

    ipu.transfer_to_infeed(np.full(2, 7, np.float32))
    np.testing.assert_array_equal(np.asarray(f()), [7, 7])


MISMATCH = """
import jax, jax.numpy as jnp, numpy as np
from jax import lax

def f(x):
    y, _ = lax.infeed(lax.create_token(), shape=jax.core.ShapedArray((3, 4), jnp.float32))
    return x + y

ipu = jax.devices("ipu")[0]
f = jax.jit(f, backend="ipu")
ipu.transfer_to_infeed({feed})
try:
    print(np.asarray(f(np.float32(1))))
except Exception as e:
    print("ERROR", type(e).__name__, e)
"""


@pytest.mark.parametrize("feed, fed_text", [
    ("np.zeros((3, 4), np.int32)", "was fed (i32[3,4])"),
    ("np.zeros((4, 3), np.float32)", "was fed (f32[4,3])"),
    ("(np.zeros((3, 4), np.float32), np.zeros(2, np.float32))", "was fed (f32[3,4], f32[2])"),
])
def test_mismatched_feed_fails_with_both_types_and_never_hangs(python, feed, fed_text):
    result = python(MISMATCH.format(feed=feed), timeout=120)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("ERROR"), out
    assert "program 'jit_f' expects an infeed of (f32[3,4])" in out and fed_text in out, out
    assert "stablehlo.infeed" in out, out
