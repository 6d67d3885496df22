"""Runs the own test suites of the libraries users bring (optax, chex, flax, equinox, dm-haiku) against the installed
wheels, on cpu and on ipu, and reports per library how many of cpu's passes also pass on the ipu.

    python tests/ecosystem/run_ecosystem.py [--libraries optax,chex,...] [--paths LIB=GLOB,...]
        [--source equinox=DIR] [--workers N] [--json PATH] [--min-rate 99] [--reuse JSON]

Run it through `nox -s ecosystem_tests` (a fresh venv with the series' wheels and the libraries at the versions of
build_tools/ecosystem-requirements[-<python>].txt, hash-locked). Where each library's tests come from (LIBRARIES):
- optax, chex and dm-haiku ship them inside their package: the installed package's ``*_test.py`` files;
- flax ships them in its sdist only: the sdist of the installed version, downloaded by pip and checked against the
  sha256 in LIBRARIES (``SDIST_SHA256``) before it is unpacked;
- equinox ships none: ``--source equinox=DIR`` names a checkout of its tag (``git clone --depth 1 --branch v<version>
  https://github.com/patrick-kidger/equinox``); without one it is left out, saying so.

Each library's tests run with pytest (pytest-xdist over --workers processes) once with JAX_PLATFORMS=cpu and once
with the ipu (LIBRARIES' ``ipu_platforms``), through tests/upstream's pytest plugin: it records every outcome and,
on ipu, applies tests/ecosystem/expectations-<jax version>.txt (the format of tests/upstream/expectations.py; node
ids are relative to the folder the tests run from, e.g. ``optax/_src/alias_test.py::...``). The table per library
has the same columns as JAX's (run_upstream.py). Exit status 1 when a test that passes on cpu fails on ipu without
being listed, a listed xfail passes, a file collects on cpu but not on ipu, or a library is below --min-rate.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Tuple

HERE = Path(__file__).resolve().parent
UPSTREAM = HERE.parent / "upstream"
sys.path.insert(0, str(UPSTREAM))

from run_upstream import (  # noqa: E402 (tests/upstream is on sys.path)
    JAX_DEVICE_RESTRICTION,
    devices_asked,
    print_table,
    summarise,
)


class Library(NamedTuple):
    distribution: str  # the name pip installs it by
    package: str  # the import name
    tests: str  # "package": *_test.py inside it; "sdist": the sdist's tests/; "checkout": --source DIR's tests/
    ipu_platforms: str  # JAX_PLATFORMS of its ipu run (the ipu first: the default backend)
    why_platforms: str = ""
    # pytest -k: tests that check no result, left out on both backends, and why
    not_results: str = ""
    why_not_results: str = ""
    # a pytest process per test file: a file's jax.config.update("jax_enable_x64", True) would otherwise hold for
    # the files after it in the same process (every value 64-bit: emulated on the ipu, and far slower there)
    process_per_file: bool = False
    # test files that keep themselves to cpu when imported, for something the ipu has too: lifted on the ipu
    # (jax_ipu_upstream.py's --lift-cpu-gates), and why
    cpu_gated: Tuple[str, ...] = ()
    why_cpu_gated: str = ""


LIBRARIES: Dict[str, Library] = {
    "optax": Library("optax", "optax", "package", "ipu", process_per_file=True),
    "chex": Library("chex", "chex", "package", "ipu,cpu",
                    "chex's own tests ask for cpu devices (chex.set_n_cpu_devices, jax.devices('cpu')) beside the "
                    "default backend, as its users' test setups do"),
    "flax": Library("flax", "flax", "sdist", "ipu"),
    "equinox": Library("equinox", "equinox", "checkout", "ipu", not_results="not test_speed_",
                       why_not_results="its test_speed_* time loops of up to 200,000 steps and check how the host's "
                                       "run time scales, a property of the machine and its load (on a 2-core machine "
                                       "they fail on cpu too), not of results",
                       cpu_gated=("test_noinline.py", "test_pmap.py", "test_sharding.py", "test_while_loop.py"),
                       why_cpu_gated="equinox keeps them to cpu for the several devices jax gives a cpu (pmap over "
                                     "jax.devices('cpu'), sharding) and for flakiness it saw on gpus (noinline, two "
                                     "while_loop tests), not for anything cpu alone computes: the ipu has as many "
                                     "devices and runs them"),
    "dm-haiku": Library("dm-haiku", "haiku", "package", "ipu"),
}
# The sdists whose tests run (flax ships its tests only there): {(distribution, version): sha256}, verified before
# the sdist is unpacked. A version the locks pin must be here (tests/toolchain/test_ecosystem.py checks it). The
# tag of a checkout (--source) is the locked version's (build_tools/pins.py github-output gives it to CI).
SDIST_SHA256: Dict[Tuple[str, str], str] = {
    ("flax", "0.7.2"): "7f023ece0b8b0d03019d2841dbe780e33b81ec42268bdc3e5d24c8fb0582fd7b",
    ("flax", "0.12.12"): "103cc503c94219513b73027aa0e93aac408adfd3fcdfb1df85e9d147219e4896",
}


# Failures the ipu gives by design, by the words of its refusal: counted against the rate (not passes), listed by
# class, and not problems. 64-bit types: f64, i64, u64 and complex128 run emulated (jax_enable_x64), and are refused
# at compile time with JAX_IPU_EMULATE_64BIT=0 (Graphcore's behaviour). fp8: refused by name
# on an ipu2, as Poplar refuses its quarter type there.
REFUSED = {"64-bit types": re.compile(r"Unsupported element type (f64|i64|u64|c128)\b"),
           # fp8 runs on an ipu21 only (JAX_IPU_MODEL_VERSION=ipu21; Poplar's quarter type); the suites run an ipu2
           "fp8 on an ipu2": re.compile(r"ipu2 has no fp8")}


def refusal(message: str) -> Optional[str]:
    return next((name for name, words in REFUSED.items() if words.search(message)), None)


def expectations_path(jax_version: str) -> Path:
    return HERE / f"expectations-{jax_version.split('+')[0]}.txt"


def installed_version(distribution: str) -> Optional[str]:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _sdist(distribution: str, version: str, into: Path) -> Path:
    """The library's sdist, downloaded by pip, checked against SDIST_SHA256 and unpacked: its root."""
    want = SDIST_SHA256.get((distribution, version))
    if want is None:
        raise SystemExit(f"{distribution} {version}: its sdist has no sha256 in SDIST_SHA256 "
                         "(tests/ecosystem/run_ecosystem.py); add it with the lock file's bump")
    download = into / "sdist"
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:", "--no-build-isolation",
                    "-d", str(download), f"{distribution}=={version}"], check=True, stdout=subprocess.DEVNULL)
    archive = next(download.glob("*.tar.gz"))
    got = hashlib.sha256(archive.read_bytes()).hexdigest()
    if got != want:
        raise SystemExit(f"{archive.name}: sha256 {got}, but SDIST_SHA256 pins {want}: not used")
    with tarfile.open(archive) as tar:
        tar.extractall(into / "src")  # noqa: S202 - the archive is the pinned one (sha256 checked above)
    return next((into / "src").iterdir())


