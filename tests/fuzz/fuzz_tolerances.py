"""What the fuzzer allows between ipu and cpu: one table of float tolerances per op, and one list of accepted
differences. Integers and bools are always compared exactly; so is every float op this table calls exact.

TOLERANCES: per op (the ``op`` of fuzz_programs.Step), how far the ipu's float result may be from cpu's: 0 is bit
for bit (NaN matches any NaN; a zero's sign counts); N is N ulps of the result (``per="result"``), of the sum of the
terms' magnitudes for sums (``"scale"``), or of the array's largest magnitude (``"norm"``); where some order of a sum's
or product's terms over- or underflows, anything. A pair (a, b) is (jaxlib 0.4.13, jaxlib 0.12). A program's
tolerance follows from its ops: cpu runs the program again with each inexact op's result moved by its N ulps (up,
down, by random signs), and an ipu float result must lie within SAFETY times the largest move this caused in cpu's;
an int or bool result, or one computed from such through a discontinuous op (a compare, a bitcast, a sort, a branch),
may differ only where a move changed it. So a difference an op is allowed is carried, amplified or damped, through
the ops after it, and with every op on the way exact, the envelope is empty: bit for bit.

ACCEPTED: differences the README explains, and those the fuzzer found that the backend has yet to fix (``open``),
each matched by op and dtype and by conditions (series, host flags, result size, terms per element, a property of
the program or of the op's operand values: WHEN), never by program. A program that fails the table alone but passes
when one entry's ops get that entry's tolerance is counted under that entry's reason (the first in the list that
suffices); ``error`` entries explain an error of the ipu instead, ``hang`` entries keep programs off the ipu. Open
entries are counted apart, so that they stay visible, and go with their fix.

UNSUPPORTED_BY_DESIGN: what the README says the ipu backend refuses; an "Unsupported operation" error naming one of
these is counted, any other is a mismatch.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple, Union

SAFETY = 4  # an ipu result may move SAFETY times as far as cpu's moved under its ops' allowed ulps

Ulps = Union[int, Tuple[int, int]]


@dataclasses.dataclass(frozen=True)
class Tolerance:
    f32: Ulps  # ulps in f32 (also each part of a complex64); 0: bit for bit; (jaxlib 0.4.13, jaxlib 0.12)
    half: Ulps  # ulps in f16 and bf16 (their own)
    reason: str
    per: str = "result"  # "result": ulps of the result; "scale": of the sum of the terms' magnitudes (anything where
    #                      that overflows); "product": of the result, anything where some order of the factors
    #                      over- or underflows; "norm": of the largest magnitude in the array
    exact_upto: int = 0  # sums of at most this many terms are bit for bit
    grows: bool = False  # ulps times sqrt(terms / 32): the sum's order differs, and its error grows with its length


def _exact(reason: str) -> Tolerance:
    return Tolerance(0, 0, reason)


EXACT_ROUNDING = "exactly rounded in f32 (f16/bf16: computed in f32 and rounded once, as XLA:CPU does)"
XLA_BITS = "XLA's own approximation with its FMAs, bit for bit with XLA:CPU (README; test_xla_bits.py)"
MOVES = "moves or selects values without arithmetic"
LIBM = "the emulator's libm against XLA:CPU's expansion: a few ulp (test_elementwise.py's measured ULP_UNARY)"

TOLERANCES: Dict[str, Tolerance] = {
    # elementwise, exactly rounded or defined bit for bit
    "neg": _exact(EXACT_ROUNDING), "abs": _exact(EXACT_ROUNDING), "floor": _exact(EXACT_ROUNDING),
    "ceil": _exact(EXACT_ROUNDING), "round": _exact(EXACT_ROUNDING), "round_afz": _exact(EXACT_ROUNDING),
    "sqrt": _exact(EXACT_ROUNDING), "square": _exact(EXACT_ROUNDING), "reciprocal": _exact(EXACT_ROUNDING),
    "add": _exact(EXACT_ROUNDING), "sub": _exact(EXACT_ROUNDING), "mul": _exact(EXACT_ROUNDING),
    "div": _exact(EXACT_ROUNDING + "; divides rewritten as XLA's simplifier rewrites them (README)"),
    "rem": _exact(EXACT_ROUNDING + " (fmod is exact)"), "max": _exact(EXACT_ROUNDING),
    "min": _exact(EXACT_ROUNDING), "relu": _exact(EXACT_ROUNDING), "clamp": _exact(EXACT_ROUNDING),
    "sign": _exact("copysign(x != 0, x), denormals as zeros (README, denormals)"),
    "nextafter": _exact("next_after bit for bit (README)"),
    "pow_2": _exact("a ** 2.0 is a * a (XLA's simplifier, README)"),
    "pow_half": _exact("a ** 0.5 is LLVM's |sqrt(a)| (README)"),
    "integer_pow": _exact("repeated multiplies, as jax lowers integer_pow"),
    "reduce_precision": _exact("rounds the mantissa and exponent, exactly defined"),
    "is_finite": _exact("a predicate"), "isnan": _exact("a predicate"), "signbit": _exact("a predicate"),
    "compare": _exact("a predicate"),
    "compare_eq": _exact("a predicate; an equality of values that depend on inexact ops holds within their ulps"),
    "convert": _exact("exactly rounded; float -> int saturates, NaN -> 0 (README)"),
    "bitcast": _exact("reinterprets bits"),
    # integer and bool ops (their results are compared exactly whatever the table says)
    **{op: _exact("integers and bools: exact") for op in ("and", "or", "xor", "not", "popcount", "clz", "floordiv",
                                                          "mod", "shift_left", "shift_right_arithmetic",
                                                          "shift_right_logical")},
    # XLA's approximations, reproduced bit for bit
    "exp": _exact(XLA_BITS), "exp2": _exact(XLA_BITS + " (jax's exp2 is exp(x * ln 2))"),
    "expm1": _exact(XLA_BITS + " (jaxlib 0.4.13's f16 step by step in f16: test_xla_bits.py)"),
    "log": _exact(XLA_BITS),
    "log1p": _exact(XLA_BITS + " (jaxlib 0.4.13's f16 step by step in f16: test_xla_bits.py)"),
    "tanh": _exact(XLA_BITS), "logistic": _exact(XLA_BITS), "erf": _exact(XLA_BITS), "erfc": _exact(XLA_BITS),
    "erf_inv": _exact(XLA_BITS), "tan": _exact(XLA_BITS), "lgamma": _exact(XLA_BITS),
    "digamma": _exact(XLA_BITS), "rsqrt": _exact(XLA_BITS + " (0.12: the host's rsqrtss and XLA's Newton steps)"),
    "atan": Tolerance((1, 0), 1, "jaxlib 0.4.13: libm's atanf against XLA:CPU's (1 ulp, test_elementwise.py); "
                      "jaxlib 0.12: Eigen's atan, bit for bit (README)"),
    # the emulator's libm against XLA:CPU's expansions
    "sin": Tolerance(1, 1, LIBM), "cos": Tolerance(1, 1, LIBM), "asin": Tolerance(3, 2, LIBM),
    "acos": Tolerance(3, 2, LIBM), "sinh": Tolerance(6, 1, LIBM), "cosh": Tolerance(6, 1, LIBM),
    "asinh": Tolerance(4, 2, LIBM), "acosh": Tolerance(4, 2, LIBM), "atanh": Tolerance(3, 2, LIBM),
    "cbrt": Tolerance(2, 1, LIBM), "pow": Tolerance(2, 1, LIBM + " (powf)"), "atan2": Tolerance(2, 1, LIBM),
    # data movement
    "reshape": _exact(MOVES), "transpose": _exact(MOVES), "broadcast": _exact(MOVES), "slice": _exact(MOVES),
    "pad": _exact(MOVES), "concatenate": _exact(MOVES), "rev": _exact(MOVES), "dynamic_slice": _exact(MOVES),
    "dynamic_update_slice": _exact(MOVES), "select": _exact(MOVES), "gather": _exact(MOVES),
    "scatter_set": _exact(MOVES + " (distinct indices)"), "iota": _exact("exact integers"),
    "sort": _exact(MOVES + " (a total order: -0 < +0, NaN last)"), "sort_multi": _exact(MOVES),
    "top_k": _exact(MOVES), "unpack": _exact(MOVES),
    # reductions and scans
    "reduce_max": _exact("max/min return one of their operands"), "reduce_logical": _exact("a predicate"),
    "argmax": _exact("comparisons only"), "cummax": _exact("comparisons only"),
    "window_max": _exact("comparisons only"), "scatter_min": _exact("comparisons only"),
    "scatter_max": _exact("comparisons only"),
    "reduce_sum": Tolerance(4, 2, "XLA:CPU's tree of 32-element windows in 8 lanes; sums of more than 32 terms agree "
                            "to a few ulp of their scale, the lanes depending on the host's vector width (README, "
                            "reductions; test_reduce.py)", per="scale", exact_upto=32),
    "reduce_prod": Tolerance(4, 2, "a product reordered as the sum is: a few ulp of the result (anything where some "
                             "order of its factors overflows)", per="product", exact_upto=32),
    "cumsum": Tolerance(4, 2, "XLA:CPU's order, bit for bit alone (test_window.py): jaxlib 0.4.13 lowers it to jax's "
                        "associative scan, jaxlib 0.12 to a reduce_window over the whole axis that the ipu rewrites "
                        "into XLA:CPU's rows of 16; a product that feeds it the ipu fuses into its adds (fused "
                        "multiply-adds), as cpu need not: a few ulp of the scale, growing as the square root of the "
                        "axis beyond 32", per="scale", exact_upto=1, grows=True),
    "cumprod": Tolerance(4, 2, "as cumsum, for products: ulps of the result", per="product", exact_upto=1,
                         grows=True),
    "cumlogsumexp": Tolerance(4, 2, "as cumsum, of logaddexp (exp, log1p; jaxlib 0.12's body of several ops is "
                              "applied to whole arrays as XLA's map does); the log makes the running sum's error an "
                              "absolute one: ulps of max(|result|, 1)", per="scale", exact_upto=1, grows=True),
    "window_sum": Tolerance(4, 2, "the README states no order for windowed sums, and the ipu's is not XLA:CPU's "
                            "(which adds each window in order from the init value): a few ulp of the scale, from "
                            "windows of 2", per="scale"),
    "window_mul": Tolerance(4, 2, "as window_sum, for products: a few ulp of the result", per="product"),
    "scatter_add": Tolerance(4, 2, "duplicate indices add in update order", per="scale", exact_upto=1),
    "scatter_mul": Tolerance(4, 2, "duplicate indices multiply in update order", exact_upto=1),
    "dot": Tolerance(8, 2, "XLA:CPU's matmul kernels block and vectorise the sum over k; f16/bf16 accumulate in f32 "
                     "(README; test_dot.py: 8 ulp of the scale in f32, 2 in f16)", per="scale"),
    "conv": Tolerance(8, 2, "as dot (test_conv.py: 8 ulp of the scale in f32, 2 in f16)", per="scale"),
    "softmax": Tolerance(4, 2, "exp bit for bit; its sum as reduce_sum's (of positive terms: ulps of the result)",
                         exact_upto=32),
    "log_softmax": Tolerance(4, 2, "as softmax; the log makes its sum's error an absolute one: ulps of "
                             "max(|result|, 1)", per="scale", exact_upto=32),
    "logsumexp": Tolerance(4, 2, "as log_softmax", per="scale", exact_upto=32),
    # complex64 as pairs of f32, computed as XLA:CPU computes it (README); ulps of |z|, for both parts
    "complex": _exact(MOVES), "complex_part": _exact(MOVES), "complex_neg": _exact(EXACT_ROUNDING),
    "complex_conj": _exact(EXACT_ROUNDING), "complex_add": _exact(EXACT_ROUNDING),
    "complex_sub": _exact(EXACT_ROUNDING),
    "complex_mul": Tolerance(1, 1, "XLA:CPU's (ac - bd, ad + bc) (README), bit for bit alone; in chains XLA:CPU "
                             "0.4.13 contracts across the multiplies: 1 ulp of |z|"),
    "complex_square": Tolerance(1, 1, "as complex_mul"),
    "complex_div": Tolerance(2, 2, "Smith's division with C99's infinities (README); each part within 2 ulp of |z|"),
    "complex_abs": Tolerance(2, 2, "overflow-free abs (README)"),
    "complex_exp": Tolerance(2, 2, "exp and sin/cos of the parts (README)"),
    "complex_log": Tolerance(2, 2, "log of |z| and atan2 (README); in ulps of max(|log z|, 1), as log |z| of a |z| "
                             "near 1 is an absolute error", per="scale"),
    "complex_sqrt": Tolerance(2, 2, "README: as XLA:CPU"), "complex_tanh": Tolerance(4, 2, "README: as XLA:CPU"),
    "complex_sin": Tolerance(4, 2, "README: as XLA:CPU"),
    # control flow and transformations: their bodies' ops count; these add nothing of their own but grad's sums
    "cond": _exact("runs one branch"), "fori_loop": _exact("runs its body"), "while": _exact("runs its body"),
    "scan": _exact("runs its body"), "vmap": _exact("batches its body's ops"),
    "grad": Tolerance(8, 2, "the backward pass sums cotangents (the transposes of broadcasts, dots, gathers) in an "
                      "order of XLA's choosing: ulps of the gradient's largest element", per="norm"),
}

HALF = ("float16", "bfloat16")
SCANS = ("cumsum", "cumprod", "cummax", "cumlogsumexp")
XLA_APPROXIMATIONS = ("exp", "exp2", "expm1", "log", "log1p", "tanh", "logistic", "erf", "erfc", "erf_inv", "tan",
                      "lgamma", "digamma", "rsqrt", "atan")
SCANS_AND_WINDOWS = SCANS + ("window_sum", "window_mul", "window_max", "scatter_add", "scatter_mul")
DTYPES_ALL = ("float32", "float16", "bfloat16", "int32", "uint32", "int8", "uint8", "bool", "complex64")


def _ulps(value: Ulps, series: str) -> int:
    if isinstance(value, tuple):
        return value[0] if series.startswith("0.4.") else value[1]
    return value


def tolerance(step, series: str, accepted: Sequence["Accepted"] = ()) -> Optional[Tuple[int, str]]:  # noqa: ANN001
    """(ulps, per) for a fuzz_programs.Step, or None where it must be bit for bit. Accepted entries that cover the
    step raise its tolerance to theirs (in ulps of its result where the table has it exact)."""
    if any(a.per == "any" and a.covers(step) for a in accepted):
        return 1, "any"
    if step.dtype not in ("float32", "complex64") + HALF:
        return None
    row = TOLERANCES[step.op]
    ulps = _ulps(row.half if step.dtype in HALF else row.f32, series)
    exact = ulps == 0 or step.count <= row.exact_upto
    if row.grows and step.count > 32:
        ulps = int(math.ceil(ulps * math.sqrt(step.count / 32)))
    covering = sorted((a for a in accepted if a.covers(step)), key=lambda a: a.ulps)
    if covering:
        entry = covering[-1]
        if entry.per == "any":
            return 1, "any"
        per = row.per if entry.per == "row" else entry.per
        return (entry.ulps, per) if exact else (max(ulps, entry.ulps), row.per)
    return None if exact else (ulps, row.per)


# ---------------------------------------------------------------------------------------------------- accepted

ELEMENTWISE_F32 = ("neg", "abs", "sign", "floor", "ceil", "round", "round_afz", "sqrt", "rsqrt", "cbrt", "exp",
                   "exp2", "expm1", "log", "log1p", "tanh", "logistic", "sin", "cos", "tan", "asin", "acos", "atan",
                   "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erf_inv", "lgamma", "digamma", "square",
                   "reciprocal", "relu", "add", "sub", "mul", "div", "rem", "max", "min", "pow", "atan2", "nextafter",
                   "pow_2", "pow_half", "integer_pow", "clamp", "reduce_precision")
TRANSCENDENTAL = ("exp", "exp2", "expm1", "log", "log1p", "tanh", "logistic", "sin", "cos", "tan", "asin", "acos",
                  "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erf_inv", "lgamma", "digamma",
                  "cbrt", "pow", "atan2", "rsqrt", "softmax", "log_softmax", "logsumexp", "cumlogsumexp")


@dataclasses.dataclass(frozen=True)
class Accepted:
    reason: str
    ops: Tuple[str, ...]  # the table's rows this entry relaxes
    dtypes: Tuple[str, ...]
    ulps: int  # those ops' tolerance under this entry: ulps of their result (at least that many f32 smallest
    #            normals); per="denormal": only that many f32 smallest normals; per="row": as the table's row;
    #            per="any": any value (NaN included)
    per: str = "result"
    series: str = ""  # only with this jaxlib ("0.4." or "0.12")
    cpu_has: str = ""  # only on hosts whose /proc/cpuinfo flags have this one
    cpu_lacks: str = ""  # ... or lack it
    min_size: int = 0  # only where the op's result has min_size..max_size elements
    max_size: int = 0
    when: str = ""  # a key of WHEN: only steps whose operands (cpu's values) satisfy it
    min_count: int = 0  # only steps of at least (at most) this many terms per result element
    max_count: int = 0
    min_work: int = 0  # only steps whose result elements times terms per element (a scan's axis) reach this
    empty: bool = False  # only steps with an empty result
    error: str = ""  # explains an error of the ipu whose message has this text (not a difference of values)
    hang: bool = False  # the ipu takes too long: such programs are counted under this entry without running there
    open: bool = False  # found by the fuzzer, not yet fixed in the backend: counted apart, visible

    def applies(self, steps: Sequence, series: str) -> bool:
        """Whether the environment fits and the program has a step this entry covers."""
        if self.series and not series.startswith(self.series):
            return False
        flags = cpu_flags()
        if (self.cpu_has and self.cpu_has not in flags) or (self.cpu_lacks and self.cpu_lacks in flags):
            return False
        return any(self.covers(s) for s in steps)

    def covers(self, step) -> bool:  # noqa: ANN001 - a fuzz_programs.Step
        if step.op not in self.ops or step.dtype not in self.dtypes or step.size * step.count < self.min_work:
            return False
        if self.empty and step.size != 0:
            return False
        if step.count < self.min_count or (self.max_count and step.count > self.max_count):
            return False
        return not self.max_size or self.min_size <= step.size <= self.max_size


ACCEPTED: List[Accepted] = [
    # -- explained by the README or the series' expected failures
    Accepted("XLA:CPU leaves arrays of 2 to 7 elements unvectorised and there returns some f32 denormals unflushed; "
             "the emulator flushes at every size (README, denormals)",
             ELEMENTWISE_F32 + ("convert", "select"), ("float32",), 1, per="denormal", min_size=2, max_size=7),
    Accepted("on hosts without AVX512-BF16, jaxlib 0.12's XLA:CPU bf16 elementwise arithmetic rounds differently "
             "from computing in f32 and rounding once (README; expected-failures/0.12.0.1.txt)",
             ELEMENTWISE_F32, ("bfloat16",), 1, series="0.12", cpu_lacks="avx512_bf16"),
    Accepted("on hosts with AVX512-FP16, XLA:CPU computes f16 arithmetic natively, rounding to f16 inside its "
             "expansions and loops and fusing f16 multiply-adds, where the ipu computes in f32 and rounds each op "
             "once (expected-failures: test_transcendental_chain[float16], asinh f16; jaxlib 0.12 with "
             "--xla_cpu_max_isa=AVX2 agrees with the ipu)",
             ELEMENTWISE_F32 + TRANSCENDENTAL + SCANS_AND_WINDOWS, ("float16",), 2, cpu_has="avx512_fp16"),
    Accepted("XLA:CPU computes an integer 0 / x whose 0 it knows at compile time as 0 (LLVM folds it), so 0 / 0 is "
             "0 there, not XLA's -1 (which its compiled code and the ipu give); seen with a while loop's counter",
             ("div", "floordiv"), ("int32", "uint32", "int8", "uint8"), 0, per="any", when="zero_by_zero"),
    Accepted("jaxlib 0.12's XLA:CPU drops NaNs from some maxima and minima over long rows (jnp.max of f32[256, 1024] "
             "rows holding a NaN and an inf gives inf; of f32[4, 33] NaN): lax.max and lax.min propagate NaN, and "
             "so does the ipu (README, maxima and NaN)", ("reduce_max",), ("float32", "float16", "bfloat16"), 1,
             per="any", series="0.12", when="nan_operand"),
    Accepted("jaxlib 0.4.13's XLA:CPU constant folder computes clz of a negative signed integer it knows at compile "
             "time as clz of its 64-bit sign extension minus (64 - width): -32 for an int32, -56 for an int8, where "
             "every count of a negative value is 0 (the ipu's, jaxlib 0.12's, and 0.4.13's own compiled code): "
             "lax.clz(jnp.full(4, -1, jnp.int8)), a pad whose result is all padding value -1, a value derived from "
             "a while loop's counter (lax.clz(~(-i)) for i = 0)",
             ("clz",), ("int32", "int8"), 0, per="any", series="0.4."),
    Accepted("jaxlib 0.12's XLA:CPU drops terms from some padded windowed sums, integers included: "
             "lax.reduce_window(x, 0, lax.add, (3, 1), (1, 1), ((1, 1), (1, 0))) of the int32[3, 4] [[1, 2, 3, 4], "
             "[10, 20, 30, 40], [100, 200, 300, 400]] gives 21, 42, 63, 84 in its middle row, whose windows hold "
             "whole columns (111, 222, 333, 444: numpy's, 0.4.13's and the ipu's); seen where a window spans a "
             "whole dimension of 3 padded by 1 on each side (fuzz seed 20282601 #425). Counted only where cpu's "
             "own window sum of the step's operands is not the sum", ("window_sum",),
             ("float32", "float16", "bfloat16", "int32", "uint32", "int8", "uint8"), 0, per="any", series="0.12",
             when="cpu_window_sum_wrong"),
    Accepted("jaxlib 0.12's XLA:CPU adds some f32 sums of more than 32 terms in one accumulator (YNNPACK: jnp.sum "
             "of an f32[32, 15] holding a 1 and then 479 values of 2^-24 is 1 there, 1.0000284 on the ipu, which adds "
             "in a tree of 32-term windows, 1.0000286 exactly), whose error grows with the count: a sum of 480 "
             "positive tangents 47 ulps from the exact value on cpu, 1 on the ipu (fuzz seed 20285422 #1253). "
             "Counted only where cpu's own sum of the step's operand is more than 2 ulps of the scale from the "
             "exact sum (README, reductions)", ("reduce_sum",), ("float32",), 256, per="row", series="0.12",
             min_count=33, when="cpu_sum_inaccurate"),
    Accepted("jaxlib 0.4.13: jax writes an empty strided slice (x[1:4:3, 3:3] of a u8[5, 4]) as a broadcast of a "
             "zero, and XLA's simplifier folds a reduce of a broadcast scalar to the reducer of the init and that "
             "scalar, also where the broadcast has no element: jnp.all of it is and(True, False), False on cpu "
             "(jnp.all of the same empty array passed in is True there), where the all of nothing is True on the "
             "ipu, in numpy and in jaxlib 0.12 (fuzz seed 20282701 #1920)", ("reduce_logical",), ("bool",), 0,
             per="any", series="0.4.", when="empty_operand"),
    Accepted("jaxlib 0.4.13's XLA:CPU computes a windowed maximum or minimum whose windows hold one element but "
             "step by more than one (lax.reduce_window(x, inf, lax.min, (1,), (2,), 'SAME')) with the vector "
             "minps/maxps where it vectorises, which read a denormal as a zero under DAZ: of a denormal it gives 0 "
             "for 1 and for 8 or more results, the denormal for 2 to 7 (unvectorised), the same op; a reduce's or "
             "a window's of two elements passes the denormal on at every size. The ipu passes it on (README, "
             "denormals)", ("window_max",), ("float32", "bfloat16"), 1, per="denormal", series="0.4.",
             when="denormal_operand"),
    Accepted("jaxlib 0.12's XLA:CPU moves some bf16 arrays through f32 (a select it fuses with bf16 arithmetic, "
             "a broadcast: its float normalization computes them in f32) and rounds them back to bf16 with FTZ, so "
             "a bf16 denormal may come out as a zero, depending on its fusion decisions (where(m, erf(x), x) of a "
             "bf16[3, 7] flushes when m is sliced inside the jit, not when m is an argument; broadcast_to of a "
             "bf16[7] flushes; a pad's denormal padding value flushes in some elements and not others: "
             "lax.pad(ones(bf16[6, 3]), bf16(1e-40), ((1, 0, 0), (0, 0, 0))) starts [d, d, 0], fuzz seed 20282401 "
             "#5003): the ipu moves the value untouched (README, denormals)",
             ("select", "broadcast", "reshape", "transpose", "slice", "pad", "concatenate", "rev", "dynamic_slice",
              "dynamic_update_slice", "gather"), ("bfloat16",), 1, per="denormal", series="0.12",
             when="denormal_operand_or_padding"),
    Accepted("jaxlib 0.4.13's XLA:CPU tests a bf16 value against zero (x != 0, x.astype(bool)) with its bits, so a "
             "bf16 denormal is nonzero, where the test is all its loop reads of x (the ipu's rule), but with a float "
             "compare that reads it as a zero where the loop also computes with x: where(x != 0, tan(x), x) of a "
             "bf16 denormal selects x on cpu, tan(x) = 0 on the ipu (README, denormals)", ("select",), ("bfloat16",),
             1, per="denormal", series="0.4.", when="denormal_operand"),
    Accepted("jaxlib 0.12's XLA:CPU computes cbrt of an f32 denormal as 5.6e-16 of a sign its code decides: "
             "-5.6e-16 for every denormal of an array (the ipu's), +5.6e-16 for the negation of a bitcast one",
             ("cbrt",), ("float32",), 1, per="any", series="0.12", when="denormal_operand"),
    Accepted("jaxlib 0.4.13's XLA:CPU computes a maximum, minimum or clamp (relu, jnp.clip) that it fuses into a "
             "loop it does not vectorise (a gather's, once per gathered element; one that calls fmod; one whose "
             "minor dimension is 3, 5, 6 or 7 (9 to 15 too on an AVX-512 host), or 1 under more dimensions: relu "
             "of f32[6, 4, 7]; one a concatenation reads into such a minor dimension) with compares "
             "and selects that return a denormal (operand or bound) as it is, where its vector loops (maxps) and the "
             "ipu read it as a zero (README, denormals)", ("relu", "max", "min", "clamp"), ("float32",), 1,
             per="denormal", series="0.4.", when="scalar_loop"),
    Accepted("jaxlib 0.4.13's XLA:CPU computes exp (exp2, and what jax builds on it) of x + NaN, x * NaN... fused "
             "with the arithmetic on a NaN literal as whatever LLVM's constant folding of its expansion gives (its "
             "float-to-int of NaN is poison): 0 for f32[250, 3], -2.98e38 for exp(x[0, 0] + nan), NaN once a "
             "reduce stands between; logsumexp over a jnp.take(..., mode='fill') whose NaN fill it fuses in "
             "drops the NaN: 0 for logsumexp([0, fill])); exp of a NaN is NaN on the ipu, as IEEE and XLA define it",
             ("exp", "exp2", "expm1", "logistic", "tanh", "sinh", "logsumexp", "softmax", "log_softmax", "grad"),
             ("float32", "float16", "bfloat16"), 1, per="any", series="0.4.", when="nan_literal_operand"),
    Accepted("jaxlib 0.12's XLA:CPU computes a ** 0.5 of a program's one-element array with powf (NaN for a "
             "negative denormal, where its vector code's |sqrt(a)| and the ipu give 0); the same op inside a fused "
             "loop (a slice of a longer array) gives 0 there too, so the ipu keeps the README's rule",
             ("pow_half",), ("float32",), 1, per="any", series="0.12", max_size=1, when="denormal_operand"),
    Accepted("XLA folds an array it computes at compile time whose elements all compare equal into a broadcast "
             "of the first, +0 and -0 alike: bitcast_convert_type of a folded f32 -0 (-jnp.sum of an empty array) "
             "to bf16[2] is [0, 0] on cpu, [0, -0] (the bits) on the ipu", ("bitcast",),
             ("float32", "float16", "bfloat16"), 1, per="any", when="folded"),
    Accepted("XLA folds what it can compute at compile time (an op of constants, a pad of an empty array, which is "
             "all padding value, the indices of an argmax over one element) with host arithmetic, which keeps a "
             "denormal result that its compiled code would flush (1e-40 / 65504 is 1.4e-45 there) and reads a "
             "denormal operand as it is (1e-40 / 0 is inf there, NaN compiled); the front end folds an elementwise "
             "op of constants so too (compiler/fold_constants.py), the rest (a pad, a reduction, an argmax of what "
             "is known) the ipu computes at run time, with the series' flushing",
             ELEMENTWISE_F32 + TRANSCENDENTAL + ("convert",), ("float32", "float16", "bfloat16"), 1, per="denormal",
             when="folded"),
    Accepted("XLA folds a transcendental function of operands it knows at compile time (the entry above) with the "
             "host's libm, which reads a denormal operand as it is: rsqrt of a bf16 1e-40 is 1e20 there, inf "
             "compiled and on the ipu (the value of jax.value_and_grad of rsqrt's sum over a lax.pad that keeps "
             "none of its operand, all 1e-40 padding: fuzz seed 20282001 #7763)",
             TRANSCENDENTAL, ("float32", "float16", "bfloat16"), 1, per="any", when="folded"),
    Accepted("jaxlib 0.12's LLVM computes an f32 fmod by a constant power of two of at least 1 with arithmetic that "
             "reads a denormal dividend as a zero (the front end applies that to splat divisors: "
             "test_denormals.py's fmod cases); an iota divisor is such a constant only in loops LLVM unrolls (a "
             "minor dimension of up to 16 elements, a 1-D array of up to 129: measured; not of 17, 24, 64 or 200), "
             "and the ipu keeps the denormal there, as fmod does (fuzz seed 20282001 #5744, #9508)",
             ("rem",), ("float32",), 1, per="denormal", series="0.12", when="reads_iota"),
    Accepted("jaxlib 0.12's XLA:CPU computes a one-element maximum or minimum against a constant with scalar code "
             "that returns the constant on a tie (max(-0, 1e-40) is +0 there), where its vector loops and the ipu "
             "return x (-0)", ("max", "min"), ("float32",), 1, per="denormal", series="0.12", max_size=1),
    Accepted("jaxlib 0.12's LLVM knows that max(x, c) of a positive constant c is positive and drops the zero "
             "case of what reads it: rsqrt(max(x, 1e-40)) is NaN on cpu (its Newton step on the denormal read as a "
             "zero), inf on the ipu as rsqrt(+0)", ("rsqrt",), ("float32",), 1, per="any", series="0.12",
             when="denormal_bound"),
    Accepted("jaxlib 0.12's XLA:CPU erf rounds differently by an ulp where it is fused with the erf_inv that reads "
             "it, which turns the ulp into anything near +-1 (erf_inv(erf(x)) of f32[129]: erf(3.77) is 1 there, "
             "so inf; 0.99999994 alone and on the ipu, so 3.83)", ("erf",), ("float32",), 1, per="any",
             series="0.12", when="read_by_erf_inv"),
    Accepted("jaxlib 0.4.13's LLVM takes relu's maximum for maxnum, which never returns NaN, and drops the NaN case "
             "of the convert to uint32 that reads it: relu(nan).astype(uint32) is 4294967295 or 2147483648 on cpu "
             "(fuzz seed 20262101 #870, in a branch of lax.switch), 0 (XLA's NaN rule, cpu's own for "
             "nan.astype(uint32)) on the ipu; f16 and bf16 too, which XLA:CPU computes in f32 (an f16 relu of a "
             "vmapped window maximum: fuzz seed 20286811 #47)", ("relu", "max"), ("float32", "float16", "bfloat16"), 1,
             per="any", series="0.4.", when="nan_to_unsigned"),
    Accepted("jaxlib 0.12's XLA:CPU, in a branch of lax.switch in a while loop's body, drops the NaN case of a "
             "reduce_precision with no mantissa bits whose result a convert to uint32 reads: a NaN (0x7fc00123) "
             "becomes inf and 4294967295 there (fuzz seed 20286222 #554), NaN and 0 (XLA's NaN rule) alone, in a "
             "switch or in a loop, and on the ipu", ("reduce_precision",), ("float32",), 1, per="any",
             series="0.12", when="nan_to_unsigned"),
    Accepted("XLA:CPU fuses a pad into the elementwise ops that read it, and LLVM folds them on the padding value "
             "with host arithmetic, which keeps a denormal (max(round(p), p) of a pad with 1e-40 is 1e-40 there); "
             "the ipu computes them at run time, with the series' flushing", ELEMENTWISE_F32,
             ("float32", "float16", "bfloat16"), 1, per="denormal", when="denormal_padding"),
    Accepted("jaxlib 0.12's simplifier moves an elementwise op of a pad and a constant into the pad (1e-40 / pad(x, "
             "0.001) => pad(1e-40 / x, 1e-40 / 0.001)) and folds the new padding value with host arithmetic, which "
             "reads a denormal constant as it is (1e-40 / 0.001 is 1e-37 there; compiled, and on the ipu, the "
             "denormal reads as 0: fuzz seed 20280601 #1086); the ipu computes the padding at run time, with the "
             "series' flushing", ELEMENTWISE_F32, ("float32", "float16", "bfloat16"), 1, per="any", series="0.12",
             when="pad_and_denormal_literal"),
    Accepted("... and a product or quotient of that padding value and an infinity folds to an infinity there (1e-40 "
             "* inf is inf in LLVM's host arithmetic), where the ipu reads the denormal as a zero (0 * inf is NaN)",
             ("mul", "div"), ("float32", "float16", "bfloat16"), 1, per="any", when="denormal_padding"),
    Accepted("... and any other op of that padding value computes there with the denormal as it is (ceil(1e-40) "
             "is 1 in LLVM's host arithmetic, floor(-1e-40) -1, sign(1e-40) 1, sqrt(1e-40) 1e-20), where the ipu "
             "reads it as a zero (fuzz seed 20270301 #8553, 20270501 #5109)", ELEMENTWISE_F32,
             ("float32", "float16", "bfloat16"), 1, per="any", when="denormal_padding"),
    Accepted("LLVM folds arithmetic on a bool converted to a float (a select of 1 and 0) and a constant into a "
             "select of two constants it computes with host arithmetic, denormals read as they are, in some of "
             "XLA:CPU's loops and not in others: 1e-40 / p.astype(f32) is inf where p is false for one element, "
             "NaN for 16 (as on the ipu); p.astype(f32) / 1e-40 is 0 there for 16, NaN on the ipu", ("div",),
             ("float32", "float16", "bfloat16"), 1, per="any", when="converted_bool_operand"),
    Accepted("jaxlib 0.12's XLA:CPU computes atan in vector loops of 64 elements that read a denormal as a zero, and "
             "the rest of an array (all of one under 64 elements, the last n mod 64 of others) with scalar code that "
             "returns a denormal as it is; the ipu reads it as a zero everywhere (README, denormals)", ("atan",),
             ("float32",), 1, per="denormal", series="0.12", when="denormal_operand"),
    # -- found by this fuzzer, to be fixed in the backend (each with a reproducer in the fuzzer's report); the
    #    first entry whose relaxation alone explains a mismatch counts it, so the narrow ones come first
    Accepted("open: jaxlib 0.12's XLA:CPU multiplies long products in another order than the ipu, which follows "
             "jaxlib 0.4.13's (bit for bit with it): the product of 2^23 factors near 1 is 0.93886 on cpu, 0.93788 "
             "on the ipu (both 6% from the exact product)", ("reduce_prod",), ("float32", "complex64"), 1,
             per="any", series="0.12", min_count=33, open=True),
    Accepted("open: jaxlib 0.12's XLA:CPU computes A / broadcast(b) as A * broadcast(1 / b), as the ipu does, where "
             "the quotient has one reader, but as a divide in some of the fusions of one with several ((v / s, "
             "v / s + 1), both branches of a cond reading it): an ulp apart", ("div",), ("float32", "float16"), 2,
             series="0.12", when="read_twice", open=True),
    Accepted("open: the ipu contracts a multiply into the add that reads it (one fused multiply-add) even when the "
             "product has another reader inside a nested function (a vmap, a branch, a loop body), where XLA:CPU "
             "rounds the product: an ulp apart", ("add", "sub"), ("float32", "float16", "bfloat16"), 1,
             when="product_used_twice", open=True),
    Accepted("open: a convolution with lhs dilation (a transposed convolution) and an infinite or NaN kernel "
             "element: XLA:CPU, in both series, skips the holes and the padding or multiplies them as zeros (0 * inf = "
             "NaN) depending on which of its convolution implementations it picks for the shapes (measured: a 1-D "
             "kernel of 2 taps skips, of 3 taps may multiply); the ipu always multiplies them, as StableHLO defines "
             "lhs dilation (zeros inserted)", ("conv",),
             ("float32", "float16", "bfloat16"), 1, per="any", when="kernel_not_finite", open=True),
    Accepted("open: a convolution with rhs (window) dilation and an infinite or NaN input element that falls "
             "between two of a window's dilated taps: XLA:CPU, for some shapes, multiplies it by a zero it puts "
             "between the taps (0 * inf = NaN: a bf16 NCH convolution with rhs_dilation (2,) gives NaN where the ipu "
             "gives -inf, fuzz seed 20287101 #1446); the ipu reads only the elements the taps cover, as StableHLO "
             "defines window dilation (the mirror of the lhs dilation entry above)", ("conv",),
             ("float32", "float16", "bfloat16"), 1, per="any", when="rhs_dilated_input_not_finite", open=True),
    Accepted("open: jaxlib 0.4.13, a divide of jax.nn.softmax, which jax 0.4.13 lowers to a call of exp(x - m) / s: "
             "XLA inlines it and its simplifier's (A / B) / C => A / (B * C) makes softmax(x) / c one divide, an ulp "
             "from the ipu's two (the front end's divide rules do not see into calls)", ("div",),
             ("float32", "float16"), 1, series="0.4.", when="divides_softmax", open=True),
    Accepted("open: jaxlib 0.4.13, f32 sums and products over outer dimensions whose kept minor dimension is 3, 5, 6 "
             "or 7, or 1 under more dimensions (jnp.sum(x, axis=(0, 1)) of f32[3, 7, 5, 1], jnp.prod(x, 0) of "
             "f32[4, 31, 1]), or of an operand with a dimension of 1 (jnp.sum(x, axis=(0, 2)) of f32[8, 33, 1]): "
             "XLA:CPU leaves that loop unvectorised (or reduces each output's few terms with LLVM's "
             "vector.reduce) in another order than the emulator's model of its vector loops; a few ulp of the "
             "scale", ("reduce_sum", "reduce_prod"), ("float32",), 4, per="row", series="0.4.",
             when="minor_unvectorised", open=True),
    Accepted("open: jaxlib 0.4.13, an f32 sum or product over the innermost dimension of a reshape whose rows span "
             "several of its source's dimensions (jnp.sum(x.reshape(16, 6), 1) of f32[4, 2, 3, 4], also through "
             "elementwise ops): XLA:CPU fuses the reshape into the reduce's loop, and LLVM vectorises that loop's "
             "index arithmetic for some shapes (f32[3, 4, 4] as [8, 6]) and folds the row in order for others "
             "(f32[2, 3, 4] as [4, 6]), where the ipu folds it in the lanes of the unfused loop; an ulp or two of the "
             "scale (fuzz seed 20280501 #5831)", ("reduce_sum", "reduce_prod"), ("float32",), 4, per="row",
             series="0.4.", when="reshaped_rows", open=True),
    Accepted("open: jaxlib 0.4.13, an f32 sum or product that XLA:CPU fuses with the gather it reads: LLVM leaves "
             "rows of fewer than 16 terms (but 4 and 8) unvectorised there and adds them in order from the init "
             "value, where the emulator uses its 8-lane model (jnp.sum(x[i], 0) of 6 gathered rows), and so a sum of "
             "all 16 elements of a gathered f32[2, 8] (jnp.take_along_axis: fuzz seed 20271501 #1939)",
             ("reduce_sum", "reduce_prod"), ("float32",), 4, per="row", series="0.4.", max_count=16,
             when="scalar_loop", open=True),
    Accepted("open: XLA:CPU's f32 erf of an argument beyond 3 in magnitude rounds differently in some fusions: with "
             "jaxlib 0.4.13 erf(erfc(jnp.cumsum(v)) + x) at x = 3.4334497 is 2 ulps above erf(x), with jaxlib 0.12 "
             "erf(x + v * 0) is exactly -1 for x below -3.8325 where erf(x) is an ulp off it (its clamp applies in "
             "one of its two codegen paths); the ipu computes erf(x) alike everywhere", ("erf",), ("float32",), 8,
             when="erf_tail", open=True),
    Accepted("open: jaxlib 0.12, a product of a pad and a denormal constant (lax.pad(v, 1e30, ...) * 1e-40): in "
             "XLA:CPU's fused loop the pad is a select of the operand or the padding value, LLVM moves the multiply "
             "into both arms and folds padding value times constant when it compiles, denormals kept (1e-10 on cpu; "
             "the ipu multiplies under denormals-are-zero: 0; fuzz seed 20280201 #4915)", ("mul",), ("float32",), 1,
             per="any", series="0.12", when="reads_pad", open=True),
    Accepted("open: jaxlib 0.4.13, an f32 sum or product of a pad that XLA:CPU fuses into the reduce's loop "
             "(jnp.sum(lax.pad(x, 3.7, [(0, -1, 0), (-2, 0, 1)]), 1) of f32[3, 3]): the loop's bounds checks keep "
             "LLVM from vectorising it, and it adds each output's terms in order from the init value, where the "
             "emulator folds a row of up to 32 in its 8-lane model: an ulp (fuzz seed 20262101 #2976)",
             ("reduce_sum", "reduce_prod"), ("float32",), 4, per="row", series="0.4.", when="reads_pad", open=True),
    Accepted("open: jaxlib 0.4.13, an f32 sum or product of a reduction that XLA:CPU fuses into the reduce's loop "
             "(it fuses a reduce over the minor dimension into its reader, HLO fusion of reduce(reduce(x)): "
             "jnp.sum(jnp.min(jnp.square(x), axis=(1, 2))) of f32[3, 6, 4]): that loop is elemental, not the "
             "vectorised reduce, and adds the terms in order from the init value, where the emulator folds a row of up "
             "to 32 in its 8-lane model, as cpu does for a sum of an array it reads from memory: an ulp (fuzz seed "
             "20262201 #161)", ("reduce_sum", "reduce_prod"), ("float32",), 4, per="row", series="0.4.",
             when="reads_reduce", open=True),
    Accepted("open: jaxlib 0.4.13, an f32 sum or product over several dimensions of a transpose: XLA folds the "
             "transpose into the reduce and keeps the reduced dimensions in the transposed order (jnp.sum(x.T, (0, "
             "2)) of f32[7, 100, 2] is reduce(x, dimensions={2,0}) in its HLO), and its loop nest follows that "
             "order; the emulator folds the source's dimensions in increasing order: an ulp or two on 62 of 100 "
             "outputs (fuzz seed 20270101 #6545)", ("reduce_sum", "reduce_prod"), ("float32",), 4, per="row",
             series="0.4.", when="reads_transpose", open=True),
    Accepted("open: jaxlib 0.4.13, an f32 sum of products that XLA:CPU fuses into the reduce's loop (jnp.sum(x * x, "
             "axis=1) of rows of up to 32 terms): LLVM contracts each product into its lane's add, one fused "
             "multiply-add per term; the emulator rounds the products first (fuzz seed 20261601 #5025: 18% of the "
             "rows of f32[8192, 32] an ulp apart)", ("reduce_sum",), ("float32",), 2, per="row", series="0.4.",
             when="reads_product", open=True),
    Accepted("open: XLA hoists a loop's invariant code out of it (WhileLoopInvariantCodeMotion) and its simplifier "
             "then sees a hoisted divide of a quotient computed before the loop: (1 / x) / x in a lax.fori_loop body "
             "is 1 / (x * x) on cpu; the front end's divide rules do not see through the loop's invariant operands: "
             "an ulp of the quotient, which jnp.fmod of it turns into anything (fuzz seed 20261601 #9554)",
             ("div",), ("float32", "float16"), 1, per="any", when="divides_quotient", open=True),
    Accepted("open: ... and the same for a divide, in a loop's body, by a power, quotient or reciprocal computed "
             "before the loop: 0.001 / v of v = x ** -2 in a lax.while_loop body is 0.001 * (x * x) on cpu once "
             "hoisted (A / pow(B, C) => A * pow(B, -C); fuzz seed 20271601 #3693)", ("div",), ("float32", "float16"), 1,
             per="any", when="divides_hoisted_power", open=True),
    Accepted("open: ... and the same for a reciprocal, in a loop's body, of a power or quotient computed before the "
             "loop: jnp.reciprocal(x ** -2) in a lax.scan body is x * x on cpu (1 / (1 / (x * x)) simplified), an "
             "ulp from the ipu's twice rounded quotient (fuzz seed 20270901 #1717)", ("reciprocal",),
             ("float32", "float16"), 1, per="any", when="reciprocal_of_quotient_in_loop", open=True),
    Accepted("open: jaxlib 0.12, a maximum or minimum of jnp.nextafter(a, b) and b: XLA expands nextafter with a "
             "select that gives b where a == b, and LLVM folds the extremum into that select as it does for "
             "jnp.where (max(select(p, A, B), A) => select(p, A, max(B, A))), so there the result is b itself, a "
             "denormal kept, where the emulator computes the extremum and reads it as zero (fuzz seed 20261601 "
             "#5802)", ("max", "min"), ("float32",), 1, per="denormal", series="0.12", when="extremum_of_nextafter",
             open=True),
    Accepted("open: a gradient that cancels through a loop of one trip (d(b / b)/db in a lax.fori_loop(0, 1, ...), "
             "analytically 0): XLA's while-loop simplifier removes the loop, as the front end now does, but cpu "
             "still keeps a product's rounding error in the backward pass and the ipu 0, which later steps amplify "
             "to anything (arcsin of it: NaN on cpu; fuzz seed 20261601 #2387). The other cases of such loops (an "
             "add of the loop's product after it: 20271601 #7152; a converted predicate carried through it: "
             "20280101 #7096, 20282401 #8139) give cpu's bits since the loop is removed",
             ("grad",), ("float32",), 1, per="any", when="one_trip_loop", open=True),
    Accepted("open: jaxlib 0.4.13, a subtract of jnp.clip(v, 0.0, 0.0): LLVM folds XLA:CPU's maximum and minimum of "
             "the one constant into v where v is NaN and 0 elsewhere, and x - 0 into x, so a denormal x stays as it "
             "is on cpu, where the ipu subtracts under denormals-are-zero (1.8e-40 on cpu, 0 on the ipu: fuzz seed "
             "20280101 #4951; jnp.clip(v, 0.0, 1.0) is flushed on both)", ("sub",), ("float32",), 1,
             per="denormal", series="0.4.", when="subtracts_clip_to_zero", open=True),
    Accepted("open: jaxlib 0.12, a float bitcast from integers and read as a bool "
             "(lax.bitcast_convert_type(i, jnp.bfloat16).astype(bool)): LLVM folds the compare with zero into an "
             "integer test of the bits, so a denormal is True on cpu, where the emulator compares the float with "
             "denormals read as zeros, False, as cpu does for a bf16 denormal computed otherwise (fuzz seed 20262101 "
             "#92)", ("bitcast",), ("float32", "float16", "bfloat16"), 1, per="any", series="0.12",
             when="bitcast_to_bool", open=True),
    Accepted("open: the gradient of a softmax (of a log_softmax, a logsumexp): its backward pass sums the products "
             "of the cotangent and the softmax, which XLA:CPU fuses into the reduce's loop and contracts into its "
             "adds (one fused multiply-add per term, as in the sum of products entry, in both series), where the "
             "emulator rounds the products first; where the gradient cancels (of jnp.sum(jax.nn.softmax(x, 1)), 0 "
             "analytically), cpu's sum is 1 / S exactly and the ipu's an ulp off: 6e-8 where cpu gives 0 (fuzz "
             "seed 20261901 #3391)",
             ("grad",), ("float32",), 1, per="any", when="softmax_in_grad", open=True),
    Accepted("open: jaxlib 0.4.13, an f32 product of quotients that XLA:CPU fuses into the reduce's loop: LLVM's "
             "InstCombine sinks the divide under the reassociable multiply, acc * (a / b) => (acc * a) / b, in "
             "each step; the emulator multiplies the quotients (jnp.prod(x / y, axis=(0, 1)) of f32[4, 2])",
             ("reduce_prod",), ("float32",), 4, per="row", series="0.4.", when="reads_quotient", open=True),
    Accepted("open: jaxlib 0.4.13's XLA:CPU calls Eigen's own unfused matmul kernel for dots that are not a gemv "
             "and whose result has at most 8 columns or 3 rows (f32[250, 7] @ f32[7, 8]): each product rounds before "
             "it is added, where the emulator fuses it (one multiply-add), so an overflowing product meets an "
             "infinite sum as inf + -inf = NaN on cpu and -inf on the ipu, and what reads the dot (a sort) may "
             "move by anything", ("dot",), ("float32",), 8, per="any", series="0.4.", when="operand_not_finite",
             open=True),
    Accepted("open: jaxlib 0.4.13, jax.nn.relu(x) and a jnp.clip of the same x with a lower bound of 0: XLA's CSE "
             "merges relu's max(x, 0) with the clip's max(0, x) (which it sees through the clip's call, its constant "
             "on the left), and that operand order gives relu(-0) = +0 (fuzz seed 20270301 #4897); the emulator "
             "computes relu in its own order (-0)", ("relu",), ("float32",), 1, per="denormal", series="0.4.",
             when="beside_clamp", open=True),
    Accepted("a bitcast of a float that an inexact op (one this table gives ulps) computed: a difference the "
             "table allows moves its bits, and what is computed from them (an int8's remainder, an argmax) by "
             "anything; the wobbled cpu runs move each such op by its full ulps, up, down or at random, and need "
             "not land on the ipu's value (jaxlib 0.4.13's asinh an ulp from cpu's under a bitcast to int8: fuzz "
             "seed 20270401 #5976)", ("bitcast",), DTYPES_ALL, 0, per="any", when="reads_inexact"),
    Accepted("open: jaxlib 0.12, an f16 log1p or cbrt in a while loop's body (lax.fori_loop, lax.scan): XLA:CPU "
             "computes them there as an expansion with parts rounded to f16, 1 to 2 ulp from the rounded result "
             "(log1p on 394 and cbrt on 167 of 2,000 f16 values in [0.05, 3]); its tan and rsqrt there, sin(x) / "
             "cos(x) and 1 / sqrt(x) with each part rounded, the ipu computes as it does (fuzz seed 20270901 "
             "#1178; 20270501 #728)", ("log1p", "cbrt"), ("float16",), 2, series="0.12", when="in_loop_body",
             open=True),
    Accepted("open: jaxlib 0.4.13, a select of A op B and A (jnp.where(p, a - b, a), jnp.where(p, a * b, a)) in "
             "a loop LLVM leaves unvectorised (a gather's: jnp.take of it; an array of one element): there it folds "
             "the select into A op select(p, B, identity), which flushes a denormal A where p is false; its vector "
             "loops, and the ipu, select A as it is (measured: jnp.take(jnp.where(p, v - x, v), i, axis=1, "
             "mode='fill') of a 2.9e-39, fuzz seed 20271001 #2582; f32[1] jnp.where(p, a * b, a), 20271101 #1076; "
             "jnp.take_along_axis of jnp.where(p, a / b, a) with a 2.9e-39, 20287111 #954)",
             ("select",), ("float32",), 1, per="denormal", series="0.4.", when="difference_select_in_scalar_loop",
             open=True),
    Accepted("jaxlib 0.4.13's XLA:CPU computes complex sqrt in polar form, sqrt|z| (cos(t/2) + i sin(t/2)) with "
             "t = atan2(b, a): near the negative real axis t/2 rounds to f32's pi/2 and its cosine is -4.4e-8, so the "
             "real part is -4.4e-8 sqrt|z| whatever its value (sqrt(-4 + 1e-7j) has real part -8.7e-8 there, "
             "2.5e-8 in numpy, jaxlib 0.12 and on the ipu, which computes C99's csqrt; -8.1e11 for -3.4e38 + "
             "0.33j, whose tanh then differs by anything: fuzz seed 20285421 #1365) (README, complex sqrt)",
             ("complex_sqrt",), ("complex64",), 0, per="any", series="0.4.", when="near_negative_real_axis"),
    Accepted("open: jaxlib 0.12, complex tanh of a value with an imaginary part of 2^23 or more in magnitude, near "
             "a pole: the ipu's real part is a few millionths from cpu's (tanh(0.0187 - 2.4e12j) is 50.58376 on the "
             "ipu, 50.58393 on cpu, which is the exact value in f64; fuzz seed 20270901 #5247)", ("complex_tanh",),
             ("complex64",), 64, per="any", series="0.12", when="huge_imaginary_operand", open=True),
    Accepted("open: jaxlib 0.12, lax.top_k of jnp.where(jnp.isnan(y), nan, y) where y holds x86's negative NaN "
             "(sqrt of a negative): fused into the top_k, XLA:CPU drops the select and orders y's negative NaN "
             "below everything (index of a 0 chosen); the select's positive NaN, which the ipu orders and cpu writes "
             "where the select is an output, is above everything (index of the NaN chosen). With a NaN input "
             "instead, cpu keeps the select (fuzz seed 20271201 #737)", ("top_k",), ("float32", "float16",
             "bfloat16"), 1, per="any", series="0.12", when="negative_nan_operand", open=True),
    Accepted("open: a product with a float iota along an outer dimension: XLA:CPU's loop over that dimension "
             "is unrolled where it is short, the iota's values become constants there, and LLVM folds 1.0 * x => x, "
             "so a denormal x stays where the iota is 1 (broadcasted_iota(f32, (4, 2, 6), 1) * x on both series; "
             "along dimension 0 of size 4 only jaxlib 0.12 unrolls; never along the minor dimension, which is "
             "vectorised); the emulator multiplies (fuzz seed 20270301 #1997)",
             ("mul", "div"), ("float32",), 1, per="denormal", when="reads_iota", open=True),
    Accepted("open: jaxlib 0.4.13, a cumulative or windowed maximum or minimum of a value XLA:CPU computes in the "
             "same loop (jnp.abs(x), x * x * x, -(x * x)): where a window holds one element and padding, LLVM folds "
             "the compare with the padding away and returns the element as it is, a denormal kept and -0 kept (row "
             "0 of lax.cummax(jnp.abs(x), 0), of lax.cummin(x * 1e-30, 0) for x = -1e-20; of an argument read from "
             "memory it is flushed, +0 for -0, as on the ipu); the emulator's reduce_window reads denormals as zeros "
             "and gives +0 there (fuzz seed 20270301 #782, 20270401 #53)", ("cummax", "window_max"), ("float32",), 1,
             per="denormal", series="0.4.", when="reads_elementwise", open=True),
    Accepted("open: jaxlib 0.12's XLA:CPU dot, where products overflow to infinities of both signs: cpu's kernel "
             "for the shape decides between NaN (inf + -inf of rounded products, or of two lanes) and an infinity "
             "(the second product fused into the first's overflowed sum), and the emulator always fuses in k order "
             "(measured with -2 * 3.4e38 and 1.5 * 3.4e38 at k and k + gap: f32[18, 64] @ f32[64, 5] and [64, 8] "
             "give NaN at every gap, [64, 64] -inf; f32[1, 64] @ f32[64, 1] NaN at gaps 1, 8, 16, f32[2, 64] @ "
             "f32[64, 1] only at gap 1; fuzz seed 20270301 #1110), and what reads the dot (a sort, an argmin) may "
             "move by anything; so with bf16 and f16 operands, whose products are summed in f32 (bf16[6, 4, 5] @ "
             "bf16[6, 5, 16] with 3.4e38 and -3.4e38 in a row: NaN on cpu, -inf on the ipu, fuzz seed 20285522 "
             "#346)", ("dot",), ("float32", "bfloat16", "float16"), 8, per="any", series="0.12",
             when="products_overflow", open=True),
    Accepted("open: jaxlib 0.12's XLA:CPU adds a window's terms in an order that depends on the shape and the "
             "padding, which the emulator does not reproduce (probed with M, -M and 1 placed in a window: f32[6, 4] "
             "window 3x2 padded 1 on each side of dim 1 adds column by column, unpadded row by row; f32[4, 7, 2] "
             "window 3x4x2 adds the window's rows 0, 2, 1, 3); the emulator adds in row-major window order. The sums "
             "stay within window_sum's ulps of their scale, but where terms cancel, a sort by those sums may order "
             "near-equal keys differently and move its payload (sorting expm1 of bf16 sums of cbrt of -3.4e38 and "
             "3.4e38)",
             ("sort_multi",), DTYPES_ALL, 0, per="any", series="0.12", when="keys_from_window_sum", open=True),
    Accepted("open: jaxlib 0.12 on an AVX-512 host, bf16 maxima and minima of denormals in a reduce or a scatter: "
             "neither of the emulator's two rules (the elementwise op's, which keeps the operand's bits, and "
             "reduce_window's, which reads denormals as zeros) is cpu's in every case there (jnp.max of the pair "
             "(2d, d) is 0 on cpu, of (d, -d) is -d; jnp.min over 3 rows keeps none, .at[].max keeps one: fuzz seed "
             "20270101 #6188, #5924); what follows may differ by anything", ("reduce_max", "argmax", "scatter_max",
                                                                              "scatter_min"),
             ("bfloat16",), 1, per="any", series="0.12", cpu_has="avx512f", when="denormal_operand", open=True),
    Accepted("open: XLA:CPU keeps a computed bf16 exponent in f32 inside the loop of a power it fuses it into "
             "(xla_allow_excess_precision): of a negative base, a power whose exponent the ipu rounds to a bf16 "
             "integer is finite there and NaN on cpu, or the reverse (jnp.power(x, jax.nn.log_softmax(x, axis=0)) "
             "of bf16[8, 250])", ("pow",), ("bfloat16",), 1, per="any", when="negative_base_computed_exponent",
             open=True),
    Accepted("XLA's simplifier proves some computed predicates constant before its a * convert(p) => select(p, a, "
             "0) rule (an iota over a dimension of one is zeros, an integer times zero is zero: iota < iota * x is "
             "false), folds the convert to a constant 0 or 1, and multiplies by it: inf * 0 is NaN there; the front "
             "end applies the rule to the predicate as computed (0, as on cpu where it cannot fold the predicate): "
             "the gradient of a / roll(a) at a = (iota < iota * x).astype(f32)", ("grad", "mul"),
             ("float32", "float16"), 1, per="any", when="uniform_converted_bool_operand"),
    Accepted("open: XLA:CPU contracts the last product of its f32 erf_inv expansion (x * p(w)) into an add or "
             "subtract it fuses with it, one fused multiply-add (lax.erf_inv(x) + 3.0 is an ulp from erf_inv(x) then "
             "+ 3.0 on 3% of inputs, - 1.0 on 10%: fuzz seed 20271601 #25); the ipu does so with jaxlib 0.4.13 where "
             "erf_inv has one reader, but not where XLA duplicates it into several readers' loops, and jaxlib 0.12's "
             "erf_inv + c differs on 5% of inputs either way", ("add", "sub"), ("float32",), 1,
             when="add_of_erf_inv", open=True),
    Accepted("open: a one-window scatter-add onto a product (jnp.square(v).at[i].add(u)), or a one-window "
             "scatter-multiply (v.at[i].mul(u)), read by an add or subtract: XLA makes the scatter a "
             "dynamic-update-slice and its fused loop contracts the product (outside the window, or the window's "
             "v * u) into the reader (one fused multiply-add), both series; the ipu rounds the product (fuzz seed "
             "20271601 #9859; v.at[-5].mul(x) + v: 91 of 258 window elements apart, by many ulps where the sum "
             "cancels, seed 20272201 #2512)",
             ("add", "sub"), ("float32",), 1, per="any", when="reads_scatter_onto_product", open=True),
    Accepted("open: jaxlib 0.12's bf16 maximum and minimum on this AVX-512 host (no AVX512-FP16) read denormals as "
             "zeros for arrays of up to 33 elements and in some fusions (-jnp.maximum(v, s) of bf16[62, 3, 3, 6]: "
             "fuzz seed 20271601 #3483), and keep them otherwise (jnp.maximum of 64 elements); the ipu keeps them "
             "(ieeeAvx512)", ("max", "min"), ("bfloat16",), 1, per="denormal", series="0.12",
             when="denormal_operand", open=True),
    Accepted("open: jaxlib 0.12, a windowed maximum or minimum whose windows hold one element (lax.reduce_window "
             "with window (1, 1) and strides (2, 1); lax.cummax, which jaxlib 0.12 lowers to a reduce_window whose "
             "first window holds one element and padding) in a loop's body: XLA:CPU passes a denormal on, the ipu "
             "reads it as zero there (fuzz seed 20271601 #2474; lax.cummax(v, axis=1) in lax.fori_loop(0, 2, ...) "
             "keeps v[72, 0] = 1.8e-40, which it flushes outside the loop and in a loop of one trip: 20285422 "
             "#2270)", ("window_max", "cummax"), ("float32", "bfloat16"), 1,
             per="denormal", series="0.12", when="denormal_operand", open=True),
    Accepted("open: jaxlib 0.4.13's XLA constant-folds a transcendental of constants (of an iota: lax.lgamma of "
             "broadcasted_iota) with its HLO evaluator, whose lgamma is not its compiled code's: lgamma(2) is "
             "4.77e-7 folded and 0 computed, lgamma(3) 0.69314766 and 0.69314742 (fuzz seed 20271701 #1184, #1564); "
             "the ipu computes the compiled code's", ("lgamma",), ("float32", "bfloat16", "float16"), 1, per="any",
             series="0.4.", when="reads_iota", open=True),
    Accepted("open: a product read by an add that the program returns and by a second add of that sum "
             "(v2 = x ** 2.0; v4 = v2 + x; (v2 + v4, v4)): XLA computes the returned sum in a loop of its own and "
             "duplicates the product into both, two fused multiply-adds (cpu's v2 + v4 is fma(x, x, v4) on every "
             "element, both series), where the ipu contracts only the first (fuzz seed 20271701 #3002)", ("add",),
             ("float32",), 1, per="any", when="reads_product", open=True),
    Accepted("open: jaxlib 0.4.13, an f16 minimum or maximum of an iota over a dimension of one (zeros: XLA folds it "
             "to a constant) and x: XLA:CPU computes it as a minimum with a constant operand, whose -0 and +0 order "
             "the ipu applies to splat constants only (min(iota, -0) is -0 on cpu, +0 on the ipu: fuzz seed "
             "20271701 #4249)", ("min", "max"), ("float16", "float32", "bfloat16"), 1, per="denormal",
             series="0.4.", when="reads_iota", open=True),
    Accepted("a sine, cosine or tangent of a value the table lets move by its ulps, where one ulp of that value is "
             "half a radian or more (|x| >= 2^22 in f32, 2^9 in f16, 2^6 in bf16): a move of an ulp or two turns "
             "the angle by more than the wobbled cpu runs sample, so the result may be anything in its range (tan "
             "of a sum of 100 int32s converted to f32, -1.3102060e10 on cpu and 2 ulp off on the ipu, within "
             "reduce_sum's ulps: 3.68 and -18.8; fuzz seed 20282401 #3912)", ("sin", "cos", "tan"),
             ("float32", "float16", "bfloat16"), 1, per="any", when="inexact_huge_angle"),
    Accepted("an erf_inv (NaN outside [-1, 1]) of a value the table lets move by its ulps (a sum of cancelling f32 "
             "terms: 2.0 on cpu, 0.0 on the ipu, both within a few ulp of the sum's scale): NaN on one side and a "
             "number on the other (fuzz seed 20271801 #7048)", ("erf_inv",), ("float32", "float16", "bfloat16"), 1,
             per="any", when="reads_inexact"),
    Accepted("open: a bf16 value that XLA:CPU keeps in f32 between ops (the excess-precision entry below) converted "
             "to an integer: a chain as steep as tan -> sinh -> sin -> digamma moves by far more than the bf16 ulps "
             "the rounding between ops makes, and the integer by anything (astype(jnp.uint8): 0 on cpu, 11 on the "
             "ipu; fuzz seed 20271701 #7179)", ("convert",), ("bfloat16",), 1, per="any", when="reads_inexact",
             open=True),
    Accepted("open: jaxlib 0.12, an f16 divide by jnp.repeat of a value inside a vmap (a broadcast XLA reshapes): "
             "its simplifier's A / broadcast(B) => A * broadcast(1 / B) applies there and the front end's divide "
             "rules do not see through that reshape (-18.453 on cpu, -18.469 on the ipu: fuzz seed 20271801 #6570)",
             ("div",), ("float16", "float32"), 1, per="any", series="0.12", when="divides_broadcast", open=True),
    Accepted("open: jaxlib 0.12, a minimum or maximum of jnp.where(p, a, b) and a: XLA:CPU computes the extremum "
             "(a denormal read as zero), the ipu passes a through (fuzz seed 20271801 #7529)", ("min", "max"),
             ("float32", "float16", "bfloat16"), 1, per="denormal", series="0.12", when="denormal_operand",
             open=True),
    Accepted("open: jaxlib 0.12, f16 rsqrt (and tan) in a lax.fori_loop(0, 1, ...): XLA removes a loop of one trip, "
             "so its body's rsqrt rounds once as outside loops, where the front end writes it as 1 / sqrt(x) rounded "
             "per part as in loops that stay (fuzz seed 20271801 #9477)", ("rsqrt", "tan", "nextafter", "mul"),
             ("float16",), 1, per="any", series="0.12", when="in_loop_body", open=True),
    Accepted("open: jaxlib 0.4.13, a jnp.where read by a lax.pad with interior padding: XLA:CPU fuses the select "
             "into the pad's loop, which flushes the denormals the select passes on (pad(where(p, v / x, v), inf, "
             "[(2, 0, 2), (0, 0, 1)]) keeps none of 8 denormal v on cpu; without interior padding, or a pad of v "
             "alone, keeps all 8, as the ipu does everywhere: fuzz seed 20272301 #374)", ("select",), ("float32",), 1,
             per="denormal", series="0.4.", when="read_by_interior_pad", open=True),
    Accepted("open: a bf16 erf_inv of a value XLA:CPU keeps in f32 (the excess-precision entry below): near 1 in "
             "magnitude, the rounding to bf16 that the ipu applies and cpu skips moves the argument onto 1 and the "
             "result to an infinity (bf16 tanh(3.92) is 1.0 on the ipu, 0.99921 in cpu's f32: erf_inv gives inf "
             "against 2.3), and what follows by anything (a window sum of inf and -inf is NaN; with "
             "--xla_allow_excess_precision=false cpu agrees: fuzz seed 20272201 #8665)", ("erf_inv",), ("bfloat16",),
             1, per="any", when="reads_elementwise", open=True),
    Accepted("open: a product (or a divide XLA writes as one, by a broadcast scalar) that an add or subtract reads "
             "through a jnp.pad of mode 'wrap', 'reflect' or 'symmetric' (a concatenate of slices of it): XLA fuses "
             "the pieces into the reader's loop and contracts the product into it there (x30 - jnp.pad(x1 / x27, "
             "[(1, 0)], mode='wrap'): fma(-x1, 1 / x27, x30), seed 20272201 #8892); the front end moves products "
             "through chains of single moves only (passes/contract_through_moves.py)", ("add", "sub"), ("float32",),
             1, when="reads_product_through_mirror_pad", open=True),
    Accepted("open: a softmax or log_softmax of a product (jax.nn.softmax(x ** 2)): XLA:CPU fuses the product into "
             "the loops of the max, the subtract and the sum by shapes of its own, and contracts x * x - max into a "
             "fused multiply-add in some of them, which the front end does not follow: the exact square minus the "
             "rounded max is its rounding error, not 0, and exp of it can overflow (0.12: 1.0 on cpu, NaN on the "
             "ipu for a row of f32[8, 8] whose max is 1.46e29, while for f32[1, 8] cpu gives NaN too: fuzz seed "
             "20272801 #8731; 0.4.13: 250 ulps of log_softmax(square(x), axis=1) near 0 in f32[4, 7, 2, 1], fuzz "
             "seed 20272701 #9120)", ("softmax", "log_softmax"), ("float32",), 1, per="any", when="reads_product",
             open=True),
    Accepted("open: jaxlib 0.4.13 on an AVX-512 host, jnp.where(p, x ** 3, x) of a denormal x: LLVM's fold "
             "select(p, X * Y, X) => X * select(p, Y, 1) (the select-fold entry) stays in XLA:CPU's scalar code "
             "for some elements of a vector loop (2 of 125 of f32[5, 5, 5]), which flushes x there (-0 on cpu; the "
             "ipu, on this host, keeps x: fuzz seed 20272701 #4267)", ("select",), ("float32",), 1,
             per="denormal", series="0.4.", cpu_has="avx512f", when="selects_product", open=True),
    Accepted("open: jaxlib 0.12, an argmax or argmin of jnp.power(x, y) with a denormal y: XLA:CPU fuses the power "
             "into the reduction's loop, which reads y as it is (pow(0, 1.8e-40) is 0 there), where cpu's own power "
             "and the ipu read it as a zero (1): a tie moves the index (fuzz seed 20272801 #6159)", ("argmax",),
             ("float32", "float16", "bfloat16"), 1, per="any", series="0.12", when="reads_power", open=True),
    Accepted("open: jaxlib 0.12, an f16 divide of two values a lax.scan body captures (sigmoid(x) / s): XLA hoists "
             "it out of the loop and rewrites it there; an f16 ulp on a few elements (4 of 384: -0.05322 on the "
             "ipu, -0.05325 on cpu, fuzz seed 20272801 #6164)", ("div",), ("float16",), 1, series="0.12",
             when="in_loop_body", open=True),
    Accepted("open: jaxlib 0.4.13, f32 denormals converted to bool (astype(jnp.bool_), x != 0): XLA:CPU's loop "
             "reads some as nonzero (3 of 3 in f32[5, 2, 4] made by bitcasting the negation of a u32 that another "
             "op reads too, fuzz seed 20273101 #1058), while alone (bitcast then astype of f32[8] to f32[70]) it "
             "reads every one as zero, as the ipu does", ("convert",), ("float32",), 1, per="any", series="0.4.",
             when="denormal_operand", open=True),
    Accepted("open: jaxlib 0.12, jnp.isnan of x ** 0.5 where nothing else reads the power: LLVM folds isnan(sqrt(x)) "
             "into x < 0 in XLA:CPU's fused loop and reads a negative denormal x as it is (True on cpu), where the "
             "power itself is +0 there and on the ipu (False: fuzz seed 20281601 #252, x = -7.3e-40)", ("isnan",),
             ("float32", "float16", "bfloat16"), 1, per="any", series="0.12", when="reads_root", open=True),
    # -- broad ones last
    Accepted("open: XLA:CPU computes arrays of rank 2 and more, arrays of under 8 elements and values it fuses into "
             "a reduction's loop with other code than long vectors, and there its approximations can round "
             "differently by an ulp (seen: jaxlib 0.4.13 exp2 and erf; jaxlib 0.12 exp2, logistic, tanh, tan, atan, "
             "erf_inv; jaxlib 0.12 atan(atan(x ** 3)) in the scalar tail of its 64-element loops; jaxlib 0.4.13 "
             "log_softmax over the first axis of f32[3, 1]); the ipu gives the long "
             "vectors' bits everywhere (the README names only the denormals of arrays of 2 to 7 elements)",
             XLA_APPROXIMATIONS + ("softmax", "log_softmax", "logsumexp"), ("float32",), 1, when="unvectorised",
             open=True),
    Accepted("open: jaxlib 0.12's XLA:CPU computes the last n mod 8 elements of an f32 tanh over more than 8 in its "
             "loop's epilogue, and where that remainder is 2 or 4 (narrower vectors) rounds some values an ulp below "
             "its long vectors' result: tanh(3.5) is 0x3f7f8897 in f32[8] and in the first 8 of f32[10], 0x3f7f8896 "
             "in the last 2 of f32[10], [12], ..., [250], where remainders of 1, 3, 5, 6 or 7 agree (fuzz seed "
             "20285512 #379); the ipu gives the long vectors' bits everywhere", ("tanh",), ("float32",), 1,
             series="0.12", when="epilogue_of_2_or_4", open=True),
    Accepted("open: XLA:CPU's bf16 arithmetic on this AVX-512 host reads some bf16 denormals and signed zeros "
             "otherwise than the emulator, and keeps some bf16 values in f32 where moves stand between an op and its "
             "convert to f32, or in the dots jaxlib 0.12 computes in its own loops (small ones; larger go to a "
             "library that reads bf16): 1e-40 / x of a bf16 zero x is inf on cpu, NaN here; a bf16 nextafter's "
             "denormal under a scatter is flushed there; max(x + pad(v, -0), pad(v, -0)) keeps -0 here (fuzz seed "
             "20281201 #4162, #4732, #5094); jaxlib 0.4.13 reads 3 of 36 elements of jnp.roll(1 / x, 2, "
             "axis=1).astype(f32) unrounded, flushes a bf16 denormal maximum converted to f32, and gives -0 for x + "
             "min(zeros) where XLA folds the min (fuzz seed 20281701 #754, #962, #782). The excess precision "
             "XLA:CPU applies to a bf16 op read by a convert to f32, by the f32 expansions of erf, erfc, cosh, sinh, "
             "lgamma, digamma and erf_inv, across calls and (jaxlib 0.4.13) by dots with an f32 result, the front "
             "end applies (rules/excess_precision.py): 35 of the 38 programs of seed 20281201 and 41 of 41 of seed "
             "20281101 that this entry took in 10,000 pass without it",
             ELEMENTWISE_F32 + TRANSCENDENTAL + SCANS_AND_WINDOWS + ("reduce_sum", "reduce_prod", "dot", "conv"),
             ("bfloat16",), 1, open=True),
    Accepted("open: jaxlib 0.12's sums and products do not always give XLA:CPU's bits (YNNPACK's order depends on "
             "the number of rows); they agree to a few ulp of their scale",
             ("reduce_sum", "reduce_prod", "softmax", "log_softmax", "logsumexp"),
             ("float32", "complex64", "float16", "bfloat16"), 4, per="row", series="0.12", open=True),
    Accepted("open: jaxlib 0.4.13's f16, bf16 and complex64 sums and products do not always give XLA:CPU's bits "
             "(its f32 ones do: README, reductions); they agree to a few ulp of their scale",
             ("reduce_sum", "reduce_prod", "softmax", "log_softmax", "logsumexp"),
             ("complex64", "float16", "bfloat16"), 4, per="row", series="0.4.", open=True),
]


def _not_finite(values: Sequence) -> bool:
    import numpy as np

    return any(not np.all(np.isfinite(np.asarray(v, np.float32))) for v in values)


def _rhs_dilated(step) -> bool:  # noqa: ANN001
    """A convolution step with a window (rhs) dilation above 1 (its source's rhs_dilation=(...))."""
    import re

    found = re.search(r"rhs_dilation=\(([^)]*)\)", step.expr)
    return bool(found) and any(int(d) > 1 for d in found.group(1).replace(" ", "").split(",") if d)


def _products_overflow(values: Sequence) -> bool:
    """Some product of an element of the first operand and one of the second may overflow f32."""
    import numpy as np

    a, b = (np.abs(np.asarray(v, np.float64)) for v in values[:2])
    return bool(a.size and b.size and np.nanmax(a) * np.nanmax(b) > np.finfo(np.float32).max)


def _nan(values: Sequence) -> bool:
    import numpy as np

    return any(np.isnan(np.asarray(v, np.float32)).any() for v in values)


def _negative_nan_operand(values: Sequence) -> bool:
    """An operand holds a NaN with its sign bit set (x86's default NaN: sqrt(-1), 0 * inf)."""
    import numpy as np

    for v in values:
        a = np.asarray(v)
        if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
            f = a.astype(np.float32)
            if (np.isnan(f) & np.signbit(f)).any():
                return True
    return False


def _huge_imaginary_operand(values: Sequence) -> bool:
    import numpy as np

    """An operand (a complex one's imaginary part, or the parts lax.complex builds it of) of 2^23 or more."""
    parts = [np.imag(np.asarray(v)) if np.iscomplexobj(v) else np.asarray(v, np.float64) for v in values]
    return any((np.abs(p) >= 2.0 ** 23).any() for p in parts)


def _near_negative_real_axis(values: Sequence) -> bool:
    """A complex operand (or the real and imaginary parts lax.complex builds it of) with an element whose real part
    is negative and its imaginary part below 2^-10 of it in magnitude."""
    import numpy as np

    vs = [np.asarray(v) for v in values]
    z = vs[0] if np.iscomplexobj(vs[0]) else (np.asarray(vs[0], np.float64) + 1j * np.asarray(vs[1], np.float64)
                                               if len(vs) == 2 else None)
    if z is None:
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.any((z.real < 0) & (np.abs(z.imag) <= np.abs(z.real) * 2.0 ** -10)))


