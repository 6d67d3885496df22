"""Checks of `nox -s lint` beyond ruff and mypy (``python -m build_tools lint <check>``):

    clang-format   jax_ipu_shim's C++ against .clang-format, in check mode (never rewrites a file)
    pins-agree     docker/Dockerfile, .github/workflows/*.yml and pyproject's cibuildwheel table agree with pins.toml
    citations      every doc a comment cites (ipu-model.md, pjrt-notes.md, ...) is a file of the repository
    closures       no function nested in another in jax_ipu calls itself: such a closure holds its own cell, a
                   reference cycle that keeps what it captured (a compile's whole document) until the garbage
                   collector runs, and that jax's own core_test counts as a leak

Every finding fails: there is no baseline of known findings (the tree was brought to the checks when they came).
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

from build_tools.pins import REPO, Pins, load

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

# Docs that comments cite by name; until they live in the repository a citation points nowhere for a reader.
CITED_DOCS = ("ipu-model.md", "pjrt-notes.md", "style.md", "prior-art.md", "tooling-notes.md")
CITATION = re.compile(r"(?:[\w./-]*/)?(" + "|".join(re.escape(d) for d in CITED_DOCS) + r")\b")
# The check, its baseline and its test name those docs as data, not as citations.
NOT_CITING = ("build_tools/lint.py", "tests/toolchain/test_lint.py")
CODE_SUFFIXES = (".py", ".cc", ".h", ".toml", ".yml", ".yaml", ".sh", ".txt", ".ipynb", ".map", ".md")


def tracked(*patterns: str) -> List[Path]:
    out = subprocess.run(["git", "ls-files", "-z", "--", *patterns], cwd=REPO, stdout=subprocess.PIPE, check=True)
    return [REPO / p for p in out.stdout.decode().split("\0") if p and (REPO / p).is_file()]


def _report(section: str, failing: Dict[str, str]) -> int:
    """Prints each finding; returns how many files have one."""
    for name in sorted(failing):
        print(f"[{section}] FAIL {name}: {failing[name]}")
    print(f"[{section}] {len(failing)} file(s) with findings")
    return len(failing)


def clang_format() -> int:
    exe = shutil.which("clang-format")
    if not exe:
        print("[clang-format] FAIL no clang-format on PATH (build_tools/lint-requirements.txt installs it)")
        return 1
    failing = {}
    warnings_total = 0
    for path in tracked("jax_ipu_shim/*.cc", "jax_ipu_shim/*.h", "examples/*.cc", "tests/*.cc"):
        proc = subprocess.run([exe, "--dry-run", "--style=file", str(path)], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        count = proc.stdout.count("warning:")
        if count or proc.returncode:
            warnings_total += count
            failing[path.relative_to(REPO).as_posix()] = f"{count} place(s) differ from .clang-format"
    print(f"[clang-format] {warnings_total} place(s) in {len(failing)} file(s) differ from .clang-format")
    return _report("clang-format", failing)


def citations() -> int:
    names = {p.name for p in tracked()}
    failing: Dict[str, str] = {}
    for path in tracked():
        if (path.suffix not in CODE_SUFFIXES and path.name != "Dockerfile") or \
                path.relative_to(REPO).as_posix() in NOT_CITING:
            continue
        text = path.read_text(errors="replace")
        missing = sorted({m.group(1) for m in CITATION.finditer(text) if m.group(1) not in names})
        if missing:
            lines = [str(i) for i, ln in enumerate(text.splitlines(), 1) if any(d in ln for d in missing)]
            failing[path.relative_to(REPO).as_posix()] = (f"cites {', '.join(missing)} (not in the repository) on "
                                                          f"line(s) {', '.join(lines)}")
    return _report("citations", failing)


def _pins_agree_problems(pins: Pins) -> List[str]:
    series = pins.get_series()
    problems = []
    docker = (REPO / "docker" / "Dockerfile").read_text()
    others = [s.python for s in pins.all_series() if s.name != series.name]
    expected_args = {"BASE_IMAGE": pins.docker["base_image"], "PYTHON_VERSION": series.python,
                     "NOX_VERSION": pins.tools["nox"], "UV_VERSION": pins.tools["uv"],
                     "CURRENT_PYTHON_VERSION": " ".join(others)}
    for arg, value in re.findall(r"^ARG (\w+)=(\S+)", docker, flags=re.M):
        if arg in expected_args and value != expected_args[arg]:
            problems.append(f"docker/Dockerfile: ARG {arg}={value}, pins.toml says {expected_args[arg]}")
    if "FROM ${BASE_IMAGE}" not in docker:
        problems.append("docker/Dockerfile: FROM must use ${BASE_IMAGE} (nox passes it from pins.toml)")

    allowed_pythons = {s.python for s in pins.all_series()} | {pins.tools["host_python"]}
    for wf in sorted((REPO / ".github" / "workflows").glob("*.yml")):
        name = wf.relative_to(REPO).as_posix()
        text = wf.read_text()
        for ref in re.findall(r"^\s*-?\s*uses:\s*(\S+)", text, flags=re.M):
            if not ref.startswith("./") and not re.search(r"@[0-9a-f]{40}$", ref):
                problems.append(f"{name}: action {ref} is not pinned to a commit sha")
        for block in re.findall(r"python-version:\s*(\|\n(?:\s{10,}.*\n)+|.*)", text):
            for value in re.findall(r"[\"']?([0-9][0-9.]*)[\"']?", block):
                if value not in allowed_pythons:
                    problems.append(f"{name}: python-version {value}; pins.toml has {sorted(allowed_pythons)}")
        for pkg, version in re.findall(r"([A-Za-z0-9_.-]+)==([^\s\"'$]+)", text):
            problems.append(f"{name}: {pkg}=={version} written in the workflow; take it from pins.toml "
                            "(steps.pins.outputs)")
        for image in re.findall(r"(ubuntu:\d\d\.\d\d)", text):
            if image != pins.docker["base_image"]:
                problems.append(f"{name}: image {image}; pins.toml has {pins.docker['base_image']}")

    with open(REPO / "pyproject.toml", "rb") as f:
        cibw = tomllib.load(f).get("tool", {}).get("cibuildwheel", {})
    if cibw:
        want = f"{series.python_tag}-manylinux_x86_64"
        if cibw.get("build") != want:
            problems.append(f"pyproject.toml [tool.cibuildwheel] build = {cibw.get('build')!r}, expected {want!r}")
        image = cibw.get("manylinux-x86_64-image", "")
        if image != series.platform_tag.split("_")[0]:
            problems.append(f"pyproject.toml [tool.cibuildwheel] manylinux-x86_64-image = {image!r}, pins.toml's "
                            f"platform is {series.platform_tag}")
    return problems


def pins_agree() -> int:
    problems = _pins_agree_problems(load())
    for p in problems:
        print(f"[pins-agree] FAIL {p}")
    if not problems:
        print("[pins-agree] ok: docker/Dockerfile, .github/workflows and pyproject agree with build_tools/pins.toml")
    return len(problems)


def _recursive_closures(tree: ast.AST) -> List[str]:
    """``outer.inner`` (line) for each function defined inside another that refers to its own name."""
    found = []
    for outer in ast.walk(tree):
        if not isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in ast.walk(outer):
            if inner is outer or not isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            names = {n.id for stmt in inner.body for n in ast.walk(stmt) if isinstance(n, ast.Name)}
            if inner.name in names:
                found.append(f"{outer.name}.{inner.name} (line {inner.lineno})")
    return found


def closures() -> int:
    failing = {}
    for path in tracked("jax_ipu_shim/python/*.py"):
        found = _recursive_closures(ast.parse(path.read_text(), str(path)))
        if found:
            failing[path.relative_to(REPO).as_posix()] = ("recursive closure(s) " + ", ".join(sorted(set(found))) +
                                                          ": make it a module function, a method or a loop")
    return _report("closures", failing)


CHECKS = {"clang-format": clang_format, "pins-agree": pins_agree, "citations": citations, "closures": closures}


def main(names: List[str]) -> int:
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        print(f"unknown lint check(s) {unknown}; known: {', '.join(CHECKS)}", file=sys.stderr)
        return 2
    failures = sum(CHECKS[n]() for n in (names or list(CHECKS)))
    return 1 if failures else 0
