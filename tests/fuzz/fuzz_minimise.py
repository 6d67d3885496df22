"""Shrinks a program whose ipu result differs from cpu's while it still differs, and writes it as a standalone script
that prints both results.

The moves, each kept only if the program still runs on cpu and still mismatches (unexplained): keep one output; drop
what it does not need; cut a step (its result becomes an input holding cpu's value of it, so every step before it
that fed only it goes); shrink elementwise programs to the one element that differs; set the inputs' elements to 0
or 1 in halves while the mismatch persists (delta debugging).
"""

from __future__ import annotations

import copy
import inspect
import re
import time
from typing import Callable, List, Optional, Set

import fuzz_compare as fc
import fuzz_programs as fp
import numpy as np

Check = Callable[[fp.Program], bool]


def still_fails(reason: str) -> Check:
    """A program still fails as the original did: cpu runs it, and ipu mismatches unexplained with the same reason
    (results differ / raised / refused)."""
    def check(program: fp.Program) -> bool:
        outcome = fc.judge(program)
        return outcome.status == "mismatch" and outcome.reason == reason
    return check


def minimise(program: fp.Program, check: Check, budget: float = 180.0) -> fp.Program:
    deadline = time.time() + budget
    best = copy.deepcopy(program)

    def attempt(candidate: fp.Program) -> bool:
        nonlocal best
        if time.time() > deadline:
            return False
        try:
            ok = check(candidate)
        except Exception:  # noqa: BLE001 - a candidate jax rejects is just not smaller
            ok = False
        if ok:
            best = candidate
        return ok

    # one output
    if len(best.outputs) > 1:
        for name in list(best.outputs):
            candidate = copy.deepcopy(best)
            candidate.outputs = [name]
            if attempt(prune(candidate)):
                break
    best = prune(best)
    attempt(_prune_blocks(best))
    # cut steps, from the last to the first, until nothing more goes
    changed = True
    while changed and time.time() < deadline:
        changed = False
        for step in reversed(list(best.steps)):
            if step not in best.steps:
                continue
            candidate = cut(best, best.steps.index(step))
            if candidate is not None and attempt(prune(candidate)):
                changed = True
    # steps bypassed: a step's result replaced by one of its operands of the same type
    for step in reversed(list(best.steps)):
        if step in best.steps and time.time() < deadline:
            for candidate in bypasses(best, best.steps.index(step)):
                if attempt(prune(candidate)):
                    break
    # the one element that differs, for elementwise programs
    best = _one_element(best, attempt)
    # simpler input values
    for k in range(len(best.inputs)):
        if time.time() > deadline:
            break
        best = _simplify_values(best, k, attempt)
    return best


def prune(program: fp.Program) -> fp.Program:
    """Without the steps and inputs its outputs do not need."""
    needed: Set[str] = set(program.outputs)
    kept: List[fp.Step] = []
    for step in reversed(program.steps):
        if any(o.name in needed for o in step.outs):
            kept.append(step)
            needed.update(step.reads)
    program = copy.copy(program)
    program.steps = list(reversed(kept))
    program.inputs = [i for i in program.inputs if i.var.name in needed]
    return program


def _prune_blocks(program: fp.Program) -> fp.Program:
    """Without the steps in nested functions that their results do not need (and the reads they were for)."""
    program = copy.deepcopy(program)

    def block(b: fp.Block) -> None:
        needed = set(fp._names_in(b.result))
        kept: List[fp.Step] = []
        for step in reversed(b.steps):
            if any(o.name in needed for o in step.outs):
                for inner in step.blocks:
                    block(inner)
                if step.blocks:
                    step.reads = _region_reads(step)
                kept.append(step)
                needed.update(step.reads)
        b.steps = list(reversed(kept))

    for step in program.steps:
        for b in step.blocks:
            block(b)
        if step.blocks:
            step.reads = _region_reads(step)
    return prune(program)


def _region_reads(step: fp.Step) -> List[str]:
    return list(dict.fromkeys(fp._names_in(step.expr) + [r for b in step.blocks for r in fp._outer_reads(b)]))


def cut(program: fp.Program, index: int) -> Optional[fp.Program]:
    """Step ``index``'s results as inputs holding cpu's values of them."""
    step = program.steps[index]
    if any(o.dtype == "tuple" for o in step.outs):
        return None
    probe = copy.deepcopy(program)
    probe.outputs = [o.name for o in step.outs]
    probe = prune(probe)
    try:
        values = fc.run(fc.function(probe), "cpu", fc.arguments(probe))
    except Exception:  # noqa: BLE001 - nothing to cut here
        return None
    candidate = copy.deepcopy(program)
    del candidate.steps[index]
    for o, v in zip(step.outs, values):
        if o.dtype == fp.COMPLEX:
            v = (v[..., 0] + 1j * v[..., 1]).astype(np.complex64)
        var = fp.Var(o.name, o.dtype, tuple(v.shape), moved_only=False)
        candidate.inputs.append(fp.Input(var, 0, "cut", literal=np.asarray(v)))
    return candidate