def _denormal_operand(values: Sequence) -> bool:
    import numpy as np

    for v in values:
        a = np.abs(np.asarray(v, np.float32))
        if ((a > 0) & (a < 1.1754944e-38)).any():
            return True
    return False


def _product_used_twice(step, program, values) -> bool:  # noqa: ANN001
    """An add or subtract of a product (x ** 2 and jnp.square included, which are x * x; or a quotient by a constant)
    that another step, nested ones included, or the program's result also reads."""
    producers = {o.name: s for s in program.ops() for o in s.outs}
    readers: Dict[str, int] = {}
    for s in program.ops():
        for r in set(s.reads):
            readers[r] = readers.get(r, 0) + 1
    for r in program.outputs:
        readers[r] = readers.get(r, 0) + 1
    return any(r in producers and producers[r].op in ("mul", "div", "pow_2", "square") and readers.get(r, 0) > 1
               for r in step.reads)


def _read_twice(step, program, values) -> bool:  # noqa: ANN001
    """The step's result has more than one reader (steps, nested ones included, and the program's result)."""
    name = step.outs[0].name
    return sum(name in s.reads for s in program.ops()) + program.outputs.count(name) > 1


def _zero_by_zero(values: Sequence) -> bool:
    import numpy as np

    a, b = (np.asarray(v) for v in values()[:2])
    return bool(np.any((a == 0) & (b == 0)))


