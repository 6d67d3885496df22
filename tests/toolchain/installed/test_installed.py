"""Runs in a fresh venv of a series' Python where only `pip install <its wheels> pytest` happened, from outside the
source tree."""

from __future__ import annotations

import importlib.util
import os
import re
import site
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _pinned(key: str) -> str:
    # Python 3.8 has no tomllib; these two keys are simple strings in pins.toml.
    match = re.search(rf'^{key} = "([^"]+)"', (REPO / "build_tools" / "pins.toml").read_text(), flags=re.M)
    assert match, key
    return match.group(1)


def _series_names() -> list:
    return re.findall(r'^\[series\."([^"]+)"\]$', (REPO / "build_tools" / "pins.toml").read_text(), flags=re.M)


def _installed_series() -> str:
    """The series whose wheels this venv holds: the one whose version the installed jaxlib carries."""
    from importlib import metadata

    public = metadata.version("jaxlib").split("+")[0]
    assert public in _series_names(), f"jaxlib {public} is none of the pinned series {_series_names()}"
    return public


SERIES = _installed_series()
LABELLED = "{}+{}".format(SERIES, _pinned("label"))
# The current series ships the backend as a plugin wheel of its own (pins.toml: packaging = "plugin").
PLUGIN_WHEEL = SERIES != _pinned("default_series")


def _is_installed(path: str) -> bool:
    """In this interpreter's site-packages (the nox venv may itself live inside the repository)."""
    resolved = str(Path(path).resolve())
    return any(resolved.startswith(str(Path(d).resolve()) + os.sep) for d in site.getsitepackages())


def test_import_jax_and_versions() -> None:
    import jax
    import jaxlib.version
    from jax._src import lib

    # upstream's versions at run time, parseable as integers (flax 0.5.3 parses jax's so); pip sees the label
    public = LABELLED.split("+")[0]
    assert jax.__version__ == jaxlib.version.__version__ == public
    upstream = tuple(map(int, jax.version.__version__.split(".")))
    assert jax.__version_info__ == upstream
    assert lib.version == upstream  # jax's own jaxlib version check


def test_distribution_metadata() -> None:
    from importlib import metadata

    assert metadata.version("jax") == LABELLED
    assert metadata.version("jaxlib") == LABELLED


def test_packages_come_from_the_installed_wheels() -> None:
    from importlib import metadata

    for name in ("jax", "jaxlib", "jax_ipu"):
        spec = importlib.util.find_spec(name)
        assert spec and spec.origin and _is_installed(spec.origin), f"{name} imported from {spec and spec.origin}"
    if PLUGIN_WHEEL:  # jax finds the backend by the plugin wheel's entry point
        assert metadata.version("jax-ipu-plugin") == LABELLED
        points = [e for e in metadata.entry_points(group="jax_plugins") if e.name == "ipu"]
        assert [e.value for e in points] == ["jax_ipu.backend.plugin"]
        assert metadata.distribution("jax-ipu-plugin").read_text("WHEEL").count("Tag: py3-none-manylinux_2_27_x86_64")
        return
    plugins = importlib.util.find_spec("jax_plugins")
    assert plugins and plugins.origin in (None, "namespace"), "jax_plugins must be a namespace package"
    assert importlib.util.find_spec("jax_plugins.ipu") is not None


def test_native_library_is_installed() -> None:
    spec = importlib.util.find_spec("jax_ipu")
    assert spec and spec.submodule_search_locations
    lib = Path(list(spec.submodule_search_locations)[0]) / "lib" / "libjax_ipu.so"
    assert lib.is_file() and lib.stat().st_size > 0


def test_donation_lists_ipu() -> None:
    import jax
    from jax._src.interpreters import mlir

    jax.devices("ipu")  # the current series initialises plugins at the first use of a backend

    assert "ipu" in mlir._platforms_with_donation and "cpu" in mlir._platforms_with_donation


def test_cpu_still_works() -> None:
    import jax
    import jax.numpy as jnp

    out = jax.jit(lambda x: x * 2, backend="cpu")(jnp.arange(3))
    assert out.tolist() == [0, 2, 4]

# The README's example itself runs in tests/backend/test_seed_example.py.
