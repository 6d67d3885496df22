"""Sessions for building and testing jax-ipu. The same sessions run on a laptop, in .ci/run and in GitHub Actions.

    nox -s build_wheels                 # every series: dist/ (0.4.13, Python 3.8), dist/0.12.0.1/ (Python 3.12)
    nox -s build_wheels -- --series 0.12.0.1   # one series
    nox -s build_wheels -- --docker     # the 0.4.13 series inside docker/Dockerfile (Ubuntu 20.04 + Python 3.8)
    nox -s build_wheels -- --cxx g++    # development build with another compiler (not portable)
    nox -s tests                        # build or reuse dist/, toolchain tests, every series' suites and examples
    nox -s installed_tests-3.12         # one series' suites (sessions per series are named by its Python)
    nox -s examples                     # examples/ end to end on each series' wheels (their printed results checked)
    nox -s multihost                    # IPUs of several processes (jax.distributed on localhost), per series
    nox -s check_patches                # every patch series applies to its pinned upstream source
    nox -s lint                         # ruff, mypy, clang-format, actionlint, hadolint, patches, pins agree
    nox -s release                      # dist/jax-ipu-<version>.zip: wheels, dependencies, sums, index, licences
    nox -s reproducible                 # two clean builds of HEAD give byte-identical wheels
    nox -s cibuildwheel                 # the jaxlib wheel through cibuildwheel + auditwheel (needs Docker: CI)
    nox -s bench                        # benchmark: the same jitted programs on cpu and ipu (not a test, not in CI)
    nox -s bench -- --quick             # a short run; also --only NAME[,NAME], --reps N, --json PATH, --list
    nox -s upstream_tests -- JAX_SRC    # JAX's own tests (a jax checkout at the pinned tag) on cpu and ipu
    nox -s ecosystem_tests              # optax, chex, flax, equinox and dm-haiku's own tests on cpu and ipu

Pins (versions, sums, Python, glibc, label) come from build_tools/pins.toml only.
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nox

REPO = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO))

from build_tools.pins import load  # noqa: E402
from build_tools.suites import BUILD_VARIABLES, CANARY_FILES, seven_tile_files, suite_dirs, suite_env  # noqa: E402

PINS = load()
SERIES = PINS.get_series()  # the default series (0.4.13): dist/*.whl
PYTHON = SERIES.python  # the Python the default series' wheels are for, e.g. "3.8"
# Every series by the Python its wheels are for: the installed-wheel sessions run once per series, named by it
# (installed_tests-3.8, installed_tests-3.12).
SERIES_BY_PYTHON = {s.python: s for s in PINS.all_series()}
PYTHONS = list(SERIES_BY_PYTHON)
REQUIREMENTS = "build_tools/requirements.txt"
# The installed-wheel test venvs: the series' wheels with --no-deps plus its lock (runtime deps and pytest):
# test-requirements.txt for the default series' Python, test-requirements-<python>.txt for the others (_lock).
TEST_REQUIREMENTS = "build_tools/test-requirements.txt"
# Screenshots and other files the suites keep for people to look at (CI uploads them).
ARTIFACTS = REPO / "build" / "test-artifacts"


nox.options.sessions = ["build_wheels"]
nox.options.error_on_missing_interpreters = True


def _python_works(exe: str | None) -> bool:
    if not exe:
        return False
    return subprocess.run([exe, "-c", "pass"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def _make_python_findable(version: str) -> None:
    """Puts a working python<version> first on PATH (a pyenv shim that refuses to answer does not count)."""
    exe = f"python{version}"
    if _python_works(shutil.which(exe)):
        return
    pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    for bindir in sorted(glob.glob(os.path.join(pyenv_root, "versions", f"{version}.*", "bin")), reverse=True):
        if _python_works(os.path.join(bindir, exe)):
            os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
            return


for _python in PYTHONS:
    _make_python_findable(_python)


def _series(session: nox.Session):
    """The series a per-Python session runs (its python= parameter)."""
    return SERIES_BY_PYTHON[str(session.python)]


def _lock(path: str, series) -> str:
    """A lock file of the series: `path` itself for the default series, `<stem>-<python>.txt` beside it otherwise."""
    if series.name == PINS.default_series:
        return path
    stem, ext = os.path.splitext(path)
    return f"{stem}-{series.python}{ext}"


def _dist_dir(series) -> Path:
    """dist/ for the default series, dist/<series>/ for the others (build_tools/build.py series_dist)."""
    return REPO / "dist" if series.name == PINS.default_series else REPO / "dist" / series.name


def _install_tools(session: nox.Session) -> None:
    session.install("--only-binary=:all:", "--require-hashes", "-r", REQUIREMENTS)


def _split_docker(posargs: list) -> tuple:
    rest = [a for a in posargs if a != "--docker"]
    return len(rest) != len(posargs), rest


def _run_in_docker(session: nox.Session, name: str, args: list) -> None:
    """Runs ``nox -s <name> -- <args>`` inside the image of docker/Dockerfile, with the repo and cache mounted."""
    docker = shutil.which("docker")
    if not docker:
        session.error("--docker: no `docker` command on PATH. Install Docker, or build without --docker.")
    probe = subprocess.run([docker, "info", "--format", "{{.ServerVersion}}"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        session.error(f"--docker: no Docker engine reachable (`docker info` failed: {reason}). Start a Docker daemon "
                      "(or point DOCKER_HOST at one), or run the session without --docker to build on this host")
    image = f"jax-ipu-build:{SERIES.name}-py{PYTHON}"
    session.run(docker, "build", "-t", image, "-f", str(REPO / "docker" / "Dockerfile"),
                "--build-arg", f"BASE_IMAGE={PINS.docker['base_image']}",
                "--build-arg", f"PYTHON_VERSION={PYTHON}",
                "--build-arg", f"NOX_VERSION={PINS.tools['nox']}",
                "--build-arg", f"UV_VERSION={PINS.tools['uv']}",
                "--build-arg", f"CURRENT_PYTHON_VERSION={' '.join(p for p in PYTHONS if p != PYTHON)}",
                str(REPO / "docker"), external=True)
    cache = os.environ.get("JAX_IPU_CACHE") or os.path.expanduser("~/.cache/jax-ipu")
    os.makedirs(cache, exist_ok=True)
    user = [] if os.getuid() == 0 else ["--user", f"{os.getuid()}:{os.getgid()}"]
    session.run(docker, "run", "--rm", *user, "-e", "HOME=/tmp/home", "-e", "JAX_IPU_CACHE=/cache", "-e", "CI",
                "-v", f"{REPO}:/src", "-v", f"{cache}:/cache", "-w", "/src", image,
                "nox", "--envdir", "/tmp/nox", "-s", name, "--", *args, external=True)


def _on_host(session: nox.Session, name: str) -> list | None:
    """The session's arguments with the build tools installed, or None once `--docker` ran the whole session
    inside docker/Dockerfile instead."""
    docker, args = _split_docker(session.posargs)
    if docker:
        _run_in_docker(session, name, args)
        return None
    _install_tools(session)
    return args


@nox.session(venv_backend="venv", reuse_venv=True)
def build_wheels(session: nox.Session) -> None:
    """Build dist/*.whl (extra args go to `python -m build_tools build`, e.g. --cxx g++ or --jobs 2)."""
    args = _on_host(session, "build_wheels")
    if args is not None:
        session.run("python", "-m", "build_tools", "build", *args)


@nox.session(venv_backend="venv", reuse_venv=True)
def check_patches(session: nox.Session) -> None:
    """Prove every patch series applies cleanly to its pinned upstream source and has What/Why/When to drop."""
    _install_tools(session)
    session.run("python", "-m", "build_tools", "check-patches")


@nox.session(venv_backend="venv", reuse_venv=True)
def lint(session: nox.Session) -> None:
    """ruff (line length enforced) and mypy over our Python, clang-format (check mode) over jax_ipu_shim's C++,
    actionlint over the workflows, hadolint over docker/Dockerfile, every patch series applies, the Dockerfile, the
    workflows and pins.toml agree, cited docs exist. Configuration: pyproject.toml, .clang-format (no baseline:
    every finding fails). Every tool is hash-locked."""
    session.install("--only-binary=:all:", "--require-hashes", "-r", "build_tools/lint-requirements.txt")
    session.run("ruff", "check", "jax_ipu_shim/python", "build_tools", "tests", "examples", "noxfile.py",
                *session.posargs)
    session.run("mypy")  # files and options: [tool.mypy] in pyproject.toml
    session.run("python", "-m", "build_tools", "lint", "clang-format", "pins-agree", "citations", "closures")
    session.run("actionlint", "-color=false", *sorted(str(p) for p in (REPO / ".github" / "workflows").glob("*.yml")))
    session.run("hadolint", "--no-color", str(REPO / "docker" / "Dockerfile"))
    session.run("python", "-m", "build_tools", "check-patches")


@nox.session(venv_backend="venv", reuse_venv=True)
def release(session: nox.Session) -> None:
    """Per series, jax-ipu-<version>.zip in its dist folder: our wheels (rebuilt if stale), their locked dependency
    wheels, SHA256SUMS, wheels.html, INSTALL, LICENSES/ (build_tools/release.py).
    Arguments: --pages-url URL, --tag vX, --no-build, --dist DIR, --jobs N."""
    _install_tools(session)
    series = [] if any(a == "--series" or a.startswith("--series=") for a in session.posargs) else \
        [["--series", s.name] for s in PINS.all_series()]
    for args in series or [[]]:  # every series' zip (dist/ and dist/<series>/), or the one named
        session.run("python", "-m", "build_tools", "release", *args, *session.posargs)


@nox.session(venv_backend="venv", reuse_venv=True)
def reproducible(session: nox.Session) -> None:
    """Two clean builds of HEAD (separate exports, caches and build dirs) must give byte-identical wheels.
    Arguments go to `python -m build_tools reproduce`: --jobs N, --share-cache (quick: objects reused), --keep DIR."""
    _install_tools(session)
    session.run("python", "-m", "build_tools", "reproduce", *session.posargs)


@nox.session(venv_backend="venv", reuse_venv=True)
def cibuildwheel(session: nox.Session) -> None:
    """The jaxlib wheel through cibuildwheel (pinned, hash-locked) in the manylinux2014 image: the same build
    (build_tools/cibw), so the same bytes as dist/'s (nox -s compare_wheels). Needs a Docker engine: GitHub's release
    workflow runs it. Output: dist/cibuildwheel/."""
    session.install("--only-binary=:all:", "--require-hashes", "-r", "build_tools/release-requirements.txt")
    session.run("cibuildwheel", "--platform", "linux", "--config-file", "pyproject.toml",
                "--output-dir", "dist/cibuildwheel", "build_tools/cibw", *session.posargs)


@nox.session(venv_backend="venv", reuse_venv=True)
def check_wheels(session: nox.Session) -> None:
    """``twine check --strict`` and ``check-wheel-contents`` on every series' wheels in dist/ (rebuilt first if
    stale): what PyPI and installers would say of them. check-wheel-contents' two exceptions are in pyproject.toml,
    with their reasons."""
    _install_tools(session)
    session.run("python", "-m", "build_tools", "build", "--if-stale")
    session.install("--only-binary=:all:", "--require-hashes", "-r", "build_tools/wheel-check-requirements.txt")
    wheels = sorted(str(p) for p in Path("dist").glob("**/*.whl") if p.parent.name != "cibuildwheel")
    if not wheels:
        session.error("no wheels in dist/: run nox -s build_wheels")
    session.run("twine", "check", "--strict", *wheels)
    session.run("check-wheel-contents", *wheels)


