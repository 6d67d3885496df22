"""Runs a fuzz program on cpu and on ipu in this process and judges the difference (fuzz_tolerances.py says what is
allowed): ok, explained by an accepted difference, open (accepted as known, to fix), unsupported, or a mismatch."""

from __future__ import annotations

import dataclasses
import re
import time
import traceback
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import fuzz_programs as fp
import fuzz_tolerances as ft
import numpy as np

TRIALS = 7  # cpu runs of the wobbled program: all up, all down, four of random signs, none (with loose equalities)


def series() -> str:
    from jaxlib import version

    return version.__version__.split("+")[0]


@dataclasses.dataclass
class Outcome:
    status: str  # "ok", "explained", "open", "unsupported", "invalid" (cpu refused it: a generator bug), "mismatch"
    reason: str = ""  # the accepted entry's reason, the unsupported op, or what went wrong
    detail: str = ""
    seconds: float = 0.0


# ---------------------------------------------------------------------------------------------------- running


def function(program: fp.Program, wobble: Optional[fp.WobbleTable] = None) -> Callable:
    import jax
    import jax.numpy as jnp
    from jax import lax

    namespace: Dict[str, Any] = {"jax": jax, "jnp": jnp, "lax": lax, "np": np}
    if wobble is not None:
        exec(fp.WOBBLE_SOURCE, namespace)
    exec(fp.render(program, wobble), namespace)
    return namespace["f"]


def run(f: Callable, backend: str, args: Sequence[Any]) -> List[np.ndarray]:
    """``f`` jitted for ``backend``: its results as numpy arrays (complex64 as pairs of f32)."""
    import jax

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = jax.jit(f, backend=backend)(*args)
        leaves = [_pairs(np.asarray(leaf)) for leaf in jax.tree_util.tree_leaves(out)]
    if backend == "ipu":
        for leaf in jax.tree_util.tree_leaves(out):
            devices = leaf.devices() if hasattr(leaf, "devices") else {leaf.device()}
            assert {d.platform for d in devices} == {"ipu"}, f"a result lives on {devices}, not on the ipu"
    return leaves


def _pairs(a: np.ndarray) -> np.ndarray:
    """complex64 as f32 pairs (a trailing axis of 2): each part is compared as an f32."""
    return np.stack([a.real, a.imag], axis=-1) if a.dtype == np.complex64 else a


def arguments(program: fp.Program) -> List[np.ndarray]:
    return [fp.input_value(i) for i in program.inputs]


# ---------------------------------------------------------------------------------------------------- comparing


