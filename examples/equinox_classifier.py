"""An Equinox CNN trained with Optax on the IPU, and the same training on the cpu, side by side.

What an Equinox user writes: an ``eqx.Module`` (two ``eqx.nn.Conv2d`` layers, max pooling, then an ``eqx.nn.MLP``),
``eqx.filter_value_and_grad`` and ``eqx.filter_jit`` with ``optax.adam``. A model is a PyTree: ``jax.device_put``
of its arrays (``eqx.partition``) moves it to the IPU, and from then on every step runs there, because jit follows
committed arrays. The same model, from the same key and on the same batches, is trained on the cpu too, and the two
accuracies are compared.

    python equinox_classifier.py           # 6 epochs (MNIST: ~0.98 test accuracy)
    python equinox_classifier.py --short   # what the examples suite runs: 3 epochs

Needs equinox and optax (examples/requirements-3.12.txt: the current series only).
Prints ``epoch N ipu_test_acc A cpu_test_acc B`` per epoch and ``RESULT ...`` lines at the end.
Stated result: ipu test accuracy >= 0.90 and within 0.01 of the cpu's.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu,ipu")
os.environ.setdefault("JAX_PLATFORM_NAME", "cpu")

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _data  # noqa: E402

REQUIRED_TEST_ACCURACY = 0.90
REQUIRED_AGREEMENT = 0.01


class CNN(eqx.Module):
    convs: list
    pool: eqx.nn.MaxPool2d
    head: eqx.nn.MLP

    def __init__(self, key):
        k1, k2, k3 = jax.random.split(key, 3)
        self.convs = [eqx.nn.Conv2d(1, 8, 3, padding=1, key=k1), eqx.nn.Conv2d(8, 16, 3, padding=1, key=k2)]
        self.pool = eqx.nn.MaxPool2d(2, stride=2)
        self.head = eqx.nn.MLP(16 * 7 * 7, 10, width_size=64, depth=1, activation=jax.nn.relu, key=k3)

    def __call__(self, image):  # one image, (784,) -> logits (10,)
        x = image.reshape(1, 28, 28)
        for conv in self.convs:
            x = self.pool(jax.nn.relu(conv(x)))
        return self.head(x.reshape(-1))


def loss_fn(model, images, labels):
    logits = jax.vmap(model)(images)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


@eqx.filter_jit
def train_step(model, opt_state, images, labels, optimiser):
    loss, grads = eqx.filter_value_and_grad(loss_fn)(model, images, labels)
    updates, opt_state = optimiser.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss


@eqx.filter_jit
def predict(model, images):
    return jnp.argmax(jax.vmap(model)(images), axis=-1)


def accuracy(model, images, labels, device, batch_size=512):
    correct = 0
    for i in range(0, len(labels), batch_size):
        x = jax.device_put(images[i:i + batch_size], device)
        correct += int(np.sum(np.asarray(predict(model, x)) == labels[i:i + batch_size]))
    return correct / len(labels)


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

    optimiser = optax.adam(args.learning_rate)
    with jax.default_device(jax.devices("cpu")[0]):
        model = CNN(jax.random.PRNGKey(0))
    devices = {"ipu": jax.devices("ipu")[0], "cpu": jax.devices("cpu")[0]}
    runs = {}
    for name, device in devices.items():
        arrays, static = eqx.partition(model, eqx.is_array)
        placed = eqx.combine(jax.device_put(arrays, device), static)
        runs[name] = (placed, optimiser.init(eqx.filter(placed, eqx.is_array)))
    rng = np.random.RandomState(0)
    for epoch in range(epochs):
        for images, one_hot in _data.batches(data.train_images, data.train_labels, args.batch_size, rng):
            labels = np.argmax(one_hot, axis=1).astype(np.int32)
            for name, device in devices.items():
                placed, opt_state = runs[name]
                placed, opt_state, _ = train_step(placed, opt_state, jax.device_put(images, device),
                                                  jax.device_put(labels, device), optimiser)
                runs[name] = (placed, opt_state)
        accs = {name: accuracy(runs[name][0], data.test_images, data.test_labels, device)
                for name, device in devices.items()}
        print(f"epoch {epoch + 1} ipu_test_acc {accs['ipu']:.4f} cpu_test_acc {accs['cpu']:.4f}")

    device = next(iter(jax.tree_util.tree_leaves(eqx.filter(runs["ipu"][0], eqx.is_array))[0].devices()))
    print(f"RESULT dataset {data.name}")
    print(f"RESULT device {device.platform}:{device.id}")
    print(f"RESULT test_accuracy {accs['ipu']:.4f} required {REQUIRED_TEST_ACCURACY:.2f}")
    print(f"RESULT cpu_test_accuracy {accs['cpu']:.4f} difference {abs(accs['ipu'] - accs['cpu']):.4f} "
          f"required {REQUIRED_AGREEMENT:.2f}")
    ok = accs["ipu"] >= REQUIRED_TEST_ACCURACY and abs(accs["ipu"] - accs["cpu"]) <= REQUIRED_AGREEMENT
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