@nox.session(venv_backend="venv", reuse_venv=True)
def compare_wheels(session: nox.Session) -> None:
    """`nox -s compare_wheels -- DIR_A DIR_B`: the wheels both folders hold must be byte-identical (names the
    differing files inside them otherwise)."""
    _install_tools(session)
    session.run("python", "-m", "build_tools", "compare", *session.posargs)


@nox.session(venv_backend="venv", reuse_venv=True)
def tests(session: nox.Session) -> None:
    """Build (or reuse) dist/, run tests/toolchain on the host, then the installed-wheel suites on Python 3.8."""
    args = _on_host(session, "tests")
    if args is None:
        return
    session.run("python", "-m", "build_tools", "build", "--if-stale", *args)
    # The build's own variables (cache, development compiler) stay: the toolchain tests check that build.
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(REPO / "tests" / "toolchain"),
                str(REPO / "tests" / "toolchain"), "--ignore", str(REPO / "tests" / "toolchain" / "installed"),
                env=suite_env(keep=BUILD_VARIABLES))
    # The arguments of `tests` are build arguments (e.g. --jobs 1): the suites get none of them. Every series, its
    # suites then its examples; the series side by side where there are cores for it.
    jobs = {SERIES_BY_PYTHON[p].name: [f"installed_tests-{p}", f"examples-{p}"] for p in PYTHONS}
    if len(jobs) > 1 and (os.cpu_count() or 1) > 1:
        _side_by_side(session, jobs)
    else:
        for names in jobs.values():
            for name in names:
                session.notify(name, posargs=[])


