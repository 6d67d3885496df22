"""MNIST data-parallel over 4 IPUs with ``pmap``: each IPU takes a quarter of every batch, the gradients are
averaged across the IPUs with ``lax.pmean`` (over the IPU-Links), and every IPU applies the same update.

The model and optimiser are mnist_classifier.py's (MLP 784-1024-1024-10, momentum SGD). The replicated optimiser
state is donated, so each IPU keeps its copy in SRAM. The emulator provides the 4 IPUs
(``JAX_IPU_DEVICE_COUNT=4``, set here unless already given).

    python mnist_classifier_pmap.py [--short]

Prints ``epoch N time_s T train_acc A test_acc B`` per epoch and ``RESULT ...`` lines, among them the largest
difference between the IPUs' parameter replicas (they must stay identical). Stated accuracy: test accuracy >= 0.90.
"""

from __future__ import annotations

import os
import sys
import time
from functools import partial

os.environ.setdefault("JAX_IPU_DEVICE_COUNT", "4")  # before jax is imported
os.environ.setdefault("JAX_PLATFORMS", "cpu,ipu")
os.environ.setdefault("JAX_PLATFORM_NAME", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _data  # noqa: E402
import jax  # noqa: E402
import mnist_classifier as mc  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from tqdm import tqdm  # noqa: E402


def replicate(tree, devices):
    """A copy of every leaf on each IPU, stacked along a new leading axis as pmap takes it: jax 0.4.13's
    jax.device_put_replicated; current jax removed it for device_put of the stacked copies, split over the IPUs."""
    if hasattr(jax, "device_put_replicated"):  # jax 0.4.13 (current jax raises AttributeError for it)
        return jax.device_put_replicated(tree, devices)
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    split = NamedSharding(Mesh(np.array(devices), ("ipus",)), PartitionSpec("ipus"))
    return jax.tree_util.tree_map(
        lambda x: jax.device_put(np.broadcast_to(np.asarray(x), (len(devices),) + x.shape), split), tree)


def main(argv=None):
    parser = mc.parser(__doc__.splitlines()[0], batch_help="the global batch, split over the IPUs")
    parser.add_argument("--ipus", type=int, default=4)
    args = parser.parse_args(argv)

    devices = jax.devices("ipu")[:args.ipus]
    if len(devices) < args.ipus or args.batch_size % args.ipus:
        raise SystemExit(f"need {args.ipus} ipu devices (got {len(devices)}; set JAX_IPU_DEVICE_COUNT) and a batch "
                         f"size divisible by them (got {args.batch_size})")
    n = len(devices)
    data, epochs, step_size = mc.load(args, short_epochs=3)
    print(f"devices {n} x {devices[0].device_kind}")
    opt_init, opt_update = mc.momentum_sgd(step_size, args.momentum)

    @partial(jax.pmap, axis_name="ipus", backend="ipu", donate_argnums=(0,))
    def update(opt_state, batch):
        # The mean of the per-IPU mean losses' gradients is the gradient of the global batch's mean loss.
        grads = lax.pmean(jax.grad(mc.loss)(opt_state[0], batch), axis_name="ipus")
        return opt_update(grads, opt_state)

    opt_state = replicate(opt_init(mc.init_params(jax.random.PRNGKey(0))), devices)
    rng = np.random.RandomState(0)
    per_ipu = args.batch_size // n
    steps = len(data.train_labels) // args.batch_size
    # A progress bar over all steps when the run is long (tqdm hides itself when stderr is not a terminal).
    progress = tqdm(total=steps * epochs, unit="step", disable=None if steps * epochs > 50 else True)
    for epoch in range(epochs):
        start = time.perf_counter()
        for images, targets in _data.batches(data.train_images, data.train_labels, args.batch_size, rng):
            opt_state = update(opt_state, (images.reshape(n, per_ipu, -1), targets.reshape(n, per_ipu, -1)))
            progress.update()
        jax.block_until_ready(opt_state)
        epoch_time = time.perf_counter() - start
        params = jax.tree_util.tree_map(lambda x: x[0], opt_state[0])  # replica 0, evaluated on ipu 0
        train_acc = mc.accuracy(params, data.train_images, data.train_labels)
        test_acc = mc.accuracy(params, data.test_images, data.test_labels)
        progress.write(f"epoch {epoch + 1} time_s {epoch_time:.2f} train_acc {train_acc:.4f} test_acc {test_acc:.4f}")
    progress.close()
    leaves = jax.tree_util.tree_leaves(opt_state[0])
    spread = max(float(np.max(np.abs(np.asarray(x) - np.asarray(x)[:1]))) for x in leaves)
    print(f"RESULT dataset {data.name}")
    print(f"RESULT devices {' '.join(f'{d.platform}:{d.id}' for d in sorted(leaves[0].devices(), key=lambda d: d.id))}")
    print(f"RESULT replica_max_abs_diff {spread:.3g}")
    print(f"RESULT test_accuracy {test_acc:.4f} required {mc.REQUIRED_TEST_ACCURACY:.2f}")
    return 0 if test_acc >= mc.REQUIRED_TEST_ACCURACY else 1


if __name__ == "__main__":
    sys.exit(main())
