"""What can be checked of the GitHub workflows without GitHub (no Docker engine here): every step is a nox session,
a build_tools command or a pinned action; sessions exist; least permissions; concurrency; the release trigger."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
SESSIONS = set(re.findall(r"@nox\.session\([^)]*\)\ndef (\w+)\(", (REPO / "noxfile.py").read_text()))
# What a `run:` step may be: the bootstrap of nox itself, or the project's own entry points.
ALLOWED_RUN = (r'python -m pip install "nox==\$\{\{ steps\.pins\.outputs\.nox \}\}"',
               r'python build_tools/pins\.py github-output >> "\$GITHUB_OUTPUT"',
               r"bash \.ci/run", r"nox --non-interactive -s (\w+)(?: -p \S+)?( -- .*)?")


def _runs(text: str) -> List[str]:
    runs = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"\s*(?:- )?run:\s*(.*)$", line)
        if not m:
            continue
        command = m.group(1)
        if command in (">-", "|", ">"):  # a folded block: its lines, joined
            indent = len(lines[i + 1]) - len(lines[i + 1].lstrip())
            block = []
            for follow in lines[i + 1:]:
                if follow.strip() and len(follow) - len(follow.lstrip()) < indent:
                    break
                block.append(follow.strip())
            command = " ".join(b for b in block if b)
        runs.append(command)
    return runs


def test_sessions_exist() -> None:
    assert {"tests", "lint", "release", "cibuildwheel", "compare_wheels", "check_wheels", "upstream_tests",
            "upstream_canary"} <= SESSIONS


def test_the_newest_jax_is_tried_weekly_and_a_failure_opens_an_issue() -> None:
    """upstream.yml: on a schedule (and by hand) the current series' wheels are built and `nox -s upstream_canary`
    runs the newest jax and jaxlib with our plugin; only when that job fails does the report job (issues: write, no
    other permission) open an issue or comment on the open one."""
    text = (REPO / ".github" / "workflows" / "upstream.yml").read_text()
    assert re.search(r"on:\n  schedule:\n    - cron: \"[^\"]+\"\n  workflow_dispatch:", text)
    runs = _runs(text)
    assert runs.index("nox --non-interactive -s upstream_canary") > \
        runs.index("nox --non-interactive -s build_wheels -- --series ${{steps.pins.outputs.current_series}}")
    report = text.split("\n  report:\n", 1)[1]
    assert "    needs: canary\n    if: failure()\n" in report
    assert "github.rest.issues.create(" in report and "github.rest.issues.createComment(" in report


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_step_is_a_session_or_build_tools_command(workflow: Path) -> None:
    for command in _runs(workflow.read_text()):
        m = next((re.fullmatch(p, command) for p in ALLOWED_RUN if re.fullmatch(p, command)), None)
        assert m, f"{workflow.name}: step `{command}` is not a nox session or a build_tools command"
        if command.startswith("nox "):
            assert m.group(1) in SESSIONS, f"{workflow.name}: no nox session {m.group(1)!r}"


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_least_permissions_and_concurrency(workflow: Path) -> None:
    text = workflow.read_text()
    assert re.search(r"^permissions: \{\}$", text, flags=re.M), "workflow-wide permissions must be none"
    assert re.search(r"^concurrency:\n  group: ", text, flags=re.M)
    jobs = re.split(r"^  (\w[\w-]*):\n", text.split("\njobs:\n", 1)[1], flags=re.M)[1:]
    for name, body in zip(jobs[::2], jobs[1::2]):
        assert "    permissions:\n" in body, f"{workflow.name}: job {name} does not state its permissions"
        assert "write" not in body or name in ("release", "pages", "report"), f"{workflow.name}: job {name} may write"
        if name == "report":  # upstream.yml's: it opens issues and may do nothing else
            assert re.search(r"    permissions:\n      issues: write\n    steps:", body), body


def test_release_on_version_tags_runs_ci_first() -> None:
    text = (REPO / ".github" / "workflows" / "release.yml").read_text()
    assert re.search(r"on:\n  push:\n    tags: \[\"v\*\"\]", text)
    assert "uses: ./.github/workflows/ci.yml" in text
    assert "workflow_call:" in (REPO / ".github" / "workflows" / "ci.yml").read_text()
    for step in ("-s cibuildwheel", "-s release --", "-s compare_wheels", "-s check_wheels", "action-gh-release@",
                 "deploy-pages@", "upload-pages-artifact@"):
        assert step in text, step


def test_cibuildwheel_backend_gives_the_dist_wheel(jaxlib_wheel: Path, tmp_path: Path) -> None:
    """What cibuildwheel runs in its container (pip wheel of build_tools/cibw) is the same build: the same bytes."""
    import subprocess
    import sys

    from build_tools.fetch import sha256_of

    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w",
                           str(tmp_path), str(REPO / "build_tools" / "cibw")], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    built = sorted(tmp_path.glob("jaxlib-*.whl"))
    assert [p.name for p in built] == [jaxlib_wheel.name]
    assert sha256_of(built[0]) == sha256_of(jaxlib_wheel)
