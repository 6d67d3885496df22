"""ResNet-50 v1.5 training on one IPU, configured as Graphcore ran it for its published Bow figure, in plain jax:
the model, its training step for one micro-batch, the optimiser's update, and ``estimate``, which runs both on the
ipu and turns the emulator's cycle estimate into images/s per IPU. ``resnet_bow.py`` prints that figure next to
Graphcore's; ``nox -s fidelity`` (tests/fidelity) checks it against its band (row model.resnet50)."""

from __future__ import annotations

import contextlib
import json
import os
from functools import partial
from typing import Any, Dict, Iterator

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

# Graphcore's published figure: 42,029 images/s training ResNet-50 on a Bow IPU-POD16 (docs/ipu-model.md), per IPU.
PUBLISHED_IMAGES_PER_S_PER_IPU = 42029 / 16
# How Graphcore ran it, with where each setting comes from; what the emulated run does differently is "differs".
GRAPHCORE = {
    "micro_batch": 20, "gradient_accumulation": 6, "recompute": True, "dtype": "float16",
    "available_memory_proportion": 0.15, "partials_type": "half",
    "source": "graphcore/examples @187775b (SDK 2.5), applications/tensorflow/cnns/training/configs.yml "
              "mk2_resnet50_mlperf_pod16_bs20: micro_batch_size 20, replicas 16 (one IPU each), "
              "gradient_accumulation_count 6, enable_recomputation, precision 16.16, SGD with momentum 0.9, "
              "available_memory_proportion [0.15] (JAX_IPU_AVAILABLE_MEMORY_PROPORTION), half partials (its "
              "README: 'partials saved to tile memory within the convolutions are set to half-precision'; the "
              "training code sets partialsType 'half' for convolutions and matmuls: JAX_IPU_PARTIALS_TYPE)",
    "differs": "recomputation checkpoints at every bottleneck block (Graphcore's: 6 pipeline splits on one "
               "IPU); no stochastic rounding; the gradients' "
               "all-reduce across the 16 replicas, once per 6 micro-batches, is not run",
}


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


def estimate() -> Dict[str, Any]:
    """Runs one micro-batch's training step and one optimiser update of ``GRAPHCORE``'s configuration on the first
    ipu device and returns the estimate: ``images_per_s_per_ipu`` (the micro-batch over the
    step's time plus a 1/gradient_accumulation share of the update's), the cycles of each, the step's compute,
    exchange and sync cycles, its worst tile's bytes against a tile's, and the host's wall time of the step.

    The step does not fit a tile as jax writes it (its worst tile holds more than 638,976 bytes): it is compiled
    with Poplar's ``debug.allowOutOfMemory``, so that the estimate is still made, as the IPU Model makes it."""
    config = GRAPHCORE
    step, args = resnet50(config["micro_batch"], recompute=config["recompute"])
    update, update_args = sgd_momentum_update(args[0])
    with graphcore_options(config):
        found = step_estimate(step, args)
        found["update_cycles"] = step_estimate(update, update_args)["cycles"]
    cycles = found["cycles"] + found["update_cycles"] / config["gradient_accumulation"]
    clock = jax.devices("ipu")[0].tile_clock_frequency
    return dict(found, images_per_s_per_ipu=config["micro_batch"] / (cycles / clock))


@contextlib.contextmanager
def graphcore_options(config: Dict[str, Any]) -> Iterator[None]:
    """Compiles inside it as Graphcore's configuration compiles: its availableMemoryProportion and partialsType for
    matmuls and convolutions, and past a tile's memory (Poplar's debug.allowOutOfMemory), so that the estimate is
    made. All are read at each compile."""
    names = ("POPLAR_ENGINE_OPTIONS", "JAX_IPU_AVAILABLE_MEMORY_PROPORTION", "JAX_IPU_PARTIALS_TYPE")
    saved = {name: os.environ.get(name) for name in names}
    options = dict(json.loads(saved["POPLAR_ENGINE_OPTIONS"] or "{}"), **{"debug.allowOutOfMemory": "true"})
    os.environ["POPLAR_ENGINE_OPTIONS"] = json.dumps(options)
    os.environ["JAX_IPU_AVAILABLE_MEMORY_PROPORTION"] = str(config["available_memory_proportion"])
    os.environ["JAX_IPU_PARTIALS_TYPE"] = config["partials_type"]
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def step_estimate(step: Any, args: Any) -> Dict[str, Any]:
    """Runs a jitted step once on the first ipu device: the emulator's estimate of it (total, compute, exchange and
    sync cycles), its worst tile's bytes and a tile's, and the host's wall time."""
    import time

    from jax_ipu import runtime

    started = time.perf_counter()
    jax.block_until_ready(step(*args))
    wall = time.perf_counter() - started
    profile, memory = runtime.last_execution(), runtime.tile_memory_stats()
    return {"cycles": profile["total_cycles"], "compute": profile["compute_cycles"],
            "exchange": profile["exchange_cycles"], "sync": profile["sync_cycles"], "wall_s": round(wall, 1),
            "worst_tile_bytes": memory["largest_tile_bytes_in_use"], "tile_bytes": memory["tile_bytes_limit"]}
