"""Benchmark: the same jitted programs (bench_programs.PROGRAMS) on XLA:CPU and on the IPU emulator, in one process.

    python tests/bench/bench.py [--quick] [--json PATH] [--only NAME[,NAME]] [--reps N] [--list]

Run it through `nox -s bench` (a fresh venv with dist/*.whl, from outside the source tree). Per program: compile on
both backends (`lower()` and `compile()` timed separately), run once on each from the same inputs and compare
(allclose with the program's tolerance; the table shows the largest error over the tolerance, err/tol, which
must stay <= 1; a mismatch is marked in the table and the exit status is 1), warm up, then
time `--reps` runs alternating cpu and ipu (each run waits with `block_until_ready`; the dispatch program times
many calls and reports the time per call). A program the ipu backend cannot compile is reported as
`unsupported: <first line of the error>` and the bench carries on. Prints a table (medians, ipu/cpu ratio, compile
times, estimated IPU cycles of the last run), the geomean ratio and the programs above 3x, and writes the same as
JSON, with versions, machine and git revision, to --json (default bench-results.json in the current directory).

This times things: it is a benchmark, never a test, and never part of `nox -s tests` or CI.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
from bench_programs import BY_NAME, PROGRAMS, Program

# The bench uses `jax.jit(f, backend=...)`, as the README does; jax 0.4.13 warns that it is deprecated, once per jit.
warnings.filterwarnings("ignore", message="backend and device argument on jit is deprecated")

SLOW_RATIO = 2.0  # issue 24's target: no program above 2x cpu's wall time


def _first_line(error: BaseException) -> str:
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else 'no message'}"


class Runner:
    """One program jitted for one backend, holding its inputs on that backend's device."""

    def __init__(self, program: Program, quick: bool, backend: str) -> None:
        import jax

        self.case = program.build(quick)
        self.backend = backend
        self.device = jax.devices(backend)[0]
        self.jitted = jax.jit(self.case.fn, backend=backend, donate_argnums=self.case.donate)
        self.args = self.fresh_args()

    def fresh_args(self) -> tuple:
        import jax

        return tuple(jax.device_put(self.case.args, self.device))

    def compile(self) -> Dict[str, float]:
        start = time.perf_counter()
        lowered = self.jitted.lower(*self.args)
        lowered_at = time.perf_counter()
        lowered.compile()
        return {"lower_s": lowered_at - start, "compile_s": time.perf_counter() - lowered_at}

    def run(self) -> tuple:
        """Seconds per call (over case.calls calls, waiting for the last) and the outputs of the last call."""
        import jax

        start = time.perf_counter()
        for _ in range(self.case.calls):
            if self.case.feed:
                self.case.feed(self.device)
            out = self.jitted(*self.args)
            if self.case.drain:  # after the program has run, as a user drains it
                out = (jax.block_until_ready(out), self.case.drain(self.device))
        jax.block_until_ready(out)
        seconds = (time.perf_counter() - start) / self.case.calls
        if self.case.drain:
            out, handed_back = out
            out = (*out, handed_back) if isinstance(out, tuple) else (out, handed_back)
        if self.case.carry:  # a training step: its new state is the next call's (donated) input
            self.args = tuple(out[:self.case.carry]) + self.args[self.case.carry:]
        return seconds, out


def compare(cpu_out: Any, ipu_out: Any, rtol: float, atol: float) -> Dict[str, Any]:
    """allclose of every output leaf; the largest absolute and relative errors."""
    import jax

    cpu_leaves, cpu_tree = jax.tree_util.tree_flatten(cpu_out)
    ipu_leaves, ipu_tree = jax.tree_util.tree_flatten(ipu_out)
    # err_over_tol: the largest |ipu - cpu| / (atol + rtol * |cpu|); allclose holds while it is <= 1.
    result: Dict[str, Any] = {"rtol": rtol, "atol": atol, "max_abs_err": 0.0, "max_rel_err": 0.0,
                              "err_over_tol": 0.0, "ok": True}
    if cpu_tree != ipu_tree:
        return dict(result, ok=False, problem=f"output structure differs: cpu {cpu_tree}, ipu {ipu_tree}")
    for i, (c, p) in enumerate(zip(cpu_leaves, ipu_leaves)):
        c, p = np.asarray(c), np.asarray(p)
        if c.shape != p.shape or c.dtype != p.dtype:
            return dict(result, ok=False,
                        problem=f"output {i}: cpu {c.dtype}{list(c.shape)}, ipu {p.dtype}{list(p.shape)}")
        c64, p64 = c.astype(np.float64), p.astype(np.float64)
        if c64.size:
            err = np.abs(p64 - c64)
            result["max_abs_err"] = max(result["max_abs_err"], float(np.nanmax(np.where(np.isnan(err), np.inf, err))))
            rel = err / np.maximum(np.abs(c64), np.finfo(np.float64).tiny)
            result["max_rel_err"] = max(result["max_rel_err"], float(np.nanmax(np.where(np.isnan(rel), np.inf, rel))))
            tol = atol + rtol * np.abs(c64)
            over = np.where(err == 0, 0.0, err / np.where(tol > 0, tol, np.finfo(np.float64).tiny))
            result["err_over_tol"] = max(result["err_over_tol"],
                                         float(np.nanmax(np.where(np.isnan(over), np.inf, over))))
        if not np.all(np.isfinite(c64)):
            result.setdefault("problem", f"output {i}: cpu result is not finite")
        if not np.allclose(p64, c64, rtol=rtol, atol=atol, equal_nan=True):
            result["ok"] = False
            result.setdefault("problem", f"output {i} differs beyond rtol={rtol:g} atol={atol:g}")
    return result