REDUCING = ("reduce_sum", "reduce_prod", "reduce_max", "argmax", "cumsum", "cumprod", "cummax", "cumlogsumexp",
            "softmax", "log_softmax", "logsumexp", "window_sum", "window_mul", "window_max", "dot", "conv")


def _unvectorised(step, program, values) -> bool:  # noqa: ANN001
    """A result of fewer than 8 elements or of rank 2 and more, or one a reduction reads (XLA:CPU fuses it into
    the reduction's loop); an atan with a scalar tail (jaxlib 0.12 computes atan in vector loops of 64 elements and
    the last n mod 64 with scalar code: atan(atan(x ** 3)) of f32[31] is 1 to 3 ulp off there, not of f32[4096];
    fuzz seed 20282001 #8362)."""
    if step.size < 8 or max(len(o.shape) for o in step.outs) >= 2:
        return True
    if step.op == "atan" and step.size % 64:
        return True
    names = {o.name for o in step.outs}
    return any(s.op in REDUCING and names & set(s.reads) for s in program.ops())


def _folded(step, program, values) -> bool:  # noqa: ANN001
    """Every operand of the step is known at compile time: computed from constants alone (no input), a pad of an
    empty array or one whose negative padding cuts away every element of its operand counting as its padding value,
    what reads only empty arrays (a reduction of one: its init value) and the indices of a top_k or argmax over an
    axis of one element as zeros; a nested function's parameter (grad's, vmap's) is what the step that calls it
    passes there (fuzz seed 20282001 #7763: the value of rsqrt's sum over lax.pad(v, bf16(1e-40), config) that
    keeps none of v)."""
    producers = {o.name: s for s in program.ops() for o in s.outs}
    passed = {p.name: caller.reads[i] for caller in program.ops() for b in caller.blocks
              for i, p in enumerate(b.params) if i < len(caller.reads)}
    known: Dict[str, bool] = {}

    def all_padding(producer) -> bool:  # noqa: ANN001 - a lax.pad whose result holds none of its operand
        if producer.op != "pad" or not producer.expr.startswith("lax.pad("):
            return False
        source = program.var(producer.reads[0])
        if source.size == 0:
            return True
        config = ast.literal_eval(producer.expr[producer.expr.rindex("["):-1])
        for n, (lo, _hi, interior), out in zip(source.shape, config, producer.outs[0].shape):
            if not any(0 <= lo + i * (interior + 1) < out for i in range(n)):
                return True
        return False

    def indices_of_one(producer, name: str) -> bool:  # noqa: ANN001
        try:
            source = program.var(producer.reads[0])
        except (IndexError, KeyError):  # no operand, or a block's argument
            return False
        if source.size == 0:
            return False
        if producer.op == "top_k":
            return name == producer.outs[1].name and source.shape[-1] == 1
        return producer.op == "argmax" and producer.outs[0].size == source.size

    def empty(name: str) -> bool:  # an empty array: what reads it (a reduction's result) is its init value
        try:
            return program.var(name).size == 0
        except KeyError:
            return False

    def constant(name: str) -> bool:
        if name not in known:
            known[name] = False  # an input or a block's argument, and no cycles
            producer = producers.get(name)
            if producer is not None:
                known[name] = all_padding(producer) or \
                    indices_of_one(producer, name) or all(constant(r) or empty(r) for r in producer.reads)
            elif name in passed:
                known[name] = constant(passed[name])
        return known[name]

    return bool(step.reads) and all(constant(r) for r in step.reads)


