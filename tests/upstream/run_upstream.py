"""Runs JAX's own test files against the installed wheels, on cpu and on ipu, and reports the ipu pass rate.

    python tests/upstream/run_upstream.py JAX_CHECKOUT [--files all|lane|multi-device|callbacks|interop|a_test.py,...]
        [--shard K/N] [--backends cpu,ipu] [--cases N] [--workers N] [--devices N] [--json PATH] [--min-rate 97]

Run it through `nox -s upstream_tests -- JAX_CHECKOUT` (a fresh Python venv with dist/*.whl and
build_tools/upstream-test-requirements.txt). JAX_CHECKOUT is a jax source tree at the tag of the pinned jax (the jax
sdist has no tests), e.g. `git clone --depth 1 --branch jax-v0.4.13 https://github.com/jax-ml/jax`.

Each file runs with pytest (pytest-xdist over --workers processes) once with JAX_PLATFORMS=cpu and once with
JAX_PLATFORMS=ipu, from a copy of the checkout's tests/ directory, so that `import jax` is the installed wheel.
On ipu, tests/upstream/expectations.txt is applied: listed tests are skipped or strict-xfail, each with its reason.
The pass rate of a file is: of the tests that pass on cpu, the share that pass on ipu (an xfail counts as a
failure). Exit status 1 when a file does not collect on ipu, a test that passes on cpu fails on ipu without being
listed, a listed xfail passes (shrink the list), or the total rate is below --min-rate. The rate the target
applies to leaves out the tests jax's own utilities keep to other devices (@jtu.run_on_devices("cpu"): skipped
on ipu as on jax's GPU and TPU runs; cases generated for cpu only, absent from the ipu run); the table shows both,
and a third figure, the whole-suite metric other plugins report (jax-mps): the ipu's passes among its collected
tests less those skipped or xfailed.

By default every test file of the checkout runs (``--files all``); the multi-device files (MULTI_DEVICE_FILES)
run in a pytest of their own with 4 devices on each backend (4 IPUs; cpu with 4 forced host devices) unless
--devices says otherwise. ``--shard K/N`` keeps every N-th file from the K-th, so that CI can spread the files over
N jobs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
# Issue 7's choice: lax, lax_numpy*, control flow, autodiff, vmap, random, linalg, fft, nn, einsum and api.
FILES = (
    "lax_test.py", "lax_numpy_test.py", "lax_numpy_operators_test.py", "lax_numpy_reducers_test.py",
    "lax_numpy_indexing_test.py", "lax_numpy_einsum_test.py", "lax_numpy_vectorize_test.py",
    "lax_control_flow_test.py", "lax_autodiff_test.py", "lax_vmap_test.py", "lax_vmap_op_test.py",
    "random_test.py", "linalg_test.py", "fft_test.py", "nn_test.py", "api_test.py",
)
# Issue 23's callback lane: `--files` these (with `--devices 4` for their pmap tests). jax skips the first two for
# every PJRT C API plugin and the harness runs them on the ipu (jax_ipu_upstream.C_API_GUARDED_FILES); the
# current series has removed host_callback.
CALLBACK_FILES = ("host_callback_test.py", "infeed_test.py", "python_callback_test.py", "checkify_test.py",
                  "debugging_primitives_test.py")
# Issue 20's multi-device lane: `--files` these with `--devices 4` or `--devices 8` (jax's own tests of sharding,
# pjit, shard_map and pmap; the same forced device count on cpu).
MULTI_DEVICE_FILES = ("pjit_test.py", "xmap_test.py", "shard_map_test.py", "multi_device_test.py", "array_test.py",
                      "pmap_test.py")
# DLPack and jits for several backends in one process (issue 23).
INTEROP_FILES = ("array_interoperability_test.py", "multibackend_test.py")
PASS = ("passed", "xpassed")
LANES = {"lane": FILES, "multi-device": MULTI_DEVICE_FILES, "callbacks": CALLBACK_FILES, "interop": INTEROP_FILES}
MULTI_DEVICE_COUNT = 4
# The files run with MULTI_DEVICE_COUNT devices by default: the multi-device lane's, and those of the callback lane
# that test pmap and sharded callbacks (measured so: README).
FOUR_DEVICE_FILES = MULTI_DEVICE_FILES + ("python_callback_test.py", "checkify_test.py", "debugging_primitives_test.py")


def select_files(spec: str, available: List[str], shard: Optional[str] = None) -> List[str]:
    """The files ``--files`` names (file names, or "all" and the LANES' names, comma-separated), in order, each
    once; with ``shard`` "K/N", every N-th of them from the K-th (1-based)."""
    files: List[str] = []
    for item in (i.strip() for i in spec.split(",")):
        if not item:
            continue
        names = sorted(available) if item == "all" else list(LANES.get(item, (item,)))
        files += [f for f in names if f not in files]
    if shard:
        k, n = (int(part) for part in shard.split("/"))
        if not 1 <= k <= n:
            raise SystemExit(f"--shard {shard}: K must be 1 to N")
        files = files[k - 1::n]
    return files


# What a test file asks jax's test utilities for at its top: ``jtu.request_cpu_devices(8)`` (the current series; cpu
# then has 8 devices whatever the run forced) or ``jtu.set_host_platform_device_count(N)`` (0.4.13).
_REQUESTED = re.compile(r"\b(?:request_cpu_devices|set_host_platform_device_count)\(\s*(\d+)\s*\)")


def devices_asked(path: Path, pattern: "re.Pattern[str]") -> Optional[int]:
    """The most devices the test file at ``path`` asks for in ``pattern``'s words (its one group: the count), or
    None."""
    try:
        found = [int(n) for n in pattern.findall(path.read_text(errors="replace"))]
    except OSError:
        return None
    return max(found) if found else None


def requested_devices(path: Path) -> Optional[int]:
    """The cpu devices the test file at ``path`` requests (the most, if it asks more than once), or None."""
    return devices_asked(path, _REQUESTED)


def device_groups(files: List[str], devices: Optional[int],
                  tests_dir: Optional[Path] = None) -> List[Tuple[Optional[int], List[str]]]:
    """[(devices, files)]: one pytest per group and backend, fewest devices first. ``devices`` given: every file with
    it. Otherwise FOUR_DEVICE_FILES get MULTI_DEVICE_COUNT, and a file that requests more cpu devices for itself
    (requested_devices, in ``tests_dir``) gets that many on both backends: the ipu run has as many IPUs as cpu has
    devices, so that no test skips itself on the ipu for want of devices that cpu was given."""
    if devices is not None:
        return [(devices, files)]
    groups: Dict[Optional[int], List[str]] = {}
    for f in files:
        count = MULTI_DEVICE_COUNT if f in FOUR_DEVICE_FILES else None
        asked = requested_devices(tests_dir / f) if tests_dir is not None else None
        if asked is not None and asked > (count or 1):
            count = asked
        groups.setdefault(count, []).append(f)
    return [(d, groups[d]) for d in sorted(groups, key=lambda d: d or 1)]


# Files whose tests jit the same function for the device under test and for cpu (backend="cpu", jax.devices("cpu")),
# as jax's GPU and TPU runs can, which always have cpu beside them: the ipu run has cpu beside it too.
# Also the current series' colocated_python_test.py (Python run on the cpu devices colocated with the accelerator's)
# and string_array_test.py (string arrays, which jax keeps on cpu devices).
MULTI_BACKEND_FILES = ("multibackend_test.py", "colocated_python_test.py", "string_array_test.py")
# jax 0.4.13's host_callback_test.py runs call_jax's functions on cpu from inside the device's callbacks (CallJaxTest's
# "outside device", which is cpu beside a gpu or tpu): the ipu run has cpu beside it too.
OUTSIDE_DEVICE_FILES = ("host_callback_test.py",)


def cpu_beside(files: List[str], current_series: bool) -> List[Tuple[bool, List[str]]]:
    """[(whether the ipu run also has cpu, files)]. The current series' jax puts a callback's operands on a cpu device
    (io_callback, jax.debug.*: "failed to find a local CPU device ... Make sure cpu is listed in JAX_PLATFORMS"),
    as a user's process has: its callback lane runs on the ipu with JAX_PLATFORMS=ipu,cpu (the ipu stays the default
    backend); so do MULTI_BACKEND_FILES and OUTSIDE_DEVICE_FILES, in both series. Every other run has the ipu alone."""
    beside = [f for f in files
              if (current_series and f in CALLBACK_FILES) or f in MULTI_BACKEND_FILES + OUTSIDE_DEVICE_FILES]
    alone = [f for f in files if f not in beside]
    return [(c, g) for c, g in ((False, alone), (True, beside)) if g]


def jax_version(version: str) -> Tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0])[:3])


def checkout_version(checkout: Path) -> str:
    version_py = checkout / "jax" / "version.py"
    if not (checkout / "tests").is_dir() or not version_py.is_file():
        raise SystemExit(f"{checkout} is not a jax source checkout (it needs tests/ and jax/version.py). "
                         "Get one at the pinned tag, e.g.: git clone --depth 1 --branch jax-v<version> "
                         "https://github.com/jax-ml/jax")
    text = version_py.read_text(encoding="utf-8")
    # jax 0.4.13: __version__ = "..."; later series: _version = "..." (a source tree has no release version).
    found = (re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.M)
             or re.search(r'^_version\s*=\s*"([^"]+)"', text, re.M))
    return found.group(1) if found else "?"


def run_backend(backend: str, tests_dir: Path, files: List[str], args, out: Path,
                devices: Optional[int] = None, with_cpu: bool = False) -> int:
    env = dict(os.environ)  # nox cleared the variables that would redirect the run (noxfile.REDIRECTING_ENV)
    platforms = f"{backend},cpu" if with_cpu and backend != "cpu" else backend
    env.update(JAX_PLATFORMS=platforms, JAX_NUM_GENERATED_CASES=str(args.cases),
               PYTHONPATH=os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    if devices:  # the multi-device files: the same number of devices on either backend
        if backend == "ipu":
            env["JAX_IPU_DEVICE_COUNT"] = str(devices)
        else:
            flags = [f for f in env.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
            env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={devices}"])
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "jax_ipu_upstream",
           "--rootdir", str(tests_dir), f"--upstream-results={out}", "-o", "addopts=", "--tb=line", "-rN",
           "--continue-on-collection-errors"]
    if args.workers > 1:
        cmd += ["-n", str(args.workers)]  # tests of one file spread over the workers too
    if backend == "ipu":
        cmd.append("--upstream-expectations")
    if getattr(args, "older_tests", None):
        cmd.append(f"--older-tests={args.older_tests}")
    cmd += files
    print(f"\n== {platforms}{f' ({devices} devices)' if devices else ''}: {' '.join(files)}", flush=True)
    return subprocess.run(cmd, cwd=tests_dir, env=env).returncode


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _test_function(nodeid: str) -> str:
    """The test a generated case belongs to: its node id without the case number (testSVD2 -> testSVD)."""
    return nodeid.rstrip("0123456789")


# What jax's own test utilities say when they skip a test on a device its author did not enable it for
# (@jtu.run_on_devices("cpu"), ...): such a test is for another backend, as on jax's GPU and TPU runs.
# Also a feature jaxlib gives cpu buffers only: array_test's buffer protocol tests skip themselves elsewhere.
# The current series' callback tests skip themselves by device too ("Host callback not supported on ipu" unless cpu,
# gpu or tpu; "Test requires CPU or GPU devices"), though the ipu runs host callbacks (its own tests, and jax
# 0.4.13's versions of these files).
JAX_DEVICE_RESTRICTION = ("Skipped unless running on devices with tags", "Buffer protocol only works on CPU",
                          "Host callback not supported on", "Test requires CPU or GPU devices")


def summarise(files: List[str], cpu: Dict[str, str], ipu: Dict[str, str],
              ipu_messages: Optional[Dict[str, str]] = None,
              restrictions: Tuple[str, ...] = JAX_DEVICE_RESTRICTION) -> Tuple[list, dict]:
    """Per file and in total: of the tests that pass on cpu, how many pass on ipu (`rate`), and the same leaving out
    those jax's own test utilities run only on other devices (`runnable_rate`: skips whose message starts with one
    of ``restrictions``)."""
    ipu_messages = ipu_messages or {}
    rows = []
    for f in files:
        cpu_f = {k: v for k, v in cpu.items() if file_of(k) == f}
        ipu_f = {k: v for k, v in ipu.items() if file_of(k) == f}
        base = sorted(k for k, v in cpu_f.items() if v in PASS)
        ok = [k for k in base if ipu_f.get(k) in PASS]
        restricted = [k for k in base if ipu_f.get(k) == "skipped"
                      and ipu_messages.get(k, "").startswith(restrictions)]
        # A case jax generates for cpu only (its parameters depend on jtu.device_under_test(), e.g. linalg_test's
        # svd_algorithms()): absent from the ipu run, where other cases of the same test ran. Like the above, for
        # other devices.
        ran = {_test_function(k) for k in ipu_f}
        not_generated = [k for k in base if k not in ipu_f and _test_function(k) in ran]
        restricted += not_generated
        runnable = len(base) - len(restricted)
        rows.append({
            "file": f, "cpu_passed": len(base), "ipu_passed": len(ok),
            "ipu_xfailed": sum(1 for k in base if ipu_f.get(k) == "xfailed"),
            "ipu_skipped": sum(1 for k in base if ipu_f.get(k) == "skipped"),
            "jax_device_restricted": len(restricted),
            "runnable_rate": 100.0 * len(ok) / runnable if runnable else None,
            "ipu_failed": sorted(k for k in base if ipu_f.get(k) in ("failed", "error")),
            "ipu_missing": sorted(k for k in base if k not in ipu_f and k not in not_generated),
            "not_generated_on_ipu": sorted(not_generated),
            "xpassed": sorted(k for k, v in ipu_f.items() if v == "xpassed"),
            "collect_error_cpu": cpu_f.get(f) == "error", "collect_error_ipu": ipu_f.get(f) == "error",
            "rate": 100.0 * len(ok) / len(base) if base else None,
            **_suite_metric(ipu_f),
        })
    total_base = sum(r["cpu_passed"] for r in rows)
    total_ok = sum(r["ipu_passed"] for r in rows)
    runnable = total_base - sum(r["jax_device_restricted"] for r in rows)
    total = {"cpu_passed": total_base, "ipu_passed": total_ok,
             "rate": 100.0 * total_ok / total_base if total_base else None,
             "jax_device_restricted": total_base - runnable,
             "runnable_rate": 100.0 * total_ok / runnable if runnable else None,
             **_suite_metric({k: v for k, v in ipu.items() if file_of(k) in files})}
    return rows, total


def _suite_metric(outcomes: Dict[str, str]) -> Dict[str, Optional[float]]:
    """The whole-suite figure other PJRT plugins report (jax-mps): passed / (collected - skipped - xfailed), over
    the ipu's own outcomes (a file that does not collect counts as one failure)."""
    counted = [v for v in outcomes.values() if v not in ("skipped", "xfailed")]
    passed = sum(1 for v in counted if v in PASS)
    return {"suite_counted": len(counted), "suite_passed": passed,
            "suite_rate": 100.0 * passed / len(counted) if counted else None}


