"""jaxlib 0.4.13: XLA's algebraic simplifier folds the constants of a float add or multiply chain into one.

XLA's ``HandleSubtract`` writes ``A - C`` as ``A + (-C)``; ``HandleAdd`` writes ``(A + C1) + C2`` as ``A + (C1 + C2)``
and ``(C1 - A) + C2`` as ``(C1 + C2) - A``; ``HandleMultiply`` writes ``(A * C1) * C2`` as ``A * (C1 * C2)``, and
for scalars ``(A * C1) * (B * C2)`` as ``(A * B) * (C1 * C2)`` (``(x / 7.25) ** 2`` of an f32[]). C1 and
C2 are constants or broadcasts of scalar constants, or of the scalar arithmetic and logarithms of constants that XLA
folds first (a divide by a constant is already a multiply by its reciprocal, compiler/translate.py; jax's exp2(A) is
exp(log(2) * A)), A is not a constant, and the operands may come in either order; the intermediate may have
other readers (it stays for them). The simplifier repeats to a fixed point, so a longer chain folds to one constant,
which XLA computes on the host in the element type (f16: in f32, rounded once; denormals kept). So on jaxlib
0.4.13, ``(x + 1.3) - 0.7`` is ``x + 0.6`` on cpu, one rounding where the ops one by one round twice, and
``x / 255 * 2 - 1`` is ``x * (2 / 255) + -1``. Measured on f32 and f16 (every form above, f32[256] and f16[256],
against cpu: all differed before); bf16, which XLA:CPU computes in f32 through converts, and jaxlib 0.12, whose
simplifier leaves floats alone, match without it.

The pass rewrites each such op in program order (so an inner op is already in its folded form when its reader is
seen) and leaves what it bypasses to the dead-code pass. Integer chains fold to the same values either way and are
left alone."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

import numpy as np

from ..program_format import Blob
from . import id_counter

DTYPES = {"f32": np.float32, "f16": np.float16}
ARITHMETIC = ("add", "subtract", "multiply", "divide", "negate", "log")
CONTROL_FLOW = ("while", "case", "if")


def run(functions: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Rewrites the program's functions in place; returns those it changed."""
    changed = []
    for function in functions:
        if _block(function, id_counter(function)):
            changed.append(function)
    return changed


def _scalar(v: int, producer: Dict[int, Dict[str, Any]], scalars: Dict[int, Optional[Any]]) -> Optional[Any]:
    """The value of a scalar constant, or of scalar arithmetic on them (1 / c, log(2): XLA folds them), else None;
    ``scalars`` keeps what is found."""
    if v in scalars:
        return scalars[v]
    p = producer.get(v)
    value = None
    if p is not None and p["results"][0]["shape"] == [] and p["results"][0]["dtype"] in DTYPES:
        dtype = DTYPES[p["results"][0]["dtype"]]
        if p["op"] == "constant" and len(p["attrs"]["value"]) == np.dtype(dtype).itemsize:
            value = np.frombuffer(bytes(p["attrs"]["value"]), dtype)[0]
        elif p["op"] in ARITHMETIC:
            args = [_scalar(o, producer, scalars) for o in p["operands"]]
            if all(a is not None for a in args):
                value = _fold(p["op"], dtype, *args)
    scalars[v] = value
    return value


