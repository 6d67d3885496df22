"""The software bill of materials each of our wheels carries (PEP 770): ``<dist-info>/sboms/jax-ipu.cdx.json``.

A CycloneDX 1.6 JSON document whose subject is the wheel (its project, version and ``pkg:pypi`` purl) and whose
components are what the wheel is made of, each named with the version and sha256 that build_tools/pins.toml pins:

- the upstream jax sdist or jaxlib wheel it repacks, with the patches applied to it (``pedigree.patches``: each
  patch's file under patches/ and its text);
- where the wheel holds our backend (jaxlib for 0.4.13, jax-ipu-plugin for the current series): the ``jax_ipu``
  package and its native library ``libjax_ipu.so`` (the library's sha256, as built), the libc++ that the library links
  statically (zig's, from the pinned ziglang), and the PJRT C API header it is compiled against (from the pinned
  tensorflow-cpu wheel: its declarations only, no code of it runs).

auditwheel records what it grafts into a wheel in an SBOM of its own (auditwheel 6.3 and later); our wheels are linked
for their manylinux target by zig and never repaired, so nothing is grafted and there is nothing of auditwheel's to
add. The document is deterministic: no timestamp, and a serial number derived from its content.
"""

from __future__ import annotations

import hashlib
import json
import urllib.parse
import uuid
from typing import Any, Dict, List

from build_tools import patches
from build_tools.pins import REPO, Artifact, Pins, Series

SBOM_NAME = "sboms/jax-ipu.cdx.json"  # under the wheel's .dist-info/
SPEC_VERSION = "1.6"
LIBCXX_LICENCE = "Apache-2.0 WITH LLVM-exception"


def purl(package: str, version: str) -> str:
    return f"pkg:pypi/{package.lower().replace('_', '-')}@{urllib.parse.quote(version, safe='')}"


def _sha256(value: str) -> List[Dict[str, str]]:
    return [{"alg": "SHA-256", "content": value}]


def upstream(artifact: Artifact) -> Dict[str, Any]:
    """A pinned upstream file as a component, with the patches of its series (none for the header's wheel)."""
    component: Dict[str, Any] = {
        "type": "library" if artifact.key != "jax" else "framework",
        "bom-ref": purl(artifact.package, artifact.version),
        "name": artifact.package,
        "version": artifact.version,
        "purl": purl(artifact.package, artifact.version),
        "hashes": _sha256(artifact.sha256),
        "externalReferences": [{"type": "distribution", "url": f"https://pypi.org/project/{artifact.package}/"
                                f"{artifact.version}/#files", "comment": artifact.filename}],
    }
    if artifact.key in ("jax", "jaxlib"):
        applied = patches.read_series(artifact)
        if applied:
            component["pedigree"] = {"patches": [
                {"type": "unofficial", "diff": {"url": patch.relative_to(REPO).as_posix(),
                                                "text": {"contentType": "text/x-diff",
                                                         "content": patch.read_text()}}} for patch in applied]}
    return component


def backend(pins: Pins, series: Series, library_sha256: str) -> List[Dict[str, Any]]:
    """Our package and native library, and what the library is built from beyond our sources."""
    version = pins.labelled(series.jaxlib.version)
    header = upstream(series.pjrt_header)
    header.update(type="file", scope="excluded",
                  description=f"{series.pjrt_header.extra['header']}: the PJRT C API declarations libjax_ipu.so is "
                              "compiled against (its structs and function types; no code of it is linked)")
    zig = pins.tools["ziglang"]
    return [
        {"type": "library", "bom-ref": "jax-ipu", "name": "jax_ipu", "version": version,
         "description": "the ipu backend: a PJRT plugin whose runtime is a tile-level IPU Model emulator",
         "licenses": [{"license": {"id": "Apache-2.0"}}],
         "components": [{"type": "library", "bom-ref": "libjax_ipu.so", "name": "libjax_ipu.so",
                         "version": version, "hashes": _sha256(library_sha256),
                         "licenses": [{"license": {"id": "Apache-2.0"}}]}]},
        {"type": "library", "bom-ref": "libc++", "name": "libc++", "version": f"ziglang-{zig}",
         "description": "LLVM's C++ standard library as zig ships it, linked statically into libjax_ipu.so",
         "licenses": [{"expression": LIBCXX_LICENCE}],
         "pedigree": {"ancestors": [{"type": "application", "name": "ziglang", "version": zig,
                                     "purl": purl("ziglang", zig)}]}},
        header,
    ]


def document(project: str, version: str, components: List[Dict[str, Any]]) -> bytes:
    """The CycloneDX JSON bytes for a wheel of ``project`` ``version`` made of ``components``."""
    subject = {"type": "library", "bom-ref": purl(project, version), "name": project, "version": version,
               "purl": purl(project, version)}
    body: Dict[str, Any] = {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "version": 1,
        "metadata": {"component": subject,
                     "tools": {"components": [{"type": "application", "name": "jax-ipu build_tools"}]}},
        "components": components,
        "dependencies": [{"ref": subject["bom-ref"], "dependsOn": [c["bom-ref"] for c in components]}],
    }
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()
    body["serialNumber"] = uuid.UUID(bytes=digest[:16], version=5).urn
    return (json.dumps(body, indent=2, sort_keys=True) + "\n").encode()

