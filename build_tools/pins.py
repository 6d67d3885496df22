"""Reads build_tools/pins.toml, the one source of truth for upstream artifacts, tool versions and the version label.

Usable as a module (``from build_tools.pins import load``) and as a script for shell and workflows:

    python build_tools/pins.py get tools.nox               # prints 2024.10.9
    python build_tools/pins.py get series.0.4.13.python    # dotted path; series keys may contain dots
    python build_tools/pins.py pythons                     # every series' Python: 3.8, 3.12
    python build_tools/pins.py github-output >> "$GITHUB_OUTPUT"
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Any, Dict, List

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.8 (docker/): tomli is in build_tools/requirements.txt
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
PINS_FILE = REPO / "build_tools" / "pins.toml"


@dataclasses.dataclass(frozen=True)
class Artifact:
    """One upstream file, fetched from PyPI and verified by sha256 before use."""

    key: str  # "jax", "jaxlib", "pjrt_header"
    package: str
    version: str
    filename: str
    sha256: str
    extra: Dict[str, Any]

    @property
    def is_sdist(self) -> bool:
        return self.filename.endswith((".tar.gz", ".zip"))


@dataclasses.dataclass(frozen=True)
class Series:
    """Everything one jaxlib series needs: its artifacts, Python version and portability target."""

    name: str
    python: str
    glibc: str
    platform_tag: str
    jax: Artifact
    jaxlib: Artifact
    pjrt_header: Artifact
    # "jaxlib": our package and library inside the jaxlib wheel (0.4.13); "plugin": a jax-ipu-plugin wheel of
    # their own, found by jax's `jax_plugins` entry point (the current series).
    packaging: str = "jaxlib"

    @property
    def artifacts(self) -> List[Artifact]:
        return [self.jax, self.jaxlib, self.pjrt_header]

    @property
    def python_tag(self) -> str:
        return "cp" + self.python.replace(".", "")


@dataclasses.dataclass(frozen=True)
class Pins:
    label: str
    default_series: str
    tools: Dict[str, str]
    docker: Dict[str, str]
    series: Dict[str, Series]
    raw: Dict[str, Any]

    def get_series(self, name: str | None = None) -> Series:
        name = name or self.default_series
        if name not in self.series:
            raise KeyError(f"no series {name!r} in {PINS_FILE}; known: {', '.join(sorted(self.series))}")
        return self.series[name]

    def all_series(self) -> List[Series]:
        """Every series, in pins.toml's order (the default first)."""
        return sorted(self.series.values(), key=lambda s: s.name != self.default_series)

    def labelled(self, version: str) -> str:
        return f"{version}+{self.label}"


_ARTIFACT_FIELDS = ("package", "version", "filename", "sha256")


def _artifact(series: str, key: str, table: Dict[str, Any]) -> Artifact:
    missing = [f for f in _ARTIFACT_FIELDS if f not in table]
    if missing:
        raise ValueError(f"{PINS_FILE}: [series.\"{series}\".{key}] lacks {', '.join(missing)}")
    extra = {k: v for k, v in table.items() if k not in _ARTIFACT_FIELDS}
    return Artifact(key, table["package"], table["version"], table["filename"], table["sha256"].lower(), extra)


def load(path: Path = PINS_FILE) -> Pins:
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    series = {}
    for name, table in raw["series"].items():
        series[name] = Series(
            name=name,
            python=table["python"],
            glibc=table["glibc"],
            platform_tag=table["platform_tag"],
            jax=_artifact(name, "jax", table["jax"]),
            jaxlib=_artifact(name, "jaxlib", table["jaxlib"]),
            pjrt_header=_artifact(name, "pjrt_header", table["pjrt_header"]),
            packaging=table.get("packaging", "jaxlib"),
        )
    project = raw["project"]
    return Pins(project["label"], project["default_series"], dict(raw["tools"]), dict(raw["docker"]), series, raw)


def lookup(raw: Dict[str, Any], dotted: str) -> Any:
    """Resolves a dotted path; keys that themselves contain dots (series versions) are matched greedily."""
    node: Any = raw
    parts = dotted.split(".")
    while parts:
        for n in range(len(parts), 0, -1):
            key = ".".join(parts[:n])
            if isinstance(node, dict) and key in node:
                node = node[key]
                parts = parts[n:]
                break
        else:
            raise KeyError(f"{dotted!r} not found in {PINS_FILE}")
    return node


def _locked_tag(series, distribution: str) -> str:
    """v<version> of ``distribution`` in the series' ecosystem lock (nox -s ecosystem_tests): the tag of its
    repository whose tests run (equinox ships none on the registry)."""
    suffix = "" if series.name == load().default_series else f"-{series.python}"  # as noxfile._lock names them
    text = (REPO / "build_tools" / f"ecosystem-requirements{suffix}.txt").read_text(encoding="utf-8")
    found = re.search(rf"^{re.escape(distribution)}==(\S+)", text, re.M)
    if not found:
        raise KeyError(f"build_tools/ecosystem-requirements{suffix}.txt pins no {distribution}")
    return f"v{found.group(1)}"


def github_output(pins: Pins) -> str:
    s = pins.get_series()
    lines = {
        "label": pins.label,
        "series": s.name,
        "python": s.python,
        # The other series' Python (the current series: 3.12); the workflows install it next to the default's.
        "current_python": " ".join(x.python for x in pins.all_series() if x.name != s.name),
        "current_series": " ".join(x.name for x in pins.all_series() if x.name != s.name),  # its dist/<series>/
        "nox": pins.tools["nox"],
        "host_python": pins.tools["host_python"],
        "cibuildwheel": pins.tools["cibuildwheel"],
        "jax_tag": f"jax-v{s.jax.version}",  # the jax source tag whose tests/ nox -s upstream_tests runs
        "current_jax_tag": " ".join(f"jax-v{x.jax.version}" for x in pins.all_series() if x.name != s.name),
        "equinox_tag": _locked_tag(s, "equinox"),  # the equinox tag whose tests/ nox -s ecosystem_tests runs
        "current_equinox_tag": " ".join(_locked_tag(x, "equinox") for x in pins.all_series() if x.name != s.name),
        "base_image": pins.docker["base_image"],
        "cache_key": "jax-ipu-" + "-".join(a.sha256[:12] for a in s.artifacts),
    }
    return "".join(f"{k}={v}\n" for k, v in lines.items())


def main(argv: List[str]) -> int:
    pins = load()
    if len(argv) == 2 and argv[0] == "get":
        value = lookup(pins.raw, argv[1].replace("default_series", pins.default_series))
        print(value if not isinstance(value, (dict, list)) else repr(value))
        return 0
    if argv == ["pythons"]:  # every series' Python, one per line (.ci/run)
        print("\n".join(s.python for s in pins.all_series()))
        return 0
    if argv == ["github-output"]:
        sys.stdout.write(github_output(pins))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
