"""Each series' release zip installs offline into a fresh venv of its Python (3.8, 3.12) and runs on ipu; its sums
catch a tampered file.

The zips are assembled here from dist/ and dist/<series>/ (`nox -s tests` builds or reuses them first) into a
temporary folder, the same way `nox -s release` does, so these tests always run: about a minute and a half each.
The dependency wheels come from the cache's wheelhouse (filled by the first `nox -s release` or the first run of this
test, like the build's downloads); pip runs with --no-index and no network settings.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import List

import pytest

from build_tools import release
from build_tools.fetch import sha256_of
from build_tools.pins import Pins, Series, load

REPO = Path(__file__).resolve().parents[2]

MATMUL = """
import jax, jax.numpy as jnp, numpy as np
ipu = jax.devices("ipu")[0]
rng = np.random.default_rng(7)
a = rng.standard_normal((64, 48)).astype(np.float32)
b = rng.standard_normal((48, 32)).astype(np.float32)
out = jax.jit(lambda x, y: jnp.tanh(x @ y), device=ipu)(a, b)
assert next(iter(out.devices())) == ipu, out.devices()
np.testing.assert_allclose(np.asarray(out), np.tanh(a @ b), rtol=2e-5, atol=2e-5)
print("matmul ok on", ipu.platform, ipu)
"""


def _python_of(version: str) -> str:
    exe = f"python{version}"
    candidates = [shutil.which(exe)] + sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/{exe}")))
    for c in candidates:
        if c and subprocess.run([c, "-c", "pass"], stderr=subprocess.DEVNULL).returncode == 0:
            return c
    pytest.fail(f"{exe} not found (PATH or pyenv): the release is tested in a fresh Python {version} venv")


@pytest.fixture(scope="module", params=[s.name for s in load().all_series()])
def series(request: pytest.FixtureRequest, pins: Pins) -> Series:
    """Every series in turn (overrides conftest's default series here)."""
    return pins.get_series(request.param)


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory, pins: Pins, series: Series) -> Path:
    built = REPO / "dist" if series.name == pins.default_series else REPO / "dist" / series.name
    version = pins.labelled(series.jax.version)
    ours = sorted(built.glob(f"*-{version}-*.whl"))
    if len(ours) != (3 if series.packaging == "plugin" else 2):
        pytest.fail(f"{built} lacks the {series.name} wheels ({[p.name for p in ours]}); run `nox -s build_wheels`")
    dist = tmp_path_factory.mktemp("dist")
    for w in ours:
        shutil.copy2(w, dist / w.name)
    return release.release(dist, series.name, build_first=False)


def _packages(series: Series) -> List[str]:
    return ["jax", "jaxlib"] + (["jax-ipu-plugin"] if series.packaging == "plugin" else [])


def _unzip(zip_path: Path, dest: Path) -> Path:
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(dest)
        top = {n.split("/", 1)[0] for n in zf.namelist()}
    assert len(top) == 1, f"the zip must hold one folder, holds {sorted(top)}"
    return dest / top.pop()


