"""BERT-Large's busiest pipeline stage for `nox -s fidelity`, in plain jax (no library), configured as Graphcore ran
it (ResNet-50 is the examples' _resnet50.py, which resnet_bow.py also runs).

``bert_stage`` returns ``(step, args)``: a jitted training step for one micro-batch on one IPU and its arguments
(parameters and a batch of synthetic data, on the host). fidelity.py runs the step once on the ipu and converts the
emulator's cycle estimate into throughput."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

# ------------------------------------------------------------------------------------- BERT-Large encoder stage

BERT_LARGE = dict(hidden=1024, heads=16, ffn=4096)


def _layer_norm(x, scale, bias, eps=1e-12):
    xf = x.astype(jnp.float32)
    mean = jnp.mean(xf, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(xf - mean), axis=-1, keepdims=True)
    return ((xf - mean) * lax.rsqrt(var + eps) * scale + bias).astype(x.dtype)


def bert_layer_params(key, dtype, hidden, ffn):
    k = iter(jax.random.split(key, 8))

    def dense(n_in, n_out):
        w = jax.random.normal(next(k), (n_in, n_out), jnp.float32) * 0.02
        return w.astype(dtype), jnp.zeros((n_out,), dtype)

    def ln():
        return jnp.ones((hidden,), jnp.float32), jnp.zeros((hidden,), jnp.float32)

    return {"qkv": dense(hidden, 3 * hidden), "out": dense(hidden, hidden), "ln1": ln(),
            "ffn_in": dense(hidden, ffn), "ffn_out": dense(ffn, hidden), "ln2": ln()}


def bert_layer(p, x, heads):
    b, s, h = x.shape
    d = h // heads
    qkv = x @ p["qkv"][0] + p["qkv"][1]
    q, k, v = (t.reshape(b, s, heads, d) for t in jnp.split(qkv, 3, axis=-1))
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d).astype(x.dtype)
    probs = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(x.dtype)
    context = jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, s, h)
    x = _layer_norm(x + context @ p["out"][0] + p["out"][1], *p["ln1"])
    y = jax.nn.gelu(x @ p["ffn_in"][0] + p["ffn_in"][1], approximate=True)
    return _layer_norm(x + y @ p["ffn_out"][0] + p["ffn_out"][1], *p["ln2"])


def bert_stage(layers: int, micro_batch: int, seq: int = 128, dtype=jnp.float16, backend: str = "ipu",
               recompute: bool = True, hidden=BERT_LARGE["hidden"], heads=BERT_LARGE["heads"],
               ffn=BERT_LARGE["ffn"]):
    """One pipeline stage of BERT pre-training on one IPU, for one micro-batch: the forward of ``layers`` encoder
    layers on the activations the previous stage sent, the backward from the gradient the next stage sent (each
    layer's forward computed again first where ``recompute``: a checkpoint per layer, as Graphcore's pipelines
    recompute), and the gradients added into the stage's accumulators (the weights are updated once per
    gradient-accumulation count of micro-batches: bert_update)."""
    keys = jax.random.split(jax.random.PRNGKey(1), layers)
    params = [bert_layer_params(k, dtype, hidden, ffn) for k in keys]
    accumulators = jax.tree_util.tree_map(lambda a: jnp.zeros(a.shape, jnp.float32), params)
    layer = partial(bert_layer, heads=heads)
    if recompute:
        layer = jax.checkpoint(layer)

    def forward(ps, x):
        for p in ps:
            x = layer(p, x)
        return x

    @partial(jax.jit, backend=backend, donate_argnums=(1,))
    def step(ps, acc, x, dy):
        y, vjp = jax.vjp(forward, ps, x)
        grads, dx = vjp(dy)
        acc = jax.tree_util.tree_map(lambda a, g: a + g.astype(jnp.float32), acc, grads)
        return acc, y, dx

    rng = np.random.RandomState(0)
    x = rng.standard_normal((micro_batch, seq, hidden)).astype(np.float32).astype(jnp.dtype(dtype))
    dy = (rng.standard_normal((micro_batch, seq, hidden)) * 1e-3).astype(np.float32).astype(jnp.dtype(dtype))
    return step, (params, accumulators, x, dy)
