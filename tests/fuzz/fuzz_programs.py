"""Random jax programs for the differential fuzzer, generated from (seed, index) alone, kept as a list of steps that
renders to Python source (the reproducer is that source).

A program is a function of a few input arrays, 3-12 steps of jax.numpy / lax calls, and the values no later step
reads as its outputs. A step knows its op (a key of fuzz_tolerances.TOLERANCES), its result types and the source that
computes it; a control-flow or transformation step (cond, switch, while, fori_loop, scan, vmap, grad) holds blocks of
steps of its own. Shapes and dtypes are tracked here, without jax, so generation is cheap and deterministic; cpu
running a program is what validates it.

Rendering with ``wobble=table`` adds, after every step whose op the table says is not bit-exact, a perturbation of
its float results by that many ulps (of the result, or of the scale of a sum's terms), driven by a trial number:
cpu running that version a few times gives the envelope within which the ipu's result may move (fuzz_compare.py).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int32", "uint32", "int8", "uint8")
DTYPES = FLOATS + INTS + ("bool",)
COMPLEX = "complex64"
BITS = {"float32": 32, "int32": 32, "uint32": 32, "float16": 16, "bfloat16": 16, "int8": 8, "uint8": 8}

Shape = Tuple[int, ...]


def jdt(dtype: str) -> str:
    """The dtype as source: jnp.float32, jnp.bool_."""
    return "jnp.bool_" if dtype == "bool" else f"jnp.{dtype}"


def size_of(shape: Sequence[int]) -> int:
    return int(math.prod(shape)) if shape else 1


def is_float(dtype: str) -> bool:
    return dtype in FLOATS


def is_int(dtype: str) -> bool:
    return dtype in INTS


# ---------------------------------------------------------------------------------------------------- the model


@dataclasses.dataclass
class Var:
    name: str
    dtype: str
    shape: Shape
    moved_only: bool = False  # only data movement since an input: NaN payloads are the input's own

    @property
    def size(self) -> int:
        return size_of(self.shape)

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclasses.dataclass
class Input:
    var: Var
    seed: int
    profile: str
    literal: Optional[np.ndarray] = None  # set by the minimiser: these exact values instead of the recipe


@dataclasses.dataclass
class Block:
    """A nested function: ``def name(params): steps; return result``."""
    name: str
    params: List[Var]
    steps: List["Step"]
    result: str


@dataclasses.dataclass
class Step:
    op: str  # the row of fuzz_tolerances.TOLERANCES
    outs: List[Var]
    expr: str  # the right-hand side; "{B0}" etc. name this step's blocks
    reads: List[str]  # the values it reads (blocks' reads of outer values included)
    dtype: str  # the dtype it computes in (its float result's, for the tolerance)
    count: int = 1  # terms per result element of a sum (dot, reduce, window, scatter)
    scale: Optional[str] = None  # for sums: the same sum of the terms' magnitudes, as source
    blocks: List[Block] = dataclasses.field(default_factory=list)

    @property
    def size(self) -> int:
        return max((o.size for o in self.outs), default=0)


@dataclasses.dataclass
class Program:
    seed: int
    index: int
    inputs: List[Input]
    steps: List[Step]
    outputs: List[str]
    big: bool = False

    def ops(self) -> List[Step]:
        """Every step, nested ones included."""
        out: List[Step] = []

        def walk(steps: Sequence[Step]) -> None:
            for s in steps:
                out.append(s)
                for b in s.blocks:
                    walk(b.steps)
        walk(self.steps)
        return out

    def var(self, name: str) -> Var:
        for i in self.inputs:
            if i.var.name == name:
                return i.var
        for s in self.ops():
            for o in s.outs:
                if o.name == name:
                    return o
            for b in s.blocks:  # a nested function's parameters (a scan's carry, a loop's state)
                for p in b.params:
                    if p.name == name:
                        return p
        raise KeyError(name)


# ---------------------------------------------------------------------------------------------------- rendering

WobbleTable = Callable[[Step], Optional[Tuple[float, str]]]  # a step -> (ulps, "result"|"scale"|"norm") or exact


# Ops whose result jumps where their operands move a little (or that pick by value): a float result downstream of
# one of them, fed by an inexact op, may change by anything where it changes at all.
DISCONTINUOUS = {"bitcast", "compare", "compare_eq", "floor", "ceil", "round", "round_afz", "sign", "is_finite",
                 "isnan", "signbit", "argmax", "sort", "sort_multi", "top_k", "cond", "while", "rem", "nextafter",
                 "reduce_precision", "gather", "scatter_set", "scatter_min", "scatter_max", "reduce_max", "cummax",
                 "window_max", "max", "min", "clamp", "relu", "convert"}


def discrete(program: Program, wobble: WobbleTable) -> set:
    """The values that depend, through a discontinuous op, on a result the table calls inexact."""
    tainted: set = set()
    jumps: set = set()

    def walk(steps: Sequence[Step], inside: bool, jumping: bool) -> None:
        for s in steps:
            reads_tainted = inside or any(r in tainted for r in s.reads)
            reads_jumps = jumping or any(r in jumps for r in s.reads)
            for b in s.blocks:
                walk(b.steps, reads_tainted, reads_jumps)
            inner = [o.name for b in s.blocks for st in b.steps for o in st.outs]
            if wobble(s) or reads_tainted or any(n in tainted for n in inner):
                tainted.update(o.name for o in s.outs)
            if reads_jumps or any(n in jumps for n in inner) or (reads_tainted and s.op in DISCONTINUOUS):
                jumps.update(o.name for o in s.outs)
    walk(program.steps, False, False)
    return jumps


def render(program: Program, wobble: Optional[WobbleTable] = None, name: str = "f") -> str:
    """The program as a Python function definition. With ``wobble``, the function takes a trial number first and
    perturbs the results of the steps the table calls inexact; an equality of values that depend on them holds, on
    the last trial, within a few ulps (so that an equality the ops' ulps could break counts as one that may)."""
    params = ", ".join((["_trial"] if wobble else []) + [i.var.name for i in program.inputs])
    lines = [f"def {name}({params}):"]
    lines += _render_steps(program.steps, wobble, "    ", set())
    lines.append(f"    return ({', '.join(program.outputs)},)")
    return "\n".join(lines) + "\n"


def _render_steps(steps: Sequence[Step], wobble: Optional[WobbleTable], indent: str, tainted: set,
                  inside: bool = False) -> List[str]:
    """``tainted``: the values that depend on an inexact step (grows as steps render); ``inside``: in a block of a
    step that reads such values."""
    lines: List[str] = []
    for s in steps:
        tolerance = wobble(s) if wobble else None
        reads_tainted = inside or any(r in tainted for r in s.reads)
        for b in s.blocks:
            lines.append(f"{indent}def {b.name}({', '.join(p.name for p in b.params)}):")
            lines += _render_steps(b.steps, wobble, indent + "    ", tainted, reads_tainted)
            if wobble and b.result.startswith("jnp.sum(") and b.result.endswith(".astype(jnp.float32))"):
                # a grad's loss: a sum in XLA:CPU's order of its terms, moved as a reduce_sum's result is (4 ulps
                # of the sum of their magnitudes), or value_and_grad's value would have to be cpu's bits
                terms = b.result[len("jnp.sum("):-1]
                salt = sum(map(ord, b.name)) * 7
                lines.append(f"{indent}    return _wobble({b.result}, 4, jnp.sum(jnp.abs({terms})), _trial, {salt})")
            else:
                lines.append(f"{indent}    return {b.result}")
        target = ", ".join(o.name for o in s.outs)
        expr = s.expr
        if wobble and s.op == "compare_eq" and reads_tainted and len(s.reads) == 2:
            a, b = s.reads
            expr = f"{'~' if '!=' in s.expr else ''}_eq({a}, {b}, _trial)"
        lines.append(f"{indent}{target} = {expr}")
        if wobble and (tolerance or reads_tainted or any(o.name in tainted for b in s.blocks for st in b.steps
                                                         for o in st.outs)):
            tainted.update(o.name for o in s.outs)
        if tolerance:
            ulps, per = tolerance
            scale = {"result": "None", "norm": "'norm'", "denormal": "0.0", "any": "'any'"}.get(per, s.scale or "None")
            if per == "product":
                scale = f"('product', {s.scale})" if s.scale else "None"
            for k, o in enumerate(s.outs):
                if o.dtype in FLOATS or o.dtype == COMPLEX or (per == "any" and o.dtype != "tuple"):
                    salt = sum(map(ord, o.name)) * 7 + k
                    lines.append(f"{indent}{o.name} = _wobble({o.name}, {ulps}, {scale}, _trial, {salt})")
    return lines


# The runtime helper that wobbled programs call (defined in their namespace, never in a reproducer).
WOBBLE_SOURCE = '''
def _wobble(v, n, scale, trial, salt):
    """v moved by n ulps (of |v|, of scale, or of max|v| for 'norm'): up on trial 0, down on 1, by up to 2n in a
    direction from a hash of the element's position on 2-5 (so that low bits vary too), not on 6; by at least n f32
    smallest normals, so that a denormal flushed or not counts. scale='any': NaN, 0 or an infinity (anything may
    differ)."""
    if not jnp.issubdtype(v.dtype, jnp.inexact):  # integers and bools: only 'any' moves them
        if not (isinstance(scale, str) and scale == "any"):
            return v
        if v.dtype == jnp.bool_:
            return jnp.where(trial == 1, ~v, v)
        return jnp.where(trial == 1, v + 1, jnp.where(trial == 2, v - 1, v))
    if v.dtype == jnp.complex64:  # both parts by n ulps of |v| (of the scale's magnitude for sums)
        s = jnp.abs(v) if scale is None else (scale if isinstance(scale, (str, tuple)) else jnp.abs(scale))
        if isinstance(scale, tuple):
            s = ("product-of", jnp.abs(v), scale[1])
        return lax.complex(_wobble(jnp.real(v), n, s, trial, salt), _wobble(jnp.imag(v), n, s, trial, salt + 1))
    w = v.astype(jnp.float32)
    info = jnp.finfo(v.dtype)
    h = jnp.arange(w.size, dtype=jnp.uint32).reshape(w.shape) * jnp.uint32(0x9E3779B1)
    h = h + jnp.uint32(salt * 40503 % 4294967296) + trial.astype(jnp.uint32) * jnp.uint32(0xC2B2AE35)
    h = h ^ (h >> 16)
    h = h * jnp.uint32(0x7FEB352D)
    h = h ^ (h >> 15)
    coin = (h >> 7) & 1 == 1
    # 'any' value: NaN on trial 1, 0 on 2, +inf on 3, -inf on 4, one of them at random on 5, where half the elements
    # keep their value (so that what one element alone changes, a sort's order, moves too)
    pick = (h >> 11) & 7
    anything = jnp.where(trial == 1, jnp.nan, jnp.where(trial == 2, 0.0, jnp.where(trial == 3, jnp.inf, jnp.where(
        trial == 4, -jnp.inf, jnp.where(pick == 0, jnp.nan, jnp.where(pick == 1, 0.0, jnp.where(pick == 2, jnp.inf,
                                                                                             -jnp.inf)))))))
    kept = (trial == 5) & (pick >= 4)
    if isinstance(scale, str) and scale == "any":
        return jnp.where((trial >= 1) & (trial <= 5) & ~kept, anything, w).astype(v.dtype)
    overflow = None  # where some order of a sum's or product's terms overflows, any value may come out
    if scale is None:
        mag = jnp.abs(w)
    elif isinstance(scale, tuple):  # ("product", bound) or, for a complex part, ("product-of", |v|, bound)
        mag = jnp.abs(w) if scale[0] == "product" else scale[1]
        overflow = ~jnp.isfinite(jnp.broadcast_to(scale[-1], w.shape))
    elif isinstance(scale, str):
        mag = jnp.broadcast_to(jnp.max(jnp.where(jnp.isfinite(w), jnp.abs(w), 0.0), initial=0.0), w.shape)
    else:
        mag = jnp.broadcast_to(jnp.abs(jnp.asarray(scale).astype(jnp.float32)), w.shape)
        overflow = ~jnp.isfinite(mag)
    # an ulp of the smallest normal of the type, and n ulps at least n f32 smallest normals (flushed or not)
    mag = jnp.maximum(mag, max(1.1754944e-38 / float(info.eps), float(info.tiny)))
    sign = jnp.where(trial == 0, 1.0, jnp.where(trial == 1, -1.0, jnp.where(coin, 1.0, -1.0)))
    sign = jnp.where(trial == 6, 0.0, sign)
    # random sizes on trials 2-5, from a 128th of n to 2n: a function that is not monotonic (sin near its extremes)
    # can cross an integer or a compare's threshold under a smaller move than n ulps and not under n
    sign = sign * jnp.where(trial >= 2, (((h >> 9) & 255) + 1).astype(jnp.float32) / 128, 1.0)
    delta = jax.lax.stop_gradient(sign * (n * float(info.eps)) * mag)
    out = w + delta
    if overflow is not None:
        out = jnp.where(overflow & (trial >= 1) & (trial <= 5) & ~kept, anything, out)
    return out.astype(v.dtype)


def _eq(a, b, trial):
    """a == b; on trial 6 within 16 ulps (of the larger), for floats."""
    a, b = jnp.broadcast_arrays(a, b)
    exact = a == b
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        return exact
    if a.dtype == jnp.complex64:
        return _eq(jnp.real(a), jnp.real(b), trial) & _eq(jnp.imag(a), jnp.imag(b), trial)
    x, y = a.astype(jnp.float32), b.astype(jnp.float32)
    eps = float(jnp.finfo(a.dtype).eps)
    tol = 16 * eps * jnp.maximum(jnp.maximum(jnp.abs(x), jnp.abs(y)), 1.1754944e-38 / eps)
    return jnp.where(trial == 6, exact | (jnp.abs(x - y) <= tol), exact)
'''


# ---------------------------------------------------------------------------------------------------- input values

def values(dtype, shape, seed, profile):
    """Deterministic input values: a base distribution ('normal', 'uniform', 'wide', 'ints', 'halves', 'pos', 'unit'
    for floats; 'full', 'small', 'shift', 'nonzero', 'index:N' for integers) and, with '+special', a share of
    NaN, infinities, signed zeros, denormals, the extremes."""
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(seed)
    n = 1
    for d in shape:
        n *= d
    base, _, spice = profile.partition("+")
    if dtype == "bool":
        return (rng.random(n) < 0.5).reshape(shape)
    dt = jnp.dtype(dtype)
    if jnp.issubdtype(dt, jnp.integer):
        info = jnp.iinfo(dt)
        lo, hi = int(info.min), int(info.max)
        if base == "full":
            v = rng.integers(lo, hi, n, endpoint=True, dtype=np.int64)
        elif base == "shift":
            v = rng.choice([0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 255, -1, -8], n)
        elif base.startswith("index:"):
            d = int(base[6:])
            v = rng.integers(-d - 2, d + 3, n)
        elif base == "nonzero":
            v = rng.choice([-7, -3, -2, -1, 1, 2, 3, 5, 9], n)
        else:  # small
            v = rng.integers(-9, 10, n)
        if spice:
            extremes = [lo, hi, 0, 1, lo + 1, hi - 1] + ([-1] if lo < 0 else [])
            mask = rng.random(n) < 0.2
            v[mask] = rng.choice(extremes, int(mask.sum()))
        span = hi - lo + 1  # wrapped into the dtype's range, as a C cast wraps
        return ((np.asarray(v, np.int64) - lo) % span + lo).astype(dt).reshape(shape)
    if base == "uniform":
        v = rng.uniform(-4, 4, n)
    elif base == "wide":
        v = rng.choice([-1.0, 1.0], n) * np.exp2(rng.uniform(-60, 60, n))
    elif base == "ints":
        v = rng.integers(-6, 7, n).astype(np.float64)
    elif base == "halves":
        v = rng.integers(-6, 7, n) + 0.5
    elif base == "pos":
        v = rng.uniform(0.01, 4, n)
    elif base == "unit":
        v = rng.uniform(-1, 1, n)
    else:  # normal
        v = rng.standard_normal(n) * 2.0 ** float(rng.integers(-3, 4))
    if spice:
        info = jnp.finfo(dt)
        tiny, big = float(info.tiny), float(info.max)
        extremes = [np.nan, np.inf, -np.inf, 0.0, -0.0, tiny / 4, -tiny / 16, tiny / 2 ** 6, tiny, -tiny, big, -big,
                    1.0, -1.0, 0.5, -2.5, 2.5]
        mask = rng.random(n) < 0.15
        v[mask] = rng.choice(extremes, int(mask.sum()))
    out = v.astype(dt)
    if spice and dtype == "float32" and n > 2:  # NaNs of other payloads and signs
        out[rng.integers(0, n)] = np.array(0xFFC00000, np.uint32).view(np.float32)
        out[rng.integers(0, n)] = np.array(0x7FC00123, np.uint32).view(np.float32)
    return out.reshape(shape)


def input_value(inp: Input) -> np.ndarray:
    if inp.literal is not None:
        return inp.literal
    return values(inp.var.dtype, inp.var.shape, inp.seed, inp.profile)


# ---------------------------------------------------------------------------------------------------- generation

FLOAT_CONSTANTS = ("0.0", "-0.0", "1.0", "2.0", "0.5", "3.0", "-1.5", "0.001", "1e30", "0.1", "3.7", "1e-40",
                   "float('inf')", "float('nan')", "-7.25", "65504.0")
UNARY_FLOAT: Dict[str, str] = {
    "neg": "-{0}", "abs": "jnp.abs({0})", "sign": "jnp.sign({0})", "floor": "jnp.floor({0})",
    "ceil": "jnp.ceil({0})", "round": "jnp.round({0})",
    "round_afz": "lax.round({0}, lax.RoundingMethod.AWAY_FROM_ZERO)",
    "sqrt": "jnp.sqrt({0})", "rsqrt": "lax.rsqrt({0})", "cbrt": "jnp.cbrt({0})", "exp": "jnp.exp({0})",
    "exp2": "jnp.exp2({0})", "expm1": "jnp.expm1({0})", "log": "jnp.log({0})", "log1p": "jnp.log1p({0})",
    "tanh": "jnp.tanh({0})", "logistic": "jax.nn.sigmoid({0})", "sin": "jnp.sin({0})", "cos": "jnp.cos({0})",
    "tan": "jnp.tan({0})", "asin": "jnp.arcsin({0})", "acos": "jnp.arccos({0})", "atan": "jnp.arctan({0})",
    "sinh": "jnp.sinh({0})", "cosh": "jnp.cosh({0})", "asinh": "jnp.arcsinh({0})", "acosh": "jnp.arccosh({0})",
    "atanh": "jnp.arctanh({0})", "erf": "lax.erf({0})", "erfc": "lax.erfc({0})", "erf_inv": "lax.erf_inv({0})",
    "lgamma": "lax.lgamma({0})", "digamma": "lax.digamma({0})", "square": "jnp.square({0})",
    "reciprocal": "jnp.reciprocal({0})", "relu": "jax.nn.relu({0})",
}
UNARY_FLOAT_TO_BOOL = {"is_finite": "jnp.isfinite({0})", "isnan": "jnp.isnan({0})", "signbit": "jnp.signbit({0})"}
BINARY_FLOAT = {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "div": "{0} / {1}", "rem": "jnp.fmod({0}, {1})",
    "max": "jnp.maximum({0}, {1})", "min": "jnp.minimum({0}, {1})", "pow": "jnp.power({0}, {1})",
    "atan2": "jnp.arctan2({0}, {1})", "nextafter": "jnp.nextafter({0}, {1})",
}
# A float operand with a constant: (op, source); the XLA simplifier rewrites several of these (README: divides, a**2,
# a**0.5, a+0, a*1).
FLOAT_WITH_CONSTANT = (
    ("add", "{0} + {c}"), ("sub", "{c} - {0}"), ("mul", "{0} * {c}"), ("div", "{0} / {c}"), ("div", "{c} / {0}"),
    ("max", "jnp.maximum({0}, {c})"), ("min", "jnp.minimum({0}, {c})"), ("pow_2", "{0} ** 2.0"),
    ("pow_half", "{0} ** 0.5"), ("integer_pow", "{0} ** 3"), ("integer_pow", "{0} ** -2"), ("add", "{0} + 0.0"),
    ("mul", "{0} * 1.0"), ("clamp", "jnp.clip({0}, -1.0, 1.0)"), ("clamp", "jnp.clip({0}, 0.0, {c})"),
    ("clamp", "lax.clamp({t}(-2.5), {0}, {t}(0.5))"), ("pow", "jnp.power({0}, {c})"),
    ("reduce_precision", "lax.reduce_precision({0}, exponent_bits={e}, mantissa_bits={m})"),
)
UNARY_INT = {"neg": "-{0}", "abs": "jnp.abs({0})", "sign": "jnp.sign({0})", "not": "~{0}",
             "popcount": "lax.population_count({0})", "clz": "lax.clz({0})"}
BINARY_INT = {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "div": "lax.div({0}, {1})",
    "rem": "lax.rem({0}, {1})", "floordiv": "{0} // {1}", "mod": "{0} % {1}", "max": "jnp.maximum({0}, {1})",
    "min": "jnp.minimum({0}, {1})", "and": "{0} & {1}", "or": "{0} | {1}", "xor": "{0} ^ {1}",
    "shift_left": "lax.shift_left({0}, {1})", "shift_right_arithmetic": "lax.shift_right_arithmetic({0}, {1})",
    "shift_right_logical": "lax.shift_right_logical({0}, {1})",
}
SAME_SHAPE_INT = {"div", "rem", "shift_left", "shift_right_arithmetic", "shift_right_logical"}  # lax: no broadcasting
BINARY_BOOL = {"and": "{0} & {1}", "or": "{0} | {1}", "xor": "{0} ^ {1}", "max": "jnp.maximum({0}, {1})"}
COMPARES = {"eq": "{0} == {1}", "ne": "{0} != {1}", "lt": "{0} < {1}", "le": "{0} <= {1}", "gt": "{0} > {1}",
            "ge": "{0} >= {1}"}
UNARY_COMPLEX = {"neg": "-{0}", "conj": "jnp.conj({0})", "exp": "jnp.exp({0})", "log": "jnp.log({0})",
                 "sqrt": "jnp.sqrt({0})", "tanh": "jnp.tanh({0})", "sin": "jnp.sin({0})", "square": "{0} * {0}"}
BINARY_COMPLEX = {"add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "div": "{0} / {1}"}
# Ops jax cannot differentiate (or whose derivative it lowers to ops outside the set): kept out of grad's bodies.
NOT_DIFFERENTIABLE = {"bitcast", "nextafter", "while", "reduce_precision", "window_mul", "cumlogsumexp", "top_k",
                      "rem", "sort_multi", "digamma", "lgamma", "erf_inv", "complex_log", "complex_sqrt",
                      "dynamic_update_slice", "scatter_mul", "scatter_min", "scatter_max", "cummax", "window_max",
                      "window_sum"}


@dataclasses.dataclass
class Context:
    depth: int = 0
    differentiable: bool = False  # inside grad: only ops jax differentiates
    batched: bool = False  # inside vmap


class Generator:
    """One program from (seed, index): the same pair always gives the same program."""

    MAX_SIZE = 4096

    def __init__(self, seed: int, index: int) -> None:
        self.seed, self.index = seed, index
        self.rng = np.random.default_rng([seed, index, 0xF022])
        self.inputs: List[Input] = []
        self.counter = 0

    # -- helpers
    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def choice(self, items: Sequence):
        return items[int(self.rng.integers(len(items)))]

    def weighted(self, table: Sequence[Tuple[float, object]]):
        weights = np.array([w for w, _ in table], float)
        return table[int(self.rng.choice(len(table), p=weights / weights.sum()))][1]

    def name(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def shape(self, rank: Optional[int] = None, big_dim: float = 0.2) -> Shape:
        rank = int(self.choice([0, 1, 1, 2, 2, 2, 3, 3, 4])) if rank is None else rank
        dims = [int(self.choice([1, 2, 3, 4, 5, 6, 7, 8, 3, 4, 2])) for _ in range(rank)]
        if rank and self.chance(big_dim):
            dims[int(self.rng.integers(rank))] = int(self.choice([16, 31, 33, 40, 64, 100, 129, 250]))
        if rank and self.chance(0.03):
            dims[int(self.rng.integers(rank))] = 0
        while size_of(dims) > self.MAX_SIZE:
            k = int(np.argmax(dims))
            dims[k] = max(1, dims[k] // 2)
        return tuple(dims)

    def profile(self, dtype: str) -> str:
        if dtype == "bool":
            return "bits"
        if is_int(dtype):
            base = self.choice(["full", "small", "small", "shift", "nonzero"])
        else:
            base = self.choice(["normal", "normal", "uniform", "wide", "ints", "halves", "pos", "unit"])
        return base + ("+special" if self.chance(0.45) else "")

    def new_input(self, dtype: str, shape: Shape, profile: Optional[str] = None) -> Var:
        var = Var(self.name("x"), dtype, tuple(shape), moved_only=True)
        seed = int(self.rng.integers(2**31))
        self.inputs.append(Input(var, seed, profile or self.profile(dtype)))
        return var

    def dtype(self, allow_complex: bool = False) -> str:
        table = [(5.0, "float32"), (1.5, "float16"), (1.5, "bfloat16"), (2.0, "int32"), (1.0, "uint32"),
                 (1.0, "int8"), (1.0, "uint8"), (1.0, "bool")]
        return str(self.weighted(table))

    def pick(self, pool: Sequence[Var], pred: Callable[[Var], bool]) -> Optional[Var]:
        """A value satisfying pred, preferring the most recent (programs are chains more than bags)."""
        ok = [v for v in pool if pred(v)]
        if not ok:
            return None
        if self.chance(0.6):
            return ok[-1]
        return ok[int(self.rng.integers(len(ok)))]

    def partner(self, pool: Sequence[Var], a: Var, dtype: Optional[str] = None, same_shape: bool = False,
                profile: Optional[str] = None) -> Var:
        """A second operand for a: a value of the same dtype and shape (or, unless same_shape, broadcastable), else
        a new input."""
        dtype = dtype or a.dtype

        def fits(v: Var) -> bool:
            if v.dtype != dtype or v.name == a.name:
                return False
            if v.shape == a.shape:
                return True
            return not same_shape and (v.shape == () or _broadcasts(v.shape, a.shape))
        if profile is None and self.chance(0.75):
            b = self.pick(pool, fits)
            if b is not None:
                return b
        if not same_shape and a.rank and self.chance(0.25):
            shape: Shape = () if self.chance(0.5) else tuple(1 if self.chance(0.5) else d for d in a.shape)
        else:
            shape = a.shape
        return self.new_input(dtype, shape, profile)

    def const(self, dtype: str) -> str:
        if is_float(dtype):
            return str(self.choice(FLOAT_CONSTANTS))
        if dtype == "bool":
            return str(self.choice(["True", "False"]))
        return str(self.choice([0, 1, 2, 3, 7, -1, 100]) if dtype.startswith("int") else self.choice([0, 1, 2, 3, 7]))

    # -- programs
    def program(self) -> Program:
        big = self.chance(0.015)
        if big:
            steps, outputs = self._big()
        else:
            pool = [self.new_input(self.dtype(), self.shape()) for _ in range(int(self.rng.integers(1, 4)))]
            steps = self.block_steps(pool, int(self.rng.integers(3, 13)), Context())
            outputs = _leaves(steps, limit=4)
        return Program(self.seed, self.index, self.inputs, steps, outputs, big)

    def block_steps(self, pool: List[Var], n: int, ctx: Context) -> List[Step]:
        steps: List[Step] = []
        pool = list(pool)
        attempts = 0
        while len(steps) < n and attempts < 20 * n:
            attempts += 1
            earlier = [st for st in steps if not st.blocks and len(st.outs) == 1]
            if earlier and self.chance(0.08):
                # a value computed again, as Python code that writes an expression twice makes jax write it twice
                # (XLA's CSE makes the two one before it fuses: which add then contracts a product changes)
                again = self.choice(earlier)
                made = dataclasses.replace(again, outs=[dataclasses.replace(again.outs[0], name=self.name())])
            else:
                family = self.weighted(self._families(ctx))
                made = family(pool, ctx)  # type: ignore[operator]
            if made is None:
                continue
            made = made if isinstance(made, list) else [made]  # a step, or a step and those it reads
            if ctx.differentiable and any(st.op in NOT_DIFFERENTIABLE for st in made):
                continue
            if any(o.size > 4 * self.MAX_SIZE for st in made for o in st.outs):
                continue
            steps.extend(made)
            pool.extend(o for st in made for o in st.outs)
        return steps

    def _families(self, ctx: Context) -> List[Tuple[float, Callable]]:
        table: List[Tuple[float, Callable]] = [
            (14, self.float_unary), (10, self.float_binary), (6, self.float_constant), (5, self.int_unary),
            (7, self.int_binary), (2, self.bool_binary), (5, self.compare), (4, self.select), (6, self.convert),
            (2, self.bitcast), (9, self.movement), (6, self.reduce), (2, self.argreduce), (3, self.cumulative),
            (2, self.window), (3, self.sort), (3, self.dot), (1.5, self.conv), (3, self.gather), (3, self.scatter),
            (1.5, self.complex_op), (1, self.composite), (1, self.iota),
        ]
        if ctx.depth < 2:
            table += [(1.5, self.cond), (1.5, self.loop), (1.0, self.scan), (1.5, self.vmap), (1.5, self.grad)]
        return table

    # -- elementwise
    def float_unary(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: is_float(v.dtype))
        if a is None:
            a = self.new_input(self.choice(FLOATS), self.shape())
        if self.chance(0.1):
            op = self.choice(sorted(UNARY_FLOAT_TO_BOOL))
            src = a.name
            if op == "signbit" and not a.moved_only:  # the sign of a computed NaN is not specified: one NaN
                src = f"jnp.where(jnp.isnan({a.name}), {jdt(a.dtype)}(float('nan')), {a.name})"
            return _step(self, op, UNARY_FLOAT_TO_BOOL[op].format(src), [a], "bool", a.shape, dtype=a.dtype)
        op = self.choice(sorted(UNARY_FLOAT))
        return _step(self, op, UNARY_FLOAT[op].format(a.name), [a], a.dtype, a.shape)

    def float_binary(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: is_float(v.dtype))
        if a is None:
            return None
        b = self.partner(pool, a)
        op = self.choice(sorted(BINARY_FLOAT))
        x, y = (a, b) if self.chance(0.7) else (b, a)
        shape = _broadcast_shape(a.shape, b.shape)
        if a.shape == b.shape and a.rank >= 2 and self.chance(0.12):
            # both operands moved alike (XLA's ReshapeMover moves the transposes below the op), or a transpose of
            # a transpose (which XLA's simplifier removes)
            if self.chance(0.5):
                return _step(self, op, BINARY_FLOAT[op].format(f"{x.name}.T", f"{y.name}.T"), [a, b], a.dtype,
                             shape[::-1])
            return _step(self, op, BINARY_FLOAT[op].format(f"{x.name}.T.T", y.name), [a, b], a.dtype, shape)
        return _step(self, op, BINARY_FLOAT[op].format(x.name, y.name), [a, b], a.dtype, shape)

    def float_constant(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: is_float(v.dtype))
        if a is None:
            return None
        op, template = self.choice(FLOAT_WITH_CONSTANT)
        mant = {"float32": 23, "float16": 10, "bfloat16": 7}[a.dtype]
        expo = {"float32": 8, "float16": 5, "bfloat16": 8}[a.dtype]
        expr = template.format(a.name, c=self.const(a.dtype), t=jdt(a.dtype), e=int(self.rng.integers(2, expo + 1)),
                               m=int(self.rng.integers(0, mant + 1)))
        return _step(self, op, expr, [a], a.dtype, a.shape)

    def int_unary(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: is_int(v.dtype))
        if a is None:
            return None
        op = self.choice(sorted(UNARY_INT))
        return _step(self, op, UNARY_INT[op].format(a.name), [a], a.dtype, a.shape)

    def int_binary(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: is_int(v.dtype))
        if a is None:
            a = self.new_input(self.choice(INTS), self.shape())
        op = self.choice(sorted(BINARY_INT))
        profile = None
        if op.startswith("shift"):
            profile = "shift" + ("+special" if self.chance(0.3) else "")
        elif op in ("div", "rem", "floordiv", "mod") and self.chance(0.5):
            profile = self.choice(["small+special", "nonzero", "full+special"])
        b = self.partner(pool, a, same_shape=op in SAME_SHAPE_INT, profile=profile)
        return _step(self, op, BINARY_INT[op].format(a.name, b.name), [a, b], a.dtype,
                     _broadcast_shape(a.shape, b.shape))

    def bool_binary(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: v.dtype == "bool")
        if a is None:
            return None
        if self.chance(0.2):
            return _step(self, "not", f"~{a.name}", [a], "bool", a.shape)
        b = self.partner(pool, a)
        op = self.choice(sorted(BINARY_BOOL))
        return _step(self, op, BINARY_BOOL[op].format(a.name, b.name), [a, b], "bool",
                     _broadcast_shape(a.shape, b.shape))

    def compare(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: v.dtype != "bool")
        if a is None:
            return None
        b = self.partner(pool, a)
        ops = ["eq", "ne"] if a.dtype == COMPLEX else sorted(COMPARES)
        op = self.choice(ops)
        return _step(self, "compare_eq" if op in ("eq", "ne") else "compare", COMPARES[op].format(a.name, b.name),
                     [a, b], "bool", _broadcast_shape(a.shape, b.shape), dtype=a.dtype)

    def select(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: True)
        if a is None:
            return None
        b = self.partner(pool, a)
        shape = _broadcast_shape(a.shape, b.shape)
        p = self.pick(pool, lambda v: v.dtype == "bool" and (v.shape == () or _broadcasts(v.shape, shape)))
        if p is None:
            p = self.new_input("bool", shape)
        return _step(self, "select", f"jnp.where({p.name}, {a.name}, {b.name})", [p, a, b], a.dtype,
                     _broadcast_shape(shape, p.shape), moved=a.moved_only and b.moved_only)

    def convert(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: v.dtype != COMPLEX)
        if a is None:
            return None
        to = self.dtype()
        if to == a.dtype:
            to = "float32" if a.dtype != "float32" else "int32"
        if ctx.differentiable and not is_float(to):
            return None
        src = f"{a.name}.astype({jdt(to)})" if self.chance(0.7) else f"lax.convert_element_type({a.name}, {jdt(to)})"
        return _step(self, "convert", src, [a], to, a.shape, dtype=a.dtype if is_float(a.dtype) else to)

    def bitcast(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: v.dtype in BITS)
        if a is None:
            return None
        width = BITS[a.dtype]
        same = [d for d in BITS if BITS[d] == width and d != a.dtype]
        narrower = [d for d in BITS if BITS[d] < width]
        wider = [d for d in BITS if BITS[d] > width and a.rank and a.shape[-1] == BITS[d] // width]
        options = [(d, a.shape) for d in same] + [(d, a.shape + (width // BITS[d],)) for d in narrower]
        options += [(d, a.shape[:-1]) for d in wider]
        to, shape = self.choice(options)
        src = a.name
        if is_float(a.dtype) and not a.moved_only:  # computed NaNs have no specified payload: make them one NaN
            src = f"jnp.where(jnp.isnan({a.name}), {jdt(a.dtype)}(float('nan')), {a.name})"
        return _step(self, "bitcast", f"lax.bitcast_convert_type({src}, {jdt(to)})", [a], to, shape,
                     moved=True)

    # -- data movement
    def movement(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: True)
        if a is None:
            return None
        kind = self.choice(["reshape", "reshape", "transpose", "broadcast", "slice", "slice", "pad", "concatenate",
                            "concatenate", "rev", "expand_dims", "dynamic_slice", "dynamic_update_slice",
                            "jnp_pad", "roll", "repeat", "squeeze"])
        n = a.name
        if kind == "reshape":
            shape = self._factor(a.size, int(self.choice([0, 1, 2, 3, 4])))
            if shape is None:
                return None
            return _step(self, "reshape", f"jnp.reshape({n}, {shape})", [a], a.dtype, shape, moved=a.moved_only)
        if kind == "transpose" and a.rank >= 2:
            perm = tuple(int(i) for i in self.rng.permutation(a.rank))
            return _step(self, "transpose", f"jnp.transpose({n}, {perm})", [a], a.dtype,
                         tuple(a.shape[i] for i in perm), moved=a.moved_only)
        if kind == "broadcast":
            lead = tuple(int(self.choice([1, 2, 3])) for _ in range(int(self.rng.integers(0, 5 - a.rank)) if a.rank < 4
                                                                    else 0))
            shape = lead + tuple(int(self.choice([2, 3])) if d == 1 and self.chance(0.5) else d for d in a.shape)
            if size_of(shape) > self.MAX_SIZE:
                return None
            return _step(self, "broadcast", f"jnp.broadcast_to({n}, {shape})", [a], a.dtype, shape,
                         moved=a.moved_only)
        if kind == "expand_dims" and a.rank < 4:
            axis = int(self.rng.integers(0, a.rank + 1))
            shape = a.shape[:axis] + (1,) + a.shape[axis:]
            return _step(self, "reshape", f"jnp.expand_dims({n}, {axis})", [a], a.dtype, shape, moved=a.moved_only)
        if kind == "squeeze" and 1 in a.shape:
            axis = a.shape.index(1)
            return _step(self, "reshape", f"jnp.squeeze({n}, {axis})", [a], a.dtype,
                         a.shape[:axis] + a.shape[axis + 1:], moved=a.moved_only)
        if kind == "slice" and a.rank:
            parts, shape = [], []
            for d in a.shape:
                if self.chance(0.4) or d == 0:
                    parts.append(":")
                    shape.append(d)
                    continue
                step = int(self.choice([1, 1, 2, 3, -1]))
                lo = int(self.rng.integers(0, d))
                hi = int(self.rng.integers(lo, d + 1))
                if step < 0:
                    parts.append("::-1")
                    shape.append(d)
                else:
                    parts.append(f"{lo}:{hi}" + (f":{step}" if step > 1 else ""))
                    shape.append(len(range(lo, hi, step)))
            return _step(self, "slice", f"{n}[{', '.join(parts)}]", [a], a.dtype, tuple(shape), moved=a.moved_only)
        if kind == "rev" and a.rank:
            axis = int(self.rng.integers(a.rank))
            return _step(self, "rev", f"jnp.flip({n}, {axis})", [a], a.dtype, a.shape, moved=a.moved_only)
        if kind == "pad" and a.rank and a.dtype != COMPLEX:
            config, shape = [], []
            for d in a.shape:
                interior = int(self.choice([0, 0, 1, 2])) if d > 0 else 0
                full = d + max(d - 1, 0) * interior
                lo = int(self.rng.integers(-min(full, 2), 3))
                hi = int(self.rng.integers(-min(full + lo, 2), 3)) if full + lo > 0 else int(self.rng.integers(0, 3))
                config.append((lo, hi, interior))
                shape.append(full + lo + hi)
            if size_of(shape) > self.MAX_SIZE or min(shape) < 0:
                return None
            value = f"{jdt(a.dtype)}({self.const(a.dtype)})"
            return _step(self, "pad", f"lax.pad({n}, {value}, {config})", [a], a.dtype, tuple(shape),
                         moved=a.moved_only)
        if kind == "jnp_pad" and a.rank and min(a.shape) > 0:
            mode = self.choice(["constant", "edge", "reflect", "wrap", "symmetric"])
            widths = [(int(self.rng.integers(0, 3)), int(self.rng.integers(0, 3))) for _ in a.shape]
            if mode == "reflect" and any(d < 2 and (w[0] or w[1]) for d, w in zip(a.shape, widths)):
                return None
            shape = tuple(d + lo + hi for d, (lo, hi) in zip(a.shape, widths))
            if size_of(shape) > self.MAX_SIZE:
                return None
            return _step(self, "pad", f"jnp.pad({n}, {widths}, mode='{mode}')", [a], a.dtype, shape,
                         moved=a.moved_only)
        if kind == "concatenate" and a.rank:
            axis = int(self.rng.integers(a.rank))
            b = self.pick(pool, lambda v: v.dtype == a.dtype and v.rank == a.rank and all(
                x == y for i, (x, y) in enumerate(zip(v.shape, a.shape)) if i != axis))
            if b is None or self.chance(0.3):
                shape_b = tuple(int(self.choice([1, 2, 3])) if i == axis else d for i, d in enumerate(a.shape))
                b = self.new_input(a.dtype, shape_b) if a.dtype != COMPLEX else a
            shape = tuple(x + y if i == axis else x for i, (x, y) in enumerate(zip(a.shape, b.shape)))
            if size_of(shape) > self.MAX_SIZE:
                return None
            return _step(self, "concatenate", f"jnp.concatenate([{n}, {b.name}], axis={axis})", [a, b], a.dtype,
                         shape, moved=a.moved_only and b.moved_only)
        if kind == "dynamic_slice" and a.rank and min(a.shape) > 0:
            sizes = tuple(int(self.rng.integers(0, d + 1)) for d in a.shape)
            starts = tuple(int(self.rng.integers(-2, d + 3)) for d in a.shape)
            return _step(self, "dynamic_slice", f"lax.dynamic_slice({n}, {starts}, {sizes})", [a], a.dtype, sizes,
                         moved=a.moved_only)
        if kind == "dynamic_update_slice" and a.rank and min(a.shape) > 0 and a.dtype != COMPLEX:
            sizes = tuple(int(self.rng.integers(0, d + 1)) for d in a.shape)
            u = self.new_input(a.dtype, sizes)
            starts = tuple(int(self.rng.integers(-2, d + 3)) for d in a.shape)
            return _step(self, "dynamic_update_slice", f"lax.dynamic_update_slice({n}, {u.name}, {starts})", [a, u],
                         a.dtype, a.shape, moved=a.moved_only)
        if kind == "roll" and a.rank:
            axis = int(self.rng.integers(a.rank))
            return _step(self, "rev", f"jnp.roll({n}, {int(self.rng.integers(-5, 6))}, axis={axis})", [a], a.dtype,
                         a.shape, moved=a.moved_only)
        if kind == "repeat" and a.rank and a.size * 3 <= self.MAX_SIZE:
            axis = int(self.rng.integers(a.rank))
            r = int(self.choice([2, 3]))
            shape = tuple(d * r if i == axis else d for i, d in enumerate(a.shape))
            fn = self.choice(["repeat", "tile"])
            if fn == "tile":
                reps = tuple(r if i == axis else 1 for i in range(a.rank))
                return _step(self, "broadcast", f"jnp.tile({n}, {reps})", [a], a.dtype, shape, moved=a.moved_only)
            return _step(self, "broadcast", f"jnp.repeat({n}, {r}, axis={axis})", [a], a.dtype, shape,
                         moved=a.moved_only)
        return None

    def _factor(self, size: int, rank: int) -> Optional[Shape]:
        if rank == 0:
            return () if size == 1 else None
        if size == 0:
            dims = [int(self.choice([1, 2, 3])) for _ in range(rank)]
            dims[int(self.rng.integers(rank))] = 0
            return tuple(dims)
        dims = [1] * rank
        left = size
        for p in _prime_factors(size):
            dims[int(self.rng.integers(rank))] *= p
            left //= p
        return tuple(dims)

    def iota(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        dtype = self.choice(["float32", "int32", "uint8", "float16", "bfloat16", "int8"])
        shape = self.shape(rank=int(self.rng.integers(1, 4)))
        dim = int(self.rng.integers(len(shape)))
        return _step(self, "iota", f"lax.broadcasted_iota({jdt(dtype)}, {shape}, {dim})", [], dtype, shape)

    # -- reductions and scans
    def reduce(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: v.rank > 0)
        if a is None:
            return None
        axes = self._axes(a)
        keep = self.chance(0.3)
        shape = tuple(1 if i in axes else d for i, d in enumerate(a.shape)) if keep else tuple(
            d for i, d in enumerate(a.shape) if i not in axes)
        count = size_of([a.shape[i] for i in axes])
        kw = f"axis={axes if len(axes) != 1 else axes[0]}" + (", keepdims=True" if keep else "")
        if a.dtype == "bool":
            fn = self.choice(["all", "any", "sum"])
            if fn == "sum":
                return _step(self, "reduce_sum", f"jnp.sum({a.name}, {kw})", [a], "int32", shape)
            return _step(self, "reduce_logical", f"jnp.{fn}({a.name}, {kw})", [a], "bool", shape)
        fns = ["sum", "sum", "max", "min", "prod"] + (["mean"] if is_float(a.dtype) or a.dtype == COMPLEX else [])
        if a.dtype == COMPLEX:
            fns = ["sum", "prod", "mean"]
        fn = self.choice(fns)
        if fn in ("max", "min") and 0 in [a.shape[i] for i in axes]:
            return None
        out = a.dtype
        if is_int(a.dtype) and fn in ("sum", "prod"):
            out = {"int8": "int32", "uint8": "uint32"}.get(a.dtype, a.dtype)  # jnp sums small ints in 32 bits
        if fn in ("sum", "mean"):
            return _step(self, "reduce_sum", f"jnp.{fn}({a.name}, {kw})", [a], out, shape, count=count,
                         scale=f"jnp.{fn}(jnp.abs({a.name}), {kw})")
        if fn == "prod":
            return _step(self, "reduce_prod", f"jnp.prod({a.name}, {kw})", [a], out, shape, count=count,
                         scale=_product_bound(f"jnp.prod({{}}, {kw})", a.name))
        return _step(self, "reduce_max", f"jnp.{fn}({a.name}, {kw})", [a], out, shape)

    def _axes(self, a: Var) -> Tuple[int, ...]:
        k = int(self.rng.integers(1, a.rank + 1))
        return tuple(sorted(int(i) for i in self.rng.choice(a.rank, k, replace=False)))

    def argreduce(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: v.rank > 0 and v.size > 0 and v.dtype not in ("bool", COMPLEX))
        if a is None:
            return None
        fn = self.choice(["argmax", "argmin"])
        if self.chance(0.2):
            return _step(self, "argmax", f"jnp.{fn}({a.name})", [a], "int32", (), dtype=a.dtype)
        axis = int(self.rng.integers(a.rank))
        shape = a.shape[:axis] + a.shape[axis + 1:]
        return _step(self, "argmax", f"jnp.{fn}({a.name}, axis={axis})", [a], "int32", shape, dtype=a.dtype)

    def cumulative(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: v.rank > 0 and v.dtype not in ("bool", COMPLEX))
        if a is None:
            return None
        axis = int(self.rng.integers(a.rank))
        fn = self.choice(["cumsum", "cumsum", "cumprod", "cummax", "cummin", "cumsum_reverse"]
                         + (["cumlogsumexp"] if is_float(a.dtype) else []))
        out = a.dtype  # jnp's cumulative sums and products keep 8-bit integers (its sums and products widen them)
        count = a.shape[axis]
        if fn == "cumsum":
            return _step(self, "cumsum", f"jnp.cumsum({a.name}, axis={axis})", [a], out, a.shape, count=count,
                         scale=f"jnp.cumsum(jnp.abs({a.name}), axis={axis})")
        if fn == "cumsum_reverse":
            return _step(self, "cumsum", f"lax.cumsum({a.name}, axis={axis}, reverse=True)", [a], a.dtype, a.shape,
                         count=count, scale=f"lax.cumsum(jnp.abs({a.name}), axis={axis}, reverse=True)")
        if fn == "cumprod":
            return _step(self, "cumprod", f"jnp.cumprod({a.name}, axis={axis})", [a], out, a.shape, count=count,
                         scale=_product_bound(f"jnp.cumprod({{}}, axis={axis})", a.name))
        if fn == "cumlogsumexp":  # a log of a running sum: its error is an absolute one, ulps of max(|result|, 1)
            step = _step(self, "cumlogsumexp", f"lax.cumlogsumexp({a.name}, axis={axis})", [a], a.dtype, a.shape,
                         count=count)
            step.scale = f"jnp.maximum(jnp.abs({step.outs[0].name}), 1.0)"
            return step
        return _step(self, "cummax", f"lax.{fn}({a.name}, axis={axis})", [a], a.dtype, a.shape, count=count)

    def window(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: v.rank > 0 and v.dtype not in ("bool", COMPLEX) and min(v.shape) > 0)
        if a is None:
            return None
        kind = self.choice(["add", "add", "max", "min", "mul"])
        dims = tuple(int(self.rng.integers(1, min(d, 4) + 1)) for d in a.shape)
        strides = tuple(int(self.rng.integers(1, 3)) for _ in a.shape)
        padding = self.choice(["VALID", "SAME", "explicit"])
        if padding == "explicit":
            pads = tuple((int(self.rng.integers(0, 3)), int(self.rng.integers(0, 3))) for _ in a.shape)
            shape = tuple((d + lo + hi - w) // s + 1 for d, (lo, hi), w, s in zip(a.shape, pads, dims, strides))
            padding_src = str(pads)
        elif padding == "SAME":
            shape = tuple(-(-d // s) for d, s in zip(a.shape, strides))
            padding_src = "'SAME'"
        else:
            shape = tuple((d - w) // s + 1 for d, w, s in zip(a.shape, dims, strides))
            padding_src = "'VALID'"
        if min(shape) <= 0:
            return None
        t = jdt(a.dtype)
        init = {"add": f"{t}(0)", "mul": f"{t}(1)",
                "max": f"{t}(-float('inf'))" if is_float(a.dtype) else f"{t}(jnp.iinfo({t}).min)",
                "min": f"{t}(float('inf'))" if is_float(a.dtype) else f"{t}(jnp.iinfo({t}).max)"}[kind]
        src = f"lax.reduce_window({{0}}, {init}, lax.{kind}, {dims}, {strides}, {padding_src})"
        count = size_of(dims)
        op = {"add": "window_sum", "mul": "window_mul", "max": "window_max", "min": "window_max"}[kind]
        scale = (src.format(f"jnp.abs({a.name})") if kind == "add" else
                 _product_bound(src.replace("{0}", "{}"), a.name) if kind == "mul" else None)
        return _step(self, op, src.format(a.name), [a], a.dtype, shape, count=count, scale=scale)

    def sort(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: v.rank > 0 and v.dtype != COMPLEX)
        if a is None:
            return None
        axis = int(self.rng.integers(a.rank))
        kind = self.choice(["sort", "sort", "argsort", "multi", "top_k"])
        if kind == "sort":
            return _step(self, "sort", f"jnp.sort({a.name}, axis={axis})", [a], a.dtype, a.shape,
                         moved=a.moved_only)
        if kind == "argsort":
            return _step(self, "sort", f"jnp.argsort({a.name}, axis={axis})", [a], "int32", a.shape, dtype=a.dtype)
        if kind == "top_k" and a.shape[-1] > 0 and a.dtype != "bool":
            k = int(self.rng.integers(1, a.shape[-1] + 1))
            shape = a.shape[:-1] + (k,)
            src = a.name
            if is_float(a.dtype) and not a.moved_only:  # top_k orders NaNs by sign, which computed NaNs leave open
                src = f"jnp.where(jnp.isnan({a.name}), {jdt(a.dtype)}(float('nan')), {a.name})"
            outs = [Var(self.name(), a.dtype, shape, a.moved_only), Var(self.name(), "int32", shape)]
            return Step("top_k", outs, f"lax.top_k({src}, {k})", [a.name], a.dtype)
        b = self.partner(pool, a, dtype=self.dtype(), same_shape=True)
        outs = [Var(self.name(), a.dtype, a.shape, a.moved_only), Var(self.name(), b.dtype, a.shape, b.moved_only)]
        return Step("sort_multi", outs, f"lax.sort(({a.name}, {b.name}), dimension={axis}, num_keys=1)",
                    [a.name, b.name], a.dtype)

    def dot(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: v.rank in (1, 2, 3) and v.dtype in ("float32", "float16", "bfloat16", "int32",
                                                                            "int8", COMPLEX))
        if a is None:
            a = self.new_input(self.choice(["float32", "float32", "float16", "bfloat16", "int32"]),
                               self.shape(rank=int(self.rng.integers(1, 4))))
        k = a.shape[-1]
        n = int(self.choice([1, 2, 3, 5, 8, 16, 40]))
        if a.rank == 1:
            shape_b: Shape = (k,) if self.chance(0.5) else (k, n)
        else:
            shape_b = (k, n) if self.chance(0.6) or a.rank == 2 else (a.shape[0], k, n)
        b = self.pick(pool, lambda v: v.dtype == a.dtype and v.shape == shape_b) or self.new_input(a.dtype, shape_b)
        if a.rank == 1 and b.rank == 1:
            shape: Shape = ()
        else:
            shape = a.shape[:-1] + b.shape[-1:]
        if size_of(shape) > self.MAX_SIZE:
            return None
        fn = self.choice(["matmul", "matmul", "einsum", "preferred"])
        out = a.dtype
        if fn == "einsum" and a.rank == 2 and b.rank == 2:
            src = "jnp.einsum('ik,kj->ij', {0}, {1})"
        elif fn == "preferred" and a.dtype in ("int8", "float16", "bfloat16") and b.rank == 2:
            out = "int32" if a.dtype == "int8" else "float32"
            dims = f"((({a.rank - 1},), (0,)), ((), ()))"
            src = f"lax.dot_general({{0}}, {{1}}, {dims}, preferred_element_type={jdt(out)})"
        else:
            src = "jnp.matmul({0}, {1})"
        return _step(self, "dot", src.format(a.name, b.name), [a, b], out, shape, count=k,
                     scale=src.format(f"jnp.abs({a.name})", f"jnp.abs({b.name})"))

    def conv(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        dtype = self.choice(["float32", "float32", "float16", "bfloat16"])
        spatial = int(self.choice([1, 2]))
        groups = int(self.choice([1, 1, 2]))
        a = self.pick(pool, lambda v: v.dtype == dtype and v.rank == spatial + 2 and min(v.shape) > 0
                      and v.shape[1] % groups == 0)
        if a is None:
            shape_a = (int(self.rng.integers(1, 3)), groups * int(self.rng.integers(1, 4))) + tuple(
                int(self.rng.integers(1, 10)) for _ in range(spatial))
            a = self.new_input(dtype, shape_a)
        cin = a.shape[1] // groups
        cout = groups * int(self.rng.integers(1, 4))
        kernel = tuple(int(self.rng.integers(1, 4)) for _ in range(spatial))
        w = self.new_input(dtype, (cout, cin) + kernel)
        strides = tuple(int(self.rng.integers(1, 3)) for _ in range(spatial))
        # lhs dilation only along strided dimensions: XLA:CPU's simplifier (both series) aborts on some lhs-dilated
        # stride-1 convolutions ("Window dimensions do not match RHS shape")
        lhs_dil = tuple(int(self.choice([1, 1, 2])) if st > 1 else 1 for st in strides)
        rhs_dil = tuple(int(self.choice([1, 1, 2])) for _ in range(spatial))
        pads = tuple((int(self.rng.integers(0, 3)), int(self.rng.integers(0, 3))) for _ in range(spatial))
        out_sp = []
        for d, (lo, hi), k, s, ld, rd in zip(a.shape[2:], pads, kernel, strides, lhs_dil, rhs_dil):
            size = (d - 1) * ld + 1 + lo + hi
            dk = (k - 1) * rd + 1
            if size < dk:
                return None
            out_sp.append((size - dk) // s + 1)
        shape = (a.shape[0], cout) + tuple(out_sp)
        if size_of(shape) > self.MAX_SIZE:
            return None
        layout = ("NCH", "OIH", "NCH") if spatial == 1 else ("NCHW", "OIHW", "NCHW")
        src = (f"lax.conv_general_dilated({{0}}, {{1}}, {strides}, {list(pads)}, lhs_dilation={lhs_dil}, "
               f"rhs_dilation={rhs_dil}, dimension_numbers={layout}, feature_group_count={groups})")
        return _step(self, "conv", src.format(a.name, w.name), [a, w], dtype, shape, count=cin * size_of(kernel),
                     scale=src.format(f"jnp.abs({a.name})", f"jnp.abs({w.name})"))

    def gather(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: v.rank > 0 and min(v.shape) > 0)
        if a is None:
            return None
        axis = int(self.rng.integers(a.rank))
        d = a.shape[axis]
        kind = self.choice(["take", "take", "index", "along"])
        if kind == "along":
            shape = tuple(int(self.rng.integers(1, 5)) if i == axis else x for i, x in enumerate(a.shape))
            idx = self.new_input("int32", shape, f"index:{d}")
            src = f"jnp.take_along_axis({a.name}, jnp.clip({idx.name}, -{d}, {d - 1}), axis={axis})"
            return _step(self, "gather", src, [a, idx], a.dtype, shape, moved=a.moved_only)
        idx_shape = self.shape(rank=int(self.choice([0, 1, 1, 2])), big_dim=0)
        idx = self.new_input("int32", idx_shape, f"index:{d}")
        shape = a.shape[:axis] + idx_shape + a.shape[axis + 1:]
        if size_of(shape) > self.MAX_SIZE:
            return None
        if kind == "index" and axis == 0:
            return _step(self, "gather", f"{a.name}[{idx.name}]", [a, idx], a.dtype, shape, moved=a.moved_only)
        mode = self.choice(["clip", "fill"])
        return _step(self, "gather", f"jnp.take({a.name}, {idx.name}, axis={axis}, mode='{mode}')", [a, idx],
                     a.dtype, shape, moved=a.moved_only and mode == "clip")

    def scatter(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: v.rank > 0 and min(v.shape) > 0 and v.dtype != COMPLEX)
        if a is None:
            return None
        d = a.shape[0]
        fn = self.choice(["set", "add", "add", "mul", "min", "max", "segment_sum"])
        n = int(self.rng.integers(1, 2 * d + 2))
        if fn == "set":  # distinct indices: which duplicate wins is not specified
            n = min(n, d)
            idx_src = f"jnp.array({[int(i) for i in self.rng.permutation(d)[:n]]}, jnp.int32)"
            mode = self.choice(["'clip'", "'drop'", "None"])
        else:
            idx_src = f"jnp.array({[int(i) for i in self.rng.integers(-d - 1, d + 2, n)]}, jnp.int32)"
            mode = "'drop'"
        if fn == "segment_sum" and a.dtype != "bool":
            data = self.new_input(a.dtype, (n,) + a.shape[1:])
            src = f"jax.ops.segment_sum({data.name}, {idx_src}, num_segments={d})"
            return _step(self, "scatter_add", src, [data], a.dtype if a.dtype != "bool" else "bool",
                         a.shape, count=n, scale=f"jax.ops.segment_sum(jnp.abs({data.name}), {idx_src}, "
                         f"num_segments={d})")
        if a.dtype == "bool" and fn in ("add", "mul", "segment_sum"):
            return None
        u = self.new_input(a.dtype, (n,) + a.shape[1:] if self.chance(0.8) else ())
        src = f"{a.name}.at[{idx_src}].{fn}({u.name}, mode={mode})"
        op = {"set": "scatter_set", "add": "scatter_add", "mul": "scatter_mul", "min": "scatter_min",
              "max": "scatter_max"}[fn]
        scale = f"jnp.abs({a.name}).at[{idx_src}].add(jnp.abs({u.name}), mode={mode})" if fn == "add" else None
        return _step(self, op, src, [a, u], a.dtype, a.shape, count=n, scale=scale,
                     moved=a.moved_only and u.moved_only and fn == "set")

    # -- complex64, emulated as pairs of f32
    def complex_op(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        c = self.pick(pool, lambda v: v.dtype == COMPLEX)
        if c is None or self.chance(0.3):
            a = self.pick(pool, lambda v: v.dtype == "float32")
            if a is None:
                a = self.new_input("float32", self.shape())
            b = self.partner(pool, a, same_shape=True)
            made = f"lax.complex({a.name}, {b.name})"
            if self.chance(0.3):
                return _step(self, "complex", made, [a, b], COMPLEX, a.shape)
            op = self.choice(sorted(UNARY_COMPLEX))  # made and used in one step: complex values meet more ops
            expr = UNARY_COMPLEX[op].format(made)
            return _step(self, "complex_" + op, expr, [a, b], COMPLEX, a.shape, scale=_complex_scale(op, expr))
        kind = self.choice(["unary", "unary", "binary", "binary", "part", "abs"])
        if kind == "unary":
            op = self.choice(sorted(UNARY_COMPLEX))
            expr = UNARY_COMPLEX[op].format(c.name)
            return _step(self, "complex_" + op, expr, [c], COMPLEX, c.shape, scale=_complex_scale(op, expr))
        if kind == "binary":
            b = self.pick(pool, lambda v: v.dtype == COMPLEX and v.shape == c.shape and v.name != c.name) or c
            op = self.choice(sorted(BINARY_COMPLEX))
            return _step(self, "complex_" + op, BINARY_COMPLEX[op].format(c.name, b.name), [c, b], COMPLEX, c.shape)
        if kind == "abs":
            return _step(self, "complex_abs", f"jnp.abs({c.name})", [c], "float32", c.shape)
        fn = self.choice(["real", "imag"])
        return _step(self, "complex_part", f"jnp.{fn}({c.name})", [c], "float32", c.shape)

    def composite(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: is_float(v.dtype) and v.rank > 0 and min(v.shape) > 0)
        if a is None:
            return None
        axis = int(self.rng.integers(a.rank))
        fn = self.choice(["softmax", "logsumexp", "log_softmax"])
        count = a.shape[axis]
        if fn == "logsumexp":
            shape = a.shape[:axis] + a.shape[axis + 1:]
            step = _step(self, "logsumexp", f"jax.nn.logsumexp({a.name}, axis={axis})", [a], a.dtype, shape,
                         count=count)
        else:
            step = _step(self, fn, f"jax.nn.{fn}({a.name}, axis={axis})", [a], a.dtype, a.shape, count=count)
        if fn != "softmax":  # an error of the sum is an absolute one after its log: ulps of max(|result|, 1)
            step.scale = f"jnp.maximum(jnp.abs({step.outs[0].name}), 1.0)"
        return step

    # -- control flow and transformations
    def _body(self, params: List[Var], pool: List[Var], ctx: Context, n: int) -> Tuple[List[Step], List[Var]]:
        inner = Context(ctx.depth + 1, ctx.differentiable, ctx.batched)
        steps = self.block_steps(list(pool) + params, n, inner)
        return steps, list(pool) + params + [o for s in steps for o in s.outs]

    def _fit(self, value: Var, target: Var) -> str:
        """Source that turns value into target's type (for a branch or a loop body's result)."""
        src = value.name
        if value.dtype != target.dtype:
            if value.dtype == COMPLEX:
                src = f"jnp.real({src})"
            src = f"{src}.astype({jdt(target.dtype)})"
        if value.shape != target.shape:
            if value.size == 0:
                src = f"jnp.zeros({target.shape}, {jdt(target.dtype)})"
            else:
                src = f"jnp.resize({src}, {target.shape})"
        return src

    def _last(self, steps: List[Step], fallback: Var) -> Var:
        outs = [o for s in steps for o in s.outs]
        return outs[-1] if outs else fallback

    def cond(self, pool: List[Var], ctx: Context) -> Optional[List[Step]]:
        a = self.pick(pool, lambda v: v.size <= 1024)
        if a is None:
            return None
        pred_var = self.pick(pool, lambda v: v.dtype != COMPLEX)
        if pred_var is None:
            return None
        before: List[Step] = []
        if pred_var.dtype == "bool":
            pred = f"jnp.any({pred_var.name})"
        else:  # the sum is a step of its own, so that its rounding counts (a branch may turn on it)
            before.append(_step(self, "reduce_sum", f"jnp.sum({pred_var.name}.astype(jnp.float32))", [pred_var],
                                "float32", (), count=pred_var.size,
                                scale=f"jnp.sum(jnp.abs({pred_var.name}.astype(jnp.float32)))"))
            pred = f"{before[0].outs[0].name} > 0"
        nbranch = int(self.choice([2, 2, 3]))
        blocks, result = [], None
        for _ in range(nbranch):
            param = Var(self.name("a"), a.dtype, a.shape)
            steps, _ = self._body([param], pool, ctx, int(self.rng.integers(1, 4)))
            last = self._last(steps, param)
            result = result or Var(self.name(), last.dtype, last.shape)
            blocks.append(Block(self.name("branch"), [param], steps, self._fit(last, result)))
        names = [f"{{B{k}}}" for k in range(nbranch)]
        if nbranch == 2:
            expr = f"lax.cond({pred}, {names[0]}, {names[1]}, {a.name})"
        else:
            index = (f"jnp.sum({pred_var.name}.astype(jnp.int32)) % 4" if pred_var.dtype != "bool"
                     else f"jnp.sum({pred_var.name}.astype(jnp.int32))")
            expr = f"lax.switch({index}, [{', '.join(names)}], {a.name})"
        assert result is not None
        return before + [_region(self, "cond", [result], expr, [a, pred_var] + [b.outs[0] for b in before], blocks)]

    def loop(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: v.size <= 1024 and v.dtype != "bool")
        if a is None:
            return None
        kind = "fori" if ctx.differentiable else self.choice(["fori", "while", "while"])
        carry = Var(self.name("a"), a.dtype, a.shape)
        counter = Var(self.name("i"), "int32", ())
        steps, visible = self._body([carry], pool + [counter], ctx, int(self.rng.integers(1, 4)))
        result = Var(self.name(), a.dtype, a.shape)
        fit = self._fit(self._last(steps, carry), carry)
        trips = int(self.rng.integers(1, 5))
        if kind == "fori":
            block = Block(self.name("body"), [counter, carry], steps, fit)
            expr = f"lax.fori_loop(0, {trips}, {{B0}}, {a.name})"
            return _region(self, "fori_loop", [result], expr, [a], [block])
        pair = Var(self.name("c"), "tuple", ())
        unpack = Step("unpack", [counter, carry], f"{pair.name}", [pair.name], "int32")
        block = Block(self.name("body"), [pair], [unpack] + steps, f"({counter.name} + 1, {fit})")
        limit = str(trips)
        lim = self.pick(pool, lambda v: is_int(v.dtype) and v.name != a.name)
        if lim is not None and self.chance(0.4):  # a trip count computed from data
            limit = f"jnp.sum({lim.name}.astype(jnp.int32) & 3)"
        expr = f"lax.while_loop(lambda c: c[0] < {limit}, {{B0}}, (jnp.int32(0), {a.name}))[1]"
        return _region(self, "while", [result], expr, [a] + ([lim] if lim is not None and "sum" in limit else []),
                       [block])

    def scan(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        xs = self.pick(pool, lambda v: v.rank > 0 and 0 < v.shape[0] <= 16 and v.size <= 1024)
        c0 = self.pick(pool, lambda v: v.size <= 256 and v.dtype != "bool")
        if xs is None or c0 is None:
            return None
        carry = Var(self.name("a"), c0.dtype, c0.shape)
        x = Var(self.name("a"), xs.dtype, xs.shape[1:])
        steps, visible = self._body([carry, x], pool, ctx, int(self.rng.integers(1, 4)))
        last = self._last(steps, x)
        y = Var(self.name(), last.dtype, (xs.shape[0],) + last.shape)
        result = Var(self.name(), c0.dtype, c0.shape)
        block = Block(self.name("body"), [carry, x], steps, f"({self._fit(last, carry)}, {last.name})")
        reverse = ", reverse=True" if self.chance(0.3) else ""
        return _region(self, "scan", [result, y], f"lax.scan({{B0}}, {c0.name}, {xs.name}{reverse})", [c0, xs],
                       [block])

    def vmap(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: v.rank > 0 and v.shape[0] > 0 and v.size <= 2048)
        if a is None:
            return None
        axis = int(self.rng.integers(a.rank))
        param = Var(self.name("a"), a.dtype, a.shape[:axis] + a.shape[axis + 1:])
        inner = Context(ctx.depth, ctx.differentiable, True)
        steps, _ = self._body([param], [v for v in pool if v.size <= 256], inner, int(self.rng.integers(1, 5)))
        last = self._last(steps, param)
        if last.size * a.shape[axis] > self.MAX_SIZE:
            return None
        result = Var(self.name(), last.dtype, (a.shape[axis],) + last.shape)
        block = Block(self.name("per_row"), [param], steps, last.name)
        return _region(self, "vmap", [result], f"jax.vmap({{B0}}, in_axes={axis})({a.name})", [a], [block])

    def grad(self, pool: List[Var], ctx: Context) -> Optional[Step]:
        a = self.pick(pool, lambda v: is_float(v.dtype) and v.size <= 1024)
        if a is None:
            return None
        param = Var(self.name("a"), a.dtype, a.shape)
        inner = Context(ctx.depth, True, ctx.batched)
        steps, _ = self._body([param], [v for v in pool if v.dtype != COMPLEX], inner, int(self.rng.integers(1, 5)))
        last = self._last(steps, param)
        if last.dtype == COMPLEX:
            return None
        loss = f"jnp.sum({last.name}.astype(jnp.float32))"
        block = Block(self.name("loss"), [param], steps, loss)
        if self.chance(0.3):
            value = Var(self.name(), "float32", ())
            result = Var(self.name(), a.dtype, a.shape)
            return _region(self, "grad", [value, result], f"jax.value_and_grad({{B0}})({a.name})", [a], [block])
        result = Var(self.name(), a.dtype, a.shape)
        return _region(self, "grad", [result], f"jax.grad({{B0}})({a.name})", [a], [block])

    # -- the big ones: a reduction or a scan over up to 2^25 elements
    def _big(self) -> Tuple[List[Step], List[str]]:
        log2 = int(self.choice([18, 19, 20, 21, 22, 22, 23, 23, 24, 25]))
        dtype = str(self.weighted([(5, "float32"), (1, "float16"), (1, "bfloat16"), (1.5, "int32"), (0.5, "uint8")]))
        inner = 2 ** int(self.choice([0, 0, 5, 10, 13]))
        shape: Shape = (2 ** log2,) if inner == 1 else (2 ** log2 // inner, inner)
        profile = "normal" if is_float(dtype) else "small"
        if self.chance(0.2):
            profile += "+special"
        x = self.new_input(dtype, shape, profile)
        pool = [x]
        steps: List[Step] = []
        if is_float(dtype) and self.chance(0.4):
            op = self.choice(["abs", "square", "exp", "sin", "neg", "tanh"])
            steps.append(_step(self, op, UNARY_FLOAT[op].format(x.name), [x], dtype, shape))
            pool.append(steps[-1].outs[0])
        a = pool[-1]
        axis = int(self.rng.integers(len(shape)))
        fn = self.choice(["sum", "sum", "mean", "max", "argmax", "cumsum", "cumsum", "cummax", "prod_near_one"])
        if fn == "mean" and not is_float(dtype):
            fn = "sum"
        if fn in ("sum", "mean"):
            steps.append(_step(self, "reduce_sum", f"jnp.{fn}({a.name}, axis={axis})", [a],
                               {"int8": "int32", "uint8": "uint32"}.get(dtype, dtype),
                               shape[:axis] + shape[axis + 1:], count=shape[axis],
                               scale=f"jnp.{fn}(jnp.abs({a.name}), axis={axis})"))
        elif fn == "max":
            steps.append(_step(self, "reduce_max", f"jnp.max({a.name}, axis={axis})", [a], dtype,
                               shape[:axis] + shape[axis + 1:]))
        elif fn == "argmax":
            steps.append(_step(self, "argmax", f"jnp.argmax({a.name}, axis={axis})", [a], "int32",
                               shape[:axis] + shape[axis + 1:], dtype=dtype))
        elif fn == "cummax":
            steps.append(_step(self, "cummax", f"lax.cummax({a.name}, axis={axis})", [a], dtype, shape,
                               count=shape[axis]))
        elif fn == "prod_near_one" and is_float(dtype):
            steps.append(_step(self, "add", f"1.0 + {a.name} * 1e-6", [a], dtype, shape))
            b = steps[-1].outs[0]
            steps.append(_step(self, "reduce_prod", f"jnp.prod({b.name}, axis={axis})", [b], dtype,
                               shape[:axis] + shape[axis + 1:], count=shape[axis],
                               scale=_product_bound(f"jnp.prod({{}}, axis={axis})", b.name)))
        else:
            steps.append(_step(self, "cumsum", f"jnp.cumsum({a.name}, axis={axis})", [a], dtype, shape,
                               count=shape[axis], scale=f"jnp.cumsum(jnp.abs({a.name}), axis={axis})"))
        return steps, [steps[-1].outs[0].name]


def _product_bound(template: str, name: str) -> str:
    """For a product of the elements of ``name`` (``template`` with {} for the operand): the product of the factors
    above 1 over that of the nonzero ones below 1, infinite where some order of the factors over- or underflows."""
    big = template.format(f"jnp.maximum(jnp.abs({name}), 1)")
    small = template.format(f"jnp.where({name} == 0, 1, jnp.minimum(jnp.abs({name}), 1))")
    return f"{big} / {small}"


def _complex_scale(op: str, expr: str) -> Optional[str]:
    """log's error near |z| = 1 is absolute (log |z| of a |z| rounded to an ulp): ulps of max(|log z|, 1)."""
    return f"jnp.maximum(jnp.abs({expr}), 1.0)" if op == "log" else None


def _step(g: Generator, op: str, expr: str, args: Sequence[Var], out_dtype: str, shape: Sequence[int],
          dtype: Optional[str] = None, count: int = 1, scale: Optional[str] = None, moved: bool = False) -> Step:
    out = Var(g.name(), out_dtype, tuple(int(d) for d in shape), moved)
    return Step(op, [out], expr, [a.name for a in args], dtype or out_dtype, count, scale)


def _region(g: Generator, op: str, outs: List[Var], expr: str, args: Sequence[Var], blocks: List[Block]) -> Step:
    for k, b in enumerate(blocks):
        expr = expr.replace(f"{{B{k}}}", b.name)
    reads = [a.name for a in args] + [r for b in blocks for r in _outer_reads(b)]
    return Step(op, outs, expr, reads, outs[0].dtype, blocks=blocks)


def _outer_reads(block: Block) -> List[str]:
    """The values a block reads that it does not define (closures over outer values)."""
    defined = {p.name for p in block.params}
    reads: List[str] = []
    for s in block.steps:
        reads += [r for r in s.reads if r not in defined]
        for b in s.blocks:
            reads += [r for r in _outer_reads(b) if r not in defined]
        defined.update(o.name for o in s.outs)
    for token in _names_in(block.result):
        if token not in defined:
            reads.append(token)
    return reads


def _names_in(src: str) -> List[str]:
    import re

    return re.findall(r"\b[vxai]\d+\b", src)


def _leaves(steps: Sequence[Step], limit: int) -> List[str]:
    """The values no later step reads (the last always among them), most recent first, at most ``limit``."""
    read = {r for s in steps for r in s.reads}
    outs = [o.name for s in steps for o in s.outs if o.dtype != "tuple"]
    leaves = [o for o in outs if o not in read]
    if outs and outs[-1] not in leaves:
        leaves.append(outs[-1])
    return list(reversed(leaves))[:limit]


def _broadcasts(small: Shape, big: Shape) -> bool:
    if len(small) > len(big):
        return False
    return all(s in (1, b) for s, b in zip(reversed(small), reversed(big)))


def _broadcast_shape(a: Shape, b: Shape) -> Shape:
    rank = max(len(a), len(b))
    a2, b2 = (1,) * (rank - len(a)) + tuple(a), (1,) * (rank - len(b)) + tuple(b)
    return tuple(y if x == 1 else x for x, y in zip(a2, b2))


def _prime_factors(n: int) -> List[int]:
    out, p = [], 2
    while n > 1 and p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def generate(seed: int, index: int) -> Program:
    """Program ``index`` of the stream ``seed``."""
    return Generator(seed, index).program()
