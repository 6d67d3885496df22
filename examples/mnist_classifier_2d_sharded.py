"""MNIST on 8 IPUs with data x model parallelism: a ``jax.jit`` over a 4 x 2 mesh, partitioned as XLA partitions it.

The model and optimiser are mnist_classifier.py's (MLP 784-1024-1024-10, momentum SGD). Nothing here is written per
device: the arrays carry ``NamedSharding``s over a ``Mesh`` of the IPUs with axes ``data`` (4) and ``model`` (2),
and ``jax.jit`` partitions the training step. Every weight matrix and bias is split in two along ``model`` (the
first layer's columns, the next layers' rows: Megatron's pairing), so each IPU holds half of each; each batch is
split in four along ``data``. The partitioned program sends over the IPU-Links only what the shardings need
(all-reduces of partial products and of gradients). The optimiser state keeps the parameters' shardings and is
donated, so it stays in the IPUs' SRAM.

The per-IPU memory of the step comes from the profile reports of the sharded program and of the same step jitted
on one IPU (the replicated program).

    python mnist_classifier_2d_sharded.py [--short]

Prints ``epoch N time_s T train_acc A test_acc B`` per epoch and ``RESULT ...`` lines: the devices, the sharding of
each weight, the per-IPU bytes of the step's inputs and of its tile memory (sharded and replicated), and the test
accuracy. Stated accuracy: test accuracy >= 0.90.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
import time

os.environ.setdefault("JAX_IPU_DEVICE_COUNT", "8")  # before jax is imported
os.environ.setdefault("JAX_PLATFORMS", "cpu,ipu")
os.environ.setdefault("JAX_PLATFORM_NAME", "cpu")
REPORTS = tempfile.mkdtemp(prefix="jax-ipu-2d-reports-")
atexit.register(shutil.rmtree, REPORTS, True)  # read as the run goes; nothing to keep after it
# The graph profiles of the programs compiled from here on (memory per tile; nothing is added to a step's run).
os.environ.setdefault("POPLAR_ENGINE_OPTIONS", json.dumps({"autoReport.outputGraphProfile": "true",
                                                           "autoReport.directory": REPORTS}))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _data  # noqa: E402
import jax  # noqa: E402
import mnist_classifier as mc  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402
from tqdm import tqdm  # noqa: E402

# Per layer, (weight, bias): the first layer split by output features, the next ones by input features.
LAYER_SPECS = [(P(None, "model"), P("model")), (P("model", None), P("model")), (P("model", None), P("model"))]


def profile(name):
    """The graph profile jax_ipu wrote for the program ``name`` (the first of that name)."""
    path = os.path.join(REPORTS, name, "profile.json")
    if not os.path.exists(path):
        raise SystemExit(f"no profile report for {name} under {REPORTS} (is POPLAR_ENGINE_OPTIONS set elsewhere?)")
    with open(path) as f:
        return json.load(f)


def per_ipu_bytes(report):
    """(bytes of the step's inputs on one IPU, bytes of its tile memory)."""
    return sum(i["bytes"] for i in report["host"]["inputs"]), report["memory"]["total_bytes"]


def main(argv=None):
    parser = mc.parser(__doc__.splitlines()[0], batch_help="the global batch, split over the data axis")
    args = parser.parse_args(argv)
    devices = jax.devices("ipu")[:8]
    if len(devices) < 8 or args.batch_size % 4:
        raise SystemExit(f"need 8 ipu devices (got {len(devices)}; set JAX_IPU_DEVICE_COUNT) and a batch size "
                         f"divisible by 4 (got {args.batch_size})")
    mesh = Mesh(np.array(devices).reshape(4, 2), ("data", "model"))
    data, epochs, step_size = mc.load(args, short_epochs=3)
    opt_init, opt_update = mc.momentum_sgd(step_size, args.momentum)

    param_shardings = [tuple(NamedSharding(mesh, s) for s in layer) for layer in LAYER_SPECS]
    state_shardings = (param_shardings, param_shardings)
    batch_sharding = NamedSharding(mesh, P("data", None))

    def train_step(opt_state, batch):
        grads = jax.grad(mc.loss)(opt_state[0], batch)
        return opt_update(grads, opt_state)

    sharded_step = jax.jit(train_step, donate_argnums=(0,), out_shardings=state_shardings)
    opt_state = jax.device_put(opt_init(mc.init_params(jax.random.PRNGKey(0))), state_shardings)
    rng = np.random.RandomState(0)
    steps = len(data.train_labels) // args.batch_size
    progress = tqdm(total=steps * epochs, unit="step", disable=None if steps * epochs > 50 else True)
    for epoch in range(epochs):
        start = time.perf_counter()
        for batch in _data.batches(data.train_images, data.train_labels, args.batch_size, rng):
            opt_state = sharded_step(opt_state, jax.device_put(batch, batch_sharding))
            progress.update()
        jax.block_until_ready(opt_state)
        epoch_time = time.perf_counter() - start
        params = jax.device_get(opt_state[0])  # evaluated on ipu 0, as the other MNIST examples do
        train_acc = mc.accuracy(params, data.train_images, data.train_labels)
        test_acc = mc.accuracy(params, data.test_images, data.test_labels)
        progress.write(f"epoch {epoch + 1} time_s {epoch_time:.2f} train_acc {train_acc:.4f} test_acc {test_acc:.4f}")
    progress.close()

    # The same step on one IPU (every array whole): compiled only, for its profile report.
    images, targets = next(_data.batches(data.train_images, data.train_labels, args.batch_size, rng))

    def replicated_step(opt_state, batch):
        return train_step(opt_state, batch)

    jax.jit(replicated_step, backend="ipu").lower(jax.device_get(opt_state), (images, targets)).compile()
    sharded, replicated = per_ipu_bytes(profile("jit_train_step")), per_ipu_bytes(profile("jit_replicated_step"))

    weights = opt_state[0]
    print(f"RESULT dataset {data.name}")
    print(f"RESULT devices {' '.join(f'{d.platform}:{d.id}' for d in devices)} mesh data=4 model=2")
    for index, (w, _bias) in enumerate(weights):
        shard = w.addressable_shards[0].data.shape
        print(f"RESULT layer{index} weight {w.shape[0]}x{w.shape[1]} spec {tuple(w.sharding.spec)} "
              f"per_ipu {shard[0]}x{shard[1]}")
    print(f"RESULT input_bytes_per_ipu {sharded[0]} replicated {replicated[0]} ratio {sharded[0] / replicated[0]:.3f}")
    print(f"RESULT memory_bytes_per_ipu {sharded[1]} replicated {replicated[1]} ratio {sharded[1] / replicated[1]:.3f}")
    print(f"RESULT test_accuracy {test_acc:.4f} required {mc.REQUIRED_TEST_ACCURACY:.2f}")
    return 0 if test_acc >= mc.REQUIRED_TEST_ACCURACY else 1


if __name__ == "__main__":
    sys.exit(main())
