"""examples/_data.py: IDX parsing, the sha256-checked download and cache (from a local file:// mirror), the
fallback to scikit-learn's digits, and that a download with no network fails instead of hanging."""

from __future__ import annotations

import gzip
import hashlib
import os
import struct
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "examples"))
import _data  # noqa: E402


def write_idx(path, array: np.ndarray) -> bytes:
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(">" + "I" * array.ndim, *array.shape)
    data = gzip.compress(header + array.astype(np.uint8).tobytes())
    path.write_bytes(data)
    return data


def fake_mirror(tmp_path, monkeypatch):
    """A file:// mirror holding small IDX files under MNIST's names, with their digests pinned."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    rng = np.random.default_rng(0)
    arrays = {"train-images-idx3-ubyte.gz": rng.integers(0, 256, (6, 28, 28)),
              "train-labels-idx1-ubyte.gz": rng.integers(0, 10, (6,)),
              "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (3, 28, 28)),
              "t10k-labels-idx1-ubyte.gz": rng.integers(0, 10, (3,))}
    digests = {name: hashlib.sha256(write_idx(mirror / name, a)).hexdigest() for name, a in arrays.items()}
    monkeypatch.setattr(_data, "MNIST_FILES", digests)
    monkeypatch.setattr(_data, "MNIST_MIRRORS", (mirror.as_uri() + "/",))
    monkeypatch.setenv("JAX_IPU_EXAMPLES_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("JAX_IPU_EXAMPLES_OFFLINE", raising=False)
    return mirror, arrays


def test_download_verifies_caches_and_parses(tmp_path, monkeypatch):
    mirror, arrays = fake_mirror(tmp_path, monkeypatch)
    data = _data.load_mnist_or_digits()
    assert data.name == "mnist"
    np.testing.assert_array_equal(
        data.train_images, (arrays["train-images-idx3-ubyte.gz"].reshape(6, 784) / np.float32(255)).astype(np.float32))
    np.testing.assert_array_equal(data.test_labels, arrays["t10k-labels-idx1-ubyte.gz"])
    assert sorted(os.listdir(tmp_path / "cache" / "mnist")) == sorted(arrays)
    # Cached: the mirror is not needed any more.
    for f in mirror.iterdir():
        f.unlink()
    assert _data.load_mnist_or_digits().name == "mnist"


def test_a_file_with_the_wrong_sha256_is_refused(tmp_path, monkeypatch):
    mirror, _ = fake_mirror(tmp_path, monkeypatch)
    write_idx(mirror / "t10k-labels-idx1-ubyte.gz", np.zeros(3))  # tampered
    with pytest.raises(OSError, match="sha256 mismatch"):
        _data._fetch("t10k-labels-idx1-ubyte.gz", str(tmp_path / "cache"))
    assert _data.load_mnist_or_digits().name == "sklearn-digits"  # and the examples fall back


def test_no_network_falls_back_to_digits(tmp_path, monkeypatch):
    # An address nothing answers on (TEST-NET-1, RFC 5737): the attempt must give up after the short timeout.
    monkeypatch.setattr(_data, "MNIST_MIRRORS", ("http://192.0.2.1/mnist/",))
    monkeypatch.setattr(_data, "TIMEOUT_S", 0.5)
    monkeypatch.setenv("JAX_IPU_EXAMPLES_CACHE", str(tmp_path))
    monkeypatch.delenv("JAX_IPU_EXAMPLES_OFFLINE", raising=False)
    data = _data.load_mnist_or_digits()
    assert data.name == "sklearn-digits"
    assert data.train_images.shape[1] == 784 and data.train_images.dtype == np.float32
    assert 0.0 <= data.train_images.min() and data.train_images.max() <= 1.0
    assert len(data.train_labels) + len(data.test_labels) == 1797 and set(data.train_labels) == set(range(10))
    # The upscaled digits keep the original pixels: 3x3 blocks of the 8x8 image inside a 2-pixel border.
    from sklearn.datasets import load_digits
    digits = load_digits()
    image = data.train_images[0].reshape(28, 28)
    assert np.all(image[:2] == 0) and np.all(image[:, -2:] == 0)
    small = image[2:26:3, 2:26:3] * 16.0
    assert any(np.array_equal(small, d) for d in digits.images[digits.target == data.train_labels[0]])