def bypasses(program: fp.Program, index: int) -> List[fp.Program]:
    """The program without step ``index``, each operand of the result's type standing in for its result."""
    step = program.steps[index]
    if len(step.outs) != 1:
        return []
    out = step.outs[0]
    candidates = []
    for name in dict.fromkeys(step.reads):
        try:
            var = program.var(name)
        except KeyError:
            continue
        if var.dtype != out.dtype or var.shape != out.shape:
            continue
        candidate = copy.deepcopy(program)
        del candidate.steps[index]
        _rename(candidate, out.name, name)
        candidates.append(candidate)
    return candidates


def _rename(program: fp.Program, old: str, new: str) -> None:
    pattern = re.compile(rf"\b{old}\b")

    def walk(steps: List[fp.Step]) -> None:
        for s in steps:
            s.expr = pattern.sub(new, s.expr)
            s.reads = [new if r == old else r for r in s.reads]
            if s.scale:
                s.scale = pattern.sub(new, s.scale)
            for b in s.blocks:
                b.result = pattern.sub(new, b.result)
                walk(b.steps)
    walk(program.steps)
    program.outputs = [new if o == old else o for o in program.outputs]


def _one_element(program: fp.Program, attempt: Callable[[fp.Program], bool]) -> fp.Program:
    """Elementwise programs: every input of the output's shape cut down to the element where they differ."""
    elementwise = set(_ELEMENTWISE)
    if not program.steps or any(s.op not in elementwise or s.blocks for s in program.steps):
        return program
    try:
        args = fc.arguments(program)
        f = fc.function(program)
        want, got = fc.run(f, "cpu", args)[0], fc.run(f, "ipu", args)[0]
    except Exception:  # noqa: BLE001
        return program
    bad = np.argwhere(~fc.same(got, want))
    if not len(bad) or want.ndim == 0:
        return program
    at = tuple(int(i) for i in bad[0][: want.ndim])
    candidate = copy.deepcopy(program)
    for inp, value in zip(candidate.inputs, args):
        if value.shape == want.shape:
            inp.literal = np.asarray(value[at]).reshape((1,))
            inp.var.shape = (1,)
        elif value.ndim:
            return program  # broadcasting of other shapes: leave it
    for step in candidate.steps:
        for o in step.outs:
            o.shape = (1,) if o.shape == want.shape else o.shape
    return candidate if attempt(candidate) else program


_ELEMENTWISE = set(fp.UNARY_FLOAT) | set(fp.BINARY_FLOAT) | set(fp.UNARY_INT) | set(fp.BINARY_INT) | {
    "compare", "select", "convert", "pow_2", "pow_half", "integer_pow", "clamp", "reduce_precision", "is_finite",
    "isnan", "signbit"}


