"""A Flax NNX classifier trained with Optax on the IPU, and the same training on the cpu, side by side.

What a user of today's JAX stack writes: an ``nnx.Module`` (an MLP 784-256-256-10 with dropout), an
``nnx.Optimizer`` over ``optax.adamw`` with a warmup-cosine schedule and gradient clipping, and an ``@nnx.jit``
train step. The model is built on the cpu (the default backend here); ``nnx.update`` moves its state to the IPU, and
from then on every step runs there, because jit follows committed arrays. The same model, from the same seed and on
the same batches, is trained on the cpu too, and the two accuracies are compared.

    python flax_optax_classifier.py           # 6 epochs (MNIST: ~0.97 test accuracy)
    python flax_optax_classifier.py --short   # what the examples suite runs: 3 epochs

Needs flax and optax (examples/requirements-3.12.txt: the current series only; flax's NNX needs jax >= 0.4.27).
Each epoch prints the test accuracy of both (``epoch N ipu_test_acc A cpu_test_acc B``); ``RESULT ...`` lines close
the run. It states: an ipu test accuracy of at least 0.90, within 0.01 of the cpu's (_side_by_side.py).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu,ipu")
os.environ.setdefault("JAX_PLATFORM_NAME", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _side_by_side as sbs  # noqa: E402


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, sizes=(784, 256, 256, 10), dropout=0.1):
        self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in zip(sizes[:-1], sizes[1:])])
        self.dropout = nnx.Dropout(dropout, rngs=rngs)

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = self.dropout(nnx.gelu(layer(x)))
        return self.layers[-1](x)


def loss_fn(model, images, labels):
    logits = model(images)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


@nnx.jit
def train_step(model, optimizer, images, labels):
    loss, grads = nnx.value_and_grad(loss_fn)(model, images, labels)
    optimizer.update(model, grads)
    return loss


@nnx.jit
def predict(model, images):
    return jnp.argmax(model(images), axis=-1)


def build(device, steps, args):
    """The model and its optimiser, from the same seed whatever the device, with their state on `device`."""
    with jax.default_device(jax.devices("cpu")[0]):
        model = MLP(nnx.Rngs(params=0, dropout=1))
    nnx.update(model, jax.device_put(nnx.state(model), device))
    schedule = optax.warmup_cosine_decay_schedule(0.0, args.learning_rate, max(1, steps // 10), steps)
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=1e-4))
    with jax.default_device(device):
        optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    return model, optimizer


def main(argv=None):
    args = sbs.arguments(__doc__.splitlines()[0], argv)
    data, epochs = sbs.data_and_epochs(args)
    devices = sbs.devices()
    steps = epochs * (len(data.train_labels) // args.batch_size)
    runs = {name: build(device, steps, args) for name, device in devices.items()}
    rng = np.random.RandomState(0)
    for epoch in range(epochs):
        for images, labels in sbs.labelled_batches(data, args.batch_size, rng):
            for name, device in devices.items():
                model, optimizer = runs[name]
                train_step(model, optimizer, jax.device_put(images, device), jax.device_put(labels, device))
        accs = {}
        for name, device in devices.items():
            model = runs[name][0]
            model.eval()  # no dropout
            accs[name] = sbs.accuracy(predict, model, data.test_images, data.test_labels, device)
            model.train()
        print(f"epoch {epoch + 1} ipu_test_acc {accs['ipu']:.4f} cpu_test_acc {accs['cpu']:.4f}")
    return sbs.report(data, nnx.state(runs["ipu"][0]), accs)


if __name__ == "__main__":
    sys.exit(main())
