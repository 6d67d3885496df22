"""What the library examples share: each trains one model on the ipu and on the cpu side by side, from the same seed
and on the same batches, and states the accuracy it reaches and how close the two devices stay."""

from __future__ import annotations

import argparse
from typing import Callable, Dict, Tuple

import _data
import jax
import numpy as np

REQUIRED_TEST_ACCURACY = 0.90
REQUIRED_AGREEMENT = 0.01


def arguments(description: str, argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--short", action="store_true", help="a quick run for the examples suite")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--learning-rate", type=float, default=3e-3)
    return p.parse_args(argv)


def data_and_epochs(args: argparse.Namespace) -> Tuple[_data.Dataset, int]:
    """MNIST (its first 6,400 images with --short), else the digits with four times the epochs (11 batches each)."""
    data = _data.load_mnist_or_digits()
    print(f"dataset {data.name} train {len(data.train_labels)} test {len(data.test_labels)}"
          + ("" if data.name == "mnist" else " (MNIST could not be downloaded: scikit-learn's 8x8 digits)"))
    if args.short and data.name == "mnist":
        data = data._replace(train_images=data.train_images[:6400], train_labels=data.train_labels[:6400])
    epochs = args.epochs or (3 if args.short else 6)
    if data.name != "mnist" and not args.epochs:
        epochs *= 4
    return data, epochs


def devices() -> Dict[str, jax.Device]:
    return {"ipu": jax.devices("ipu")[0], "cpu": jax.devices("cpu")[0]}


def labelled_batches(data: _data.Dataset, batch_size: int, rng: np.random.RandomState):
    """One epoch's shuffled batches as (images, integer labels)."""
    for images, one_hot in _data.batches(data.train_images, data.train_labels, batch_size, rng):
        yield images, np.argmax(one_hot, axis=1).astype(np.int32)


def accuracy(predict: Callable, model, images: np.ndarray, labels: np.ndarray, device: jax.Device,
             batch_size: int = 512) -> float:
    """The share of `images` whose predicted class (`predict(model, batch)` on `device`) is the label."""
    correct = 0
    for i in range(0, len(labels), batch_size):
        x = jax.device_put(images[i:i + batch_size], device)
        correct += int(np.sum(np.asarray(predict(model, x)) == labels[i:i + batch_size]))
    return correct / len(labels)


def report(data: _data.Dataset, params, accs: Dict[str, float]) -> int:
    """The RESULT lines (where the ipu model's first array lives, both accuracies); 0 if the stated ones hold."""
    device = next(iter(jax.tree_util.tree_leaves(params)[0].devices()))
    print(f"RESULT dataset {data.name}")
    print(f"RESULT device {device.platform}:{device.id}")
    print(f"RESULT test_accuracy {accs['ipu']:.4f} required {REQUIRED_TEST_ACCURACY:.2f}")
    print(f"RESULT cpu_test_accuracy {accs['cpu']:.4f} difference {abs(accs['ipu'] - accs['cpu']):.4f} "
          f"required {REQUIRED_AGREEMENT:.2f}")
    ok = accs["ipu"] >= REQUIRED_TEST_ACCURACY and abs(accs["ipu"] - accs["cpu"]) <= REQUIRED_AGREEMENT
    return 0 if ok else 1