def _divides_softmax(step, program, values) -> bool:  # noqa: ANN001
    """The step divides a softmax, or what a nested function (a vmap) returns from one."""
    producers = {o.name: s for s in program.ops() for o in s.outs}
    producer = producers.get(step.expr.split(" / ")[0])
    if producer is None:
        return False
    inner = {s.op for b in producer.blocks for s in b.steps if s.outs and s.outs[0].name == b.result}
    return producer.op == "softmax" or "softmax" in inner


def _erf_tail(step, program, values) -> bool:  # noqa: ANN001
    import numpy as np

    return bool(np.any(np.abs(np.asarray(values()[0], np.float32)) > 3.0))


def _read_ops(step, program) -> List[str]:  # noqa: ANN001
    """The ops that compute what ``step`` reads (none for the program's inputs)."""
    producers = {o.name: s for s in program.ops() for o in s.outs}
    return [producers[r].op for r in step.reads if r in producers]


def _reads_elementwise(step, program, values) -> bool:  # noqa: ANN001
    return any(op in ELEMENTWISE_F32 for op in _read_ops(step, program))


def _upstream_ops(reads, program) -> List[str]:  # noqa: ANN001
    """The ops of every step that computes, directly or through other steps, one of ``reads``."""
    producers = {o.name: s for s in program.ops() for o in s.outs}
    seen: set = set()
    ops: List[str] = []
    todo = list(reads)
    while todo:
        producer = producers.get(todo.pop())
        if producer is None or id(producer) in seen:
            continue
        seen.add(id(producer))
        ops.append(producer.op)
        todo.extend(producer.reads)
    return ops


