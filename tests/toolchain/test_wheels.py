"""The wheels in dist/: names, tags, versions, contents, RECORD, portability, reproducibility."""

from __future__ import annotations

import email.parser
import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from build_tools import native, patches, sbom, wheels
from build_tools.pins import Pins, Series, load

REPO = Path(__file__).resolve().parents[2]


def _metadata(wheel: Path, name: str) -> email.message.Message:
    with zipfile.ZipFile(wheel) as zf:
        member = next(n for n in zf.namelist() if n.endswith(f".dist-info/{name}"))
        return email.parser.Parser().parsestr(zf.read(member).decode())


def _names(wheel: Path) -> list:
    with zipfile.ZipFile(wheel) as zf:
        return zf.namelist()


def test_jaxlib_name_tag_and_version(pins: Pins, series: Series, jaxlib_wheel: Path) -> None:
    version = pins.labelled(series.jaxlib.version)
    tag = "-".join(series.jaxlib.filename[: -len(".whl")].split("-")[2:])
    assert jaxlib_wheel.name == f"jaxlib-{version}-{tag}.whl"
    assert _metadata(jaxlib_wheel, "METADATA")["Version"] == version
    assert _metadata(jaxlib_wheel, "WHEEL").get_all("Tag") == [tag]
    assert all(n.startswith(f"jaxlib-{version}.dist-info/") for n in _names(jaxlib_wheel) if ".dist-info/" in n)


def test_jax_name_and_version(pins: Pins, series: Series, jax_wheel: Path) -> None:
    version = pins.labelled(series.jax.version)
    assert jax_wheel.name == f"jax-{version}-py3-none-any.whl"
    assert _metadata(jax_wheel, "METADATA")["Version"] == version
    with zipfile.ZipFile(jax_wheel) as zf:
        # jax.__version__ stays upstream's, which libraries parse as integers; the label is the wheel's
        assert f'__version__ = "{series.jax.version}"' in zf.read("jax/version.py").decode()
        assert '"tpu", "ipu"]' in zf.read("jax/_src/interpreters/mlir.py").decode()


def test_jaxlib_carries_our_backend(pins: Pins, jaxlib_wheel: Path) -> None:
    names = set(_names(jaxlib_wheel))
    assert wheels.LIBRARY_IN_WHEEL in names
    assert {"jax_ipu/__init__.py", "jax_plugins/ipu/__init__.py", "jaxlib/xla_extension.so"} <= names
    # custom vertices: the header codelets include, and the compiler and glibc target they are compiled with
    assert {"jax_ipu/include/poplar/Vertex.hpp", wheels.TOOLCHAIN_IN_WHEEL} <= names
    assert "jax_plugins/__init__.py" not in names, "jax_plugins must stay a namespace package"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    with zipfile.ZipFile(jaxlib_wheel) as zf:
        assert '__version__ = "0.4.13"' in zf.read("jaxlib/version.py").decode()  # upstream's, as jax's
        for name, path in wheels._our_package_files():
            assert zf.read(name) == path.read_bytes(), f"{name} differs from jax_ipu_shim/python/{name}"
        top_level = zf.read(next(n for n in names if n.endswith(".dist-info/top_level.txt"))).decode().split()
        assert {"jaxlib", "jax_ipu", "jax_plugins"} <= set(top_level)


@pytest.mark.parametrize("which", ["jax", "jaxlib"])
def test_record_is_valid(which: str, request: pytest.FixtureRequest) -> None:
    wheel = request.getfixturevalue(f"{which}_wheel")
    assert wheels.verify_record(wheel) == []


@pytest.mark.parametrize("which", ["jax", "jaxlib"])
def test_entries_are_normalised(which: str, request: pytest.FixtureRequest) -> None:
    wheel = request.getfixturevalue(f"{which}_wheel")
    with zipfile.ZipFile(wheel) as zf:
        infos = zf.infolist()
    assert {i.date_time for i in infos} == {wheels.ZIP_DATE}
    names = [i.filename for i in infos]
    dist_info = [n for n in names if ".dist-info/" in n]
    assert names[-len(dist_info):] == dist_info and names[-1].endswith("/RECORD")
    assert names[: -len(dist_info)] == sorted(names[: -len(dist_info)])


def test_auditwheel_accepts_the_pinned_platform(series: Series, jaxlib_wheel: Path) -> None:
    tag, line = wheels.check_platform(jaxlib_wheel, series, strict=True)
    assert wheels._glibc_of_tag(tag) <= wheels._glibc_of_tag(series.platform_tag), line