def test_root(name: str, lib: Library, sources: Dict[str, Path], scratch: Path) -> Tuple[Optional[Path], str]:
    """(the folder pytest runs from, its test files' paths below it as one glob), or (None, why not)."""
    version = installed_version(lib.distribution)
    if version is None:
        return None, f"{lib.distribution} is not installed"
    if lib.tests == "package":
        import importlib.util

        spec = importlib.util.find_spec(lib.package)  # its location, without running it
        if spec is None or spec.origin is None:
            return None, f"{lib.package} is not importable"
        return Path(spec.origin).resolve().parent.parent, f"{lib.package}/**/*_test.py"
    if lib.tests == "sdist":
        root = _sdist(lib.distribution, version, scratch / name)
        return root, "tests/**/*_test.py"
    source = sources.get(name)
    if source is None:
        return None, (f"its tests are not on the registry: pass --source {name}=DIR, a checkout of tag v{version} "
                      f"(git clone --depth 1 --branch v{version} https://github.com/patrick-kidger/{name})")
    if not (source / "tests").is_dir():
        raise SystemExit(f"--source {name}={source}: it has no tests/ folder")
    copy = scratch / name  # its tests only: `import equinox` must be the installed one
    shutil.copytree(source / "tests", copy / "tests")
    return copy, "tests/**/test_*.py"