def _reads_inexact(step, program, values) -> bool:  # noqa: ANN001
    """The step reads, directly or through other steps, the result of an op the table gives f32 ulps."""
    return any(TOLERANCES[op].f32 not in (0, (0, 0)) for op in _upstream_ops(step.reads, program)
               if op in TOLERANCES)


def _inexact_huge_angle(step, program, values) -> bool:  # noqa: ANN001
    """The step reads an inexact value (_reads_inexact) and one of its operands' elements has an ulp of half a
    radian or more in the step's type."""
    import numpy as np

    if not _reads_inexact(step, program, values):
        return False
    mantissa = {"float32": 23, "float16": 10, "bfloat16": 7}.get(step.dtype)
    if mantissa is None:
        return False
    with np.errstate(invalid="ignore"):
        return any(bool((np.abs(np.asarray(v, np.float64)) >= 2.0 ** (mantissa - 1)).any()) for v in values())


def _in_loop_body(step, program, values) -> bool:  # noqa: ANN001
    """The step is in the body of a while or fori loop (at any depth)."""
    def holds(s) -> bool:  # noqa: ANN001
        return any(inner is step or holds(inner) for b in s.blocks for inner in b.steps)
    return any(s.op in ("while", "fori_loop", "scan") and holds(s) for s in program.ops())


