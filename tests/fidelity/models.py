"""The whole models of `nox -s fidelity`, in plain jax (no library), configured as Graphcore ran them.

Each builder returns ``(step, args, flops)``: a jitted training step for one micro-batch on one IPU, its arguments
(parameters, optimiser state and a batch of synthetic data, on the host), and the FLOPs of the step (from XLA:CPU's
cost analysis of the same program, so they count what the program computes). fidelity.py runs the step once on the
ipu and converts the emulator's cycle estimate into throughput."""

from __future__ import annotations

from functools import partial
from typing import Any, Dict

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

# ------------------------------------------------------------------------------------------ ResNet-50 v1.5

RESNET50_STAGES = ((64, 3), (128, 4), (256, 6), (512, 3))  # (bottleneck width, blocks); outputs are 4x the width


def _conv(x, w, stride=1):
    pad = "SAME" if w.shape[0] > 1 else "VALID"
    return lax.conv_general_dilated(x, w, (stride, stride), pad, dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _batch_norm(x, scale, bias, eps=1e-5):
    # Statistics in f32, as Graphcore's fp16 models keep them (norm statistics and their gradients are f32).
    xf = x.astype(jnp.float32)
    mean = jnp.mean(xf, axis=(0, 1, 2))
    var = jnp.mean(jnp.square(xf - mean), axis=(0, 1, 2))
    y = (xf - mean) * lax.rsqrt(var + eps) * scale + bias
    return y.astype(x.dtype)


def resnet50_params(key, dtype, classes=1000):
    keys = iter(jax.random.split(key, 64))

    def conv_w(k, c_in, c_out):
        w = jax.random.normal(next(keys), (k, k, c_in, c_out), jnp.float32) * np.sqrt(2.0 / (k * k * c_in))
        return w.astype(dtype)

    def bn(c):
        return jnp.ones((c,), jnp.float32), jnp.zeros((c,), jnp.float32)

    params: Dict[str, Any] = {"stem": (conv_w(7, 3, 64), bn(64)), "stages": []}
    c_in = 64
    for width, blocks in RESNET50_STAGES:
        stage = []
        for b in range(blocks):
            block = {"conv1": conv_w(1, c_in, width), "bn1": bn(width),
                     "conv2": conv_w(3, width, width), "bn2": bn(width),
                     "conv3": conv_w(1, width, 4 * width), "bn3": bn(4 * width)}
            if b == 0:
                block["proj"], block["bn_proj"] = conv_w(1, c_in, 4 * width), bn(4 * width)
            stage.append(block)
            c_in = 4 * width
        params["stages"].append(stage)
    dense = jax.random.normal(next(keys), (c_in, classes), jnp.float32) * np.sqrt(1.0 / c_in)
    params["dense"] = (dense.astype(dtype), jnp.zeros((classes,), jnp.float32))
    return params


def _max_pool_3x3_s2(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")


def _bottleneck(block, x, stride):
    y = jax.nn.relu(_batch_norm(_conv(x, block["conv1"]), *block["bn1"]))
    y = jax.nn.relu(_batch_norm(_conv(y, block["conv2"], stride), *block["bn2"]))
    y = _batch_norm(_conv(y, block["conv3"]), *block["bn3"])
    shortcut = _batch_norm(_conv(x, block["proj"], stride), *block["bn_proj"]) if "proj" in block else x
    return jax.nn.relu(y + shortcut)


def resnet50_forward(params, images, recompute=False):
    """``recompute``: each bottleneck block is a recomputation checkpoint (its forward runs again in the backward
    pass instead of keeping its activations)."""
    block_fn = jax.checkpoint(_bottleneck, static_argnums=(2,)) if recompute else _bottleneck
    w, bn = params["stem"]
    x = jax.nn.relu(_batch_norm(_conv(images, w, 2), *bn))
    x = _max_pool_3x3_s2(x)
    for s, stage in enumerate(params["stages"]):
        for b, block in enumerate(stage):
            x = block_fn(block, x, 2 if (b == 0 and s > 0) else 1)  # v1.5: the stride is in the 3x3 convolution
    w, b = params["dense"]
    pooled = jnp.mean(x.astype(jnp.float32), axis=(1, 2)).astype(w.dtype)
    return (pooled @ w).astype(jnp.float32) + b


def _cross_entropy(logits, labels):
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))


def resnet50(micro_batch: int, dtype=jnp.float16, backend: str = "ipu", recompute: bool = True,
             loss_scale: float = 128.0):
    """ResNet-50 v1.5 training on one IPU, one micro-batch: forward, backward (with ``recompute``, each block's
    forward again) and the gradients added into accumulators, all in ``dtype`` with batch norm statistics in f32
    and a static loss scale. Returns ``(step, args)``; the optimiser's update runs once per gradient-accumulation
    count of micro-batches (sgd_momentum_update)."""
    params = resnet50_params(jax.random.PRNGKey(0), dtype)
    accumulators = jax.tree_util.tree_map(jnp.zeros_like, params)

    def loss(p, images, labels):
        return _cross_entropy(resnet50_forward(p, images, recompute), labels) * loss_scale

    @partial(jax.jit, backend=backend, donate_argnums=(1,))
    def step(p, acc, images, labels):
        value, grads = jax.value_and_grad(loss)(p, images, labels)
        acc = jax.tree_util.tree_map(lambda a, g: (a + g).astype(a.dtype), acc, grads)
        return acc, value / loss_scale

    rng = np.random.RandomState(0)
    images = rng.standard_normal((micro_batch, 224, 224, 3)).astype(np.float32).astype(jnp.dtype(dtype))
    labels = rng.randint(0, 1000, size=(micro_batch,)).astype(np.int32)
    return step, (params, accumulators, images, labels)


def sgd_momentum_update(params: Any, backend: str = "ipu", lr: float = 0.1, momentum: float = 0.9,
                        loss_scale: float = 128.0):
    """The weight update of SGD with momentum from accumulated (loss-scaled) gradients, in the parameters' types;
    the accumulators are cleared for the next round. Returns ``(update, args)``."""
    velocity = jax.tree_util.tree_map(jnp.zeros_like, params)
    accumulators = jax.tree_util.tree_map(jnp.zeros_like, params)

    @partial(jax.jit, backend=backend, donate_argnums=(0, 1, 2))
    def update(p, v, acc):
        v = jax.tree_util.tree_map(lambda v_, g: (momentum * v_ + g / loss_scale).astype(v_.dtype), v, acc)
        p = jax.tree_util.tree_map(lambda p_, v_: (p_ - lr * v_).astype(p_.dtype), p, v)
        return p, v, jax.tree_util.tree_map(jnp.zeros_like, acc)

    return update, (params, velocity, accumulators)


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
