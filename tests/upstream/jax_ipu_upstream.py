"""pytest plugin for running JAX's own test files: applies tests/upstream/expectations.txt and records every outcome.

    pytest -p jax_ipu_upstream --upstream-results=out.json [--upstream-expectations] ...

``--upstream-results`` writes {"outcomes": {node id: outcome}, "messages": {node id: first line of its failure}} as
JSON when the session ends, and appends each outcome to ``<results>.partial.jsonl`` as it arrives, so that an
interrupted run still tells what it saw (outcomes: passed, failed, skipped, xfailed, xpassed, error; a file that
failed to collect is an "error" under the file's name). ``--upstream-expectations``
marks the tests listed in expectations.txt as skipped or xfail (strict: a listed test that passes is reported, so
the list shrinks as the backend grows). Works with pytest-xdist: reports reach the controller.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict

import pytest
from expectations import load, match  # noqa: I001 (tests/upstream is on sys.path)

_RESULTS: Dict[str, str] = {}
# Lowerings a test file registered for "cpu" at its import, before jax had loaded the ipu plugin (the first file of
# a run): registered for "ipu" once jax's backends are up, before the first test runs.
_PENDING_LOWERINGS: list = []
_CONFIG = None  # the session's config, for the partial results file
_MESSAGES: Dict[str, str] = {}  # node id -> the last line of its failure: what expectations.txt reasons are made of


def pytest_addoption(parser):
    group = parser.getgroup("jax-ipu upstream")
    group.addoption("--upstream-results", default=None, help="write {node id: outcome} JSON here")
    group.addoption("--upstream-expectations", action="store_true", help="apply tests/upstream/expectations.txt")
    group.addoption("--upstream-expectations-file", default=None, help="apply this file instead (tests of the plugin)")
    group.addoption("--older-tests", default=None, metavar="CHECKOUT",
                    help="the tests are an older jax's (run_upstream.py --tests-of): give them what they import "
                         "that the installed jax no longer has (below)")
    group.addoption("--lift-cpu-gates", default="", metavar="FILE,...",
                    help="test files (by name) whose import-time gates to cpu are lifted on the ipu (below)")


def pytest_collection_modifyitems(config, items):
    path = config.getoption("--upstream-expectations-file")
    if not (config.getoption("--upstream-expectations") or path):
        return
    if not path:  # the installed series' own list
        import jax
        from expectations import series_path

        path = str(series_path(jax.__version__))
    rules = load(Path(path)) if Path(path).exists() else []
    for item in items:
        rule = match(rules, item.nodeid)
        if rule is None:
            continue
        if rule.kind == "skip":
            item.add_marker(pytest.mark.skip(reason=f"jax-ipu: {rule.reason}"))
        else:
            item.add_marker(pytest.mark.xfail(reason=f"jax-ipu: {rule.reason}", strict=True, run=True))


# Files jax skips as a whole for every PJRT C API plugin (``if xla_bridge.using_pjrt_c_api(): raise SkipTest(
# "host_callback not implemented in PJRT C API")``, likewise "infeed not implemented"): the ipu implements host
# callbacks and infeed, so these run on it, with jax told that the ipu is not such a plugin for their tests' length.
# - jax 0.4.13's pjit_test.py: testOutfeed ("outfeed not implemented in PJRT C API"); the ipu's outfeed works.
C_API_GUARDED_FILES = ("host_callback_test.py", "infeed_test.py", "pjit_test.py")
# Files with tests that skip themselves when the backend's platform_version says "PJRT C API" ("C API does not
# support uncompiled cost analysis"): the ipu's Lowered.cost_analysis() is XLA's (_jax.answer_lowered_cost_analysis), so
# for their tests the version they read leaves those words out (api_test.py and 0.4.13's xmap_test.py).
COST_ANALYSIS_GUARDED_FILES = ("api_test.py", "xmap_test.py")


# Files whose tests skip themselves unless ``jtu.test_device_matches(["cpu", "gpu", "tpu"])``, for a capability the ipu
# has: for their tests that list matches the ipu too.
# - The current series' python_callback_test.py: "Host callback not supported on ipu"; the ipu runs host callbacks.
# - The current series' compilation_cache_test.py: "serialize executable only works on tpu,gpu,cpu"; the ipu
#   serialises its executables (pjrt/serialize.cc) and routes its compiles through jax's persistent cache. (Its skip
#   comes after its base class has put a cache object in place, which a skipped test then leaves behind: jax's own
#   check of global state fails every test of the file after the first.)
# - The current series' pjit_test.py: buffer donation tests ("Skipped unless running on devices with tags: cpu, gpu,
#   tpu"); the ipu donates buffers (pjrt/launch.cc).
DEVICE_GATED_FILES = ("python_callback_test.py", "compilation_cache_test.py", "pjit_test.py")
_JAX_OWN_DEVICES = ["cpu", "gpu", "tpu"]
# Files whose tests jax keeps to cpu (@jtu.run_on_devices("cpu")) to save its other backends' test time, not for a
# capability cpu alone has: on the ipu they run as on cpu.
# - The current series' lax_control_flow_test.py: 470 generated cases of switch-gradient forwarding and of while/scan
#   constification and forwarding correctness (each compares two ways of computing the same thing).
# - The current series' api_test.py: 130 generated cases of test_jit_forwarding_correctness (a jitted function's
#   outputs forwarded from its inputs, against the same function unjitted).
# - The current series' pjit_test.py: test_changing_abstract_device (a jit's tracing cache under another abstract
#   device).
# - The current series' shard_map_test.py (test_forwarding_correctness) and mutable_array_test.py (systematic vjps
#   of jitted functions and scans over read-only refs): generated cases checking two ways of computing the same thing.
# - The current series' x64_context_test.py (the inverse of a near-singular matrix in float64, which the ipu emulates)
#   and lax_numpy_reducers_test.py (testPercentilePrecision).
CPU_GATED_FILES = ("lax_control_flow_test.py", "api_test.py", "pjit_test.py", "shard_map_test.py",
                   "mutable_array_test.py", "x64_context_test.py", "lax_numpy_reducers_test.py")
# Files whose tests jax keeps to cpu and gpu (@jtu.run_on_devices("cpu", "gpu") or ("cpu"), or "if not
# jtu.test_device_matches(["cpu", "gpu"]): skipTest(...)") because only LAPACK or the GPU solvers have the algorithm,
# where the ipu has one of its own (jax_ipu/backend/linalg.py): on the ipu they run as on cpu. A device list with tpu
# in it, and skip_on_devices (a test jax leaves out on cpu), keep their meaning.
# - The current series' linalg_test.py: eig, eigvals and their gradients, hessenberg, schur, rsf2csf, pivoted QR
#   ("Pivoting is only supported on CPU and GPU") and tridiagonal solves that need their rows swapped ("Pivoting not
#   supported in fallback tridiagonal solve").
# - The current series' lax_numpy_test.py: jnp.poly of a matrix, its characteristic polynomial ("Nonsymmetric
#   eigendecomposition is only implemented on the CPU and GPU backends").
# - The current series' linalg_sharding_test.py: each decomposition of a batch sharded over 2 devices, partitioned
#   along the batch with no collective, its gradients, and its shardings.
LAPACK_GATED_FILES = ("linalg_test.py", "lax_numpy_test.py", "linalg_sharding_test.py")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A library's test file that keeps itself to cpu when it is imported (equinox's ``if jax.default_backend() !=
    "cpu": pytest.skip(...)``, a ``skipif(jax.default_backend() != "cpu")`` mark, ``(cpu, _) = jax.devices("cpu")``
    to pmap over): named in ``--lift-cpu-gates``, it is imported on the ipu with the default backend called "cpu" and
    ``jax.devices("cpu")`` giving the default backend's devices, as jax's own cpu-gated files are lifted
    (CPU_GATED_FILES); its tests then run on the ipu. Only the import sees this: a test calls the real functions."""
    names = collector.config.getoption("--lift-cpu-gates").split(",")
    if not isinstance(collector, pytest.Module) or collector.path.name not in names:
        yield
        return
    import jax

    default_backend, devices = jax.default_backend, jax.devices
    if default_backend() != "ipu":
        yield
        return
    jax.default_backend = lambda: "cpu"
    jax.devices = lambda backend=None: devices(None if backend == "cpu" else backend)
    try:
        yield
    finally:
        jax.default_backend, jax.devices = default_backend, devices


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _PENDING_LOWERINGS:
        import jax
        from jax._src.interpreters import mlir

        jax.devices()  # jax loads its plugins, the ipu's included
        while _PENDING_LOWERINGS:
            prim, rule, kwargs = _PENDING_LOWERINGS.pop(0)
            try:
                mlir.register_lowering._jax_ipu_original(prim, rule, platform="ipu", **kwargs)
            except NotImplementedError:
                pass  # no ipu backend in this run (JAX_PLATFORMS=cpu): nothing lowers for it
    name = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    if name not in (C_API_GUARDED_FILES + COST_ANALYSIS_GUARDED_FILES + DEVICE_GATED_FILES + CPU_GATED_FILES
                    + LAPACK_GATED_FILES):
        yield
        return
    from jax._src import test_util as jtu
    from jax._src import xla_bridge

    using_pjrt_c_api, test_device_matches = xla_bridge.using_pjrt_c_api, getattr(jtu, "test_device_matches", None)
    get_backend = xla_bridge.get_backend

    def lifted_get_backend(*args, **kwargs):
        import sys

        backend = get_backend(*args, **kwargs)
        if backend.platform != "ipu" or not sys._getframe(1).f_code.co_filename.endswith("_test.py"):
            return backend  # jax's own calls get the backend itself
        return _WithoutCApiWords(backend)

    lifted_get_backend.cache_clear = getattr(get_backend, "cache_clear", None)  # (a file's setup clears it)

    def lifted_c_api(backend=None):
        return False if xla_bridge.get_backend(backend).platform == "ipu" else using_pjrt_c_api(backend)

    def lifted_matches(device_types):
        device_types = list(device_types)
        if sorted(device_types) == _JAX_OWN_DEVICES and jtu.device_under_test() == "ipu":
            return True
        if name in CPU_GATED_FILES and "cpu" in device_types and jtu.device_under_test() == "ipu":
            return True
        if (name in LAPACK_GATED_FILES and "cpu" in device_types and set(device_types) <= {"cpu", "gpu"}
                and jtu.device_under_test() == "ipu" and not _from_skip_on_devices()):
            return True
        return test_device_matches(device_types)

    if name in C_API_GUARDED_FILES:
        xla_bridge.using_pjrt_c_api = lifted_c_api
    if name in COST_ANALYSIS_GUARDED_FILES:
        xla_bridge.get_backend = lifted_get_backend
    if name in DEVICE_GATED_FILES + CPU_GATED_FILES + LAPACK_GATED_FILES and test_device_matches is not None:
        jtu.test_device_matches = lifted_matches
    try:
        yield
    finally:
        xla_bridge.using_pjrt_c_api, xla_bridge.get_backend = using_pjrt_c_api, get_backend
        if test_device_matches is not None:
            jtu.test_device_matches = test_device_matches


