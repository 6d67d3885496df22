"""The differential fuzzer: random jax programs run on cpu and on ipu in one process, their results compared.

    python tests/fuzz/fuzz.py --n 10000 --seed 1        # programs 0..9999 of seed 1 (nox -s fuzz -- --n ... --seed ...)
    python tests/fuzz/fuzz.py --seed 1 --only 4711      # one program again (its reproducer is rewritten)

Program i of seed s is always the same program (fuzz_programs.py). Worker processes run the programs in order, a
chunk each, so that a crash or a hang costs one program, not the run: a worker that dies is a mismatch of the
program it was on, one that gives no result within --timeout seconds is killed and its program counted as a hang.
What may differ is stated in fuzz_tolerances.py (the table of per-op float tolerances, the accepted differences, what
the ipu refuses by design). Each unexplained mismatch is minimised (fuzz_minimise.py) and written to --out as a
standalone script that prints both results. The summary goes to stdout and, as JSON, to --out/summary.json; the exit
status is 1 if any mismatch is unexplained. Programs cpu itself refuses or dies on are counted as invalid.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

import fuzz_programs as fp  # noqa: E402

CHUNK = 100  # programs per worker process (each starts jax once; a fresh process bounds memory and caches)
MINIMISE_BUDGET = 150.0  # seconds per mismatch


def series() -> str:
    from importlib.metadata import version

    return version("jaxlib").split("+")[0]


# ---------------------------------------------------------------------------------------------------- the worker


def worker(seed: int, indices: Sequence[int], out: Optional[str], minimise: bool, perturb_ipu: bool) -> None:
    """Judges programs in order, one JSON line per program on stdout (a "start" line before each)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu,ipu")
    import fuzz_compare as fc
    import fuzz_minimise as fm
    import jax

    s = fc.series()
    emit = sys.stdout.write
    def phase(index: int, name: str) -> None:
        emit(json.dumps({"start": index, "phase": name}) + "\n")
        sys.stdout.flush()

    for n, index in enumerate(indices):
        phase(index, "generate")
        program = fp.generate(seed, index)
        outcome = fc.judge(program, perturb_ipu=perturb_ipu, phase=lambda name, i=index: phase(i, name))
        record: Dict[str, Any] = {"index": index, "status": outcome.status, "reason": outcome.reason,
                                  "detail": outcome.detail[:2000], "seconds": round(outcome.seconds, 3),
                                  "ops": sorted({st.op for st in program.ops()}), "big": program.big}
        if outcome.status == "mismatch" and out and not perturb_ipu:
            small = program
            if minimise and not program.big:  # big ones are a few steps already, and slow to rerun
                emit(json.dumps(dict(record, provisional=True)) + "\n")  # kept should minimising crash
                phase(index, "minimise")
                small = fm.minimise(program, fm.still_fails(outcome.reason), MINIMISE_BUDGET)
                final = fc.judge(small)
                if final.status == "mismatch":
                    record["minimised_detail"] = final.detail[:2000]
            path = os.path.join(out, f"seed{seed}-{index}.py")
            fm.write(path, fm.reproducer(small, fm.header(small, s, outcome.reason,
                                                          record.get("minimised_detail", outcome.detail), program)))
            record["reproducer"] = path
            record["steps"] = [len(program.ops()), len(small.ops())]
        emit(json.dumps(record) + "\n")
        sys.stdout.flush()
        if n % 25 == 24:
            jax.clear_caches()


# ---------------------------------------------------------------------------------------------------- the parent


