"""Ops the two series hand to a plugin in a different form from the one XLA:CPU computes, written as XLA:CPU computes
them.

jaxlib 0.12 sends some CHLO ops as ``stablehlo.composite`` of their decomposition, while XLA:CPU computes its own
HLO op (erf, complex sinh); it writes ``chlo.atan`` as ``atan2(x, 1)``. jaxlib 0.4.13 decomposes ``acosh`` and
``sinh`` as XLA's own expanders do, and treats ``asin``/``atanh`` of values below f32's smallest normal as zero;
jaxlib 0.12 computes some f16 ops inside loops in f32. Both series send ``lax.approx_max_k``/``approx_min_k`` as
XLA's ``ApproxTopK`` custom call, which XLA:CPU computes exactly (a sort and a slice). Each rule writes the
computation cpu runs, so results match cpu's bit for bit where the README says the op is bit-exact."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

from jax._src.lib.mlir import ir

from jax_ipu import _jax

from .. import attributes as A
from .. import facts as F
from .. import rewrite as W
from ..errors import CompileError
from . import excess_precision
from .structure import call_target

_F16_IN_LOOPS_EXPANDED = ("stablehlo.tan", "stablehlo.rsqrt")


# Composites of chlo ops whose decomposition XLA:CPU does not run, computing an HLO op of its own instead (jaxlib
# 0.12's has an erf op), and the emulator's op for each.
_CHLO_OPS = {"chlo.erf": "erf"}


# The same for complex operands only: chlo.sinh of a c64 value, which XLA:CPU computes as its HLO sinh op; the
# emulator's complex sinh computes what cpu does (e^(z + log 1/2) - e^(log 1/2 - z), cancelling near 0 as cpu's
# does: sinh(1e-6 + 1e-6i) has real part 9.83e-7); a real sinh's decomposition is kept.
_COMPLEX_CHLO_OPS = {"chlo.sinh": "sinh"}


def _composite_name(op: Any) -> str:
    return A.string(A.named(op.attributes)["name"])


def _is_one(value: Any) -> bool:
    """`value` is 1.0 everywhere: a splat constant of 1, or one broadcast."""
    return F.splat_value(value) == 1.0


# Functions with f(x) ~ x near 0 whose jaxlib 0.4.13 XLA:CPU expansion flushes a tiny x's result to a zero: below
# what magnitude (asin: x / 2 is a denormal; atanh: x itself is, read as a zero).
_TINY_IS_ZERO = {"chlo.asin": 2 * F.F32_TINY, "chlo.atanh": F.F32_TINY}


def _chlo_op(t: Any, composite: Any) -> Optional[str]:
    """The emulator op that computes a chlo composite as XLA:CPU does (_CHLO_OPS, _COMPLEX_CHLO_OPS), or None."""
    name = _composite_name(composite)
    if name in _COMPLEX_CHLO_OPS and t.any_complex(composite):
        return _COMPLEX_CHLO_OPS[name]
    return _CHLO_OPS.get(name)


def _tiny_as_zero(t: Any, entry: Dict[str, Any], below: float) -> List[Dict[str, Any]]:
    """``entry`` (a function f with f(x) ~ x near 0) with a zero of x's sign where |x| < ``below``, as jaxlib
    0.4.13's XLA:CPU computes it: its expansion's intermediate (x / 2 in asin's 2 atan2(x, 1 + sqrt(1 - x^2)),
    2x in atanh's) is a denormal there, which it flushes."""
    rewrite = W.Rewrite(t, entry)
    out = entry["results"][0]
    exact = t.fresh(out["dtype"], out["shape"])
    rewrite.ops.append(dict(entry, results=[exact]))
    x = entry["operands"][0]
    tiny = rewrite.emit("compare", [rewrite.emit("abs", [x]), rewrite.splat(below)], "bool",
                        attrs={"comparison_direction": "LT", "compare_type": "FLOAT"})
    rewrite.emit("select", [tiny, rewrite.emit("multiply", [x, rewrite.splat(0.0)]), exact["id"]], result=out)
    return rewrite.ops


def _sinh_decomposed(t: Any, entry: Dict[str, Any], body: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """jaxlib 0.4.13's real chlo.sinh as XLA decomposes it (chlo_legalize_to_hlo), in f32 (an f16 or bf16 operand
    converted up and the result back): |x| < 1 ? (expm1(x) + expm1(x) / (expm1(x) + 1)) * 0.5 :
    exp(x + log(1/2)) - exp(log(1/2) - x), each op XLA:CPU's (its exp and expm1 approximations), so a denormal
    x gives a zero of its sign and large ones round as cpu's do."""
    out = entry["results"][0]
    rewrite = W.Rewrite(t, entry, dtype="f32")
    emit, splat = rewrite.emit, rewrite.splat
    x = entry["operands"][0]
    wide = excess_precision.unrounded(t, body, x, entry) if out["dtype"] == "bf16" else None
    if wide is not None:  # XLA's convert up reads a bf16 arithmetic op's f32 value (excess precision)
        rewrite.ops.extend(wide[0])
        x = wide[1]
    elif out["dtype"] != "f32":
        x = emit("convert", [x])
    log_half = splat(math.log(0.5))  # XLA folds log(0.5) with the host's logf
    large = emit("subtract", [emit("exponential", [emit("add", [x, log_half])]),
                              emit("exponential", [emit("subtract", [log_half, x])])])
    e = emit("exponential_minus_one", [x])
    ratio = emit("divide", [e, emit("add", [e, splat(1.0)])])
    small = emit("multiply", [splat(0.5), emit("add", [e, ratio])])
    below_one = emit("compare", [emit("abs", [x]), splat(1.0)], "bool", attrs={
        "comparison_direction": "LT", "compare_type": "FLOAT"})
    if out["dtype"] == "f32":
        emit("select", [below_one, small, large], result=out)
    else:
        emit("convert", [emit("select", [below_one, small, large])], out["dtype"], result=out)
    return rewrite.ops


def _acosh_decomposed(t: Any, entry: Dict[str, Any]) -> List[Dict[str, Any]]:
    """jaxlib 0.4.13's real chlo.acosh as XLA decomposes it (chlo_legalize_to_hlo), each op rounded to the
    type (no upcast, unlike its sinh): x < -1 ? NaN : x >= sqrt(max) ? log(2) + log(x) : log(x + sqrt((x + 1) *
    (x - 1))) (so -3.4e38 is NaN, not the inf of x + sqrt(inf)).
    Near 1 the rounded x + 1 moves the result by several ulps (acosh(1.0029) is 0.07611 in f16 on cpu, 0.07654
    rounded once; fuzz seed 20271001 #1972): measured on 1,000 values per type in [1, 100] and beyond the
    threshold, all cpu's bits."""
    out = entry["results"][0]
    rewrite = W.Rewrite(t, entry)
    emit, splat = rewrite.emit, rewrite.splat
    x = entry["operands"][0]
    one = splat(1.0)
    root = emit("sqrt", [emit("multiply", [emit("add", [x, one]), emit("subtract", [x, one])])])
    small = emit("log", [emit("add", [x, root])])
    large = emit("add", [splat(math.log(2.0)), emit("log", [x])])
    largest = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38}[out["dtype"]]
    beyond = emit("compare", [x, splat(math.sqrt(largest))], "bool", attrs={
        "comparison_direction": "GE", "compare_type": "FLOAT"})
    below = emit("compare", [x, splat(-1.0)], "bool", attrs={"comparison_direction": "LT", "compare_type": "FLOAT"})
    emit("select", [below, splat(math.nan), emit("select", [beyond, large, small])], result=out)
    return rewrite.ops


def _expanded_in_loop(t: Any, entry: Dict[str, Any], op: Any) -> List[Dict[str, Any]]:
    """jaxlib 0.12's XLA:CPU computes an f16 tan or rsqrt in a while loop's body as its expansion, each part
    rounded to f16: tan(A) = sin(A) / cos(A), rsqrt(A) = 1 / sqrt(A) (measured on every f16 in [0.05, 3]: all
    its bits; outside loops, and for bf16, it rounds the f32 result once, as the ipu does)."""
    rewrite = W.Rewrite(t, entry)
    a, out = t.use(op.operands[0]), entry["results"][0]
    if op.name == "stablehlo.tan":
        rewrite.emit("divide", [rewrite.emit("sine", [a]), rewrite.emit("cosine", [a])], result=out)
    else:
        rewrite.emit("divide", [rewrite.splat(1.0), rewrite.emit("sqrt", [a])], result=out)
    return rewrite.ops


def tiny_as_zero(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in _TINY_IS_ZERO and not scalar_body and not _jax.is_current_series()
            and (t.type_of(op.results[0].type) or ("", []))[0] in ("f32", "bf16")):
        return False
    body.extend(_tiny_as_zero(t, t.entry(op), _TINY_IS_ZERO[op.name]))
    return True


def f16_expanded_in_loops(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in _F16_IN_LOOPS_EXPANDED and not scalar_body and _jax.is_current_series()
            and t.dtype_of(op) == "f16" and F.in_while(op)):
        return False
    body.extend(_expanded_in_loop(t, t.entry(op), op))
    return True


def acosh(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "chlo.acosh" and not scalar_body and not _jax.is_current_series()
            and t.dtype_of(op) in ("f32", "f16", "bf16")):
        return False
    body.extend(_acosh_decomposed(t, t.entry(op)))
    return True


def sinh(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "chlo.sinh" and not scalar_body and not _jax.is_current_series()
            and t.real_float(op)):
        return False
    body.extend(_sinh_decomposed(t, t.entry(op), body))
    return True


def composite_chlo_op(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.composite" and _chlo_op(t, op)):
        return False
    # A CHLO op jaxlib 0.12 sends a plugin as a composite of its decomposition, where XLA:CPU computes
    # an HLO op of its own: that op, so the ipu computes what cpu does.
    entry = t.entry(op)
    t.called.remove(entry["attrs"]["callee"])
    body.append(dict(entry, op=_chlo_op(t, op), mlir=_composite_name(op), attrs={}))
    return True


def atan_as_atan2(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.atan2" and _jax.is_current_series() and _is_one(op.operands[1])):
        return False
    entry = t.entry(op)  # chlo.atan, as jaxlib 0.12 writes it for a plugin: atan2(x, 1)
    body.append(dict(entry, op="atan", mlir="chlo.atan", operands=entry["operands"][:1]))
    return True


def _approx_top_k(t: Any, op: Any) -> List[Dict[str, Any]]:
    """XLA's ``ApproxTopK`` custom call as every backend but the TPU computes it (XLA's ApproxTopKFallback): the
    operands (values, then their indices) sorted along ``reduction_dim`` with the call's comparator, each cut to
    the result's size there (k, or the approximate output size jax computed when ``aggregate_to_topk`` is off).
    The init values that follow the operands are the TPU's. The result is exact, as on cpu."""
    t.check(op)
    attrs = A.named(op.attributes)
    config = ir.DictAttr(attrs["mhlo.backend_config"]) if "mhlo.backend_config" in attrs else {}
    computations = list(ir.ArrayAttr(attrs["called_computations"])) if "called_computations" in attrs else []
    if "reduction_dim" not in config or len(computations) != 1 or len(op.operands) != 2 * len(op.results):
        raise CompileError(f"cannot read the ApproxTopK custom call with types {W.types_text(op)}: it needs a "
                           "mhlo.backend_config with reduction_dim, one comparator and an init value per operand, "
                           "as jax's lax.approx_max_k writes it")
    dimension = A.integer(config["reduction_dim"])
    comparator = A.symbol(computations[0])
    if comparator not in t.funcs:
        raise CompileError(f"the ApproxTopK custom call's comparator @{comparator} is not defined in the module")
    values = [t.use(v) for v in op.operands[:len(op.results)]]
    sorted_values = [t.fresh(*t.tensor(v)) for v in op.operands[:len(op.results)]]
    region = t.block(t.funcs[comparator].regions[0].blocks[0], "stablehlo.sort", scalar_body=True)
    sort = W.located({"op": "sort", "mlir": "stablehlo.custom_call", "operands": values, "results": sorted_values,
                      "attrs": {"dimension": dimension, "is_stable": False}, "regions": [region]}, op)
    entries = [sort]
    for whole, result in zip(sorted_values, op.results):
        out = t.define(result, "stablehlo.custom_call")
        rank = len(out["shape"])
        entries.append(W.derived(sort, "slice", [whole["id"]], [out], {
            "start_indices": [0] * rank, "limit_indices": list(out["shape"]), "strides": [1] * rank}))
    return entries


def approx_top_k(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.custom_call" and call_target(op) == "ApproxTopK"):
        return False
    body.extend(_approx_top_k(t, op))
    return True