def _block(block: Dict[str, Any], fresh: Callable[[], int]) -> bool:
    changed = False
    for entry in block["body"]:
        if entry["op"] in CONTROL_FLOW:
            for region in entry.get("regions", ()):
                changed = _block(region, fresh) or changed
    producer: Dict[int, Dict[str, Any]] = {}
    scalars: Dict[int, Optional[Any]] = {}

    def scalar(v: int) -> Optional[Any]:
        return _scalar(v, producer, scalars)

    def splat(v: int) -> Optional[Any]:
        """The one value of a constant array operand: a broadcast of a scalar constant, or a splat constant."""
        p = producer.get(v)
        if p is None:
            return None
        if p["op"] == "broadcast_in_dim" and not p["attrs"].get("broadcast_dimensions"):
            return scalar(p["operands"][0])
        if p["op"] == "constant" and p["results"][0]["dtype"] in DTYPES:
            dtype = DTYPES[p["results"][0]["dtype"]]
            data = bytes(p["attrs"]["value"])
            if (p["attrs"].get("splat") or p["results"][0]["shape"] == []) and len(data) == np.dtype(dtype).itemsize:
                return np.frombuffer(data, dtype)[0]
        return None

    body: List[Dict[str, Any]] = []

    def constant(value: Any, like: Dict[str, Any]) -> int:
        """A new broadcast of the scalar ``value`` to the shape of ``like`` (a result), placed before the rewrite."""
        scalar_id, array_id = fresh(), fresh()
        dtype = like["dtype"]
        c: Dict[str, Any] = {
            "op": "constant", "mlir": "stablehlo.constant", "operands": [],
            "results": [{"id": scalar_id, "dtype": dtype, "shape": []}],
            "attrs": {"value": Blob(np.asarray(value, DTYPES[dtype]).tobytes()), "splat": False}, "regions": []}
        b: Dict[str, Any] = {
            "op": "broadcast_in_dim", "mlir": "stablehlo.broadcast_in_dim", "operands": [scalar_id],
            "results": [{"id": array_id, "dtype": dtype, "shape": list(like["shape"])}],
            "attrs": {"broadcast_dimensions": []}, "regions": []}
        for e in (c, b):
            producer[e["results"][0]["id"]] = e
            body.append(e)
        return array_id

    def scalar_constant(value: Any, like: Dict[str, Any]) -> int:
        """A new scalar constant ``value`` (``like``: a rank-0 result), placed before the rewrite: a constant op,
        which ``scalar`` reads when a later product of the chain is reassociated in turn (``constant``'s broadcast
        of it is not)."""
        c: Dict[str, Any] = {
            "op": "constant", "mlir": "stablehlo.constant", "operands": [],
            "results": [{"id": fresh(), "dtype": like["dtype"], "shape": []}],
            "attrs": {"value": Blob(np.asarray(value, DTYPES[like["dtype"]]).tobytes()), "splat": False},
            "regions": []}
        producer[c["results"][0]["id"]] = c
        body.append(c)
        return c["results"][0]["id"]

    def scalar_factors(entry: Dict[str, Any]) -> Optional[tuple]:
        """((A, C1), (B, C2)) of a rank-0 (A * C1) * (B * C2) whose C1 and C2 are scalar constants (or what XLA
        folds into them) and A and B are not: XLA's HandleMultiply matches such constants (m::Constant), not the
        broadcasts an array's constants are, so only programs of scalars reassociate (measured on f32[]: x * c and
        y * d multiplied are (x * y) * (c * d) on cpu, 74 of 200 an ulp from the rounded products; (x / 7.25) ** k
        for k = 2, 3, 4 likewise, fuzz seed 20286221 #900; f32[2000] vectors are not)."""
        if entry["results"][0]["shape"] != [] or split(entry) is not None:
            return None
        factors = []
        for v in entry["operands"]:
            inner = producer.get(v)
            if inner is None or inner["op"] != "multiply" or inner["results"][0]["shape"] != []:
                return None
            constant_of = [scalar(o) for o in inner["operands"]]  # (a divide's 1 / C too: XLA folds it)
            if (constant_of[0] is None) == (constant_of[1] is None):
                return None
            k = 0 if constant_of[0] is not None else 1
            factors.append((inner["operands"][1 - k], constant_of[k]))
        return tuple(factors)

    def scaled_by_scalar(entry: Dict[str, Any]) -> Optional[tuple]:
        """(A, C1, S) of an array's (A * C1) * broadcast(S), either order, with C1 a constant and S a scalar that is
        not one: XLA's HandleMultiply multiplies the scalars first (measured on f32[12, 20]: (y * 1.5) * s is y *
        broadcast(s * 1.5) on cpu, 126 of 240 an ulp from the ops one by one; (y * s) * 1.5 and (y * s) * t stay)."""
        if entry["results"][0]["shape"] == []:
            return None
        for inner_id, outer_id in (entry["operands"], entry["operands"][::-1]):
            outer, inner = producer.get(outer_id), producer.get(inner_id)
            if outer is None or outer["op"] != "broadcast_in_dim" or outer["attrs"].get("broadcast_dimensions") or \
                    inner is None or inner["op"] != "multiply" or (ac := split(inner)) is None:
                continue
            s = outer["operands"][0]
            p = producer.get(s)
            if scalar(s) is None and (p is None or p["results"][0]["shape"] == []) and splat(inner_id) is None:
                return ac[0], ac[1], s
        return None

    def split(entry: Dict[str, Any]) -> Optional[tuple]:
        """(A, C) of a binary op with one constant operand and one that is not, either order."""
        a, b = entry["operands"]
        ka, kb = splat(a), splat(b)
        if kb is not None and ka is None:
            return a, kb
        if ka is not None and kb is None:
            return b, ka
        return None

    for entry in block["body"]:
        result = entry["results"][0] if entry["results"] else None
        if result is not None and result["dtype"] in DTYPES and len(entry["operands"]) == 2:
            dtype = DTYPES[result["dtype"]]
            op = entry["op"]
            a, b = entry["operands"]
            subtrahend = splat(b)
            if op == "subtract" and splat(a) is None and subtrahend is not None:  # A - C => A + (-C)
                entry = dict(entry, op="add", mlir="stablehlo.add", operands=[a, constant(-subtrahend, result)])
                op, changed = "add", True
            if op in ("add", "multiply") and (ac := split(entry)) is not None:
                inner = producer.get(ac[0])
                if inner is not None and inner["op"] == op and (ic := split(inner)) is not None:
                    folded = _fold(op, dtype, ic[1], ac[1])  # (A op C1) op C2 => A op (C1 op C2)
                    entry = dict(entry, operands=[ic[0], constant(folded, result)])
                    changed = True
                elif op == "add" and inner is not None and inner["op"] == "subtract" and \
                        splat(inner["operands"][0]) is not None and splat(inner["operands"][1]) is None:
                    folded = _fold("add", dtype, splat(inner["operands"][0]), ac[1])  # (C1 - A) + C2
                    entry = dict(entry, op="subtract", mlir="stablehlo.subtract",
                                 operands=[constant(folded, result), inner["operands"][1]])
                    changed = True
            if op == "multiply" and (moved := scaled_by_scalar(entry)) is not None:
                a, c1, s = moved  # (A * C1) * broadcast(S) => A * broadcast(S * C1), S a scalar that is no constant
                scaled = fresh()
                body.append({"op": "multiply", "mlir": "stablehlo.multiply",
                             "operands": [s, scalar_constant(c1, {"dtype": result["dtype"]})],
                             "results": [{"id": scaled, "dtype": result["dtype"], "shape": []}], "attrs": {},
                             "regions": []})
                spread = fresh()
                body.append({"op": "broadcast_in_dim", "mlir": "stablehlo.broadcast_in_dim", "operands": [scaled],
                             "results": [dict(result, id=spread)], "attrs": {"broadcast_dimensions": []},
                             "regions": []})
                entry = dict(entry, operands=[a, spread])
                changed = True
            if op == "multiply" and (pair := scalar_factors(entry)) is not None:
                (a, c1), (b, c2) = pair  # (A * C1) * (B * C2) => (A * B) * (C1 * C2), C1 and C2 scalar constants
                product = fresh()
                body.append(dict(entry, operands=[a, b], results=[dict(result, id=product)]))
                producer[product] = body[-1]
                entry = dict(entry, operands=[product, scalar_constant(_fold("multiply", dtype, c1, c2), result)])
                changed = True
        for r in entry["results"]:
            producer[r["id"]] = entry
        body.append(entry)
    block["body"] = body
    return changed


def _fold(op: str, dtype: Any, *args: Any) -> Any:
    """XLA's host arithmetic on constants of ``dtype`` (f16 computed in f32 and rounded once), denormals kept; a log
    correctly rounded (libm's logf, which XLA's evaluator calls, is within 0.82 ulp: correctly rounded at log(2))."""
    with np.errstate(all="ignore"):
        x = [np.float32(a) for a in args]
        value = {"add": lambda: x[0] + x[1], "subtract": lambda: x[0] - x[1], "multiply": lambda: x[0] * x[1],
                 "divide": lambda: x[0] / x[1], "negate": lambda: -x[0],
                 "log": lambda: np.float32(np.log(np.float64(x[0])))}[op]()
        return dtype(value)