class _WithoutCApiWords:
    """The ipu backend as a test file's own ``xla_bridge.get_backend()`` call sees it in COST_ANALYSIS_GUARDED_FILES:
    its platform_version without jaxlib's "PJRT C API" prefix, all else the backend's."""

    def __init__(self, backend) -> None:
        self._backend = backend

    @property
    def platform_version(self) -> str:
        return self._backend.platform_version.replace("PJRT C API", "").strip()

    def __getattr__(self, name: str):
        return getattr(self._backend, name)


def _from_skip_on_devices() -> bool:
    """Whether jtu.test_device_matches was called by a @jtu.skip_on_devices filter (two frames up: the lifting
    wrapper, then the filter's lambda, named after the decorator that made it)."""
    import sys

    code = sys._getframe(2).f_code
    return "skip_on_devices" in getattr(code, "co_qualname", code.co_name)


def _outcome(report) -> str:
    if report.failed and str(report.longrepr).startswith("[XPASS(strict)]"):
        return "xpassed"  # a listed test that now passes: pytest fails the run so that the list shrinks
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else ("xpassed" if report.passed else "failed")
    if report.failed:
        return "failed" if report.when == "call" else "error"
    return report.outcome  # passed / skipped


def _append_partial(config, nodeid: str) -> None:
    path = config.getoption("--upstream-results")
    if path and not hasattr(config, "workerinput"):
        with open(path + ".partial.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps([nodeid, _RESULTS[nodeid], _MESSAGES.get(nodeid, "")]) + "\n")


def pytest_configure(config):
    global _CONFIG
    _CONFIG = config
    try:  # our jax_ipu_* options, defined before the first test: jax's tests check that none appears during one
        import jax  # noqa: F401 - first: jax_ipu defines its options in an imported jax
    except ImportError:
        return
    if config.getoption("--older-tests"):
        _give_older_tests_what_they_import(Path(config.getoption("--older-tests")))
    try:
        import jax_ipu  # noqa: F401
    except ImportError:
        return
    _lower_test_primitives_for_ipu()


# What the tests of an older jax (the current series runs jax-v0.11.0's: run_upstream.py --tests-of) import at module
# level that the installed jax has removed, so that a whole file fails to collect on both backends for one name:
# api_test.py (custom_remat, SaveOnlyTheseNames), pjit_test.py and memories_test.py (compute_on2), state_test.py
# (jax._src.hypothesis_test_util, a test utility). A removed function is a placeholder that raises, a removed class
# an empty one, and a removed test utility module is loaded from the checkout: the tests that use them fail on cpu
# as on the ipu and are not counted (the rate is of cpu's passes); the rest of the file runs. Files about removed
# features as a whole (control_deps_test.py, shard_alike_test.py, hijax_test.py) are left to fail to collect.
_REMOVED_NAMES = {
    "jax._src.ad_checkpoint": ("custom_remat", "SaveOnlyTheseNames"),
    "jax._src.compute_on": ("compute_on2",),
    "jax.experimental.compute_on": ("compute_on2",),
}
_REMOVED_TEST_MODULES = ("jax._src.hypothesis_test_util",)


def _give_older_tests_what_they_import(checkout: Path) -> None:
    import importlib
    import importlib.util
    import sys

    def placeholder(qualname: str):
        def removed(*args, **kwargs):
            raise NotImplementedError(f"{qualname} is not in the installed jax (the tests are an older jax's)")

        return removed

    for module_name, names in _REMOVED_NAMES.items():
        module = importlib.import_module(module_name)
        for name in names:
            if not hasattr(module, name):
                setattr(module, name, type(name, (), {}) if name[0].isupper() else placeholder(f"{module_name}.{name}"))
    for module_name in _REMOVED_TEST_MODULES:
        if importlib.util.find_spec(module_name) is not None:
            continue
        path = checkout.joinpath(*module_name.split(".")).with_suffix(".py")
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None or not path.is_file():
            continue
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        parent, _, child = module_name.rpartition(".")
        setattr(importlib.import_module(parent), child, module)


def _lower_test_primitives_for_ipu() -> None:
    """Some test files define a primitive of their own and register its lowering for the platforms they know by
    name (python_callback_test.py: ``callback_p`` for "cpu", "gpu" and "tpu"), as a user's library registers one for
    the platforms it supports. A user would add "ipu"; here a lowering a test file registers for "cpu" is registered
    for "ipu" too (jax's own modules register theirs before the tests are imported: those are the backend's)."""
    import sys

    from jax._src.interpreters import mlir
    from jax.interpreters import mlir as public_mlir

    original = mlir.register_lowering
    if getattr(original, "_jax_ipu_upstream", False):
        return

    def register_lowering(prim, rule, platform=None, **kwargs):
        result = original(prim, rule, platform=platform, **kwargs)
        caller = sys._getframe(1).f_code.co_filename  # (not inspect.stack(), which reads every frame's source)
        if platform == "cpu" and caller.endswith("_test.py"):
            try:
                original(prim, rule, platform="ipu", **kwargs)
            except NotImplementedError:  # "ipu" is not a known platform until jax has loaded the plugin: later
                _PENDING_LOWERINGS.append((prim, rule, kwargs))
        return result

    register_lowering._jax_ipu_upstream = True
    register_lowering._jax_ipu_original = original
    mlir.register_lowering = public_mlir.register_lowering = register_lowering


def pytest_runtest_logreport(report):
    outcome = _outcome(report)
    previous = _RESULTS.get(report.nodeid)
    # A test's outcome is its call phase's, unless setup or teardown failed or it was skipped before the call.
    if report.when == "call" or previous is None or outcome == "error":
        _RESULTS[report.nodeid] = outcome
        if outcome in ("failed", "error"):
            crash = getattr(report.longrepr, "reprcrash", None)
            _MESSAGES[report.nodeid] = (crash.message if crash else str(report.longrepr)).strip().splitlines()[0][:300]
        elif outcome == "skipped" and isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
            reason = str(report.longrepr[2])  # (file, line, "Skipped: <reason>"): why it was skipped
            _MESSAGES[report.nodeid] = (reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason)[:300]
    if report.when == "teardown" and _CONFIG is not None:
        _append_partial(_CONFIG, report.nodeid)


def pytest_collectreport(report):
    if report.failed:
        _RESULTS[report.nodeid or "<collection>"] = "error"
        _MESSAGES[report.nodeid or "<collection>"] = str(report.longrepr).strip().splitlines()[-1][:300]
    elif report.skipped and report.nodeid:  # a file that skips itself whole (pytest.skip(allow_module_level=True))
        _RESULTS[report.nodeid] = "skipped"
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _MESSAGES[report.nodeid] = (reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason)[:300]


def pytest_sessionfinish(session, exitstatus):
    path = session.config.getoption("--upstream-results")
    if path and not hasattr(session.config, "workerinput"):  # the xdist controller (or a plain run) writes it
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"outcomes": _RESULTS, "messages": _MESSAGES}, f, indent=0, sort_keys=True)