class Pool:
    """Worker processes over chunks of indices, with a watchdog per program."""

    def __init__(self, args: argparse.Namespace, indices: List[int]) -> None:
        self.args = args
        self.pending = [indices[i:i + CHUNK] for i in range(0, len(indices), CHUNK)]
        self.results: Dict[int, Dict[str, Any]] = {}
        self.selector = selectors.DefaultSelector()
        self.workers: Dict[int, Dict[str, Any]] = {}
        self.stderr_dir = tempfile.mkdtemp(prefix="jax-ipu-fuzz-")

    def spawn(self, chunk: List[int]) -> None:
        a = self.args
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--seed", str(a.seed),
               "--indices", ",".join(map(str, chunk)), "--out", a.out]
        cmd += ["--no-minimise"] if a.no_minimise else []
        cmd += ["--perturb-ipu"] if a.perturb_ipu else []
        err = open(os.path.join(self.stderr_dir, f"{chunk[0]}.err"), "w+")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, cwd=tempfile.gettempdir(),
                                start_new_session=True, universal_newlines=True, bufsize=1)
        self.workers[proc.pid] = {"proc": proc, "chunk": chunk, "current": None, "phase": "", "since": time.time(),
                                  "limit": a.timeout, "err": err}
        self.selector.register(proc.stdout, selectors.EVENT_READ, proc.pid)

    def run(self, progress) -> Dict[int, Dict[str, Any]]:  # noqa: ANN001 - a callable
        try:
            while self.pending or self.workers:
                while self.pending and len(self.workers) < self.args.jobs:
                    self.spawn(self.pending.pop(0))
                for key, _ in self.selector.select(timeout=1.0):
                    self._read(key.data, progress)
                now = time.time()
                for pid, w in list(self.workers.items()):
                    if w["current"] is not None and now - w["since"] > w["limit"]:
                        self._lost(pid, "hang", f"no result within {w['limit']:.0f} s; killed", progress)
        finally:
            for pid in list(self.workers):  # (an interrupted run: its workers go with it)
                if self.workers[pid]["proc"].poll() is None:
                    os.killpg(pid, 9)
                    self.workers[pid]["proc"].wait()
                self._close(pid)
            # a lost worker's stderr is in its record already (_lost)
            shutil.rmtree(self.stderr_dir, ignore_errors=True)
        return self.results

    def _read(self, pid: int, progress) -> None:  # noqa: ANN001
        w = self.workers.get(pid)
        if w is None:
            return
        line = w["proc"].stdout.readline()
        if not line:
            w["proc"].wait()
            if w["current"] is not None or len(w["chunk"]):
                self._lost(pid, "crash", f"the worker process ended (exit status {w['proc'].returncode})", progress)
            else:
                self._close(pid)
            return
        message = json.loads(line)
        if "start" in message:
            if message["start"] != w["current"] or message.get("phase") == "minimise":
                w["since"] = time.time()
            w["current"], w["phase"] = message["start"], message.get("phase", "")
            w["limit"] = self.args.timeout + (MINIMISE_BUDGET + 60 if w["phase"] == "minimise" else 0)
            return
        if message.get("provisional"):
            self.results[message["index"]] = message
            return
        self.results[message["index"]] = message
        w["current"] = None
        w["chunk"] = [i for i in w["chunk"] if i != message["index"]]
        progress(message)

    def _lost(self, pid: int, kind: str, why: str, progress) -> None:  # noqa: ANN001
        w = self.workers[pid]
        if w["proc"].poll() is None:
            os.killpg(pid, 9)
            w["proc"].wait()
        index = w["current"] if w["current"] is not None else w["chunk"][0]
        w["err"].seek(0)
        tail = w["err"].read()[-1500:]
        rest = [i for i in w["chunk"] if i != index]
        earlier = self.results.get(index)
        if earlier and earlier.get("provisional"):  # it died minimising: the program's outcome stands
            earlier["detail"] += f"\n(minimising it ended the worker: {why})"
            progress(earlier)
            self._close(pid)
            if rest:
                self.pending.insert(0, rest)
            return
        record = {"index": index, "status": "mismatch", "reason": f"ipu {kind}", "detail": f"{why}\n{tail}",
                  "seconds": round(time.time() - w["since"], 1), "ops": [], "big": False}
        if w.get("phase") in ("cpu", "generate"):  # cpu itself (XLA:CPU) died or hung: not the ipu's doing
            record.update(status="invalid", reason=f"cpu {kind} (XLA:CPU or jax, not the ipu)")
        if self.args.out and record["status"] == "mismatch":
            import fuzz_minimise as fm

            program = fp.generate(self.args.seed, index)
            record["ops"] = sorted({s.op for s in program.ops()})
            path = os.path.join(self.args.out, f"seed{self.args.seed}-{index}.py")
            fm.write(path, fm.reproducer(program, fm.header(program, series(), f"ipu {kind}", why)))
            record["reproducer"] = path
        self.results[index] = record
        progress(record)
        self._close(pid)
        if rest:
            self.pending.insert(0, rest)

    def _close(self, pid: int) -> None:
        w = self.workers.pop(pid)
        self.selector.unregister(w["proc"].stdout)
        w["proc"].stdout.close()
        w["err"].close()