def select(root: Path, pattern: str, paths: List[str]) -> List[str]:
    """The test files under ``root`` matching ``pattern``, and, if ``paths`` are given, one of them (globs)."""
    files = sorted(str(p.relative_to(root)) for p in root.glob(pattern))
    if paths:
        files = [f for f in files if any(fnmatch.fnmatchcase(f, p) for p in paths)]
    return files


# A library test file that gives the cpu backend several devices for itself, before it imports jax (flax's spmd and
# bridge tests: os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=4'), or whose conftest.py does
# (equinox: jax.config.update("jax_num_cpu_devices", 2)).
_HOST_DEVICES = re.compile(r"(?:xla_force_host_platform_device_count=|jax_num_cpu_devices['\"],\s*)(\d+)")


def host_devices(path: Path, root: Path) -> Optional[int]:
    """The cpu devices the test file at ``path`` (under ``root``) or a conftest.py above it gives itself (the most,
    if they say more than once), or None."""
    above = [d / "conftest.py" for d in path.parents if d == root or root in d.parents]
    found = [n for n in (devices_asked(f, _HOST_DEVICES) for f in [path, *above]) if n is not None]
    return max(found) if found and max(found) > 1 else None


def process_groups(root: Path, files: List[str], per_file: bool) -> List[Tuple[Optional[int], List[str]]]:
    """[(devices, files)]: one pytest process per group and backend. A file that gives cpu N devices (host_devices)
    runs in a process of its own group, on the ipu with N IPUs (JAX_IPU_DEVICE_COUNT), as jax's own test files that
    ask for cpu devices do (run_upstream.device_groups): no test skips itself on the ipu for want of the devices cpu
    had, and the flag set at import does not give cpu its devices for the other files of the process."""
    groups: List[Tuple[Optional[int], List[str]]] = []
    shared: Dict[Optional[int], List[str]] = {}
    for f in files:
        devices = host_devices(root / f, root)
        if per_file:
            groups.append((devices, [f]))
        else:
            shared.setdefault(devices, []).append(f)
    return groups + [(d, shared[d]) for d in sorted(shared, key=lambda d: d or 1)]