def _simplify_values(program: fp.Program, k: int, attempt: Callable[[fp.Program], bool]) -> fp.Program:
    """Input k's elements set to 0 or 1 in ever smaller groups, as long as the mismatch stays."""
    value = np.array(fp.input_value(program.inputs[k]))
    if value.size == 0:
        return program
    best = program

    def with_value(v: np.ndarray) -> fp.Program:
        candidate = copy.deepcopy(best)
        candidate.inputs[k].literal = v
        return candidate

    for fill in (0, 1):
        candidate = with_value(np.full_like(value, fill))
        if attempt(candidate):
            return candidate
    flat = value.reshape(-1).copy()
    chunk = max(1, flat.size // 2)
    tries = 0
    while chunk >= 1 and tries < 24:
        changed = False
        for start in range(0, flat.size, chunk):
            tries += 1
            trial = flat.copy()
            segment = trial[start:start + chunk]
            if (segment == 0).all():
                continue
            trial[start:start + chunk] = 0
            candidate = with_value(trial.reshape(value.shape))
            if attempt(candidate):
                best, flat, changed = candidate, trial, True
            if tries >= 24:
                break
        if not changed:
            chunk //= 2
    return best


# ---------------------------------------------------------------------------------------------------- reproducer


def reproducer(program: fp.Program, header: str) -> str:
    """A standalone script: the program, its inputs, and both results printed side by side."""
    lines = ['"""' + header.strip() + '\n"""', "", "import warnings", "", "import jax", "import jax.numpy as jnp",
             "import numpy as np", "from jax import lax", "", "warnings.simplefilter('ignore')  # jit's backend= "
             "argument is deprecated in the current series", ""]
    if any(i.literal is None for i in program.inputs):
        lines += [inspect.getsource(fp.values), ""]
    lines.append(fp.render(program))
    if any(_input_source(i)[0].startswith("_filled") for i in program.inputs):
        lines.append(_FILLED)
    lines.append("inputs = [")
    for i in program.inputs:
        lines += ["    " + line for line in _input_source(i)]
    lines.append("]")
    lines.append(_SHOW)
    return "\n".join(lines)


def _input_source(i: fp.Input) -> List[str]:
    var = i.var
    if i.literal is None:
        return [f"values({var.dtype!r}, {var.shape}, {i.seed}, {i.profile!r}),  # {var.name}"]
    v = np.asarray(i.literal)
    dtype = fp.jdt(var.dtype) if var.dtype != fp.COMPLEX else "np.complex64"
    if v.size <= 16:
        shown = np.array2string(v.reshape(-1), separator=", ", max_line_width=10_000)
        return [f"np.frombuffer(bytes.fromhex('{v.tobytes().hex()}'), {dtype}).reshape({v.shape}),  # {var.name}: "
                f"{shown}"]
    values, counts = np.unique(v.reshape(-1).view(np.uint8).reshape(v.size, -1), axis=0, return_counts=True)
    common = values[int(np.argmax(counts))].tobytes()
    flat = v.reshape(-1)
    other = [j for j in range(v.size) if flat[j:j + 1].tobytes() != common]
    fill = np.frombuffer(common, v.dtype)[0]
    if not other:
        return [f"np.full({v.shape}, np.frombuffer(bytes.fromhex('{common.hex()}'), {dtype})[0]),  # {var.name}: all "
                f"{fill}"]
    if len(other) <= 32:
        rest = flat[other]
        return [f"_filled({v.shape}, {dtype}, bytes.fromhex('{common.hex()}'), {other}, "
                f"bytes.fromhex('{rest.tobytes().hex()}')),  # {var.name}: {fill} but at {len(other)} places: "
                f"{np.array2string(rest, separator=', ', max_line_width=10_000)}"]
    import base64
    import zlib

    packed = base64.b64encode(zlib.compress(v.tobytes(), 9)).decode()
    return [f"np.frombuffer(__import__('zlib').decompress(__import__('base64').b64decode('{packed}')), "
            f"{dtype}).reshape({v.shape}),  # {var.name}"]


_FILLED = '''
def _filled(shape, dtype, fill, where, rest):
    """An array of one value but at ``where``, given as bytes (exact, NaN payloads and denormals included)."""
    out = np.full(shape, np.frombuffer(fill, dtype)[0], dtype)
    out.reshape(-1)[where] = np.frombuffer(rest, dtype)
    return out

'''
_SHOW = '''

def _bits(a):
    a = np.stack([a.real, a.imag], -1) if a.dtype == np.complex64 else a
    return a, (a.view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize]) if a.dtype.itemsize in (2, 4) and
               a.dtype.kind not in "iub" else a)


cpu = jax.jit(f, backend="cpu")(*inputs)
ipu = jax.jit(f, backend="ipu")(*inputs)
for k, (c, g) in enumerate(zip(cpu, ipu)):
    (c, cb), (g, gb) = _bits(np.asarray(c)), _bits(np.asarray(g))
    nan = np.isnan(c.astype(np.float32)) & np.isnan(g.astype(np.float32)) if c.dtype.kind not in "iub" else False
    differ = (cb != gb) & ~nan
    print(f"output {k}: {c.dtype}{list(c.shape)}, {int(np.sum(differ))} of {c.size} elements differ")
    for at in np.argwhere(differ)[:10]:
        at = tuple(at)
        print(f"  at {list(at)}: cpu {c[at]!r} (bits {int(cb[at]):#x}), ipu {g[at]!r} (bits {int(gb[at]):#x})")
    if c.size <= 16:
        print("  cpu:", c.reshape(-1).tolist())
        print("  ipu:", g.reshape(-1).tolist())
'''


def header(program: fp.Program, series: str, reason: str, detail: str, original: Optional[fp.Program] = None) -> str:
    text = (f"Fuzz program {program.index} of seed {program.seed}, jaxlib {series}: {reason}.\n"
            f"{detail[:600]}\n\n"
            f"Regenerate the original: python tests/fuzz/fuzz.py --seed {program.seed} --only {program.index}")
    if original is not None and original is not program:
        text += f"\n(minimised from {len(original.ops())} steps to {len(program.ops())})"
    return text


def write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
