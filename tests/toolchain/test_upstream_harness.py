"""tests/upstream: the expectations file, the pytest plugin and the pass-rate arithmetic of `nox -s upstream_tests`
(the run itself needs a jax checkout and the wheels; these parts need neither)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

UPSTREAM = Path(__file__).resolve().parents[1] / "upstream"
sys.path.insert(0, str(UPSTREAM))

import expectations  # noqa: E402
import run_upstream  # noqa: E402


@pytest.mark.parametrize("name", ["expectations.txt", "expectations-0.12.0.1.txt"])
def test_the_reviewed_files_parse_and_every_entry_has_a_reason(name: str) -> None:
    rules = expectations.load(UPSTREAM / name)
    assert rules and all(r.kind in expectations.KINDS and r.reason for r in rules)
    # The suite runs every test file of the tag (--files all): an entry names one of them, a file jax's tests
    # directory would hold.
    listed = {r.pattern.split("::", 1)[0] for r in rules}
    odd = {f for f in listed if not (f.endswith("_test.py") and "/" not in f)}
    assert not odd, f"entries that name no test file of jax's tests directory: {odd}"


@pytest.mark.parametrize("text, message", [
    ("lax_test.py::A::b\n", "before any"),
    ("[xfail]\nlax_test.py::A::b\n", "needs a reason"),
    ("[maybe] why\nlax_test.py::A::b\n", "unknown kind"),
    ("[skip] why\nnot a node id\n", "not a node id"),
    ("[skip] why\nlax_test.py::A::b\n[xfail] other\nlax_test.py::A::b\n", "repeats line 2"),
])
def test_bad_entries_are_refused_with_the_line(text: str, message: str) -> None:
    with pytest.raises(expectations.ExpectationsError, match=message):
        expectations.parse(text)


def test_skips_win_over_xfails_and_globs_match_node_ids() -> None:
    rules = expectations.parse(
        "[xfail] complex\nlax_test.py::*complex*\n[skip] slow\nlax_test.py::LaxTest::testSlow*\n")
    assert expectations.match(rules, "lax_test.py::LaxTest::testAdd_complex64").reason == "complex"
    assert expectations.match(rules, "lax_test.py::LaxTest::testSlow_complex64").kind == "skip"
    assert expectations.match(rules, "lax_test.py::LaxTest::testAdd_float32") is None


def test_the_plugin_applies_expectations_and_records_outcomes(tmp_path: Path) -> None:
    (tmp_path / "fake_test.py").write_text(textwrap.dedent("""
        def test_pass(): pass
        def test_fail(): assert False
        def test_listed_failing(): assert False
        def test_listed_passing(): pass
        def test_listed_skip(): assert False
    """))
    (tmp_path / "broken_test.py").write_text("import no_such_module_here\n")
    (tmp_path / "cpu_only_test.py").write_text(
        "import pytest\npytest.skip('Skipping tests on non-CPU backend', allow_module_level=True)\n")
    rules = tmp_path / "rules.txt"
    rules.write_text("[xfail] known\nfake_test.py::test_listed_*\n[skip] too slow\nfake_test.py::test_listed_skip\n")
    out = tmp_path / "out.json"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "jax_ipu_upstream",
         "--continue-on-collection-errors", "--rootdir", str(tmp_path), f"--upstream-results={out}",
         f"--upstream-expectations-file={rules}", "fake_test.py", "broken_test.py", "cpu_only_test.py"],
        cwd=tmp_path, env={"PYTHONPATH": str(UPSTREAM), "PATH": ""}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True)
    assert run.returncode != 0, run.stdout  # a failure, a strict xpass and a collection error all fail the run
    recorded = json.loads(out.read_text())
    assert "assert False" in recorded["messages"]["fake_test.py::test_fail"]
    assert recorded["messages"]["cpu_only_test.py"] == "Skipping tests on non-CPU backend"  # a file skipped whole
    assert recorded["outcomes"] == {
        "broken_test.py": "error",
        "cpu_only_test.py": "skipped",
        "fake_test.py::test_pass": "passed",
        "fake_test.py::test_fail": "failed",
        "fake_test.py::test_listed_failing": "xfailed",
        "fake_test.py::test_listed_passing": "xpassed",
        "fake_test.py::test_listed_skip": "skipped",
    }
    # the partial file has the same outcomes (collection errors aside), written as each test ended
    partial = [json.loads(line) for line in (tmp_path / "out.json.partial.jsonl").read_text().splitlines()]
    assert {node: outcome for node, outcome, _ in partial} == {
        k: v for k, v in recorded["outcomes"].items() if "::" in k}


def test_the_rate_counts_only_tests_that_pass_on_cpu() -> None:
    cpu = {"a_test.py::t1": "passed", "a_test.py::t2": "passed", "a_test.py::t3": "failed", "a_test.py::u": "passed",
           "a_test.py::t5": "skipped", "b_test.py": "error"}
    ipu = {"a_test.py::t1": "passed", "a_test.py::t2": "xfailed", "a_test.py::t3": "passed", "a_test.py::t5": "passed",
           "b_test.py": "error"}
    rows, total = run_upstream.summarise(["a_test.py", "b_test.py"], cpu, ipu)
    a, b = rows
    assert (a["cpu_passed"], a["ipu_passed"], a["ipu_xfailed"], a["ipu_missing"]) == (3, 1, 1, ["a_test.py::u"])
    assert a["rate"] == pytest.approx(100 / 3)
    assert b["collect_error_cpu"] and b["collect_error_ipu"] and b["rate"] is None
    assert total == {"cpu_passed": 3, "ipu_passed": 1, "rate": pytest.approx(100 / 3), "jax_device_restricted": 0,
                     "runnable_rate": pytest.approx(100 / 3),
                     # the ipu's own: t1, t3, t5 pass, b_test.py's collection error fails; t2's xfail is left out
                     "suite_counted": 4, "suite_passed": 3, "suite_rate": 75.0}


def test_tests_jax_keeps_to_other_devices_leave_the_runnable_rate() -> None:
    cpu = {f"a_test.py::t{i}": "passed" for i in range(5)}
    ipu = {"a_test.py::t0": "passed", "a_test.py::t1": "passed", "a_test.py::t2": "failed",
           "a_test.py::t3": "skipped", "a_test.py::t4": "skipped"}
    messages = {"a_test.py::t2": "AssertionError", "a_test.py::t3": "Skipped unless running on devices with tags: cpu",
                "a_test.py::t4": "jax-ipu: listed"}
    (row,), total = run_upstream.summarise(["a_test.py"], cpu, ipu, messages)
    assert row["jax_device_restricted"] == 1 and row["ipu_skipped"] == 2
    assert row["rate"] == pytest.approx(40.0) and row["runnable_rate"] == pytest.approx(50.0)
    assert total["runnable_rate"] == pytest.approx(50.0)


def test_cases_jax_generates_for_cpu_only_leave_the_runnable_rate() -> None:
    # testSVD1 is a case jax generates on cpu only (another case of testSVD ran on ipu); testQR0 did not run at all
    cpu = {"a_test.py::C::testSVD0": "passed", "a_test.py::C::testSVD1": "passed", "a_test.py::C::testQR0": "passed"}
    ipu = {"a_test.py::C::testSVD0": "passed"}
    (row,), total = run_upstream.summarise(["a_test.py"], cpu, ipu)
    assert row["not_generated_on_ipu"] == ["a_test.py::C::testSVD1"] and row["ipu_missing"] == ["a_test.py::C::testQR0"]
    assert row["jax_device_restricted"] == 1 and row["runnable_rate"] == pytest.approx(50.0)


def test_files_are_every_test_file_by_default_lanes_by_name_and_shards_split_them() -> None:
    available = ["b_test.py", "a_test.py", "pmap_test.py", "lax_test.py"]
    assert run_upstream.select_files("all", available) == ["a_test.py", "b_test.py", "lax_test.py", "pmap_test.py"]
    assert run_upstream.select_files("lane", available) == list(run_upstream.FILES)
    assert run_upstream.select_files("lax_test.py,lane", available) == list(run_upstream.FILES)  # each file once
    shards = [run_upstream.select_files("all", available, f"{k}/3") for k in (1, 2, 3)]
    assert shards == [["a_test.py", "pmap_test.py"], ["b_test.py"], ["lax_test.py"]]
    with pytest.raises(SystemExit, match="K must be 1 to N"):
        run_upstream.select_files("all", available, "4/3")


def test_multi_device_files_run_apart_with_four_devices_unless_devices_is_given() -> None:
    files = ["lax_test.py", "pmap_test.py", "api_test.py", "python_callback_test.py"]
    assert run_upstream.device_groups(files, None) == [
        (None, ["lax_test.py", "api_test.py"]), (4, ["pmap_test.py", "python_callback_test.py"])]
    assert run_upstream.device_groups(files, 2) == [(2, files)]
    assert run_upstream.device_groups(["pmap_test.py"], None) == [(4, ["pmap_test.py"])]


def test_a_file_that_requests_cpu_devices_gets_as_many_ipus(tmp_path) -> None:
    (tmp_path / "array_test.py").write_text("jtu.request_cpu_devices(8)\n")
    (tmp_path / "mutable_array_test.py").write_text("from x import y\njtu.request_cpu_devices(2)\n")
    (tmp_path / "debugger_test.py").write_text("jtu.set_host_platform_device_count(2)  # 0.4.13\n")
    (tmp_path / "lax_test.py").write_text("import jax\n")
    files = ["lax_test.py", "array_test.py", "mutable_array_test.py", "debugger_test.py"]
    assert run_upstream.device_groups(files, None, tmp_path) == [
        (None, ["lax_test.py"]), (2, ["mutable_array_test.py", "debugger_test.py"]), (8, ["array_test.py"])]
    assert run_upstream.requested_devices(tmp_path / "lax_test.py") is None


def test_the_whole_suite_metric_leaves_out_skips_and_xfails_of_the_ipu_run() -> None:
    cpu = {"a_test.py::T::x": "passed", "a_test.py::T::y": "passed"}
    ipu = {"a_test.py::T::x": "passed", "a_test.py::T::y": "failed", "a_test.py::T::z": "skipped",
           "a_test.py::T::w": "xfailed", "a_test.py::T::v": "passed"}
    rows, total = run_upstream.summarise(["a_test.py"], cpu, ipu)
    assert rows[0]["suite_counted"] == 3 and rows[0]["suite_passed"] == 2
    assert abs(rows[0]["suite_rate"] - 200 / 3) < 1e-9 and total["suite_rate"] == rows[0]["suite_rate"]
    assert rows[0]["rate"] == 50.0  # of cpu's two passes, one passes on ipu



def test_the_current_series_runs_its_callback_files_with_cpu_beside_the_ipu() -> None:
    files = ["lax_test.py", "python_callback_test.py", "checkify_test.py"]
    assert run_upstream.cpu_beside(files, current_series=False) == [(False, files)]
    assert run_upstream.cpu_beside(files, current_series=True) == [
        (False, ["lax_test.py"]), (True, ["python_callback_test.py", "checkify_test.py"])]


def test_the_multi_backend_file_runs_with_cpu_beside_the_ipu_in_both_series() -> None:
    """multibackend_test.py jits for backend="cpu" beside the device under test, as jax's GPU runs can: its ipu run
    has cpu too, whatever the series; the other files keep the ipu alone."""
    files = ["lax_test.py", "multibackend_test.py"]
    for current in (False, True):
        assert run_upstream.cpu_beside(files, current_series=current) == [
            (False, ["lax_test.py"]), (True, ["multibackend_test.py"])]


def test_host_callbacks_call_jax_runs_with_cpu_beside_the_ipu_in_jax_0_4_13() -> None:
    """jax 0.4.13's CallJaxTest runs jax on cpu from inside the ipu's callbacks, as on a gpu: host_callback_test.py's
    ipu run has cpu beside it; its other callback files keep the ipu alone there."""
    files = ["host_callback_test.py", "python_callback_test.py"]
    assert run_upstream.cpu_beside(files, current_series=False) == [
        (False, ["python_callback_test.py"]), (True, ["host_callback_test.py"])]


def test_a_library_file_kept_to_cpu_at_import_runs_on_the_ipu_when_lifted(tmp_path: Path) -> None:
    # a stand-in jax whose default backend is the ipu and which has no cpu backend (JAX_PLATFORMS=ipu)
    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "__init__.py").write_text(textwrap.dedent("""
        def default_backend(): return "ipu"
        def devices(backend=None):
            if backend == "cpu": raise RuntimeError("Unknown backend cpu")
            return ["ipu:0", "ipu:1"]
    """))
    (tmp_path / "test_noinline.py").write_text(textwrap.dedent("""
        import jax, pytest
        if jax.default_backend() != "cpu":
            pytest.skip("Skipping tests on non-CPU backend", allow_module_level=True)
        def test_runs(): assert jax.default_backend() == "ipu"  # the test itself sees the real backend
    """))
    (tmp_path / "test_pmap.py").write_text(textwrap.dedent("""
        import jax
        (cpu, _) = jax.devices("cpu")
        def test_on_the_default_backends_device(): assert cpu == "ipu:0"
    """))
    (tmp_path / "test_other.py").write_text("import jax\n(cpu, _) = jax.devices('cpu')\ndef test_x(): pass\n")

    def run(*lift: str) -> dict:
        out = tmp_path / "out.json"
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "jax_ipu_upstream",
                        "--continue-on-collection-errors", "--rootdir", str(tmp_path), f"--upstream-results={out}",
                        *lift, "test_noinline.py", "test_pmap.py", "test_other.py"],
                       cwd=tmp_path, env={"PYTHONPATH": f"{tmp_path}:{UPSTREAM}", "PATH": ""},
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        return json.loads(out.read_text())["outcomes"]

    assert run() == {"test_noinline.py": "skipped", "test_pmap.py": "error", "test_other.py": "error"}
    # lifted by name: only the files named, and only at their import
    assert run("--lift-cpu-gates=test_noinline.py,test_pmap.py") == {
        "test_noinline.py::test_runs": "passed", "test_pmap.py::test_on_the_default_backends_device": "passed",
        "test_other.py": "error"}


def test_older_tests_get_what_the_installed_jax_removed_and_cost_analysis_guards_are_lifted(tmp_path: Path) -> None:
    # a stand-in jax: without the names jax-v0.11.0's tests import that jax 0.12 removed, an ipu backend whose
    # platform_version says "PJRT C API", as jaxlib's C API client's does
    files = {
        "jax/__init__.py": "",
        "jax/experimental/__init__.py": "",
        "jax/experimental/compute_on.py": "",
        "jax/_src/__init__.py": "",
        "jax/_src/ad_checkpoint.py": "def saved_residuals(): pass\n",
        "jax/_src/compute_on.py": "",
        "jax/_src/test_util.py": "",
        "jax/_src/xla_bridge.py": textwrap.dedent("""
            import functools
            class Backend:
                platform = "ipu"
                platform_version = "PJRT C API\\nipu 1"
            @functools.lru_cache(None)
            def get_backend(platform=None): return Backend()
            def version_jax_sees(): return get_backend().platform_version
            def using_pjrt_c_api(backend=None): return True
        """),
        "checkout/jax/_src/hypothesis_test_util.py": "def setup_hypothesis(): return 'from the checkout'\n",
        "tests/api_test.py": textwrap.dedent("""
            import pytest
            from jax._src import hypothesis_test_util as htu, xla_bridge
            from jax._src.ad_checkpoint import SaveOnlyTheseNames, custom_remat, saved_residuals
            from jax._src.compute_on import compute_on2
            def test_the_test_util_comes_from_the_checkout(): assert htu.setup_hypothesis() == "from the checkout"
            def test_a_removed_function_raises():
                with pytest.raises(NotImplementedError, match="custom_remat is not in the installed jax"):
                    custom_remat(abs)
            def test_a_removed_class_is_a_class(): assert not isinstance(1, SaveOnlyTheseNames)
            def test_the_guard_reads_no_c_api():
                assert "PJRT C API" not in xla_bridge.get_backend().platform_version
                assert "PJRT C API" in xla_bridge.version_jax_sees()  # jax's own calls: the backend itself
                xla_bridge.get_backend.cache_clear()
        """),
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    out = tmp_path / "out.json"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "jax_ipu_upstream",
                          "--rootdir", str(tmp_path / "tests"), f"--upstream-results={out}",
                          f"--older-tests={tmp_path / 'checkout'}", "api_test.py"],
                         cwd=tmp_path / "tests", env={"PYTHONPATH": f"{tmp_path}:{UPSTREAM}", "PATH": ""},
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    assert run.returncode == 0, run.stdout
    assert set(json.loads(out.read_text())["outcomes"].values()) == {"passed"}