def _beside_clamp(step, program, values) -> bool:  # noqa: ANN001
    """Another step, a clamp, reads what this step reads."""
    return any(s.op == "clamp" and set(s.reads) & set(step.reads) for s in program.ops() if s is not step)


def _reads_iota(step, program, values) -> bool:  # noqa: ANN001
    return any(op == "iota" for op in _read_ops(step, program))


def _reads_pad(step, program, values) -> bool:  # noqa: ANN001
    return any(op == "pad" for op in _read_ops(step, program))


def _keys_from_window_sum(step, program, values) -> bool:  # noqa: ANN001
    """The step (a sort) orders by values computed from a windowed sum."""
    return "window_sum" in _upstream_ops(step.reads[:1], program)


def _cpu_window_sum_wrong(step, program, values) -> bool:  # noqa: ANN001
    """cpu's own lax.reduce_window add of the step's operand is not the window sum: an integer sum that differs
    from the exact one, a float sum further from it (computed in 64 bits) than any order of adding its terms can
    take it (terms per window x eps x the sum of their magnitudes)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    (operand,) = values()[:1]
    call = ast.parse(step.expr, mode="eval").body  # lax.reduce_window(a, init, lax.add, dims, strides, padding)
    dims, strides, padding = (ast.literal_eval(arg) for arg in call.args[3:6])
    if isinstance(padding, str):
        padding = tuple(lax.padtype_to_pads(operand.shape, dims, strides, padding))
    x = jax.device_put(operand, jax.devices("cpu")[0])
    got = np.asarray(jax.jit(lambda x: lax.reduce_window(x, x.dtype.type(0), lax.add, dims, strides, padding))(x))
    inexact = jnp.issubdtype(operand.dtype, jnp.inexact)
    wide = np.pad(np.asarray(operand).astype(np.float64 if inexact else np.int64), padding)
    windows = np.lib.stride_tricks.sliding_window_view(wide, dims)[tuple(slice(None, None, s) for s in strides)]
    axes = tuple(range(-len(dims), 0))
    exact = windows.sum(axis=axes)
    if not inexact:
        return bool(np.any(got != exact.astype(operand.dtype)))
    bound = math.prod(dims) * float(jnp.finfo(operand.dtype).eps) * np.abs(windows).sum(axis=axes)
    with np.errstate(invalid="ignore"):
        wrong = np.abs(got.astype(np.float64) - exact) > bound + float(jnp.finfo(operand.dtype).tiny)
    return bool(np.any(wrong & np.isfinite(bound)))


def _cpu_sum_inaccurate(step, program, values) -> bool:  # noqa: ANN001
    """cpu's own f32 sum (or mean) of the step's operand is further from the exact one (computed in 64 bits) than
    2 ulps of the sum of the terms' magnitudes, which a tree of 32-term windows stays within."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    m = re.fullmatch(r"jnp\.(sum|mean)\((\w+), (.*)\)", step.expr)
    if not m or len(step.reads) != 1:
        return False
    fn, _, kw = m.groups()
    kwargs = ast.literal_eval("{" + re.sub(r"(\w+)=", r"'\1': ", kw) + "}")
    operand = np.asarray(values()[0])
    if operand.dtype != np.float32:
        return False
    got = np.asarray(jax.jit(lambda a: getattr(jnp, fn)(a, **kwargs))(jax.device_put(operand, jax.devices("cpu")[0])))
    wide = operand.astype(np.float64)
    exact, scale = getattr(np, fn)(wide, **kwargs), getattr(np, fn)(np.abs(wide), **kwargs)
    with np.errstate(invalid="ignore"):
        off = np.abs(got.astype(np.float64) - exact) > 2 * float(np.finfo(np.float32).eps) * scale
    return bool(np.any(off & np.isfinite(scale)))


