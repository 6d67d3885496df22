"""tests/ecosystem (`nox -s ecosystem_tests`): its libraries are locked for both series, the sdists it unpacks are
pinned, its expectation lists parse, and its report finds what it must (host Python, no jax)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "ecosystem"))
sys.path.insert(0, str(REPO / "tests" / "upstream"))

import expectations  # noqa: E402
import run_ecosystem as eco  # noqa: E402
import run_upstream  # noqa: E402

from build_tools import pins  # noqa: E402

SERIES = pins.load().all_series()


def test_there_is_a_lock_per_series():
    assert sorted(p.name for p in (REPO / "build_tools").glob("ecosystem-requirements*.txt")) == sorted(
        "ecosystem-requirements.txt" if s.name == pins.load().default_series else
        f"ecosystem-requirements-{s.python}.txt" for s in SERIES)


@pytest.mark.parametrize("series", SERIES, ids=lambda s: s.name)
def test_every_library_is_locked_and_every_sdist_it_unpacks_is_pinned(series):
    for lib in eco.LIBRARIES.values():
        version = pins._locked_tag(series, lib.distribution)[1:]
        if lib.tests == "sdist":
            assert (lib.distribution, version) in eco.SDIST_SHA256, f"{lib.distribution} {version}: no sha256"


def test_ci_checks_out_equinox_at_each_series_locked_tag():
    out = dict(line.split("=", 1) for line in pins.github_output(pins.load()).splitlines())
    for key, lock in (("equinox_tag", "ecosystem-requirements.txt"),
                      ("current_equinox_tag", f"ecosystem-requirements-{out['current_python']}.txt")):
        assert out[key].startswith("v")
        assert f"\nequinox=={out[key][1:]} \\\n" in (REPO / "build_tools" / lock).read_text()


def test_the_expectation_lists_parse_and_name_each_librarys_files():
    lists = sorted(eco.HERE.glob("expectations-*.txt"))
    assert lists, "tests/ecosystem/expectations-<jax version>.txt"
    roots = tuple(f"{lib.package}/" for lib in eco.LIBRARIES.values()) + ("tests/",)
    for path in lists:
        for rule in expectations.load(path):
            assert rule.pattern.startswith(roots), f"{path.name}:{rule.line}: {rule.pattern}"


def test_a_difference_not_listed_and_a_listed_pass_are_problems():
    files = ["optax/_src/a_test.py"]
    cpu = {"optax/_src/a_test.py::T::test_1": "passed", "optax/_src/a_test.py::T::test_2": "passed",
           "optax/_src/a_test.py::T::test_3": "passed"}
    ipu = {"optax/_src/a_test.py::T::test_1": "passed", "optax/_src/a_test.py::T::test_2": "failed",
           "optax/_src/a_test.py::T::test_3": "xfailed", "optax/_src/a_test.py::T::test_4": "xpassed"}
    rows, total = run_upstream.summarise(files, cpu, ipu)
    problems = eco.problems_of(rows, total, {"cpu": 1, "ipu": 1}, {"optax/_src/a_test.py::T::test_2": "boom"},
                               min_rate=0.0, library="optax")
    assert problems == ["fails on ipu, passes on cpu, not listed: optax/_src/a_test.py::T::test_2: boom",
                        "listed as xfail but passes on ipu (remove it from the list): optax/_src/a_test.py::T::test_4"]
    assert total["rate"] == pytest.approx(100 / 3)
    assert eco.problems_of(rows, total, {"cpu": 1, "ipu": 1}, {}, 50.0, "optax")[-1].startswith("optax: 33.33%")
    assert eco.problems_of(rows, total, {"cpu": 1, "ipu": 2}, {}, 0.0, "optax")[0].startswith(
        "optax: pytest on ipu ended with exit status 2")


def test_select_keeps_the_globs(tmp_path):
    for name in ("optax/_src/alias_test.py", "optax/_src/base_test.py", "optax/contrib/x_test.py", "optax/y.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert eco.select(tmp_path, "optax/**/*_test.py", []) == [
        "optax/_src/alias_test.py", "optax/_src/base_test.py", "optax/contrib/x_test.py"]
    assert eco.select(tmp_path, "optax/**/*_test.py", ["optax/_src/*"]) == [
        "optax/_src/alias_test.py", "optax/_src/base_test.py"]


def test_a_64_bit_refusal_is_classed_not_a_problem():
    message = ("jax.errors.JaxRuntimeError: UNIMPLEMENTED: Unsupported element type f64 in parameter 0 "
               "(tensor<3xf64>) of main : the IPU has no f64 hardware; use f32 (jax_enable_x64=False)")
    assert eco.refusal(message) == "64-bit types"
    assert eco.refusal("AssertionError: Not equal to tolerance") is None
    files = ["tests/a_test.py"]
    rows, total = run_upstream.summarise(files, {"tests/a_test.py::t": "passed"}, {"tests/a_test.py::t": "failed"})
    assert eco.problems_of(rows, total, {}, {"tests/a_test.py::t": message}, 0.0, "flax") == []


def test_a_file_kept_to_cpu_and_not_lifted_counts_against_the_rate():
    # A library test file that skips itself whole on the ipu (its own gate to cpu, not named in the library's
    # cpu_gated): its tests passed on cpu and did not run on the ipu, so the session names them; none is "cpu only".
    cpu = {"tests/test_noinline.py::test_a": "passed", "tests/test_ad.py::test_c": "passed"}
    ipu = {"tests/test_noinline.py": "skipped", "tests/test_ad.py::test_c": "passed"}
    messages = {"tests/test_noinline.py": "Skipping tests on non-CPU backend"}
    rows, total = run_upstream.summarise(["tests/test_noinline.py", "tests/test_ad.py"], cpu, ipu, messages,
                                         run_upstream.JAX_DEVICE_RESTRICTION)
    assert total["jax_device_restricted"] == 0 and total["rate"] == 50.0
    assert eco.problems_of(rows, total, {}, messages, 0.0, "equinox") == [
        "passes on cpu, did not run on ipu: tests/test_noinline.py::test_a"]
    # equinox's own gates are lifted on the ipu (tests/upstream/jax_ipu_upstream.py --lift-cpu-gates), with a reason
    assert "test_noinline.py" in eco.LIBRARIES["equinox"].cpu_gated and eco.LIBRARIES["equinox"].why_cpu_gated


def test_devices_a_conftest_gives_cpu_are_the_ipus_of_every_file_under_it(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text('import jax\njax.config.update("jax_num_cpu_devices", 2)\n')
    (tmp_path / "tests" / "test_a.py").write_text("import jax\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "test_b.py").write_text("import jax\n")
    assert eco.host_devices(tmp_path / "tests" / "test_a.py", tmp_path) == 2
    assert eco.host_devices(tmp_path / "other" / "test_b.py", tmp_path) is None
    assert eco.process_groups(tmp_path, ["tests/test_a.py", "other/test_b.py"], False) == [
        (None, ["other/test_b.py"]), (2, ["tests/test_a.py"])]


@pytest.mark.parametrize("per_file", [False, True])
def test_a_file_that_gives_cpu_devices_runs_with_as_many_ipus(tmp_path, per_file):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "spmd_test.py").write_text(
        "import os\nos.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=4'\nimport jax\n")
    (tmp_path / "tests" / "plain_test.py").write_text("import jax\n")
    (tmp_path / "tests" / "other_test.py").write_text("import jax\n")
    files = ["tests/plain_test.py", "tests/spmd_test.py", "tests/other_test.py"]
    groups = eco.process_groups(tmp_path, files, per_file)
    assert sorted(f for _, g in groups for f in g) == sorted(files)  # every file once
    assert [g for d, g in groups if d == 4] == [["tests/spmd_test.py"]]  # a process of its own, with 4 IPUs
    if not per_file:
        assert (None, ["tests/plain_test.py", "tests/other_test.py"]) in groups
