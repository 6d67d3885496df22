"""The programs `nox -s bench` runs on cpu and on ipu, declared once in PROGRAMS.

Each entry builds (for full or --quick sizes) a plain function, its inputs as numpy pytrees and how it is called:
`donate` are the donated arguments, and a program with `carry=k` feeds its first k outputs back as its first k
arguments on the next call (a training step updating its state in place). `calls` > 1 times many calls of a tiny
program and reports the time per call. `rtol`/`atol` is the tolerance of the ipu result against cpu's.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

F32 = np.float32


@dataclasses.dataclass(frozen=True)
class Case:
    fn: Callable
    args: Tuple[Any, ...]  # numpy arrays or pytrees of them
    donate: Tuple[int, ...] = ()
    carry: int = 0
    calls: int = 1


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
    Program("embedding_update", "gather 4096 rows of a 20000x128 table, scatter-add their update", _embedding,
            1e-5, 1e-5),
    Program("sort_1m_f32", "jnp.sort of 1M f32", _sort, 0.0, 0.0),
    Program("dispatch", "jitted x+1 on f32[8], time per call over 1000 calls", _dispatch, 0.0, 0.0),
]

BY_NAME: Dict[str, Program] = {p.name: p for p in PROGRAMS}