def _reads_transpose(step, program, values) -> bool:  # noqa: ANN001
    return any(op == "transpose" for op in _read_ops(step, program))


def _reads_reduce(step, program, values) -> bool:  # noqa: ANN001
    return any(op.startswith("reduce_") for op in _read_ops(step, program))


def _reads_quotient(step, program, values) -> bool:  # noqa: ANN001
    return any(op == "div" for op in _read_ops(step, program))


def _reads_product(step, program, values) -> bool:  # noqa: ANN001
    return any(op in ("mul", "square", "pow_2") for op in _read_ops(step, program))


def _read_by_interior_pad(step, program, values) -> bool:  # noqa: ANN001
    """A lax.pad with interior padding (a third number of a dimension's config not 0) reads the step's result."""
    outs = {o.name for o in step.outs}
    return any(s.op == "pad" and s.expr.startswith("lax.pad(") and any(r in outs for r in s.reads) and
               any(int(m) != 0 for m in re.findall(r"\(-?\d+, -?\d+, (-?\d+)\)", s.expr))
               for s in program.ops())


def _reads_product_through_mirror_pad(step, program, values) -> bool:  # noqa: ANN001
    """The step (an add or subtract) reads a jnp.pad of a mode that copies its operand's own elements, of a product
    or quotient."""
    producers = {o.name: s for s in program.ops() for o in s.outs}
    return step.op in ("add", "sub") and any(
        r in producers and producers[r].op == "pad" and any(f"mode='{m}'" in producers[r].expr
                                                            for m in ("wrap", "reflect", "symmetric")) and
        producers[r].reads and producers[r].reads[0] in producers and
        producers[producers[r].reads[0]].op in ("mul", "square", "pow_2", "div")
        for r in step.reads)


def _selects_product(step, program, values) -> bool:  # noqa: ANN001
    """The step (a select) reads a product or an integer power."""
    producers = {o.name: s for s in program.ops() for o in s.outs}
    return any(r in producers and producers[r].op in ("mul", "square", "pow_2", "integer_pow") for r in step.reads)


def _reads_power(step, program, values) -> bool:  # noqa: ANN001
    """The step reads a jnp.power of two arrays, or a jnp.where of one (XLA fuses both into the reader's loop)."""
    producers = {o.name: s for s in program.ops() for o in s.outs}

    def power(name: str, depth: int = 0) -> bool:
        producer = producers.get(name)
        return producer is not None and (producer.op == "pow" or (
            producer.op == "select" and depth < 4 and any(power(r, depth + 1) for r in producer.reads)))
    return any(power(r) for r in step.reads)


def _reads_root(step, program, values) -> bool:  # noqa: ANN001
    """The step reads a square root (jnp.sqrt, x ** 0.5)."""
    producers = {o.name: s for s in program.ops() for o in s.outs}
    return any(producers.get(r) is not None and producers[r].op in ("sqrt", "pow_half") for r in step.reads)


def _divides_quotient(step, program, values) -> bool:  # noqa: ANN001
    producers = {o.name: s for s in program.ops() for o in s.outs}
    return step.op == "div" and bool(step.reads) and step.reads[0] in producers and \
        producers[step.reads[0]].op in ("div", "reciprocal")


def _divides_broadcast(step, program, values) -> bool:  # noqa: ANN001
    """The step divides and reads a value moved from a smaller one (a repeat, a broadcast, a tile)."""
    producers = {o.name: s for s in program.ops() for o in s.outs}
    return step.op == "div" and any(r in producers and producers[r].op in ("repeat", "broadcast", "tile", "reshape")
                                    for r in step.reads)


def _divides_hoisted_power(step, program, values) -> bool:  # noqa: ANN001
    """The step divides, in a loop body, by a power, quotient or reciprocal computed outside the loop."""
    producers = {o.name: s for s in program.ops() for o in s.outs}
    divisor = producers.get(step.reads[-1]) if step.op == "div" and step.reads else None
    return divisor is not None and divisor.op in ("integer_pow", "pow", "div", "reciprocal") and \
        _in_loop_body(step, program, values) and not _in_loop_body(divisor, program, values)


def _reciprocal_of_quotient_in_loop(step, program, values) -> bool:  # noqa: ANN001
    return step.op == "reciprocal" and _in_loop_body(step, program, values) and \
        any(op in ("integer_pow", "div", "reciprocal") for op in _read_ops(step, program))


def _add_of_erf_inv(step, program, values) -> bool:  # noqa: ANN001
    return step.op in ("add", "sub") and "erf_inv" in _read_ops(step, program)


def _reads_scatter_onto_product(step, program, values) -> bool:  # noqa: ANN001
    """The step (an add or subtract) reads a scatter-add whose operand is a product, or a scatter-multiply."""
    producers = {o.name: s for s in program.ops() for o in s.outs}
    return step.op in ("add", "sub") and any(
        r in producers and (producers[r].op == "scatter_mul" or (
            producers[r].op == "scatter_add" and producers[r].reads and producers[r].reads[0] in producers and
            producers[producers[r].reads[0]].op in ("mul", "square", "pow_2")))
        for r in step.reads)


def _extremum_of_nextafter(step, program, values) -> bool:  # noqa: ANN001
    return any(op == "nextafter" for op in _read_ops(step, program))


def _one_trip_loop(step, program, values) -> bool:  # noqa: ANN001
    """The step (a grad) holds a loop of one trip (a lax.fori_loop(0, 1, ...), a while_loop of `c[0] < 1` from 0)."""
    def one_trip(s) -> bool:  # noqa: ANN001
        return (s.op == "fori_loop" and s.expr.startswith("lax.fori_loop(0, 1, ")) or \
            (s.op == "while" and s.expr.startswith("lax.while_loop(lambda c: c[0] < 1, "))

    def loops(s) -> bool:  # noqa: ANN001
        return one_trip(s) or any(loops(inner) for b in s.blocks for inner in b.steps)
    return step.op == "grad" and loops(step)


def _subtracts_clip_to_zero(step, program, values) -> bool:  # noqa: ANN001
    """The step subtracts a jnp.clip whose bounds are both 0."""
    producers = {o.name: s for s in program.ops() for o in s.outs}
    return step.op == "sub" and any(
        r in producers and producers[r].op == "clamp" and producers[r].expr.endswith(", 0.0, 0.0)")
        for r in step.reads)


def _softmax_in_grad(step, program, values) -> bool:  # noqa: ANN001
    """The step (a grad) differentiates a softmax, a log_softmax or a logsumexp, in any nested function."""
    def holds(s) -> bool:  # noqa: ANN001
        return s.op in ("softmax", "log_softmax", "logsumexp") or any(holds(inner) for b in s.blocks
                                                                      for inner in b.steps)
    return step.op == "grad" and holds(step)


def _nan_literal_operand(step, program, values) -> bool:  # noqa: ANN001
    """The step reads the result of arithmetic with a NaN literal (x + float('nan'), or a float gather's NaN fill:
    jnp.take(..., mode='fill')), directly or through one more elementwise step: a value LLVM knows is NaN at
    compile time; or the step is a function (grad) of such steps."""
    producers = {o.name: s for s in program.ops() for o in s.outs}

    def known_nan(name: str, depth: int) -> bool:
        producer = producers.get(name)
        if producer is None:
            return False
        fill = "mode='fill'" in producer.expr and producer.dtype in ("float32", "float16", "bfloat16")
        return "float('nan')" in producer.expr or fill or (
            depth > 0 and any(known_nan(r, depth - 1) for r in producer.reads))

    nested = [s for b in step.blocks for s in b.steps]
    return any(known_nan(r, 1) for r in step.reads) or any(_nan_literal_operand(s, program, values) for s in nested)


def _minor_unvectorised(step, program, values) -> bool:  # noqa: ANN001
    """The step's result has a minor dimension of 3, 5, 6 or 7, or of 1 under more dimensions, and on an AVX-512 host
    also 9 to 15: a loop jaxlib 0.4.13's XLA:CPU leaves unvectorised (measured on relu and maximum, sizes 1 to 33;
    on an AMD EPYC of family 26, relu of f32[8, m] and f32[4, 8, m] for m 1 to 40: 3, 5 to 7 and 9 to 15 keep
    denormals, fuzz seed 20270401 #5141, #6938); or the step reduces an
    operand with a dimension of 1 among others, whose loop nest XLA:CPU keeps (measured on jnp.sum over axis 0 of
    f32[m, n, 1] and f32[m, 1, n], m 8 to 20, n 1 to 40: 8 lanes for m = 8, in order for m = 12, neither for
    f32[m, 1, n]), also through a concatenation, whose reduction XLA's simplifier splits into reductions of its
    operands (jnp.prod of the concatenation of two f32[7, 2, 1] on their last axis: fuzz seed 20280101 #6712)."""
    producers = {o.name: s for s in program.ops() for o in s.outs}

    def unit_dim(name: str) -> bool:
        try:
            shape = program.var(name).shape
        except KeyError:
            return False
        concat = producers.get(name)
        if concat is not None and concat.op == "concatenate" and any(map(unit_dim, concat.reads)):
            return True
        return len(shape) >= 2 and 1 in shape

    scalar = (3, 5, 6, 7) + ((9, 10, 11, 12, 13, 14, 15) if "avx512f" in cpu_flags() else ())
    return any(o.shape and (o.shape[-1] in scalar or (o.shape[-1] == 1 and len(o.shape) >= 2))
               for o in step.outs) or (step.op in ("reduce_sum", "reduce_prod") and any(map(unit_dim, step.reads)))


