"""The release zip installs offline into a fresh Python 3.8 venv and runs on ipu; its sums catch a tampered file.

The zip is assembled here from dist/ (`nox -s tests` builds or reuses dist/ first) into a temporary folder, the same
way `nox -s release` does, so these tests always run: about a minute and a half. The dependency wheels come from the
cache's wheelhouse (filled by the first `nox -s release` or the first run of this test, like the build's downloads);
pip runs with --no-index and no network settings.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from build_tools import release
from build_tools.fetch import sha256_of
from build_tools.pins import Pins, Series

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


def _python38(version: str) -> str:
    exe = f"python{version}"
    candidates = [shutil.which(exe)] + sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/{exe}")))
    for c in candidates:
        if c and subprocess.run([c, "-c", "pass"], stderr=subprocess.DEVNULL).returncode == 0:
            return c
    pytest.fail(f"{exe} not found (PATH or pyenv): the release is tested in a fresh Python {version} venv")


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory, jax_wheel: Path, jaxlib_wheel: Path) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    for w in (jax_wheel, jaxlib_wheel):
        shutil.copy2(w, dist / w.name)
    return release.release(dist, build_first=False)


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
    assert {"jax", "jaxlib", "numpy", "scipy", "ml-dtypes", "opt-einsum"} <= projects
    for w in wheels:  # every wheel is for the target: pure Python or cp38 manylinux x86_64
        assert w.endswith("-py3-none-any.whl") or (f"-{series.python_tag}-" in w and "manylinux" in w), w
    lock = release.read_lock()
    for w in wheels:
        name, ver = release.normalise(w.split("-")[0]), w.split("-")[1]
        if name not in ("jax", "jaxlib"):
            assert lock[name][0] == ver and sha256_of(folder / w) in lock[name][1], f"{w} is not the locked wheel"
    listed = re.findall(r"^([0-9a-f]{64})  (.+)$", (folder / "SHA256SUMS").read_text(), flags=re.M)
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                   if p.is_file() and p.name != "SHA256SUMS")
    assert sorted(n for _, n in listed) == files
    links = re.findall(r'<a href="([^"#]+)#sha256=([0-9a-f]{64})">', (folder / "wheels.html").read_text())
    assert sorted(n.replace("%2B", "+") for n, _ in links) == wheels
    licences = folder / "LICENSES"
    for project in projects:
        assert any((licences / project).iterdir()), f"no licence notice for {project}"
    assert "Apache" in (licences / "jaxlib" / "LICENSE.txt").read_text()
    assert "libjax_ipu.so" in (licences / "CONTENTS").read_text()
    install = (folder / "INSTALL").read_text()
    assert "sha256sum -c SHA256SUMS" in install and "pip install --no-index --find-links . jax jaxlib" in install


def test_zip_is_deterministic(released: Path, tmp_path: Path) -> None:
    dist = tmp_path / "again"
    dist.mkdir()
    for w in released.parent.glob("*.whl"):
        shutil.copy2(w, dist / w.name)
    again = release.release(dist, build_first=False)
    assert sha256_of(again) == sha256_of(released)
    with zipfile.ZipFile(released) as zf:
        assert {i.date_time for i in zf.infolist()} == {release.ZIP_DATE}
        names = zf.namelist()
    assert names == sorted(names)


def test_installs_offline_and_runs_on_ipu(released: Path, series: Series, tmp_path: Path) -> None:
    folder = _unzip(released, tmp_path / "unzipped")
    subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=folder, check=True)
    venv = tmp_path / "venv"
    subprocess.run([_python38(series.python), "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    # No index, no user or global pip configuration: the folder is the only source.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "JAX_", "XLA_", "PYTHON"))}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1")
    cmd = [py, "-m", "pip", "install", "--no-index", "--find-links", ".", "jax", "jaxlib"]
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
