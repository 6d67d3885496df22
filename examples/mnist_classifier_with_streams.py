"""MNIST classifier on the IPU with host streams: each epoch is one ``lax.fori_loop`` on the device, on any jax.

The same model, data order and updates as mnist_classifier_with_infeed.py, but the batches and losses travel through
``jax_ipu.streams`` (ordered ``io_callback``s) instead of ``lax.infeed`` / ``lax.outfeed``, which current jax no
longer has: this is how seed 000's on-device training loop is written for the current series, and it runs on jax
0.4.13 too. The host queues every batch of the epoch (``infeed.put``), makes a single call that loops over them on
the IPU (``infeed.get()`` reads the next batch, ``outfeed.put(loss)`` hands its loss back), then drains the losses.

    python mnist_classifier_with_streams.py [--short]

Prints ``epoch N time_s T train_acc A test_acc B`` and ``loss_first L0 loss_last L1`` per epoch (from the outfeed
queue), then ``RESULT ...`` lines. Stated accuracy: test accuracy >= 0.90 (``--short`` included).
"""

from __future__ import annotations

import os
import sys
import time
from functools import partial

os.environ.setdefault("JAX_PLATFORMS", "cpu,ipu")  # before jax is imported: cpu is the default backend
os.environ.setdefault("JAX_PLATFORM_NAME", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _data  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import mnist_classifier as mc  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from tqdm import tqdm  # noqa: E402

from jax_ipu import runtime  # noqa: E402
from jax_ipu.streams import InfeedQueue, OutfeedQueue  # noqa: E402


def main(argv=None):
    args = mc.parser(__doc__.splitlines()[0]).parse_args(argv)
    data, epochs, step_size = mc.load(args)
    batch_size = args.batch_size
    opt_init, opt_update = mc.momentum_sgd(step_size, args.momentum)

    infeed = InfeedQueue((jax.ShapeDtypeStruct((batch_size, 784), jnp.float32),
                          jax.ShapeDtypeStruct((batch_size, 10), jnp.float32)))
    outfeed = OutfeedQueue()

    def update(i, opt_state):
        batch = infeed.get()
        value, grads = jax.value_and_grad(mc.loss)(opt_state[0], batch)
        outfeed.put(value)
        return opt_update(grads, opt_state)

    @partial(jax.jit, backend="ipu", donate_argnums=(2,))
    def train_epoch(start, end, opt_state):
        return lax.fori_loop(start, end, update, opt_state)

    device = jax.devices("ipu")[0]
    opt_state = opt_init(mc.init_params(jax.random.PRNGKey(0)))
    rng = np.random.RandomState(0)
    steps = len(data.train_labels) // batch_size
    progress = tqdm(total=epochs, unit="epoch", disable=None if steps * epochs > 50 else True)
    for epoch in range(epochs):
        start = time.perf_counter()
        runs_before = runtime.device_stats(device)["executions"]
        for batch in _data.batches(data.train_images, data.train_labels, batch_size, rng):
            infeed.put(batch)
        opt_state = train_epoch(epoch * steps, (epoch + 1) * steps, opt_state)
        jax.block_until_ready(opt_state)
        losses = [float(loss) for loss in outfeed.drain()]
        epoch_time = time.perf_counter() - start
        calls = runtime.device_stats(device)["executions"] - runs_before  # programs run this epoch: one
        params = opt_state[0]
        train_acc = mc.accuracy(params, data.train_images, data.train_labels)
        test_acc = mc.accuracy(params, data.test_images, data.test_labels)
        progress.write(f"epoch {epoch + 1} time_s {epoch_time:.2f} train_acc {train_acc:.4f} test_acc {test_acc:.4f}")
        progress.write(f"loss_first {losses[0]:.4f} loss_last {losses[-1]:.4f} steps {len(losses)}"
                       f" device_calls {calls}")
        progress.update()
    progress.close()
    leaf = jax.tree_util.tree_leaves(opt_state)[0]
    where = next(iter(leaf.devices()))
    print(f"RESULT dataset {data.name}")
    print(f"RESULT device {where.platform}:{where.id}")
    print(f"RESULT device_calls_last_epoch {calls} steps_per_epoch {steps}")
    print(f"RESULT test_accuracy {test_acc:.4f} required {mc.REQUIRED_TEST_ACCURACY:.2f}")
    return 0 if test_acc >= mc.REQUIRED_TEST_ACCURACY else 1


if __name__ == "__main__":
    sys.exit(main())
