"""build_tools/pins.toml is complete, is the only place sums live, and every download is verified."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from build_tools import fetch
from build_tools.pins import Pins, Series

REPO = Path(__file__).resolve().parents[2]


def test_series_fields(pins: Pins, series: Series) -> None:
    assert re.fullmatch(r"[a-z0-9]+(\.[a-z0-9]+)*", pins.label), "label must be a PEP 440 local version segment"
    assert "ipu" in pins.label
    assert re.fullmatch(r"3\.\d+", series.python)
    assert series.platform_tag.startswith("manylinux")
    for artifact in series.artifacts:
        assert re.fullmatch(r"[0-9a-f]{64}", artifact.sha256), artifact.filename
        assert artifact.version in artifact.filename
        assert artifact.filename.replace("_", "-").startswith(artifact.package.replace("_", "-") + "-")
    assert series.jaxlib.filename.split("-")[2] == series.python_tag


@pytest.mark.parametrize("key", ["jax", "jaxlib", "pjrt_header"])
def test_cached_download_matches_pin(series: Series, key: str) -> None:
    artifact = getattr(series, key)
    path = fetch.fetch(artifact)  # verifies the sum (downloads first on an empty cache)
    assert fetch.sha256_of(path) == artifact.sha256


def test_mismatch_names_file_sums_and_fix(series: Series, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAX_IPU_CACHE", str(tmp_path))
    bogus = tmp_path / "downloads" / series.jax.filename
    bogus.parent.mkdir(parents=True)
    bogus.write_bytes(b"not the sdist")
    with pytest.raises(fetch.FetchError) as info:
        fetch.fetch(series.jax)
    message = str(info.value)
    assert series.jax.filename in message
    assert series.jax.sha256 in message
    assert fetch.sha256_of(bogus) in message
    assert "rm " in message and "pins.toml" in message


def test_wheel_download_asks_pip_for_the_pinned_tags(series: Series) -> None:
    args = fetch._pip_download_args(series.jaxlib)
    assert ["--python-version", series.python] == args[args.index("--python-version"):][:2]
    assert "manylinux2014_x86_64" in args and "--only-binary" in args
    assert "--no-binary" in fetch._pip_download_args(series.jax)


@pytest.mark.parametrize("file, tools", [("requirements.txt", ("ziglang", "auditwheel", "pytest")),
                                         ("lint-requirements.txt", ("ruff", "mypy")),
                                         ("test-requirements.txt", ("pytest", "ziglang")),
                                         ("release-requirements.txt", ("cibuildwheel",)),
                                         ("upstream-test-requirements.txt", ("pytest",))])
def test_build_tools_are_hash_locked_at_pinned_versions(pins: Pins, file: str, tools: tuple) -> None:
    text = (REPO / "build_tools" / file).read_text()
    pattern = r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)[^\n]*\\\n\s+--hash=sha256:[0-9a-f]{64}"
    requirements = re.findall(pattern, text, flags=re.M)
    plain = [ln for ln in text.splitlines() if ln and not ln.startswith(("#", " ")) and "\\" not in ln]
    assert not plain, f"{file}: requirements without --hash: {plain}"
    versions = dict(requirements)
    for tool in tools:
        assert versions.get(tool) == pins.tools[tool], f"{tool}: {file} and pins.toml disagree"


def test_sums_live_only_in_pins_toml(series: Series) -> None:
    offenders = []
    for path in [REPO / "noxfile.py", REPO / ".ci" / "run", *REPO.glob("docker/*"), *REPO.glob(".github/**/*.yml"),
                 *REPO.glob("build_tools/*.py")]:
        if path.is_file():
            text = path.read_text(errors="replace")
            offenders += [f"{path.relative_to(REPO)}: {a.filename}" for a in series.artifacts if a.sha256 in text]
    assert not offenders
