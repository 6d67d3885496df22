"""Each patch series applies cleanly to its pristine pinned source, and says what, why and when to drop."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from build_tools import patches
from build_tools.pins import Pins, Series


@pytest.fixture(scope="module")
def patched(series: Series, tmp_path_factory: pytest.TempPathFactory) -> dict:
    trees = {}
    for artifact in (series.jax, series.jaxlib):
        tree = patches.extract_pristine(artifact, tmp_path_factory.mktemp(artifact.package) / "tree")
        patches.apply_series(artifact, tree)
        trees[artifact.package] = tree
    return trees


@pytest.mark.parametrize("project", ["jax", "jaxlib"])
def test_series_applies_cleanly(series: Series, project: str, tmp_path: Path) -> None:
    artifact = getattr(series, project)
    tree = patches.extract_pristine(artifact, tmp_path / "tree")
    applied = patches.apply_series(artifact, tree)
    # jax's wheel label is a patch of its setup.py; jaxlib is relabelled in its wheel's metadata, unpatched
    assert bool(applied) == (project == "jax"), f"patches/{project}/{artifact.version}/series: {applied}"


@pytest.mark.parametrize("project", ["jax", "jaxlib"])
def test_patch_headers(series: Series, project: str) -> None:
    assert patches.check_headers(getattr(series, project)) == []


def _namespace_of(version_py: Path) -> dict:
    namespace: dict = {}
    exec(compile(version_py.read_text(), str(version_py), "exec"), namespace)
    return namespace


@pytest.mark.parametrize("project", ["jax", "jaxlib"])
def test_versions_stay_upstreams_and_the_jax_wheel_is_labelled(pins: Pins, series: Series, patched: dict,
                                                               project: str) -> None:
    """`<project>.__version__` is upstream's: libraries parse it as dot-separated integers (flax 0.5.3:
    ``tuple(map(int, jax.version.__version__.split('.')))``). The label is the wheels': jax's setup.py adds it."""
    ns = _namespace_of(patched[project] / project / "version.py")
    upstream = getattr(series, project).version
    assert ns["__version__"] == upstream
    assert tuple(map(int, ns["__version__"].split("."))) == ns["__version_info__"]
    assert ns["_minimum_jaxlib_version_info"] <= ns["__version_info__"]
    if project == "jax":
        assert f"+{pins.label}'" in (patched[project] / "setup.py").read_text()


def test_donation_keeps_upstream_platforms(patched: dict) -> None:
    text = (patched["jax"] / "jax/_src/interpreters/mlir.py").read_text()
    platforms = re.search(r"^_platforms_with_donation = (\[.*\])$", text, flags=re.M)
    assert platforms and eval(platforms.group(1)) == ["cpu", "cuda", "rocm", "tpu", "ipu"]


def test_test_util_is_upstreams(patched: dict) -> None:
    # nox -s upstream_tests compares the ipu run of JAX's tests with the cpu run test by test: both must generate the
    # same parameterised cases, so supported_dtypes() has no ipu branch (64-bit and complex cases are listed with
    # their reasons in tests/upstream/expectations.txt instead).
    text = (patched["jax"] / "jax/_src/test_util.py").read_text()
    assert 'device_under_test() == "iree"' in text and 'device_under_test() == "ipu"' not in text