def measure(program: Program, quick: bool, reps: int, log: Any) -> Dict[str, Any]:
    """Everything the table and JSON say about one program. Never raises for a program that fails.
    With reps=0 only compiles, runs once on each backend and compares."""
    import jax_ipu

    entry: Dict[str, Any] = {"name": program.name, "description": program.description, "status": "ok",
                             "cpu": {}, "ipu": {}, "ratio": None, "check": None}
    try:
        runners = {b: Runner(program, quick, b) for b in ("cpu", "ipu")}
        entry["calls_per_run"] = runners["cpu"].case.calls
        entry["cpu"].update(runners["cpu"].compile())
    except Exception as e:  # the bench reports it and carries on
        entry["status"] = f"error on cpu: {_first_line(e)}"
        return entry
    try:
        entry["ipu"].update(runners["ipu"].compile())
    except Exception as e:
        entry["status"] = f"unsupported: {_first_line(e)}"
        del runners["ipu"]
    # The check: one run on each backend from the same inputs (this also warms up).
    outs = {}
    for backend, runner in list(runners.items()):
        try:
            outs[backend] = runner.run()[1]
        except Exception as e:
            entry["status"] = f"error on {backend}: {_first_line(e)}"
            runners.pop(backend)
    if "cpu" not in runners:
        return entry
    if "ipu" in outs:
        entry["check"] = compare(outs["cpu"], outs["ipu"], program.rtol, program.atol)
        if not entry["check"]["ok"]:
            entry["status"] = f"MISMATCH: {entry['check']['problem']}"
    if reps == 0:  # check only (the installed test): nothing is timed
        return entry
    times: Dict[str, List[float]] = {b: [] for b in runners}
    try:
        for runner in runners.values():  # warm-up
            runner.run()
        for rep in range(reps):  # alternate which backend goes first, so neither always runs on a cooler cache
            for backend in (("cpu", "ipu") if rep % 2 == 0 else ("ipu", "cpu")):
                if backend in runners:
                    times[backend].append(runners[backend].run()[0])
        if "ipu" in runners:
            entry["ipu"]["cycles"] = (jax_ipu.last_execution() or {}).get("total_cycles")
    except Exception as e:
        entry["status"] = f"error while timing: {_first_line(e)}"
        return entry
    for backend, samples in times.items():
        entry[backend].update(median_s=statistics.median(samples), times_s=samples)
    if "ipu" in times and entry["cpu"]["median_s"] > 0:
        entry["ratio"] = entry["ipu"]["median_s"] / entry["cpu"]["median_s"]
    print(f"  {program.name}: {entry['status']}", file=log, flush=True)
    return entry


def summarize(entries: List[Dict[str, Any]]) -> Dict[str, Any]:
    timed = [e for e in entries if e["status"] == "ok" and e["ratio"]]
    geomean = math.exp(sum(math.log(e["ratio"]) for e in timed) / len(timed)) if timed else None
    return {"geomean_ratio": geomean, "geomean_over": [e["name"] for e in timed],
            "slow_ratio": SLOW_RATIO,
            "above_slow_ratio": [e["name"] for e in timed if e["ratio"] > SLOW_RATIO],
            "mismatches": [e["name"] for e in entries if e["status"].startswith("MISMATCH")],
            "not_timed_on_ipu": [e["name"] for e in entries if e["ratio"] is None]}


