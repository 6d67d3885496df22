"""Datasets for the examples: MNIST when it can be downloaded, else scikit-learn's 8x8 digits.

MNIST's IDX files come from a pinned mirror, are checked against their sha256 and cached under
``~/.cache/jax-ipu/mnist`` (``JAX_IPU_EXAMPLES_CACHE`` overrides the directory). The download gives up after a short
timeout so that a machine with no network falls back at once instead of hanging; ``JAX_IPU_EXAMPLES_OFFLINE=1``
skips the attempt. The fallback is a real dataset shipped inside scikit-learn's wheel (1,797 handwritten digits,
UCI "Optical Recognition of Handwritten Digits"), its 8x8 images upscaled 3x and padded to MNIST's 28x28 so that the
same 784-input models run on it. Every loader returns a ``Dataset`` whose ``name`` the examples print.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import struct
import urllib.request
from typing import NamedTuple, Optional

import numpy as np

MNIST_MIRRORS = ("https://storage.googleapis.com/cvdf-datasets/mnist/",
                 "https://ossci-datasets.s3.amazonaws.com/mnist/")
MNIST_FILES = {  # file: sha256 (the published digests of the original archives)
    "train-images-idx3-ubyte.gz": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    "train-labels-idx1-ubyte.gz": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    "t10k-images-idx3-ubyte.gz": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    "t10k-labels-idx1-ubyte.gz": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}
TIMEOUT_S = 5.0


class Dataset(NamedTuple):
    name: str  # what the examples print: "mnist" or "sklearn-digits"
    train_images: np.ndarray  # (n, 784) float32 in [0, 1]
    train_labels: np.ndarray  # (n,) int32
    test_images: np.ndarray
    test_labels: np.ndarray


def cache_dir() -> str:
    return os.environ.get("JAX_IPU_EXAMPLES_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "jax-ipu"))


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _fetch(name: str, directory: str) -> str:
    """The verified local copy of one MNIST file, downloaded if missing. Raises OSError when no mirror gives it."""
    path = os.path.join(directory, name)
    if os.path.exists(path) and _sha256(path) == MNIST_FILES[name]:
        return path
    errors = []
    for mirror in MNIST_MIRRORS:
        try:
            with urllib.request.urlopen(mirror + name, timeout=TIMEOUT_S) as response:
                data = response.read()
        except Exception as e:  # URLError, timeouts, HTTP errors: try the next mirror
            errors.append(f"{mirror}: {e}")
            continue
        if hashlib.sha256(data).hexdigest() != MNIST_FILES[name]:
            errors.append(f"{mirror}: sha256 mismatch")
            continue
        os.makedirs(directory, exist_ok=True)
        tmp = path + ".part"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return path
    raise OSError(f"could not download {name}: " + "; ".join(errors))


def _read_idx(path: str) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"{path} is not an IDX file of unsigned bytes")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def _mnist() -> Optional[Dataset]:
    if os.environ.get("JAX_IPU_EXAMPLES_OFFLINE", "") not in ("", "0"):
        return None
    directory = os.path.join(cache_dir(), "mnist")
    try:
        paths = {name: _fetch(name, directory) for name in MNIST_FILES}
    except OSError:
        return None
    images = {k: _read_idx(paths[f"{k}-images-idx3-ubyte.gz"]).reshape(-1, 784).astype(np.float32) / 255.0
              for k in ("train", "t10k")}
    labels = {k: _read_idx(paths[f"{k}-labels-idx1-ubyte.gz"]).astype(np.int32) for k in ("train", "t10k")}
    return Dataset("mnist", images["train"], labels["train"], images["t10k"], labels["t10k"])


def _digits(test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    from sklearn.datasets import load_digits

    digits = load_digits()
    # 8x8 images with values 0..16: each pixel becomes 3x3 (24x24), padded by 2 to 28x28 (MNIST centres its digits
    # in a 20x20 box inside 28x28 in the same way).
    images = digits.images.astype(np.float32) / 16.0
    images = np.kron(images, np.ones((3, 3), np.float32))
    images = np.pad(images, ((0, 0), (2, 2), (2, 2))).reshape(-1, 784)
    labels = digits.target.astype(np.int32)
    order = np.random.RandomState(seed).permutation(len(labels))
    n_test = int(len(labels) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return Dataset("sklearn-digits", images[train], labels[train], images[test], labels[test])


def load_mnist_or_digits() -> Dataset:
    """MNIST if it is cached or can be downloaded, else scikit-learn's digits (the examples print which)."""
    return _mnist() or _digits()


def one_hot(labels: np.ndarray, classes: int = 10) -> np.ndarray:
    return (labels[:, None] == np.arange(classes)).astype(np.float32)


def batches(images: np.ndarray, labels: np.ndarray, batch_size: int, rng: np.random.RandomState):
    """Shuffled full batches of (images, one-hot labels) for one epoch (the remainder is dropped, so that one
    compiled program serves every step)."""
    order = rng.permutation(len(labels))
    for i in range(len(labels) // batch_size):
        idx = order[i * batch_size:(i + 1) * batch_size]
        yield images[idx], one_hot(labels[idx])