def _side_by_side(session: nox.Session, jobs: dict) -> None:
    """Runs each job (a name and its sessions, in order) in its own `nox` process, all at once: every line is printed
    prefixed with the job's name and kept in build/test-logs/<name>.log. Waits for all of them, prints each one's
    time, and fails naming the jobs that failed (a failure does not stop the others: their results still count)."""
    import threading
    import time

    logs = REPO / "build" / "test-logs"
    logs.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    started = time.monotonic()
    procs, pumps, times = {}, [], {}

    def pump(name: str, proc: subprocess.Popen) -> None:
        with open(logs / f"{name}.log", "w") as log:
            for line in proc.stdout:
                log.write(line)
                with lock:
                    sys.stdout.write(f"[{name}] {line}")
                    sys.stdout.flush()
        proc.wait()
        times[name] = time.monotonic() - started

    for name, sessions in jobs.items():
        # One -s with every session: nox keeps only the last of several -s options.
        cmd = [sys.executable, "-m", "nox", "--non-interactive", "-f", str(REPO / "noxfile.py"), "-s", *sessions]
        session.log(f"{name}: {' '.join(cmd[1:])} (log: {(logs / f'{name}.log').relative_to(REPO)})")
        procs[name] = subprocess.Popen(cmd, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True, bufsize=1, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        pumps.append(threading.Thread(target=pump, args=(name, procs[name]), daemon=True))
        pumps[-1].start()
    try:
        for t in pumps:
            t.join()
    except KeyboardInterrupt:
        for proc in procs.values():
            proc.terminate()
        raise
    for name, proc in procs.items():
        session.log(f"{name}: {'passed' if proc.returncode == 0 else f'FAILED (exit {proc.returncode})'} in "
                    f"{times[name] / 60:.1f} min ({' '.join(jobs[name])})")
    failed = [name for name, proc in procs.items() if proc.returncode != 0]
    if failed:
        session.error(f"failed: {', '.join(failed)} (their output: build/test-logs/<name>.log)")


def _dist_wheels(session: nox.Session) -> list:
    series = _series(session)
    where = _dist_dir(series)
    wheels = sorted(str(p) for p in where.glob("*.whl"))
    names = [Path(w).name for w in wheels]
    wanted = ["jax-", "jaxlib-"] + (["jax_ipu_plugin-"] if series.packaging == "plugin" else [])
    if not all(any(n.startswith(w) for n in names) for w in wanted):
        session.error(f"{where.relative_to(REPO)}/ lacks the {series.name} wheels ({', '.join(wanted)}; found: "
                      f"{names or 'nothing'}); run `nox -s build_wheels -- --series {series.name}`")
    return wheels


def _install_dist(session: nox.Session) -> None:
    """The series' wheels without resolving anything, then their dependencies and pytest from its hash lock."""
    session.install("--no-deps", *_dist_wheels(session))
    session.install("--only-binary=:all:", "--require-hashes", "-r", _lock(TEST_REQUIREMENTS, _series(session)))


@nox.session(python=PYTHONS, venv_backend="venv", reuse_venv=False)
def installed_tests(session: nox.Session) -> None:
    """Per series: a fresh venv of its Python, its wheels and pytest, and the suites run from outside the source
    tree (a series' known gaps: tests/expected-failures/<jaxlib version>.txt)."""
    try:
        suites = suite_dirs()
    except FileNotFoundError as e:
        session.error(str(e))
    _install_dist(session)
    session.install("--only-binary=:all:", "--require-hashes", "-r",
                    _lock("build_tools/report-test-requirements.txt", _series(session)))
    session.log(f"installed-wheel suites: {', '.join(os.path.relpath(s, REPO) for s in suites)}")
    with tempfile.TemporaryDirectory(prefix="jax-ipu-tests-") as outside:
        session.chdir(outside)
        # pytest exits 5 when it collected nothing: that fails the session like any other non-zero exit.
        session.run("python", "-m", "pytest", "--rootdir", outside, "-p", "no:cacheprovider", *suites, *session.posargs,
                    env=suite_env(JAX_IPU_TEST_ARTIFACTS=str(ARTIFACTS)))
        # The conformance files the tile count changes, again on an IPU Model of 7 tiles: every tensor then spreads
        # unevenly over few tiles, which exercises other tile mappings, exchanges and matmul plans than the full chip
        # does (build_tools/suites.py SEVEN_TILE_CONFORMANCE says which files and why).
        if not session.posargs:
            session.log("conformance on a 7-tile IPU Model")
            session.run("python", "-m", "pytest", "--rootdir", outside, "-p", "no:cacheprovider", "-q",
                        *seven_tile_files(), env=suite_env(JAX_IPU_MODEL_NUM_TILES="7"))
        session.chdir(str(REPO))


@nox.session(python=PYTHONS, venv_backend="venv", reuse_venv=False)
def multihost(session: nox.Session) -> None:
    """IPUs of several processes (jax.distributed on localhost), per series: 1, 2 and 4 processes run the same
    data-parallel training step over 4 IPUs and get the same parameters; a process that dies fails the others at
    once, naming it (tests/backend/test_multihost.py, also part of the installed-wheel suites)."""
    _install_dist(session)
    with tempfile.TemporaryDirectory(prefix="jax-ipu-multihost-") as outside:
        session.chdir(outside)
        session.run("python", "-m", "pytest", "--rootdir", outside, "-p", "no:cacheprovider", "-v",
                    str(REPO / "tests" / "backend" / "test_multihost.py"), *session.posargs, env=suite_env())
        session.chdir(str(REPO))


@nox.session(python=PYTHONS, venv_backend="venv", reuse_venv=False)
def sanitize(session: nox.Session) -> None:
    """Per series: libjax_ipu.so built with ASan+UBSan and with TSan (host g++, -O0 -g1; build_tools/sanitize.py),
    each lane's tests run under its sanitizer against the installed wheels (the library through $JAX_IPU_LIBRARY, the
    runtime preloaded). asan: tests/emulator, tests/backend and a conformance file of every op family; tsan:
    tests/emulator and tests/backend. A finding aborts the run with the sanitizer's report.

        nox -s sanitize-3.8 [-- --lane asan|tsan] [--ci] [--jobs N] [PYTEST ARGS]

    --ci: each lane's CI subset (sanitize.LANES' ci_tests). --lane (repeatable): only those lanes. .ci/run runs
    `sanitize-3.8 -- --ci --lane asan` and `sanitize-3.12 -- --ci --lane tsan`: two cold builds fit its 12-minute
    budget, both lanes on both series (four builds) do not; GitHub's workflow runs both lanes in full per series."""
    import argparse
    import time

    from build_tools import sanitize as lanes

    parser = argparse.ArgumentParser(prog="nox -s sanitize --")
    parser.add_argument("--lane", action="append", choices=list(lanes.LANES))
    parser.add_argument("--ci", action="store_true")
    parser.add_argument("--jobs", type=int, help="parallel compiles (default: all cores)")
    args, pytest_args = parser.parse_known_args(session.posargs)
    _install_dist(session)
    series = _series(session)
    with tempfile.TemporaryDirectory(prefix="jax-ipu-sanitize-") as outside:
        session.chdir(outside)
        for name in args.lane or list(lanes.LANES):
            lane = lanes.LANES[name]
            started = time.monotonic()
            try:
                library = lanes.build(lane, series, jobs=args.jobs)
                env = lanes.run_env(lane, library)
            except lanes.native.NativeBuildError as e:
                session.error(str(e))
            built = time.monotonic()
            session.log(f"{name}: {' '.join(f'{k}={v}' for k, v in env.items())}")
            launcher = lanes.launcher(lane)  # tsan: setarch -R (address space randomisation off)
            try:
                session.run(*launcher, "python", "-m", "pytest", "--rootdir", outside, "-p", "no:cacheprovider", "-q",
                            *lane.pytest_args(args.ci), *pytest_args, env=suite_env(**env), external=bool(launcher))
            finally:  # the times, also of a lane that failed
                session.log(f"{name}: built in {built - started:.0f} s, tests ran in {time.monotonic() - built:.0f} s")
        session.chdir(str(REPO))


@nox.session(python=PYTHONS, venv_backend="venv", reuse_venv=False)
def examples(session: nox.Session) -> None:
    """The examples suite: every script and notebook under examples/ runs on ipu against dist/*.whl (`--short`) in a
    fresh Python 3.8 venv, and tests/examples checks what each prints. Needs no network: without one the MNIST
    examples use scikit-learn's 8x8 digits and say so. Arguments go to pytest (e.g. `-k gcn`)."""
    _install_dist(session)
    session.install("--only-binary=:all:", "--require-hashes", "-r",
                    _lock("examples/requirements.txt", _series(session)))
    with tempfile.TemporaryDirectory(prefix="jax-ipu-examples-") as outside:
        session.chdir(outside)
        session.run("python", "-m", "pytest", "--rootdir", outside, "-p", "no:cacheprovider", "-v",
                    str(REPO / "tests" / "examples"), *session.posargs,
                    env=suite_env(MPLBACKEND="Agg", JAX_IPU_EXAMPLES_OFFLINE="1"))
        session.chdir(str(REPO))


@nox.session(python=PYTHONS, venv_backend="venv", reuse_venv=False)
def fuzz(session: nox.Session) -> None:
    """The differential fuzzer per series: random jax programs on cpu and on ipu against the installed wheels.

        nox -s fuzz-3.8 -- --n 10000 --seed 1 [--jobs 2] [--only I,J] [--out DIR] [--no-minimise]

    Program i of seed s is always the same (tests/fuzz/fuzz.py). Prints the summary (ok, unsupported by op, explained
    per accepted reason, open, unexplained); each unexplained mismatch is minimised to a standalone script in
    build/fuzz/<jaxlib version>/ (or --out, relative to the repository), with summary.json. Fails on any unexplained
    mismatch. A fixed-seed slice of it runs in the installed suites (tests/fuzz/test_fuzz.py)."""
    _install_dist(session)
    args = list(session.posargs)
    for i, a in enumerate(args):  # --out is relative to the repository (the fuzzer runs from a temporary directory)
        if a == "--out" and i + 1 < len(args):
            args[i + 1] = str((REPO / args[i + 1]).resolve())
        elif a.startswith("--out="):
            args[i] = f"--out={(REPO / a[6:]).resolve()}"
    with tempfile.TemporaryDirectory(prefix="jax-ipu-fuzz-") as outside:
        session.chdir(outside)
        session.run("python", str(REPO / "tests" / "fuzz" / "fuzz.py"), *args, env=suite_env())
        session.chdir(str(REPO))


@nox.session(python=PYTHONS, venv_backend="venv", reuse_venv=False)
def upstream_tests(session: nox.Session) -> None:
    """JAX's own test files, at the pinned jax's tag, on dist/*.whl: cpu and ipu, and the ipu pass rate against cpu.

        nox -s upstream_tests -- JAX_CHECKOUT [--files all|lane|multi-device|callbacks|interop|a_test.py,...]
            [--shard K/N] [--cases N] [--workers N] [--reuse JSON]

    JAX_CHECKOUT is a jax source tree at tag jax-v<pinned version> (the sdist has no tests); the session says how to
    get one. tests/upstream/run_upstream.py runs the files; tests/upstream/expectations.txt lists what is skipped or
    expected to fail on ipu, each with its reason. Results go to build/upstream/upstream-<UTC time>.json.
    """
    tag = f"jax-v{_series(session).jax.version}"
    if not session.posargs or session.posargs[0].startswith("-"):
        session.error(f"pass a jax source checkout at tag {tag}: `git clone --depth 1 --branch {tag} "
                      f"https://github.com/jax-ml/jax /tmp/jax-src`, then `nox -s upstream_tests -- /tmp/jax-src`")
    checkout = str((REPO / session.posargs[0]).resolve())
    _run_harness(session, "upstream", "build_tools/upstream-test-requirements.txt", [checkout, *session.posargs[1:]])


def _run_harness(session: nox.Session, name: str, lock: str, args: list) -> None:
    """tests/<name>/run_<name>.py with the series' wheels and `lock`, its results in build/<name>/ unless --json
    says otherwise."""
    _install_dist(session)
    session.install("--only-binary=:all:", "--require-hashes", "-r", _lock(lock, _series(session)))
    if not any(a == "--json" or a.startswith("--json=") for a in args):
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        args = [*args, "--json", str(REPO / "build" / name / f"{name}-{stamp}.json")]
    session.run("python", str(REPO / "tests" / name / f"run_{name}.py"), *args, env=suite_env())


@nox.session(python=PYTHONS, venv_backend="venv", reuse_venv=False)
def ecosystem_tests(session: nox.Session) -> None:
    """optax, chex, flax, equinox and dm-haiku's own tests on dist/*.whl: cpu and ipu, and the ipu's pass rate.

    Per library and file, how many of cpu's passes the ipu passes too.

        nox -s ecosystem_tests -- [--libraries optax,chex,...] [--paths LIB=GLOB,...] [--source equinox=DIR]
            [--workers N] [--reuse JSON] [--min-rate R]

    The libraries are the versions build_tools/ecosystem-requirements[-<python>].txt locks for the series.
    tests/ecosystem/run_ecosystem.py says where each one's tests come from (equinox's only from a checkout of its
    tag: --source); tests/ecosystem/expectations-<jax version>.txt lists what is expected to fail on ipu, each with
    its reason. Results go to build/ecosystem/ecosystem-<UTC time>.json.
    """
    _run_harness(session, "ecosystem", "build_tools/ecosystem-requirements.txt", list(session.posargs))


CURRENT = next(s for s in PINS.all_series() if s.packaging == "plugin")  # the series the plugin wheel serves


@nox.session(python=[CURRENT.python], venv_backend="venv", reuse_venv=False)
def upstream_canary(session: nox.Session) -> None:
    """The newest jax and jaxlib the registry has for the current series' Python, with our plugin wheel from
    dist/<series>/: does the ipu still work there? jax and jaxlib are installed unpinned (the newest is the point),
    the plugin with --no-deps (it names its own jax and jaxlib exactly), and build_tools/suites.py CANARY_FILES run.
    The versions tried and the outcome go to build/canary.json. The scheduled workflow upstream.yml runs this weekly
    and opens an issue when it fails."""
    plugin = sorted(_dist_dir(CURRENT).glob("jax_ipu_plugin-*.whl"))
    if len(plugin) != 1:
        session.error(f"dist/{CURRENT.name}/ lacks the plugin wheel; run `nox -s build_wheels -- --series "
                      f"{CURRENT.name}`")
    session.install("--only-binary=:all:", "--upgrade", "jax", "jaxlib", f"pytest=={PINS.tools['pytest']}")
    session.install("--no-deps", str(plugin[0]))
    versions = session.run("python", "-c", "import jax, jaxlib; print(jax.__version__, jaxlib.__version__)",
                           silent=True).split()
    session.log(f"newest on the registry: jax {versions[0]}, jaxlib {versions[1]} (pinned: {CURRENT.jax.version}, "
                f"{CURRENT.jaxlib.version}); our plugin {plugin[0].name}")
    record = REPO / "build" / "canary.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    outcome = {"jax": versions[0], "jaxlib": versions[1], "plugin": plugin[0].name, "passed": False}
    record.write_text(json.dumps(outcome, indent=1) + "\n")
    with tempfile.TemporaryDirectory(prefix="jax-ipu-canary-") as outside:
        session.chdir(outside)
        session.run("python", "-m", "pytest", "--rootdir", outside, "-p", "no:cacheprovider", "-q",
                    *(str(REPO / f) for f in CANARY_FILES), env=suite_env())
        session.chdir(str(REPO))
    record.write_text(json.dumps(dict(outcome, passed=True), indent=1) + "\n")


@nox.session(python=PYTHONS, venv_backend="venv", reuse_venv=False)
def fidelity(session: nox.Session) -> None:
    """The emulator's estimates against published IPU figures, per series: tests/fidelity/fidelity.py on dist/*.whl.

        nox -s fidelity-3.12 [-- --only ID[,ID] --skip-models]

    Prints each figure (tests/fidelity/published.py: chip parameters, measured microbenchmarks, whole models
    configured as Graphcore ran them), its source, the emulator's estimate, the ratio and its band, and writes the
    table to build/fidelity/fidelity-<jax version>.json. Fails when a row falls outside its band. Not part of
    `nox -s tests`: its whole-model steps take minutes."""
    _install_dist(session)
    args = list(session.posargs)
    if not any(a == "--json" or a.startswith("--json=") for a in args):
        args += ["--json", str(REPO / "build" / "fidelity" / f"fidelity-{_series(session).jax.version}.json")]
    with tempfile.TemporaryDirectory(prefix="jax-ipu-fidelity-") as outside:
        session.chdir(outside)
        session.run("python", str(REPO / "tests" / "fidelity" / "fidelity.py"), *args, env=suite_env())
        session.chdir(str(REPO))


@nox.session(python=PYTHONS, venv_backend="venv", reuse_venv=False)
def bench(session: nox.Session) -> None:
    """Benchmark dist/*.whl: tests/bench/bench.py in a fresh Python 3.8 venv, run from outside the source tree.

    Prints per program the median wall time on cpu and ipu, their ratio, compile times and estimated IPU cycles,
    then the geomean ratio. The JSON goes to build/bench/bench-<UTC time>.json (git-ignored; one file per run, to
    compare over time) unless `--json PATH` names another file (relative to the repository). Arguments go to
    bench.py: --quick, --only NAME[,NAME], --reps N, --list. It times things, so it is never part of `tests` or CI.
    """
    _install_dist(session)  # the wheels and their locked dependencies (numpy, scipy, ...): the bench needs no more
    args = [f"--json={(REPO / a[7:]).resolve()}" if a.startswith("--json=") else a for a in session.posargs]
    if "--json" in args[:-1]:  # relative paths are relative to the repository (nox runs there)
        i = args.index("--json") + 1
        args[i] = str((REPO / args[i]).resolve())
    elif not any(a.startswith("--json=") for a in args):
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        args += ["--json", str(REPO / "build" / "bench" / f"bench-{stamp}{'-quick' if '--quick' in args else ''}.json")]
    with tempfile.TemporaryDirectory(prefix="jax-ipu-bench-") as outside:
        session.chdir(outside)
        session.run("python", str(REPO / "tests" / "bench" / "bench.py"), *args, env=suite_env())
        session.chdir(str(REPO))