def _percent(value: Optional[float], digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}%"


def print_table(rows: list, total: dict) -> None:
    """`cpu only`: skipped on ipu by jax's own device restrictions, or generated for cpu only; `runnable`: the rate
    without them."""
    print(f"\n{'file':32} {'cpu pass':>9} {'ipu pass':>9} {'xfail':>6} {'skip':>5} {'cpu only':>8} {'fail':>5} "
          f"{'rate':>7} {'runnable':>8} {'suite':>7}")
    print("-" * 104)
    for r in rows:
        note = " (ipu: collection error)" if r["collect_error_ipu"] else ""
        note += " (cpu: collection error)" if r["collect_error_cpu"] else ""
        print(f"{r['file']:32} {r['cpu_passed']:9} {r['ipu_passed']:9} {r['ipu_xfailed']:6} {r['ipu_skipped']:5} "
              f"{r['jax_device_restricted']:8} {len(r['ipu_failed']) + len(r['ipu_missing']):5} "
              f"{_percent(r['rate']):>7} {_percent(r['runnable_rate']):>8} {_percent(r['suite_rate']):>7}{note}")
    print("-" * 104)
    print(f"{'total':32} {total['cpu_passed']:9} {total['ipu_passed']:9} {'':6} {'':5} "
          f"{total['jax_device_restricted']:8} {'':5} {_percent(total['rate'], 2):>7} "
          f"{_percent(total['runnable_rate'], 2):>8} {_percent(total['suite_rate'], 2):>7}")
    print("(rate: of cpu's passes, those the ipu passes; runnable: the same without the tests jax keeps to other "
          "devices; suite: the ipu's passes of its collected tests less skips and xfails, as jax-mps reports)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkout", type=Path)
    p.add_argument("--files", default="all", help="comma-separated test files under tests/, or lanes: all (every "
                                                  f"*_test.py), {', '.join(LANES)}")
    p.add_argument("--shard", default=None, metavar="K/N", help="every N-th of the files, from the K-th")
    p.add_argument("--backends", default="cpu,ipu")
    p.add_argument("--cases", type=int, default=5, help="JAX_NUM_GENERATED_CASES")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--devices", type=int, default=None,
                   help="devices per backend (JAX_IPU_DEVICE_COUNT; cpu: --xla_force_host_platform_device_count) for "
                        f"every file; default: {MULTI_DEVICE_COUNT} for FOUR_DEVICE_FILES, 1 for the others")
    p.add_argument("--json", type=Path, default=Path("upstream-results.json"))
    p.add_argument("--min-rate", type=float, default=97.0)
    p.add_argument("--tests-of", metavar="VERSION", default=None,
                   help="accept a checkout of another jax version (its tests against the installed jax), when the "
                        "installed version's tag cannot be had: the report records both versions")
    p.add_argument("--reuse", type=Path, action="append", default=[],
                   help="the --json of an earlier run: take its backends' results instead of running them again "
                        "(e.g. cpu, which does not change with the ipu wheels)")
    args = p.parse_args(argv)

    import jax  # the installed wheel

    version = checkout_version(args.checkout.resolve())
    wanted = jax.__version__.split("+")[0]
    if version != wanted and version != args.tests_of:
        raise SystemExit(f"{args.checkout} is jax {version}, but the installed jax is {jax.__version__}: check out "
                         f"tag jax-v{wanted} (or say --tests-of {version} to run that version's tests knowingly)")
    args.older_tests = None
    if version != wanted:
        print(f"[upstream] the tests of jax {version} against the installed jax {jax.__version__} (--tests-of)")
        args.older_tests = str(args.checkout.resolve())
    available = sorted(p.name for p in (args.checkout / "tests").glob("*_test.py"))
    files = select_files(args.files, available, args.shard)
    missing = [f for f in files if not (args.checkout / "tests" / f).is_file()]
    if missing:
        raise SystemExit(f"not in {args.checkout / 'tests'}: {', '.join(missing)}")

    results: Dict[str, Dict[str, str]] = {}
    messages: Dict[str, Dict[str, str]] = {}
    codes = {}
    for earlier in args.reuse:
        old = json.loads(earlier.read_text(encoding="utf-8"))
        if old.get("jax") != jax.__version__ or old.get("cases") != args.cases:
            raise SystemExit(f"--reuse {earlier}: it ran jax {old.get('jax')} with {old.get('cases')} cases, not "
                             f"jax {jax.__version__} with {args.cases}")
        for backend, res in old["results"].items():
            results[backend] = {k: v for k, v in res.items() if file_of(k) in files}
            messages[backend] = old.get("messages", {}).get(backend, {})
            codes[backend] = old["exit_codes"].get(backend)
    with tempfile.TemporaryDirectory(prefix="jax-upstream-") as tmp:
        tests_dir = Path(tmp) / "tests"
        shutil.copytree(args.checkout / "tests", tests_dir)
        groups = device_groups(files, args.devices, tests_dir)
        for backend in [b for b in args.backends.split(",") if b and b not in results]:
            results[backend], messages[backend], exits = {}, {}, []
            for devices, group in groups:
                for with_cpu, files_ in cpu_beside(group, jax_version(jax.__version__) >= (0, 5)):
                    out = Path(tmp) / f"{backend}-{devices or 1}{'-cpu' if with_cpu else ''}.json"
                    exits.append(run_backend(backend, tests_dir, files_, args, out, devices, with_cpu))
                    recorded = json.loads(out.read_text()) if out.is_file() else {}
                    results[backend].update(recorded.get("outcomes", {}))
                    messages[backend].update(recorded.get("messages", {}))
            # the worst: an incomplete run first
            codes[backend] = max(exits, key=lambda c: (c not in (0, 1), c)) if exits else 0

    report = {"jax": jax.__version__, "tests_of": version, "files": files, "cases": args.cases, "devices": args.devices,
              "device_groups": [[d or 1, g] for d, g in groups], "shard": args.shard,
              "exit_codes": codes}
    status = 0
    if "cpu" in results and "ipu" in results:
        rows, total = summarise(files, results["cpu"], results["ipu"], messages.get("ipu"))
        print_table(rows, total)
        report.update(rows=rows, total=total)
        problems = []
        for backend, code in codes.items():
            if code not in (0, 1, None):  # 0: all passed, 1: some failed; anything else cut the run short
                problems.append(f"pytest on {backend} ended with exit status {code}: the run did not complete")
        for r in rows:
            if r["collect_error_ipu"] and not r["collect_error_cpu"]:
                problems.append(f"{r['file']} does not collect on ipu")
            for k in r["ipu_failed"]:
                why = messages.get("ipu", {}).get(k, "")
                problems.append(f"fails on ipu, passes on cpu, not in expectations.txt: {k}: {why}")
            for k in r["ipu_missing"]:
                problems.append(f"passes on cpu, did not run on ipu: {k}")
            for k in r["xpassed"]:
                problems.append(f"listed as xfail but passes on ipu (remove it from expectations.txt): {k}")
        # The target holds for the tests jax runs on any device (not those its own utilities keep to cpu).
        if total["runnable_rate"] is not None and total["runnable_rate"] < args.min_rate:
            problems.append(f"ipu pass rate {total['runnable_rate']:.2f}% (of the cpu passes jax does not keep to "
                            f"other devices) is below the target {args.min_rate}%")
        for line in problems[:200]:
            print("  " + line)
        if len(problems) > 200:
            print(f"  ... and {len(problems) - 200} more (see {args.json})")
        report["problems"] = problems
        status = 1 if problems else 0
    report["results"] = results
    report["messages"] = messages
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1, sort_keys=True), encoding="utf-8")
    print(f"\nresults: {args.json}")
    return status


if __name__ == "__main__":
    sys.exit(main())
