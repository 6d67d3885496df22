"""The programs `nox -s bench` runs on cpu and on ipu, declared once in PROGRAMS.

Each entry builds (for full or --quick sizes) a plain function, its inputs as numpy pytrees and how it is called:
`donate` are the donated arguments, and a program with `carry=k` feeds its first k outputs back as its first k
arguments on the next call (a training step updating its state in place). `calls` > 1 times many calls of a tiny
program and reports the time per call. A program fed from the host has `feed(device)`, run before each call to queue
its inputs (infeed on jax 0.4.13, `jax_ipu.streams` on later jax), and `drain(device)`, run after each call to
collect what it handed back (compared like its outputs); both are timed with the call, on both backends.
`rtol`/`atol` is the tolerance of the ipu result against cpu's.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

F32 = np.float32


@dataclasses.dataclass(frozen=True)
class Case:
    fn: Callable
    args: Tuple[Any, ...]  # numpy arrays or pytrees of them
    donate: Tuple[int, ...] = ()
    carry: int = 0
    calls: int = 1
    feed: Optional[Callable[[Any], None]] = None  # device -> None: queue one call's inputs
    drain: Optional[Callable[[Any], Any]] = None  # device -> pytree: what one call handed back


@dataclasses.dataclass(frozen=True)
class Program:
    name: str
    description: str
    build: Callable[[bool], Case]  # quick -> Case
    rtol: float
    atol: float


def _rng() -> np.random.RandomState:
    return np.random.RandomState(0)


def _tree_map(f: Callable, *trees: Any) -> Any:
    import jax

    return jax.tree_util.tree_map(f, *trees)


def _mlp(quick: bool) -> Case:
    import jax
    import jax.numpy as jnp

    sizes, batch = ((784, 64, 64, 10), 16) if quick else ((784, 1024, 1024, 10), 128)
    rng = _rng()
    params = [((rng.randn(m, n) / np.sqrt(m)).astype(F32), np.zeros(n, F32)) for m, n in zip(sizes[:-1], sizes[1:])]
    momentum = _tree_map(np.zeros_like, params)
    x = rng.rand(batch, sizes[0]).astype(F32)
    y = np.eye(sizes[-1], dtype=F32)[rng.randint(0, sizes[-1], batch)]

    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jax.nn.relu(h @ w + b)
        w, b = params[-1]
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(h @ w + b) * y, axis=-1))

    def step(params, momentum, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        momentum = _tree_map(lambda m, g: 0.9 * m + g, momentum, grads)
        params = _tree_map(lambda p, m: p - 0.01 * m, params, momentum)
        return params, momentum, value

    return Case(step, (params, momentum, x, y), donate=(0, 1), carry=2)


def _matmul(n: int, dtype: Any) -> Callable[[bool], Case]:
    def build(quick: bool) -> Case:
        size = 64 if quick else n
        rng = _rng()
        a, b = (rng.uniform(-1, 1, (size, size)).astype(dtype) for _ in range(2))
        return Case(lambda a, b: a @ b, (a, b))

    return build


def _chain(quick: bool) -> Case:
    import jax.numpy as jnp

    def chain(x):
        y = jnp.tanh(x)
        y = jnp.exp(y) * x + 1.0
        y = jnp.tanh(y * 0.5) - y * y
        return jnp.exp(-jnp.abs(y)) + y * 0.25

    x = _rng().uniform(-3, 3, 4096 if quick else 1 << 20).astype(F32)
    return Case(chain, (x,))


def _softmax_layernorm(quick: bool) -> Case:
    import jax
    import jax.numpy as jnp
    from jax import lax

    def f(x, gamma, beta):
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
        h = (x - mean) * lax.rsqrt(var + 1e-5) * gamma + beta
        return jax.nn.softmax(h, axis=-1)

    rows, cols = (32, 128) if quick else (1024, 1024)
    rng = _rng()
    return Case(f, (rng.randn(rows, cols).astype(F32), rng.uniform(0.5, 1.5, cols).astype(F32),
                    rng.randn(cols).astype(F32) * 0.1))


def _cnn(quick: bool) -> Case:
    import jax
    import jax.numpy as jnp
    from jax import lax

    batch, c1, c2 = (4, 4, 8) if quick else (32, 16, 32)
    rng = _rng()

    def conv_init(cin, cout):
        return (rng.randn(3, 3, cin, cout) / np.sqrt(9 * cin)).astype(F32), np.zeros(cout, F32)

    params = [conv_init(1, c1), conv_init(c1, c2),
              ((rng.randn(7 * 7 * c2, 10) / np.sqrt(7 * 7 * c2)).astype(F32), np.zeros(10, F32))]
    x = rng.rand(batch, 28, 28, 1).astype(F32)
    y = np.eye(10, dtype=F32)[rng.randint(0, 10, batch)]

    def max_pool(h):  # 2x2, stride 2: what flax.linen.max_pool lowers to
        return lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def loss(params, x, y):
        h = x
        for w, b in params[:2]:
            h = lax.conv_general_dilated(h, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
            h = max_pool(jax.nn.relu(h + b))
        w, b = params[2]
        logits = h.reshape(h.shape[0], -1) @ w + b
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))

    def step(params, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return _tree_map(lambda p, g: p - 0.05 * g, params, grads), value

    return Case(step, (params, x, y), donate=(0,), carry=1)


def _scan_rnn(quick: bool) -> Case:
    import jax.numpy as jnp
    from jax import lax

    steps, width, batch = (20, 64, 8) if quick else (200, 64, 8)
    rng = _rng()

    def rnn(w, u, b, h0, xs):
        def cell(h, x):
            h = jnp.tanh(h @ w + x @ u + b)
            return h, h

        return lax.scan(cell, h0, xs)

    scale = 1.0 / np.sqrt(width)
    return Case(rnn, ((rng.randn(width, width) * scale).astype(F32), (rng.randn(width, width) * scale).astype(F32),
                      np.zeros(width, F32), np.zeros((batch, width), F32), rng.randn(steps, batch, width).astype(F32)))


def _rnn_loop(quick: bool) -> Case:
    import jax.numpy as jnp
    from jax import lax

    steps, width = (20, 64) if quick else (200, 64)
    rng = _rng()

    def rnn(h0, w, xs):  # one sequence: each step a [64] x [64, 64] product, an add and a tanh
        def cell(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h

        return lax.scan(cell, h0, xs)

    return Case(rnn, (np.zeros(width, F32), (rng.randn(width, width) / np.sqrt(width)).astype(F32),
                      rng.randn(steps, width).astype(F32)))


def _fed_training_loop(quick: bool) -> Case:
    """An epoch as one program (seed 000's fast path): a fori_loop whose steps each read a batch from the host,
    take a momentum-SGD step of a small softmax classifier and hand the loss back."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    steps, batch, features, classes = (4, 8, 32, 10) if quick else (100, 32, 256, 10)
    rng = _rng()
    xs = rng.randn(steps, batch, features).astype(F32)
    ys = np.eye(classes, dtype=F32)[rng.randint(0, classes, (steps, batch))]
    params = ((rng.randn(features, classes) * 0.01).astype(F32), np.zeros(classes, F32))
    momentum = _tree_map(np.zeros_like, params)

    def loss(params, x, y):
        w, b = params
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(x @ w + b) * y, axis=-1))

    def update(params, momentum, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        momentum = _tree_map(lambda m, g: 0.9 * m + g, momentum, grads)
        return _tree_map(lambda p, m: p - 0.05 * m, params, momentum), momentum, value

    if tuple(int(p) for p in jax.__version__.split(".")[:2]) < (0, 5):  # jax 0.4.13: infeed and outfeed
        from jax._src.lib import xla_client
        from jax.core import ShapedArray

        shapes = (ShapedArray((batch, features), jnp.float32), ShapedArray((batch, classes), jnp.float32))
        loss_shape = xla_client.shape_from_pyval((np.float32(0),)).with_major_to_minor_layout_if_absent()

        def step(i, state):
            (x, y), token = lax.infeed(lax.create_token(), shape=shapes)
            params, momentum, value = update(*state, x, y)
            lax.outfeed(token, (value,))
            return params, momentum

        losses: List[Any] = []
        reader: List[threading.Thread] = []

        def feed(device):
            for i in range(steps):
                device.transfer_to_infeed((xs[i], ys[i]))
            # XLA:CPU runs the program in the calling thread, and its outfeed waits for a reader: read from another
            reader[:] = [threading.Thread(target=lambda: losses.extend(
                device.transfer_from_outfeed(loss_shape)[0] for _ in range(steps)))]
            reader[0].start()

        def drain(device):
            reader[0].join()
            out = np.array(losses)
            losses.clear()
            return out
    else:  # later jax: the same loop through jax_ipu.streams (ordered io_callbacks)
        from jax_ipu.streams import InfeedQueue, OutfeedQueue

        infeed = InfeedQueue((jax.ShapeDtypeStruct((batch, features), jnp.float32),
                              jax.ShapeDtypeStruct((batch, classes), jnp.float32)))
        outfeed = OutfeedQueue()

        def step(i, state):
            x, y = infeed.get()
            params, momentum, value = update(*state, x, y)
            outfeed.put(value)
            return params, momentum

        def feed(device):
            for i in range(steps):
                infeed.put((xs[i], ys[i]))

        def drain(device):
            return np.array(outfeed.drain())

    def epoch(params, momentum):
        return lax.fori_loop(0, steps, step, (params, momentum))

    return Case(epoch, (params, momentum), donate=(0, 1), carry=2, feed=feed, drain=drain)


def _tiny_while(quick: bool) -> Case:
    import jax.numpy as jnp
    from jax import lax

    def count(n, x):  # the loop's own cost: a counter, a compare and one scalar update per iteration
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 0.999 + 1.0), (jnp.int32(0), x))

    return Case(count, (np.int32(100 if quick else 1000), np.float32(1)))