def summarise(results: Dict[int, Dict[str, Any]], seed: int, seconds: float) -> Dict[str, Any]:
    counts = collections.Counter(r["status"] for r in results.values())
    by = collections.defaultdict(collections.Counter)
    for r in results.values():
        if r["status"] != "ok":
            by[r["status"]][r["reason"]] += 1
    mismatches = sorted((r for r in results.values() if r["status"] == "mismatch"), key=lambda r: r["index"])
    return {
        "series": series(), "seed": seed, "programs": len(results), "seconds": round(seconds, 1),
        "big_programs": sum(1 for r in results.values() if r.get("big")),
        "ok": counts["ok"], "unsupported": dict(by["unsupported"]), "explained": dict(by["explained"]),
        "open": dict(by["open"]), "invalid": dict(by["invalid"]), "unexplained": len(mismatches),
        "mismatches": [{k: r.get(k) for k in ("index", "reason", "detail", "minimised_detail", "reproducer", "steps")}
                       for r in mismatches],
        "invalid_programs": sorted(r["index"] for r in results.values() if r["status"] == "invalid"),
    }


def report(summary: Dict[str, Any]) -> str:
    s = summary
    lines = [f"jaxlib {s['series']}, seed {s['seed']}: {s['programs']} programs ({s['big_programs']} big) in "
             f"{s['seconds']:.0f} s",
             f"  ok (within the table):        {s['ok']}",
             f"  unsupported by design:        {sum(s['unsupported'].values())}"]
    lines += [f"      {n:6d}  {op}" for op, n in sorted(s["unsupported"].items())]
    lines.append(f"  explained (accepted list):    {sum(s['explained'].values())}")
    lines += [f"      {n:6d}  {reason}" for reason, n in sorted(s["explained"].items(), key=lambda x: -x[1])]
    lines.append(f"  open (known, to fix):         {sum(s['open'].values())}")
    lines += [f"      {n:6d}  {reason}" for reason, n in sorted(s["open"].items(), key=lambda x: -x[1])]
    lines.append(f"  invalid (jax refused them):   {sum(s['invalid'].values())}")
    lines += [f"      {n:6d}  {reason[:150]}" for reason, n in sorted(s["invalid"].items(), key=lambda x: -x[1])]
    lines.append(f"  UNEXPLAINED mismatches:       {s['unexplained']}")
    for m in s["mismatches"]:
        lines.append(f"      #{m['index']}: {m['reason']}: {(m.get('minimised_detail') or m['detail'] or '')[:300]}")
        if m.get("reproducer"):
            lines.append(f"          reproducer: {m['reproducer']}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200, help="number of programs (default 200)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="first program index (default 0)")
    parser.add_argument("--only", default="", help="comma-separated program indices instead of --start/--n")
    parser.add_argument("--out", default="", help="reproducers and summary.json (default build/fuzz/<series>/)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per program before it is a hang")
    parser.add_argument("--no-minimise", action="store_true", help="write mismatches unminimised (faster)")
    parser.add_argument("--perturb-ipu", action="store_true",
                        help="move every float ipu result by one ulp: a check that the comparison fails")
    parser.add_argument("--quiet", action="store_true", help="no line per non-ok program while running")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--indices", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.seed, [int(i) for i in args.indices.split(",")], args.out or None, not args.no_minimise,
               args.perturb_ipu)
        return 0
    args.out = os.path.abspath(args.out or str(REPO / "build" / "fuzz" / series()))
    os.makedirs(args.out, exist_ok=True)
    indices = [int(i) for i in args.only.split(",")] if args.only else list(range(args.start, args.start + args.n))
    start = time.time()
    done = [0]

    def progress(r: Dict[str, Any]) -> None:
        done[0] += 1
        if not args.quiet and r["status"] != "ok":
            print(f"[{done[0]}/{len(indices)}] #{r['index']} {r['status']}: {r['reason'][:120]}", flush=True)
        elif done[0] % 500 == 0:
            print(f"[{done[0]}/{len(indices)}] {time.time() - start:.0f} s", flush=True)

    results = Pool(args, indices).run(progress)
    summary = summarise(results, args.seed, time.time() - start)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(report(summary))
    print(f"summary: {os.path.join(args.out, 'summary.json')}")
    return 1 if summary["unexplained"] else 0


if __name__ == "__main__":
    sys.exit(main())
