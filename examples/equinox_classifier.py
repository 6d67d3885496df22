"""An Equinox CNN trained with Optax on the IPU, and the same training on the cpu, side by side.

What an Equinox user writes: an ``eqx.Module`` (two ``eqx.nn.Conv2d`` layers, max pooling, then an ``eqx.nn.MLP``),
``eqx.filter_value_and_grad`` and ``eqx.filter_jit`` with ``optax.adam``. A model is a PyTree: ``jax.device_put``
of its arrays (``eqx.partition``) moves it to the IPU, and from then on every step runs there, because jit follows
committed arrays. The same model, from the same key and on the same batches, is trained on the cpu too, and the two
accuracies are compared.

    python equinox_classifier.py           # 6 epochs (MNIST: ~0.98 test accuracy)
    python equinox_classifier.py --short   # what the examples suite runs: 3 epochs

Needs equinox and optax (examples/requirements-3.12.txt: the current series only).
Stated result (_side_by_side.py): ipu test accuracy >= 0.90 and within 0.01 of the cpu's; ``epoch N ipu_test_acc A
cpu_test_acc B`` lines per epoch, ``RESULT ...`` lines at the end.
"""

from __future__ import annotations

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
import _side_by_side as sbs  # noqa: E402


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


def main(argv=None):
    args = sbs.arguments(__doc__.splitlines()[0], argv)
    data, epochs = sbs.data_and_epochs(args)
    devices = sbs.devices()
    optimiser = optax.adam(args.learning_rate)
    with jax.default_device(devices["cpu"]):
        model = CNN(jax.random.PRNGKey(0))
    runs = {}
    for name, device in devices.items():
        arrays, static = eqx.partition(model, eqx.is_array)
        placed = eqx.combine(jax.device_put(arrays, device), static)
        runs[name] = (placed, optimiser.init(eqx.filter(placed, eqx.is_array)))
    rng = np.random.RandomState(0)
    for epoch in range(epochs):
        for images, labels in sbs.labelled_batches(data, args.batch_size, rng):
            for name, device in devices.items():
                placed, opt_state = runs[name]
                placed, opt_state, _ = train_step(placed, opt_state, jax.device_put(images, device),
                                                  jax.device_put(labels, device), optimiser)
                runs[name] = (placed, opt_state)
        accs = {name: sbs.accuracy(predict, runs[name][0], data.test_images, data.test_labels, device)
                for name, device in devices.items()}
        print(f"epoch {epoch + 1} ipu_test_acc {accs['ipu']:.4f} cpu_test_acc {accs['cpu']:.4f}")
    return sbs.report(data, eqx.filter(runs["ipu"][0], eqx.is_array), accs)


if __name__ == "__main__":
    sys.exit(main())