def same(g: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Elementwise: the same bits (a NaN matches any NaN; the sign of a zero counts)."""
    if g.dtype.kind == "f" or g.dtype.name == "bfloat16":
        bits = {2: np.uint16, 4: np.uint32}[g.dtype.itemsize]
        with np.errstate(invalid="ignore"):
            nan = np.isnan(g.astype(np.float32)) & np.isnan(w.astype(np.float32))
        return (g.view(bits) == w.view(bits)) | nan
    return g == w


def _describe(index: int, g: np.ndarray, w: np.ndarray, bad: np.ndarray, allowed: Optional[np.ndarray]) -> str:
    where = [tuple(int(i) for i in p) for p in np.argwhere(bad)[:4]]
    parts = []
    for p in where:
        text = f"{list(p)}: ipu {g[p]} cpu {w[p]}"
        if allowed is not None and np.isfinite(allowed[p]) and allowed[p] > 0:
            text += f" (allowed {float(allowed[p]):.3g})"
        parts.append(text)
    return (f"output {index} ({w.dtype}{list(w.shape)}): {int(bad.sum())} of {bad.size} differ; " +
            "; ".join(parts))


def compare(program: fp.Program, args: Sequence[np.ndarray], got: Sequence[np.ndarray],
            want: Sequence[np.ndarray], accepted: Sequence[ft.Accepted] = (),
            cache: Optional[Dict[Any, Any]] = None, holds: Optional[Dict[Tuple[str, str], bool]] = None
            ) -> Tuple[bool, str]:
    """Whether ipu's results are within what the table (and ``accepted``) allow; else which elements are not."""
    if len(got) != len(want):
        return False, f"ipu gave {len(got)} results, cpu {len(want)}"
    bad_any, differing = [], []
    for k, (g, w) in enumerate(zip(got, want)):
        if g.dtype != w.dtype or g.shape != w.shape:
            return False, f"output {k}: ipu gave {g.dtype}{list(g.shape)}, cpu {w.dtype}{list(w.shape)}"
        ok = same(g, w)
        differing.append(~ok)
        bad_any.append(not ok.all())
    if not any(bad_any):
        return True, ""
    s = series()
    holds = holds or {}

    def table(step: fp.Step) -> Optional[Tuple[int, str]]:
        return ft.tolerance(step, s, [a for a in accepted if holds.get((a.reason, step.outs[0].name), True)])

    if not any(table(step) for step in program.ops()):
        k = bad_any.index(True)
        return False, "bit for bit expected: " + _describe(k, got[k], want[k], differing[k], None)
    trials = _trials(program, args, table, s, accepted, cache)
    if isinstance(trials, str):
        return False, trials
    jumps = fp.discrete(program, table)
    anything = _downstream(program, {o.name for st in program.ops() if (t := table(st)) and t[1] == "any"
                                     for o in st.outs})
    for k, (g, w) in enumerate(zip(got, want)):
        if not bad_any[k] or program.outputs[k] in anything:  # what may be anything makes what it reaches so too
            continue
        g2, w2 = g, w
        ps = [t[k] for t in trials]
        moved = np.zeros(w2.shape, bool)
        bad = differing[k]
        allowed = None
        if w2.dtype.kind in "iub" or program.outputs[k] in jumps:  # any change under the moves: it may change
            for p in ps:
                moved |= ~same(p, w2)
            bad &= ~moved
            if w2.dtype.kind in "iub":
                if bad.any():
                    return False, _describe(k, g2, w2, bad, None)
                continue
        else:
            w64 = w2.astype(np.float64)
            g64 = g2.astype(np.float64)
            spread = np.zeros(w2.shape)
            with np.errstate(invalid="ignore", over="ignore"):
                for p in ps:
                    p64 = p.astype(np.float64)
                    moved |= (np.isnan(p64) != np.isnan(w64)) | ((np.isinf(p64) | np.isinf(w64)) & (p64 != w64))
                    d = np.abs(p64 - w64)
                    spread = np.fmax(spread, np.where(np.isfinite(d), d, 0.0))
                allowed = ft.SAFETY * spread
                within = np.isfinite(g64) & np.isfinite(w64) & (np.abs(g64 - w64) <= allowed) & (spread > 0)
            bad &= ~(moved | within)
        if bad.any():
            return False, _describe(k, g2, w2, bad, allowed)
    return True, ""


def _downstream(program: fp.Program, names: set) -> set:
    """``names`` and every value the program computes from them."""
    reach = set(names)
    grew = bool(reach)
    while grew:
        grew = False
        for st in program.ops():
            outs = {o.name for o in st.outs}
            if set(st.reads) & reach and not outs <= reach:
                reach |= outs
                grew = True
    return reach


def _trials(program: fp.Program, args: Sequence[np.ndarray], table: fp.WobbleTable, s: str,
            accepted: Sequence[ft.Accepted], cache: Optional[Dict[Any, Any]]) -> Any:
    key = tuple(a.reason for a in accepted)
    if cache is not None and key in cache:
        return cache[key]
    try:
        f = function(program, table)
        trials = range(TRIALS) if not program.big else (0, 1, 2)
        out = [run(f, "cpu", [np.int32(t)] + list(args)) for t in trials]
    except Exception as e:  # noqa: BLE001 - the fuzzer's own wobble failed: say so, as a mismatch to look at
        out = f"cpu could not run the program with its ops' tolerances applied: {type(e).__name__}: {_first_line(e)}"
    if cache is not None:
        cache[key] = out
    return out


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else ""


# ---------------------------------------------------------------------------------------------------- judging


UNSUPPORTED = re.compile(r"Unsupported operation (\S+?)\(")


REPEATS, REPEATS_BIG = 1, 3  # further runs of each program on the ipu, whose bits must be the first run's


def judge(program: fp.Program, args: Optional[Sequence[np.ndarray]] = None, perturb_ipu: bool = False,
          phase: Callable[[str], None] = lambda name: None) -> Outcome:
    """Runs ``program`` on cpu and ipu and judges the difference. ``perturb_ipu`` moves every float result of the
    ipu by one ulp first (to check that the comparison can fail). ``phase`` hears "cpu" or "ipu" before each runs
    (so that a process that dies can be blamed on the right one)."""
    start = time.time()
    s = series()
    for entry in ft.ACCEPTED:
        if entry.hang and entry.applies(program.ops(), s):
            return Outcome("open" if entry.open else "explained", entry.reason, "not run on the ipu")
    args = arguments(program) if args is None else args
    try:
        phase("cpu")
        f = function(program)
        want = run(f, "cpu", args)
    except Exception as e:  # noqa: BLE001 - jax refused the generated program: count it, it is the generator's bug
        return Outcome("invalid", f"cpu: {type(e).__name__}: {_first_line(e)}",
                       traceback.format_exc(limit=3), time.time() - start)
    try:
        phase("ipu")
        got = run(f, "ipu", args)
    except Exception as e:  # noqa: BLE001 - any error of the ipu where cpu ran is a mismatch, unless by design
        message = str(e)
        m = UNSUPPORTED.search(message)
        if m or "UNIMPLEMENTED" in message:
            op = m.group(1) if m else "?"
            if any(x in message for x in ft.UNSUPPORTED_BY_DESIGN):
                return Outcome("unsupported", op, _first_line(e), time.time() - start)
            return Outcome("mismatch", f"ipu refused {op}, which the README says it runs",
                           _first_line(e), time.time() - start)
        for entry in ft.ACCEPTED:
            if entry.error and entry.error in message and entry.applies(program.ops(), s):
                return Outcome("open" if entry.open else "explained", entry.reason, _first_line(e),
                               time.time() - start)
        return Outcome("mismatch", f"ipu raised {type(e).__name__} where cpu ran", _first_line(e),
                       time.time() - start)
    # The emulator gives the same bits on every run, however its host threads share the work: a difference between
    # runs is a race (stop 72's row chains let a thread write bytes another still read, seen on big programs).
    for _ in range(REPEATS_BIG if program.big else REPEATS):
        again = run(f, "ipu", args)
        if any(a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes() for a, b in zip(got, again)):
            return Outcome("mismatch", "the ipu's results differ between two runs of the program",
                           "a race between the emulator's host threads?", time.time() - start)
    phase("cpu")  # the comparison runs variants of the program on cpu
    if perturb_ipu:
        got = [_one_ulp_up(g) for g in got]
    verdict = classify(program, args, got, want)
    verdict.seconds = time.time() - start
    return verdict


def classify(program: fp.Program, args: Sequence[np.ndarray], got: Sequence[np.ndarray],
             want: Sequence[np.ndarray]) -> Outcome:
    cache: Dict[Any, Any] = {}
    ok, detail = compare(program, args, got, want, (), cache)
    if ok:
        return Outcome("ok")
    s = series()
    steps = program.ops()
    candidates = [a for a in ft.ACCEPTED if not (a.error or a.hang) and a.applies(steps, s)]
    holds = _conditions(program, args, candidates)
    for entry in candidates:
        if compare(program, args, got, want, (entry,), cache, holds)[0]:
            return Outcome("open" if entry.open else "explained", entry.reason, detail)
    if len(candidates) > 1 and compare(program, args, got, want, tuple(candidates), cache, holds)[0]:
        status = "open" if any(a.open for a in candidates) else "explained"
        return Outcome(status, " + ".join(a.reason for a in candidates), detail)
    return Outcome("mismatch", "results differ", detail)


def _conditions(program: fp.Program, args: Sequence[np.ndarray],
                candidates: Sequence[ft.Accepted]) -> Dict[Tuple[str, str], bool]:
    """For entries that hold only for some operand values: whether they hold at each step they cover (cpu's
    operands; a step in a nested function, whose operands are not values of the program, counts as holding)."""
    holds: Dict[Tuple[str, str], bool] = {}
    top = {o.name for st in program.steps for o in st.outs} | {i.var.name for i in program.inputs}
    for entry in candidates:
        if not entry.when:
            continue
        for step in program.ops():
            if not entry.covers(step):
                continue

            def values(step: fp.Step = step) -> List[np.ndarray]:
                if not all(r in top for r in step.reads):
                    raise LookupError("operands inside a nested function")
                probe = fp.Program(program.seed, program.index, program.inputs, program.steps, list(step.reads))
                return run(function(probe), "cpu", args)
            try:
                holds[(entry.reason, step.outs[0].name)] = bool(ft.WHEN[entry.when](step, program, values))
            except Exception:  # noqa: BLE001 - unknown (operands not values of the program): let the entry hold
                continue
    return holds


def _one_ulp_up(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind != "f" and a.dtype.name != "bfloat16":
        return a
    f = a.copy()
    bits = {2: np.uint16, 4: np.uint32}[f.dtype.itemsize]
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(f.astype(np.float32))
    f.view(bits)[finite] += 1
    return f
