"""A Flax NNX classifier trained with Optax on the IPU, and the same training on the cpu, side by side.

What a user of today's JAX stack writes: an ``nnx.Module`` (an MLP 784-256-256-10 with dropout), an
``nnx.Optimizer`` over ``optax.adamw`` with a warmup-cosine schedule and gradient clipping, and an ``@nnx.jit``
train step. The model is built on the cpu (the default backend here); ``nnx.update`` moves its state to the IPU, and
from then on every step runs there, because jit follows committed arrays. The same model, from the same seed and on
the same batches, is trained on the cpu too, and the two accuracies are compared.

    python flax_optax_classifier.py           # 6 epochs (MNIST: ~0.97 test accuracy)
    python flax_optax_classifier.py --short   # what the examples suite runs: 3 epochs

Needs flax and optax (examples/requirements-3.12.txt: the current series only; flax's NNX needs jax >= 0.4.27).
Prints ``epoch N ipu_test_acc A cpu_test_acc B`` per epoch and ``RESULT ...`` lines at the end.
Stated result: ipu test accuracy >= 0.90 and within 0.01 of the cpu's.
"""

from __future__ import annotations

import argparse
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
import _data  # noqa: E402

REQUIRED_TEST_ACCURACY = 0.90
REQUIRED_AGREEMENT = 0.01


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


def accuracy(model, images, labels, device, batch_size=512):
    model.eval()
    correct = 0
    for i in range(0, len(labels), batch_size):
        x = jax.device_put(images[i:i + batch_size], device)
        correct += int(np.sum(np.asarray(predict(model, x)) == labels[i:i + batch_size]))
    model.train()
    return correct / len(labels)


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
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--short", action="store_true", help="a quick run for the examples suite")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--learning-rate", type=float, default=3e-3)
    args = p.parse_args(argv)

    data = _data.load_mnist_or_digits()
    print(f"dataset {data.name} train {len(data.train_labels)} test {len(data.test_labels)}"
          + ("" if data.name == "mnist" else " (MNIST could not be downloaded: scikit-learn's 8x8 digits)"))
    if args.short and data.name == "mnist":
        data = data._replace(train_images=data.train_images[:6400], train_labels=data.train_labels[:6400])
    epochs = args.epochs or (3 if args.short else 6)
    if data.name != "mnist" and not args.epochs:
        epochs *= 4  # the digits have 11 batches an epoch: more epochs for as many steps
    steps_per_epoch = len(data.train_labels) // args.batch_size

    ipu, cpu = jax.devices("ipu")[0], jax.devices("cpu")[0]
    runs = {name: build(device, epochs * steps_per_epoch, args) for name, device in (("ipu", ipu), ("cpu", cpu))}
    rng = np.random.RandomState(0)
    for epoch in range(epochs):
        for images, one_hot in _data.batches(data.train_images, data.train_labels, args.batch_size, rng):
            labels = np.argmax(one_hot, axis=1).astype(np.int32)
            for name, device in (("ipu", ipu), ("cpu", cpu)):
                model, optimizer = runs[name]
                train_step(model, optimizer, jax.device_put(images, device), jax.device_put(labels, device))
        accs = {name: accuracy(runs[name][0], data.test_images, data.test_labels, device)
                for name, device in (("ipu", ipu), ("cpu", cpu))}
        print(f"epoch {epoch + 1} ipu_test_acc {accs['ipu']:.4f} cpu_test_acc {accs['cpu']:.4f}")

    device = next(iter(jax.tree_util.tree_leaves(nnx.state(runs["ipu"][0]))[0].devices()))
    print(f"RESULT dataset {data.name}")
    print(f"RESULT device {device.platform}:{device.id}")
    print(f"RESULT test_accuracy {accs['ipu']:.4f} required {REQUIRED_TEST_ACCURACY:.2f}")
    print(f"RESULT cpu_test_accuracy {accs['cpu']:.4f} difference {abs(accs['ipu'] - accs['cpu']):.4f} "
          f"required {REQUIRED_AGREEMENT:.2f}")
    ok = accs["ipu"] >= REQUIRED_TEST_ACCURACY and abs(accs["ipu"] - accs["cpu"]) <= REQUIRED_AGREEMENT
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
