"""The lists of a series' known failures (tests/expected-failures/*.txt) and their conditions."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

import _series_expectations as E  # noqa: E402

LISTS = sorted((TESTS / "expected-failures").glob("*.txt"))


@pytest.mark.parametrize("path", LISTS, ids=[p.stem for p in LISTS])
def test_every_listed_test_file_exists_and_every_line_is_readable(path: Path) -> None:
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        test, _, condition = line.partition(" when ")
        file, sep, name = test.partition("::")
        assert sep and name, f"{path.name}: '{line}' is not <suite>/<file>::<test>"
        assert (TESTS / file).is_file(), f"{path.name}: no test file {file}"
        if condition:
            words = condition.split()
            assert "=" in condition or (len(words) == 3 and words[:2] in (["cpu", "has"], ["cpu", "lacks"])), line


def test_conditions_on_variables_and_cpu_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(E, "_cpu_flags", lambda: ["sse2", "avx2"])
    assert E._holds("cpu has avx2") and not E._holds("cpu lacks avx2")
    assert E._holds("cpu lacks avx512_bf16") and not E._holds("cpu has avx512_bf16")
    monkeypatch.setenv("JAX_IPU_MODEL_NUM_TILES", "7")
    assert E._holds("JAX_IPU_MODEL_NUM_TILES=7") and not E._holds("JAX_IPU_MODEL_NUM_TILES=16")
    monkeypatch.delenv("JAX_IPU_MODEL_NUM_TILES")
    assert not E._holds("JAX_IPU_MODEL_NUM_TILES=7")


def test_a_line_whose_condition_does_not_hold_is_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "expected-failures").mkdir()
    (tmp_path / "expected-failures" / "9.9.txt").write_text(
        "# one reason\nbackend/a.py::t1\nbackend/a.py::t2 when cpu has nothing_like_this\n"
        "backend/a.py::t3 when cpu lacks nothing_like_this\n")
    monkeypatch.setattr(E, "HERE", str(tmp_path))
    assert E.expected_failures("9.9") == {"backend/a.py::t1": "one reason", "backend/a.py::t3": "one reason"}
    assert os.path.basename(E.HERE) == tmp_path.name