def test_zip_layout(released: Path, pins: Pins, series: Series, tmp_path: Path) -> None:
    version = pins.labelled(series.jax.version)
    assert released.name == f"jax-ipu-{version}.zip"
    folder = _unzip(released, tmp_path)
    wheels = sorted(p.name for p in folder.glob("*.whl"))
    projects = {release.normalise(w.split("-")[0]) for w in wheels}
    ours = {release.normalise(p) for p in _packages(series)}
    assert ours | {"numpy", "scipy", "ml-dtypes", "opt-einsum"} <= projects
    for w in wheels:  # every wheel is for the target: pure Python, the series' cpXY manylinux, or our plugin
        assert (w.endswith("-py3-none-any.whl") or (f"-{series.python_tag}-" in w and "manylinux" in w)
                or (w.startswith("jax_ipu_plugin-") and "-py3-none-manylinux" in w)), w
    lock = release.read_lock(release.series_lock(series))
    for w in wheels:
        name, ver = release.normalise(w.split("-")[0]), w.split("-")[1]
        if name not in ours:
            assert lock[name][0] == ver and sha256_of(folder / w) in lock[name][1], f"{w} is not the locked wheel"
    listed = re.findall(r"^([0-9a-f]{64})  (.+)$", (folder / "SHA256SUMS").read_text(), flags=re.M)
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                   if p.is_file() and p.name != "SHA256SUMS")
    assert sorted(n for _, n in listed) == files
    links = re.findall(r'<a href="([^"#]+)#sha256=([0-9a-f]{64})">', (folder / "wheels.html").read_text())
    assert sorted(n.replace("%2B", "+") for n, _ in links) == wheels
    # the PEP 503 index (and PEP 691's JSON): every wheel once, under its project, with its sha256
    simple = folder / "simple"
    assert json.loads((simple / "index.json").read_text())["projects"] == [{"name": p} for p in sorted(projects)]
    listed_in_index = []
    for project in sorted(projects):
        assert f'href="{project}/"' in (simple / "index.html").read_text()
        page = re.findall(r'<a href="\.\./\.\./([^"#]+)#sha256=([0-9a-f]{64})"',
                          (simple / project / "index.html").read_text())
        page_json = json.loads((simple / project / "index.json").read_text())
        assert page_json["meta"] == {"api-version": "1.0"} and page_json["name"] == project
        assert [(f["url"], f["hashes"]["sha256"]) for f in page_json["files"]] == [("../../" + n, h) for n, h in page]
        for name, digest in page:
            name = name.replace("%2B", "+")
            assert sha256_of(folder / name) == digest and release.normalise(name.split("-")[0]) == project
            listed_in_index.append(name)
    assert sorted(listed_in_index) == wheels
    licences = folder / "LICENSES"
    for project in projects:
        assert any((licences / project).iterdir()), f"no licence notice for {project}"
    # jaxlib's notices: LICENSE.txt in 0.4.13's dist-info, licenses/LICENSE.txt in the current series' (PEP 639)
    assert any("Apache" in f.read_text() for f in (licences / "jaxlib").rglob("LICENSE*.txt"))
    if series.packaging == "plugin":
        assert "Apache License" in (licences / "jax-ipu-plugin" / "licenses" / "LICENSE").read_text()
    assert "libjax_ipu.so" in (licences / "CONTENTS").read_text()
    install = (folder / "INSTALL").read_text()
    assert "sha256sum -c SHA256SUMS" in install
    assert f"pip install --no-index --find-links . {' '.join(_packages(series))}" in install
    assert f'pip install --index-url "file://$PWD/simple" {" ".join(_packages(series))}' in install


def test_zip_is_deterministic(released: Path, series: Series, tmp_path: Path) -> None:
    dist = tmp_path / "again"
    dist.mkdir()
    for w in released.parent.glob("*.whl"):
        shutil.copy2(w, dist / w.name)
    again = release.release(dist, series.name, build_first=False)
    assert sha256_of(again) == sha256_of(released)
    with zipfile.ZipFile(released) as zf:
        assert {i.date_time for i in zf.infolist()} == {release.ZIP_DATE}
        names = zf.namelist()
    assert names == sorted(names)


def test_installs_offline_and_runs_on_ipu(released: Path, series: Series, tmp_path: Path) -> None:
    folder = _unzip(released, tmp_path / "unzipped")
    subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=folder, check=True)
    venv = tmp_path / "venv"
    subprocess.run([_python_of(series.python), "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    # No index, no user or global pip configuration: the folder is the only source.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "JAX_", "XLA_", "PYTHON"))}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1")
    # The default series installs as INSTALL's step 2 says (--find-links), the current one through the PEP 503
    # index in simple/ (INSTALL's other way): each is tested on one series, at the time of one install.
    if series.packaging == "plugin":
        cmd = [py, "-m", "pip", "install", "--index-url", (folder / "simple").as_uri(), *_packages(series)]
    else:
        cmd = [py, "-m", "pip", "install", "--no-index", "--find-links", ".", *_packages(series)]
    proc = subprocess.run(cmd, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout
    # The minimal example exactly as INSTALL prints it, then a jitted matmul on jax.devices("ipu") against numpy.
    install = (folder / "INSTALL").read_text()
    example = re.search(r"python - <<'EOF'\n(.*?)EOF", install, flags=re.S)
    assert example, "INSTALL has no minimal example"
    code = "\n".join(ln[4:] for ln in example.group(1).splitlines())
    for script, expected in ((code, r"\[ 2\.  5\. 10\.\] .*ipu"), (MATMUL, r"matmul ok on ipu")):
        run = subprocess.run([py, "-c", script], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=600)
        assert run.returncode == 0, run.stdout
        assert re.search(expected, run.stdout), run.stdout


def test_tampered_file_fails_the_check(released: Path, tmp_path: Path) -> None:
    folder = _unzip(released, tmp_path)
    ok = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=folder)
    assert ok.returncode == 0
    victim = next(folder.glob("jax-*.whl"))
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01
    victim.write_bytes(bytes(data))
    bad = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=folder, stdout=subprocess.PIPE, text=True)
    assert bad.returncode != 0
    assert f"{victim.name}: FAILED" in bad.stdout


def test_a_tag_must_name_a_series_version(pins: Pins, tmp_path: Path) -> None:
    with pytest.raises(release.ReleaseError, match=r"tag 'v9\.9' does not name a version pins\.toml gives: tag one of"):
        release.release(tmp_path, tag="v9.9", build_first=False)