def _reshaped_rows(step, program, values) -> bool:  # noqa: ANN001
    """The step reduces (through elementwise steps, which keep the shape) a reshape of a source of rank 3 or more
    whose result's rows are neither a trailing run of the source's dimensions nor within its minor one: XLA:CPU
    fuses the reshape into the reduce's loop and computes each element's source index there."""
    producers = {o.name: s for s in program.ops() for o in s.outs}

    def reshaped(name: str, depth: int) -> bool:
        producer = producers.get(name)
        if producer is None or not producer.outs:
            return False
        if producer.op == "reshape" and producer.reads:
            try:
                source = list(program.var(producer.reads[0]).shape)
            except KeyError:
                return False
            out = producer.outs[0].shape
            if len(source) < 3 or not out:
                return False
            row, trailing = out[-1], [math.prod(source[k:]) for k in range(len(source))]
            return row > 1 and source[-1] % row != 0 and row not in trailing
        shape = producer.outs[0].shape
        return depth > 0 and producer.op not in MOVES_OPS + REDUCING and not producer.blocks and any(
            reshaped(r, depth - 1) for r in producer.reads if r in producers and producers[r].outs[0].shape == shape)

    return step.op in ("reduce_sum", "reduce_prod") and any(reshaped(r, 3) for r in step.reads)


def _scalar_loop(step, program, values) -> bool:  # noqa: ANN001
    """The step's result has a minor dimension of 3, 5, 6 or 7 (or 1, of rank 2 or more), or it shares a fused loop
    with a gather (reads one, through at most one move, or is read by one), with an fmod (reads what an fmod
    reads), with a transpose that reads it and moves its minor dimension (XLA:CPU loops over the transpose's
    result, reading across: relu(abs(x)) read by jnp.transpose(..., (2, 3, 0, 1)), fuzz seed 20272901 #391) or
    with a concatenation that reads it into such a minor dimension (jnp.clip(x, 0, 1e-40) of f32[2, 1, 2, 4]
    concatenated with an f32[2, 1, 2, 3] on the last axis keeps the bound 1e-40; of x alone it gives 0: fuzz seed
    20285310 #561): loops jaxlib 0.4.13's XLA:CPU leaves unvectorised (measured on relu and maximum, sizes 1 to
    33)."""
    if _minor_unvectorised(step, program, values):
        return True
    names = {o.name for o in step.outs}
    if any(s.op == "transpose" and names & set(s.reads) and _moves_minor_dimension(s) for s in program.ops()):
        return True
    if any(s.op == "concatenate" and names & set(s.reads) and _minor_unvectorised(s, program, values)
           for s in program.ops()):
        return True
    producers = {o.name: s for s in program.ops() for o in s.outs}
    gathers = ("gather", "dynamic_slice")

    def gathered(name: str, moves: int) -> bool:
        producer = producers.get(name)
        return producer is not None and (producer.op in gathers or (
            moves > 0 and producer.op in MOVES_OPS and any(gathered(r, moves - 1) for r in producer.reads)))

    return any((s.op in gathers and names & set(s.reads)) or (s.op == "rem" and set(s.reads) & set(step.reads))
               for s in program.ops()) or any(gathered(r, 1) for r in step.reads)


MOVES_OPS = ("reshape", "transpose", "broadcast", "slice", "pad", "concatenate", "rev")


def _moves_minor_dimension(step) -> bool:  # noqa: ANN001 - a transpose step
    """A jnp.transpose whose permutation puts another dimension last."""
    found = re.search(r"\(([\d, ]+)\)\)$", step.expr)
    permutation = [int(d) for d in found.group(1).split(",") if d.strip()] if found else []
    return bool(permutation) and permutation[-1] != len(permutation) - 1


def _difference_select_in_scalar_loop(step, program, values) -> bool:  # noqa: ANN001
    """The step selects between A op B and A (jnp.where(p, a - b, a), jnp.where(p, a / b, a)) in a loop jaxlib
    0.4.13's XLA:CPU leaves unvectorised (_scalar_loop: a gather's; or an array of one element)."""
    producers = {o.name: s for s in program.ops() for o in s.outs}
    reads = list(step.reads)
    combined = [producers[r] for r in reads if r in producers and producers[r].op in ("sub", "add", "mul", "div")]
    one = all(o.shape is not None and math.prod(o.shape) == 1 for o in step.outs)
    return any(set(d.reads[:1 if d.op in ("sub", "div") else 2]) & set(reads) for d in combined) and (
        one or _scalar_loop(step, program, values))


# Conditions for entries that hold only for some steps: (step, program, its operands' values on cpu) -> bool.
def _denormal_bound(step, program, values) -> bool:  # noqa: ANN001
    """The step reads a maximum, minimum or clamp against a literal denormal bound (jnp.maximum(x, 1e-40))."""
    producers = {o.name: s for s in program.ops() for o in s.outs}
    for name in step.reads:
        producer = producers.get(name)
        if producer is None or producer.op not in ("max", "min", "clamp", "relu"):
            continue
        if _denormal_literal(producer.expr):
            return True
    return False


def _converted_to(step, program, dtype: str) -> bool:  # noqa: ANN001
    """A convert to ``dtype`` reads the step's result, or the result of a step whose nested function returns it: a
    convert step, or the cast of a nested function's result to the dtype its caller wants (a branch of lax.switch
    returning ``v.astype(jnp.uint32)``)."""
    names = {o.name for o in step.outs}
    for _ in range(4):  # (and what a nested function returns it as: a vmap's result)
        names |= {o.name for s in program.ops() for b in s.blocks
                  if names & set(re.findall(r"[A-Za-z_]\w*", b.result)) for o in s.outs}
    converted = any(s.op == "convert" and names & set(s.reads) and any(o.dtype == dtype for o in s.outs)
                    for s in program.ops())
    spelled = "bool_" if dtype == "bool" else dtype
    return converted or any(re.search(rf"\b{re.escape(n)}\.astype\(jnp\.{spelled}\)", b.result)
                            for s in program.ops() for b in s.blocks for n in names)


def _nan_to_unsigned(step, program, values) -> bool:  # noqa: ANN001
    """A NaN operand, and a convert to uint32 reads the step's result."""
    return _converted_to(step, program, "uint32") and _nan(values())


def _bitcast_to_bool(step, program, values) -> bool:  # noqa: ANN001
    """The step bitcasts integers to a float, and a convert to bool reads that float."""
    return step.op == "bitcast" and _converted_to(step, program, "bool")


def _denormal_literal(expr: str) -> bool:
    return any(0 < abs(float(x)) < 1.1754943508222875e-38
               for x in re.findall(r"(?<![\w.])-?\d+(?:\.\d*)?(?:e-?\d+)?", expr))


def _denormal_padding(step, program, values) -> bool:  # noqa: ANN001
    """The step reads, directly or through elementwise steps, a pad whose padding value is a denormal literal."""
    producers = {o.name: s for s in program.ops() for o in s.outs}

    def padded(name: str, depth: int) -> bool:
        producer = producers.get(name)
        if producer is None:
            return False
        if producer.op == "pad" and _denormal_literal(producer.expr):
            return True
        return depth > 0 and producer.op in ELEMENTWISE_F32 and any(padded(r, depth - 1) for r in producer.reads)

    return any(padded(r, 2) for r in step.reads)


def _pad_and_denormal_literal(step, program, values) -> bool:  # noqa: ANN001
    """The step reads a pad and has a denormal literal operand (1e-40 / v where v is a pad)."""
    producers = {o.name: s for s in program.ops() for o in s.outs}
    return _denormal_literal(step.expr) and any(r in producers and producers[r].op == "pad" for r in step.reads)


def _converted_bool_operand(step, program, values) -> bool:  # noqa: ANN001
    """The step reads a bool array converted to a float (x.astype(jnp.float32)), directly."""
    producers = {o.name: s for s in program.ops() for o in s.outs}
    for name in step.reads:
        producer = producers.get(name)
        if producer is not None and producer.op == "convert" and producer.reads:
            try:
                if program.var(producer.reads[0]).dtype == "bool":
                    return True
            except KeyError:
                continue
    return False


def _uniform_converted_bool_operand(step, program, values) -> bool:  # noqa: ANN001
    """The step reads a bool array converted to a float whose elements are all equal (a predicate XLA may prove
    constant)."""
    import numpy as np

    producers = {o.name: s for s in program.ops() for o in s.outs}
    for i, name in enumerate(step.reads):
        producer = producers.get(name)
        if producer is None or producer.op != "convert" or not producer.reads:
            continue
        try:
            if program.var(producer.reads[0]).dtype != "bool":
                continue
        except KeyError:
            continue
        v = np.asarray(values()[i])
        if v.size and np.all(v == v.reshape(-1)[0]):
            return True
    return False


def _read_by_erf_inv(step, program, values) -> bool:  # noqa: ANN001
    """An erf_inv reads the step's result, directly or through steps computed from it."""
    names = {o.name for o in step.outs}
    for s in program.ops():  # program order: a step's readers come after it
        if names & set(s.reads):
            if s.op == "erf_inv":
                return True
            names |= {o.name for o in s.outs}
    return False


def _negative_base_computed_exponent(step, program, values) -> bool:  # noqa: ANN001
    """A power of a base with a negative element whose exponent a step computed (not an input or a literal)."""
    import numpy as np

    producers = {o.name: s for s in program.ops() for o in s.outs}
    if len(step.reads) < 2 or step.reads[1] not in producers:
        return False
    return bool(np.any(np.asarray(values()[0], np.float32) < 0))


WHEN = {
    "zero_by_zero": lambda step, program, values: _zero_by_zero(values),
    "unvectorised": _unvectorised,
    "epilogue_of_2_or_4": lambda step, program, values: step.size > 8 and step.size % 8 in (2, 4),
    "denormal_operand": lambda step, program, values: _denormal_operand(values()),
    "empty_operand": lambda step, program, values: any(program.var(r).size == 0 for r in step.reads),
    "denormal_operand_or_padding": lambda step, program, values: (
        (step.op == "pad" and _denormal_literal(step.expr)) or _denormal_operand(values())),
    "huge_imaginary_operand": lambda step, program, values: _huge_imaginary_operand(values()),
    "near_negative_real_axis": lambda step, program, values: _near_negative_real_axis(values()),
    "negative_nan_operand": lambda step, program, values: _negative_nan_operand(values()),
    "product_used_twice": _product_used_twice,
    "kernel_not_finite": lambda step, program, values: _not_finite(values()[1:2]),
    "rhs_dilated_input_not_finite": lambda step, program, values: (
        _rhs_dilated(step) and _not_finite(values()[0:1])),
    "operand_not_finite": lambda step, program, values: _not_finite(values()),
    "products_overflow": lambda step, program, values: _products_overflow(values()),
    "nan_operand": lambda step, program, values: _nan(values()),
    "folded": _folded,
    "reads_quotient": _reads_quotient,
    "reads_product": _reads_product,
    "read_by_interior_pad": _read_by_interior_pad,
    "reads_product_through_mirror_pad": _reads_product_through_mirror_pad,
    "selects_product": _selects_product,
    "reads_power": _reads_power,
    "reads_root": _reads_root,
    "reads_pad": _reads_pad,
    "reads_elementwise": _reads_elementwise,
    "reads_iota": _reads_iota,
    "beside_clamp": _beside_clamp,
    "reads_inexact": _reads_inexact,
    "inexact_huge_angle": _inexact_huge_angle,
    "in_loop_body": _in_loop_body,
    "reciprocal_of_quotient_in_loop": _reciprocal_of_quotient_in_loop,
    "difference_select_in_scalar_loop": _difference_select_in_scalar_loop,
    "reads_reduce": _reads_reduce,
    "reads_transpose": _reads_transpose,
    "keys_from_window_sum": _keys_from_window_sum,
    "cpu_window_sum_wrong": _cpu_window_sum_wrong,
    "cpu_sum_inaccurate": _cpu_sum_inaccurate,
    "one_trip_loop": _one_trip_loop,
    "subtracts_clip_to_zero": _subtracts_clip_to_zero,
    "softmax_in_grad": _softmax_in_grad,
    "extremum_of_nextafter": _extremum_of_nextafter,
    "divides_quotient": _divides_quotient,
    "divides_hoisted_power": _divides_hoisted_power,
    "divides_broadcast": _divides_broadcast,
    "add_of_erf_inv": _add_of_erf_inv,
    "reads_scatter_onto_product": _reads_scatter_onto_product,
    "erf_tail": _erf_tail,
    "divides_softmax": _divides_softmax,
    "scalar_loop": _scalar_loop,
    "nan_literal_operand": _nan_literal_operand,
    "read_twice": _read_twice,
    "minor_unvectorised": _minor_unvectorised,
    "reshaped_rows": _reshaped_rows,
    "pad_and_denormal_literal": _pad_and_denormal_literal,
    "denormal_bound": _denormal_bound,
    "read_by_erf_inv": _read_by_erf_inv,
    "nan_to_unsigned": _nan_to_unsigned,
    "bitcast_to_bool": _bitcast_to_bool,
    "denormal_padding": _denormal_padding,
    "converted_bool_operand": _converted_bool_operand,
    "uniform_converted_bool_operand": _uniform_converted_bool_operand,
    "negative_base_computed_exponent": _negative_base_computed_exponent,
}


# ---------------------------------------------------------------------------------------------------- unsupported

# stablehlo ops (or types) the README says the ipu refuses: an "Unsupported operation" naming one is counted, not a
# mismatch. The generator makes none of these on purpose; anything else unsupported is a mismatch.
UNSUPPORTED_BY_DESIGN = ("stablehlo.triangular_solve", "f64", "i64", "ui64", "c128")


_FLAGS: Optional[List[str]] = None


def cpu_flags() -> List[str]:
    """The host's instruction-set flags (/proc/cpuinfo), which decide some of XLA:CPU's arithmetic."""
    global _FLAGS
    if _FLAGS is None:
        _FLAGS = []
        if os.path.exists("/proc/cpuinfo"):
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("flags"):
                        _FLAGS = line.split(":", 1)[1].split()
                        break
    return _FLAGS