def test_library_exports_only_the_plugin_api(jaxlib_wheel: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(jaxlib_wheel) as zf:
        lib = tmp_path / "libjax_ipu.so"
        lib.write_bytes(zf.read(wheels.LIBRARY_IN_WHEEL))
    exported = native.exported_symbols(lib)
    if not exported:
        pytest.skip("no nm on PATH to list dynamic symbols")
    assert "GetPjrtApi" in exported
    assert [s for s in exported if s != "GetPjrtApi" and not s.startswith("JaxIpu_")] == []


def test_writer_is_reproducible(tmp_path: Path) -> None:
    entries = [("pkg/b.py", lambda: b"b = 2\n", False), ("pkg/a.py", lambda: b"a = 1\n", False),
               ("demo-1.0.dist-info/METADATA", lambda: b"Name: demo\nVersion: 1.0\n", False),
               ("pkg/lib.so", lambda: b"\x7fELF", True)]
    first = wheels.write_wheel(tmp_path / "a.whl", entries, "demo-1.0.dist-info").read_bytes()
    second = wheels.write_wheel(tmp_path / "b.whl", list(reversed(entries)), "demo-1.0.dist-info").read_bytes()
    assert first == second
    assert wheels.verify_record(tmp_path / "a.whl") == []


def test_platform_check_rejects_newer_glibc(series: Series, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wheels, "auditwheel_show", lambda w: ("manylinux_2_34_x86_64", "platform tag: manylinux_2_34"))
    with pytest.raises(wheels.WheelError, match="newer than the pinned manylinux2014"):
        wheels.check_platform(Path("x.whl"), series)


@pytest.mark.parametrize("name", [s.name for s in load().all_series() if s.packaging == "plugin"])
def test_plugin_wheel_names_its_entry_point_requirements_and_notices(pins: Pins, name: str) -> None:
    """The current series' backend wheel: jax finds it by entry point, it pins its jax and jaxlib, and it carries
    the project's licence and LLVM's (libc++ is linked into its library)."""
    series = pins.get_series(name)
    version = pins.labelled(series.jaxlib.version)
    found = sorted((REPO / "dist" / name).glob(f"{wheels.PLUGIN_DISTRIBUTION}-{version}-py3-none-*.whl"))
    assert len(found) == 1, f"dist/{name}/ should hold one plugin wheel; run `nox -s build_wheels`"
    wheel = found[0]
    assert wheel.name.endswith(f"-py3-none-{series.platform_tag}.whl")
    names = _names(wheel)
    di = f"{wheels.PLUGIN_DISTRIBUTION}-{version}.dist-info"
    assert {"jax_ipu/__init__.py", "jax_ipu/backend/plugin.py", wheels.LIBRARY_IN_WHEEL, f"{di}/RECORD",
            f"{di}/licenses/LICENSE"} <= set(names)
    assert not any(n.startswith(("jax/", "jaxlib/", "jax_plugins/")) for n in names)
    meta = _metadata(wheel, "METADATA")
    assert meta["Name"] == "jax-ipu-plugin" and meta["Version"] == version
    assert sorted(meta.get_all("Requires-Dist")) == [f"jax=={series.jax.version}", f"jaxlib=={series.jaxlib.version}",
                                                     f'ziglang=={pins.tools["ziglang"]}; extra == "vertices"']
    assert meta.get_all("Provides-Extra") == ["vertices"]  # custom vertices: the compiler jax_ipu.codelets runs
    with zipfile.ZipFile(wheel) as zf:
        toolchain = json.loads(zf.read(wheels.TOOLCHAIN_IN_WHEEL))
        assert toolchain == {"ziglang": pins.tools["ziglang"], "glibc": native.target_glibc()}
        entry_points = zf.read(f"{di}/entry_points.txt").decode().split()
        assert entry_points == ["[jax_plugins]", "ipu", "=", "jax_ipu.backend.plugin"]
        assert b"Apache License" in zf.read(f"{di}/licenses/LICENSE")


def test_upstream_members_are_copied_compressed(tmp_path: Path) -> None:
    """Members of the (verified) upstream wheel go into ours as their compressed bytes, with their upstream RECORD
    line (a warm build does not inflate and deflate jaxlib's shared objects again): the same files and a valid
    RECORD; a member whose RECORD line does not match its size is read and written like any other."""
    payload = bytes(range(256)) * 4000
    upstream = wheels.write_wheel(tmp_path / "up.whl", [
        ("up/big.so", lambda: payload, True), ("up/a.py", lambda: b"a = 1\n", False),
        ("up-1.0.dist-info/METADATA", lambda: b"Name: up\nVersion: 1.0\n", False)], "up-1.0.dist-info")
    with zipfile.ZipFile(upstream) as zf:
        records = wheels.upstream_records(zf, "up-1.0.dist-info")
        records["up/a.py"] = records["up/a.py"].rsplit(",", 1)[0] + ",999"  # a RECORD line that lies: not trusted
        entries = [(i.filename, wheels.UpstreamMember(zf, i, records.get(i.filename)), i.filename.endswith(".so"))
                   for i in zf.infolist() if not i.filename.endswith("RECORD")]
        ours = wheels.write_wheel(tmp_path / "ours.whl", entries, "up-1.0.dist-info")
        raw = zf.getinfo("up/big.so")
    assert wheels.verify_record(ours) == []
    with zipfile.ZipFile(ours) as zf:
        assert zf.testzip() is None
        assert zf.read("up/big.so") == payload and zf.read("up/a.py") == b"a = 1\n"
        assert zf.getinfo("up/big.so").compress_size == raw.compress_size
        assert zf.getinfo("up/big.so").external_attr >> 16 == 0o100755


def _sbom_of(wheel: Path) -> dict:
    with zipfile.ZipFile(wheel) as zf:
        found = [n for n in zf.namelist() if n.endswith(f".dist-info/{sbom.SBOM_NAME}")]
        assert len(found) == 1, f"{wheel.name} carries {len(found)} SBOMs named {sbom.SBOM_NAME} (PEP 770)"
        return {"bom": json.loads(zf.read(found[0])), "members": {n: zf.read(n) for n in zf.namelist()
                                                                  if n == wheels.LIBRARY_IN_WHEEL}}


def _check_sbom(wheel: Path, series: Series, upstream_key: str, has_backend: bool) -> None:
    """The wheel's CycloneDX SBOM: it names the wheel as METADATA does, each upstream file with the sha256 pins.toml
    verifies and the patches applied to it, and (where the wheel holds our backend) libjax_ipu.so with the sha256 of
    the library the wheel holds, the libc++ linked into it and the PJRT header it is compiled against."""
    found = _sbom_of(wheel)
    bom, members = found["bom"], found["members"]
    meta = _metadata(wheel, "METADATA")
    assert bom["bomFormat"] == "CycloneDX" and bom["specVersion"] == "1.6"
    assert (bom["metadata"]["component"]["name"], bom["metadata"]["component"]["version"]) == \
        (meta["Name"], meta["Version"])
    by_ref = {c["bom-ref"]: c for c in bom["components"]}
    art = getattr(series, upstream_key)
    up = by_ref[sbom.purl(art.package, art.version)]
    assert up["hashes"] == [{"alg": "SHA-256", "content": art.sha256}]
    applied = [p.relative_to(REPO).as_posix() for p in patches.read_series(art)]
    assert [p["diff"]["url"] for p in up.get("pedigree", {}).get("patches", [])] == applied
    assert bom["dependencies"][0]["dependsOn"] == list(by_ref)
    if has_backend:
        library = by_ref["jax-ipu"]["components"][0]
        assert library["name"] == "libjax_ipu.so"
        assert library["hashes"][0]["content"] == hashlib.sha256(members[wheels.LIBRARY_IN_WHEEL]).hexdigest()
        assert by_ref["libc++"]["licenses"] == [{"expression": "Apache-2.0 WITH LLVM-exception"}]
        header = by_ref[sbom.purl(series.pjrt_header.package, series.pjrt_header.version)]
        assert header["hashes"][0]["content"] == series.pjrt_header.sha256
    else:
        assert "jax-ipu" not in by_ref


def test_jax_and_jaxlib_carry_their_sbom(series: Series, jax_wheel: Path, jaxlib_wheel: Path) -> None:
    _check_sbom(jax_wheel, series, "jax", has_backend=False)
    _check_sbom(jaxlib_wheel, series, "jaxlib", has_backend=series.packaging == "jaxlib")


@pytest.mark.parametrize("name", [s.name for s in load().all_series() if s.packaging == "plugin"])
def test_plugin_wheel_carries_its_sbom(pins: Pins, name: str) -> None:
    series = pins.get_series(name)
    version = pins.labelled(series.jaxlib.version)
    wheel = next((REPO / "dist" / name).glob(f"{wheels.PLUGIN_DISTRIBUTION}-{version}-py3-none-*.whl"))
    found = _sbom_of(wheel)
    assert found["bom"]["metadata"]["component"]["name"] == "jax-ipu-plugin"
    refs = {c["bom-ref"] for c in found["bom"]["components"]}
    assert {"jax-ipu", "libc++", sbom.purl(series.pjrt_header.package, series.pjrt_header.version)} == refs
    library = next(c for c in found["bom"]["components"] if c["bom-ref"] == "jax-ipu")["components"][0]
    assert library["hashes"][0]["content"] == hashlib.sha256(found["members"][wheels.LIBRARY_IN_WHEEL]).hexdigest()