def _embedding(quick: bool) -> Case:
    import jax.numpy as jnp

    vocab, dim, batch = (500, 16, 64) if quick else (20000, 128, 4096)
    rng = _rng()

    def update(table, ids, targets):
        rows = jnp.take(table, ids, axis=0)  # gather
        err = rows - targets
        loss = 0.5 * jnp.mean(jnp.sum(err * err, axis=-1))
        return table.at[ids].add(-0.1 * err), loss  # scatter-add (repeated ids accumulate)

    return Case(update, (rng.randn(vocab, dim).astype(F32), rng.randint(0, vocab, batch).astype(np.int32),
                         rng.randn(batch, dim).astype(F32)), donate=(0,), carry=1)


def _sort(quick: bool) -> Case:
    import jax.numpy as jnp

    return Case(jnp.sort, (_rng().randn(4096 if quick else 1 << 20).astype(F32),))


def _dispatch(quick: bool) -> Case:
    return Case(lambda x: x + 1, (np.arange(8, dtype=F32),), calls=100 if quick else 1000)


PROGRAMS: List[Program] = [
    Program("mlp_train_step", "MLP 784-1024-1024-10 grad + momentum SGD, batch 128, donated state", _mlp, 1e-4, 1e-5),
    Program("matmul_512_f32", "512x512 @ 512x512 f32", _matmul(512, np.float32), 1e-5, 1e-4),
    Program("matmul_2048_f32", "2048x2048 @ 2048x2048 f32", _matmul(2048, np.float32), 1e-5, 1e-3),
    Program("matmul_512_f16", "512x512 @ 512x512 f16", _matmul(512, np.float16), 1e-2, 5e-2),
    Program("matmul_2048_f16", "2048x2048 @ 2048x2048 f16", _matmul(2048, np.float16), 1e-2, 1e-1),
    Program("elementwise_chain", "tanh, exp, mul, add, sub, abs on 1M f32", _chain, 1e-5, 1e-6),
    Program("softmax_layernorm", "layer norm then softmax over rows of 1024x1024 f32", _softmax_layernorm, 1e-4, 1e-8),
    Program("cnn_train_step", "CNN conv3x3(16)-maxpool-conv3x3(32)-maxpool-dense(10) grad + SGD, batch 32",
            _cnn, 1e-4, 1e-5),
    Program("scan_rnn", "lax.scan of 200 steps of a 64-wide tanh RNN, batch 8", _scan_rnn, 1e-4, 1e-5),
    Program("rnn_scan_200", "lax.scan of 200 steps of h = tanh(h @ w + x), h f32[64] (one sequence)", _rnn_loop,
            1e-4, 1e-5),
    Program("fed_training_loop", "fori_loop of 100 momentum-SGD steps, each fed a batch from the host (infeed on "
            "jax 0.4.13, jax_ipu.streams later) and handing its loss back", _fed_training_loop, 1e-4, 1e-5),
    Program("tiny_while", "lax.while_loop of 1000 iterations of a counter and one f32 update", _tiny_while,
            1e-5, 1e-6),
    Program("embedding_update", "gather 4096 rows of a 20000x128 table, scatter-add their update", _embedding,
            1e-5, 1e-5),
    Program("sort_1m_f32", "jnp.sort of 1M f32", _sort, 0.0, 0.0),
    Program("dispatch", "jitted x+1 on f32[8], time per call over 1000 calls", _dispatch, 0.0, 0.0),
]

BY_NAME: Dict[str, Program] = {p.name: p for p in PROGRAMS}