def _time(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale or unit == "us":
            value = seconds / scale
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    raise AssertionError("unreachable")


def format_table(entries: List[Dict[str, Any]], summary: Dict[str, Any]) -> str:
    header = ("program", "cpu", "ipu", "ipu/cpu", "cpu compile", "ipu compile", "ipu cycles", "check")
    rows = [header]
    for e in entries:
        ratio = f"{e['ratio']:.2f}x" if e["ratio"] else "-"
        if e["ratio"] and e["ratio"] > SLOW_RATIO and e["status"] == "ok":
            ratio += " !"
        cycles = e["ipu"].get("cycles")
        status = e["status"]
        if status == "ok" and e["check"]:
            status = f"ok (err/tol {e['check']['err_over_tol']:.2g})"
        elif status.startswith("MISMATCH"):
            status = (f"*** {status} (err/tol {e['check']['err_over_tol']:.3g}, max abs err "
                      f"{e['check']['max_abs_err']:.3g}, max rel err {e['check']['max_rel_err']:.3g}) ***")
        rows.append((e["name"], _time(e["cpu"].get("median_s")), _time(e["ipu"].get("median_s")), ratio,
                     _time(e["cpu"].get("compile_s")), _time(e["ipu"].get("compile_s")),
                     f"{cycles:,}" if cycles is not None else "-", status[:160]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    lines = []
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:-1], widths[1:])]
        lines.append("  ".join(cells + [r[-1]]))
    lines.insert(1, "-" * len(lines[0]))
    geomean = summary["geomean_ratio"]
    lines.append("")
    lines.append(f"geomean ipu/cpu: {geomean:.2f}x over {len(summary['geomean_over'])} programs" if geomean
                 else "geomean ipu/cpu: - (no program ran on both backends)")
    lines.append(f"above {SLOW_RATIO:g}x: {', '.join(summary['above_slow_ratio']) or 'none'}")
    if summary["not_timed_on_ipu"]:
        lines.append(f"not timed on ipu (unsupported or failed): {', '.join(summary['not_timed_on_ipu'])}")
    if summary["mismatches"]:
        lines.append(f"*** WRONG RESULTS on ipu (not in the geomean): {', '.join(summary['mismatches'])} ***")
    return "\n".join(lines)


def _git_revision() -> Optional[str]:
    """The source tree's commit (this file lives in it), `-dirty` with uncommitted changes to tracked files."""
    here = str(Path(__file__).resolve().parent)
    try:
        rev = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return rev + ("-dirty" if dirty.strip() else "")


def environment() -> Dict[str, Any]:
    import jax
    import jaxlib.version

    import jax_ipu

    native = Path(jax_ipu.__file__).resolve().parent / "lib" / "libjax_ipu.so"
    cpu_model = None
    try:
        cpu_model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                          if ln.startswith("model name")), None)
    except OSError:
        pass
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "versions": {"python": platform.python_version(), "jax": jax.__version__, "jaxlib": jaxlib.version.__version__,
                     "numpy": np.__version__, "jax_ipu_git_revision": _git_revision(),
                     "libjax_ipu_sha256": (hashlib.sha256(native.read_bytes()).hexdigest()
                                           if native.is_file() else None)},
        "machine": {"cores": os.cpu_count(),
                    "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                    "cpu": cpu_model, "platform": platform.platform()},
        "env": {k: v for k, v in os.environ.items()
                if k.startswith(("JAX_", "XLA_", "TF_POPLAR")) or k in ("OMP_NUM_THREADS",)},
    }


def select(only: List[str]) -> List[Program]:
    names = [n for arg in only for n in arg.split(",") if n]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise SystemExit(f"--only: no program named {', '.join(unknown)}; the programs are: {', '.join(BY_NAME)}")
    return [p for p in PROGRAMS if not names or p.name in names]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small inputs and 3 repetitions (a smoke run)")
    parser.add_argument("--json", default="bench-results.json",
                        help="where to write the results (default: %(default)s)")
    parser.add_argument("--only", action="append", default=[], metavar="NAME", help="run only these programs")
    parser.add_argument("--reps", type=int, default=None, help="timed runs per backend (default 7, 3 with --quick)")
    parser.add_argument("--list", action="store_true", help="list the programs and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(f"{p.name:20} {p.description}" for p in PROGRAMS))
        return 0
    programs = select(args.only)
    reps = args.reps or (3 if args.quick else 7)
    if reps < 1:
        raise SystemExit("--reps must be at least 1")
    info = environment()
    print(f"jax {info['versions']['jax']}, jaxlib {info['versions']['jaxlib']}, git "
          f"{info['versions']['jax_ipu_git_revision'] or 'unknown'}, {info['machine']['usable_cores']} cores, "
          f"{'quick sizes' if args.quick else 'full sizes'}, {reps} timed runs per backend", flush=True)
    entries = []
    for i, program in enumerate(programs):
        print(f"[{i + 1}/{len(programs)}] {program.name}: {program.description}", file=sys.stderr, flush=True)
        entries.append(measure(program, args.quick, reps, sys.stderr))
    summary = summarize(entries)
    print()
    print(format_table(entries, summary))
    out = Path(args.json).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dict(info, quick=args.quick, reps=reps, programs=entries, summary=summary),
                              indent=1) + "\n")
    print(f"\nresults: {out}")
    return 1 if summary["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