def run_backend(platforms: str, root: Path, files: List[str], workers: int, out: Path, expectations: Path,
                keyword: str = "", devices: Optional[int] = None, cpu_gated: Tuple[str, ...] = ()) -> int:
    env = dict(os.environ)
    env.update(JAX_PLATFORMS=platforms,
               PYTHONPATH=os.pathsep.join([str(UPSTREAM), env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    if devices and platforms.split(",")[0] == "ipu":
        env["JAX_IPU_DEVICE_COUNT"] = str(devices)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "jax_ipu_upstream",
           "--rootdir", str(root), f"--upstream-results={out}", "-o", "addopts=", "--tb=line", "-rN",
           "--continue-on-collection-errors"]
    if workers > 1:
        cmd += ["-n", str(workers)]
    if keyword:
        cmd += ["-k", keyword]
    if platforms.split(",")[0] == "ipu":
        cmd += [f"--upstream-expectations-file={expectations}"]
        if cpu_gated:
            cmd += [f"--lift-cpu-gates={','.join(cpu_gated)}"]
    print(f"\n== {platforms}{f' ({devices} devices)' if devices else ''}: "
          f"{files[0] if len(files) == 1 else f'{len(files)} files'} under {root}", flush=True)
    return subprocess.run(cmd + files, cwd=root, env=env).returncode


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}%"


def problems_of(rows: list, total: dict, codes: Dict[str, int], messages: Dict[str, str], min_rate: float,
                library: str) -> List[str]:
    problems = [f"{library}: pytest on {b} ended with exit status {c}: the run did not complete"
                for b, c in codes.items() if c not in (0, 1, None)]
    for r in rows:
        if r["collect_error_ipu"] and not r["collect_error_cpu"]:
            problems.append(f"{r['file']} does not collect on ipu")
        problems += [f"fails on ipu, passes on cpu, not listed: {k}: {messages.get(k, '')}" for k in r["ipu_failed"]
                     if refusal(messages.get(k, "")) is None]
        problems += [f"passes on cpu, did not run on ipu: {k}" for k in r["ipu_missing"]]
        problems += [f"listed as xfail but passes on ipu (remove it from the list): {k}" for k in r["xpassed"]]
    if total["rate"] is not None and total["rate"] < min_rate:
        problems.append(f"{library}: {total['rate']:.2f}% of cpu's passes also pass on ipu, below {min_rate}%")
    return problems


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--libraries", default=",".join(LIBRARIES), help=f"comma-separated, of {', '.join(LIBRARIES)}")
    p.add_argument("--paths", default="", help="LIB=GLOB,...: only these test files of a library (globs over the "
                                                 "paths in its table, e.g. optax=optax/_src/alias_test.py)")
    p.add_argument("--source", action="append", default=[], metavar="LIB=DIR",
                   help="a checkout of a library whose tests are not on the registry (equinox)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--json", type=Path, default=Path("ecosystem-results.json"))
    p.add_argument("--min-rate", type=float, default=99.0)
    p.add_argument("--reuse", type=Path, default=None,
                   help="the --json of an earlier run: take its cpu results instead of running cpu again")
    args = p.parse_args(argv)

    import jax

    names = [n.strip() for n in args.libraries.split(",") if n.strip()]
    unknown = [n for n in names if n not in LIBRARIES]
    if unknown:
        raise SystemExit(f"--libraries: {', '.join(unknown)} unknown; known: {', '.join(LIBRARIES)}")
    paths: Dict[str, List[str]] = {}
    for item in filter(None, (i.strip() for i in args.paths.split(","))):
        lib, _, glob = item.partition("=")
        paths.setdefault(lib, []).append(glob)
    sources = {k: Path(v).resolve() for k, _, v in (s.partition("=") for s in args.source)}
    earlier = json.loads(args.reuse.read_text(encoding="utf-8")) if args.reuse else {}
    if earlier and earlier.get("jax") != jax.__version__:
        raise SystemExit(f"--reuse {args.reuse}: it ran jax {earlier.get('jax')}, not {jax.__version__}")
    expectations = expectations_path(jax.__version__)

    report: Dict[str, object] = {"jax": jax.__version__, "libraries": {}}
    all_problems: List[str] = []
    summary = []
    with tempfile.TemporaryDirectory(prefix="jax-ipu-ecosystem-") as tmp:
        for name in names:
            lib = LIBRARIES[name]
            version = installed_version(lib.distribution)
            root, pattern = test_root(name, lib, sources, Path(tmp))
            if root is None:
                print(f"\n[ecosystem] {name}: left out: {pattern}")
                report["libraries"][name] = {"version": version, "left_out": pattern}  # type: ignore[index]
                continue
            files = select(root, pattern, paths.get(name, []))
            why = f"; ipu run with JAX_PLATFORMS={lib.ipu_platforms}: {lib.why_platforms}" if lib.why_platforms else ""
            why += f"; left out ({lib.not_results}): {lib.why_not_results}" if lib.not_results else ""
            why += f"; run on the ipu though kept to cpu ({', '.join(lib.cpu_gated)}): {lib.why_cpu_gated}" \
                if lib.cpu_gated else ""
            print(f"\n[ecosystem] {name} {version}: {len(files)} test files{why}")
            results: Dict[str, Dict[str, str]] = {}
            messages: Dict[str, Dict[str, str]] = {}
            codes: Dict[str, int] = {}
            old = earlier.get("libraries", {}).get(name, {})
            if old.get("version") == version and "cpu" in old.get("results", {}):
                results["cpu"] = {k: v for k, v in old["results"]["cpu"].items() if k.split("::")[0] in files}
                messages["cpu"], codes["cpu"] = old["messages"]["cpu"], old["exit_codes"]["cpu"]
            for backend, platforms in (("cpu", "cpu"), ("ipu", lib.ipu_platforms)):
                if backend in results:
                    continue
                results[backend], messages[backend], exits = {}, {}, []
                for i, (devices, group) in enumerate(process_groups(root, files, lib.process_per_file)):
                    out = Path(tmp) / f"{name}-{backend}-{i}.json"
                    exits.append(run_backend(platforms, root, group, args.workers, out, expectations,
                                             lib.not_results, devices, lib.cpu_gated))
                    recorded = json.loads(out.read_text()) if out.is_file() else {}
                    results[backend].update(recorded.get("outcomes", {}))
                    messages[backend].update(recorded.get("messages", {}))
                # the worst: an incomplete run first (5: a file with no test left, e.g. all deselected, is not one)
                codes[backend] = max((0 if c == 5 else c for c in exits), key=lambda c: (c not in (0, 1), c))
            rows, total = summarise(files, results["cpu"], results["ipu"], messages["ipu"],
                                    JAX_DEVICE_RESTRICTION)
            print(f"\n[ecosystem] {name} {version}")
            print_table(rows, total)
            problems = problems_of(rows, total, codes, messages.get("ipu", {}), args.min_rate, name)
            refused: Dict[str, int] = {}
            for r in rows:
                for k in r["ipu_failed"]:
                    why = refusal(messages.get("ipu", {}).get(k, ""))
                    if why:
                        refused[why] = refused.get(why, 0) + 1
            for why, count in sorted(refused.items()):
                print(f"  refused by design ({why}): {count} of cpu's passes")
            total["refused"] = refused
            for line in problems[:100]:
                print("  " + line)
            all_problems += problems
            summary.append((name, version, total))
            report["libraries"][name] = {  # type: ignore[index]
                "version": version, "ipu_platforms": lib.ipu_platforms, "files": files, "rows": rows, "total": total,
                "exit_codes": codes, "results": results, "messages": messages, "problems": problems}

    print(f"\n{'library':12} {'version':>9} {'cpu pass':>9} {'ipu pass':>9} {'rate':>8} {'cpu only':>8} "
          f"{'runnable':>8} {'refused':>8} {'w/o them':>8} {'suite':>8}")
    for name, version, total in summary:
        refused = sum(total["refused"].values())
        rest = total["cpu_passed"] - total["jax_device_restricted"] - refused
        print(f"{name:12} {version:>9} {total['cpu_passed']:9} {total['ipu_passed']:9} {_pct(total['rate']):>8} "
              f"{total['jax_device_restricted']:8} {_pct(total['runnable_rate']):>8} {refused:8} "
              f"{_pct(100.0 * total['ipu_passed'] / rest if rest else None):>8} {_pct(total['suite_rate']):>8}")
    print("(rate: of cpu's passes, those the ipu passes; cpu only: tests jax or the library keeps to cpu; runnable: "
          "the rate without them; refused: failures the ipu gives by design (REFUSED); w/o them: the rate without "
          "either; suite: the ipu's passes of its collected tests less skips and xfails, as jax-mps reports)")
    report["problems"] = all_problems
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1, sort_keys=True), encoding="utf-8")
    print(f"\nresults: {args.json}")
    return 1 if all_problems else 0


if __name__ == "__main__":
    sys.exit(main())
