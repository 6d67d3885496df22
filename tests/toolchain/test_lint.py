"""The checks of `nox -s lint` that are ours: versions agree with pins.toml, every finding fails."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from build_tools import lint
from build_tools.pins import Pins

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the files pins-agree reads, for breaking on purpose."""
    for rel in ("docker/Dockerfile", "pyproject.toml", *[p.relative_to(REPO).as_posix()
                                                        for p in (REPO / ".github" / "workflows").glob("*.yml")]):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, tmp_path / rel)
    monkeypatch.setattr(lint, "REPO", tmp_path)
    return tmp_path


def test_repository_agrees_with_pins(pins: Pins) -> None:
    assert lint._pins_agree_problems(pins) == []


def test_dockerfile_default_that_disagrees_fails(tree: Path, pins: Pins) -> None:
    dockerfile = tree / "docker" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace(f"ARG BASE_IMAGE={pins.docker['base_image']}",
                                                         "ARG BASE_IMAGE=ubuntu:22.04"))
    assert any("ARG BASE_IMAGE=ubuntu:22.04" in p for p in lint._pins_agree_problems(pins))


def test_workflow_versions_come_from_pins(tree: Path, pins: Pins) -> None:
    ci = tree / ".github" / "workflows" / "ci.yml"
    text = ci.read_text()
    text = text.replace("actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683", "actions/checkout@v4", 1)
    text = text.replace('"nox==${{ steps.pins.outputs.nox }}"', '"nox==2024.10.9"', 1)
    text = text.replace(f'python-version: "{pins.tools["host_python"]}"', 'python-version: "3.10"', 1)
    ci.write_text(text)
    problems = "\n".join(lint._pins_agree_problems(pins))
    assert "actions/checkout@v4 is not pinned" in problems
    assert "nox==2024.10.9 written in the workflow" in problems
    assert "python-version 3.10" in problems


def test_every_finding_fails(capsys: pytest.CaptureFixture) -> None:
    assert lint._report("demo", {}) == 0
    assert lint._report("demo", {"a.cc": "2 place(s) differ", "b.cc": "1 place(s) differ"}) == 2
    assert "FAIL a.cc: 2 place(s) differ" in capsys.readouterr().out


def test_citation_of_a_doc_outside_the_repository_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.cc").write_text("// 64 GB/s (ipu-model.md)\n")
    (tmp_path / "b.py").write_text("# see docs/pjrt-notes.md\n")
    files = [tmp_path / "a.cc", tmp_path / "b.py"]
    monkeypatch.setattr(lint, "REPO", tmp_path)
    monkeypatch.setattr(lint, "tracked", lambda *patterns: list(files))
    assert lint.citations() == 2
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ipu-model.md").write_text("figures\n")
    (tmp_path / "docs" / "pjrt-notes.md").write_text("notes\n")
    files += [tmp_path / "docs" / "ipu-model.md", tmp_path / "docs" / "pjrt-notes.md"]
    assert lint.citations() == 0


def test_a_recursive_closure_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "walk.py").write_text("def outer(tree):\n    def walk(node):\n        for c in node:\n"
                                      "            walk(c)\n    walk(tree)\n")
    (tmp_path / "fine.py").write_text("def outer(tree):\n    def leaf(node):\n        return node\n"
                                      "    return leaf(tree)\n\n\ndef walk(node):\n    for c in node:\n"
                                      "        walk(c)\n")
    files = [tmp_path / "walk.py", tmp_path / "fine.py"]
    monkeypatch.setattr(lint, "REPO", tmp_path)
    monkeypatch.setattr(lint, "tracked", lambda *patterns: list(files))
    assert lint.closures() == 1
