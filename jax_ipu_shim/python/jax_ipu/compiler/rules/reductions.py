"""Rules for reductions and windows, as XLA's simplifier and XLA:CPU's window rewriter change them.

- ``reduce(concatenate(A, B, ...))`` over the concatenated dimension is the combination of the pieces' reductions.
- A reduce of a value a reshape or transpose moved reduces the source instead (the sum's order is the source's).
- A reduce with as many results as operand elements is a reshape, and a one-element reduce_window is the element.
- The current series' XLA:CPU computes a cumulative reduce_window (cumsum, cumprod...) as a tree of rows of 16
  (ReduceWindowRewriter), whose partial sums associate differently from a running sum; the ipu writes the same tree.
Each writes the additions in the order XLA:CPU performs them, so the rounding is the same; the values reduced are
the same elements."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

from jax._src.lib.mlir import ir

from jax_ipu import _jax

from .. import attributes as A
from .. import facts as F
from .. import ops as O
from .. import rewrite as W

# The reductions whose one-element windows XLA:CPU returns as they are (jnp.cumsum, cummax and cummin along an axis of
# length 1, lax.reduce_window of window 1); a product's it still multiplies by the init value 1, flushing a denormal.
_ONE_ELEMENT_WINDOW_IS_THE_ELEMENT = ("add", "maximum", "minimum", "or", "and")


_SCAN_BASE = 16  # XLA:CPU's ReduceWindowRewriter(base_length=16): its scans' rows


_SCAN_COMPUTATIONS = ("add", "multiply", "maximum", "minimum", "and", "or")


def _mappable_body(op: Any) -> bool:
    """A one-result body of elementwise ops and scalar constants (cumlogsumexp's logaddexp), which the front end can
    apply to whole arrays as XLA's map does."""
    if len(op.results) != 1 or len(op.regions) != 1:
        return False
    for inner in op.regions[0].blocks[0].operations:
        inner = getattr(inner, "operation", inner)
        if inner.name in ("stablehlo.return", "stablehlo.constant"):
            continue
        entry = O.registry().get(inner.name.split(".", 1)[-1]) if inner.name.startswith("stablehlo.") else None
        if entry is None or not entry["elementwise"] or len(inner.regions):
            return False
    return True


def _scan_window(op: Any) -> Optional[Tuple[List[int], int, bool, bool]]:
    """(operand shape, axis, forward, exclusive) for a reduce_window that XLA's ReduceWindowRewriter takes for a scan:
    one operand, a known reducer, every window dimension trivial but one, whose window is the whole axis (stride 1, no
    dilation) with the axis' length less one (inclusive) or the length (exclusive) of padding on one side, over an
    axis longer than the base length; else None."""
    if len(op.operands) != 2 or (F.body_computation(op, False) not in _SCAN_COMPUTATIONS and not _mappable_body(op)):
        return None
    attrs = O.read_attrs(op.attributes)
    shape = list(ir.RankedTensorType(op.operands[0].type).shape)
    rank = len(shape)
    sizes = attrs.get("window_dimensions") or [1] * rank
    strides = attrs.get("window_strides") or [1] * rank
    base = attrs.get("base_dilations") or [1] * rank
    dilations = attrs.get("window_dilations") or [1] * rank
    padding = attrs.get("padding") or [[0, 0]] * rank
    axes = [d for d in range(rank) if (sizes[d], strides[d], base[d], dilations[d], list(padding[d])) !=
            (1, 1, 1, 1, [0, 0])]
    if len(axes) != 1:
        return None
    d = axes[0]
    length, (low, high) = shape[d], padding[d]
    if strides[d] != 1 or sizes[d] != length or base[d] != 1 or dilations[d] != 1 or length <= _SCAN_BASE:
        return None
    forward = low in (length - 1, length) and high == 0
    reverse = high in (length - 1, length) and low == 0
    if not (forward or reverse):
        return None
    return shape, d, forward, (low if forward else high) == length


_REDUCER_IDENTITY = {"add": 0.0, "multiply": 1.0, "maximum": -math.inf, "minimum": math.inf}


def _reduces_one_element(op: Any) -> bool:
    """A reduce of one operand over dimensions of one element only, whose init value is its combiner's identity."""
    if len(op.operands) != 2 or len(op.results) != 1:
        return False
    operand = op.operands[0].type
    dims = list(O.read_attrs(op.attributes).get("dimensions") or [])
    if not A.is_a(ir.RankedTensorType, operand) or any(operand.shape[d] != 1 for d in dims):
        return False
    computation = F.body_computation(op, False)
    return computation in _REDUCER_IDENTITY and F.splat_value(op.operands[1]) == _REDUCER_IDENTITY[computation]


def _reduce_of_concatenate(op: Any) -> Optional[Tuple[str, int, List[int], List[Any]]]:
    """(the combiner, the concatenated dimension, the pieces' sizes along it, the pieces where they are this
    function's values, else []) for a reduce of one operand, whose body is one reducer op, over a concatenation (or
    a called function's: XLA inlines it) along a dimension it reduces: what XLA's simplifier splits into a reduce
    per piece (_reduce_pieces); else None."""
    if len(op.operands) != 2 or len(op.results) != 1 or not A.is_a(ir.RankedTensorType, op.operands[0].type):
        return None
    combine = F.body_computation(op, False)
    producer = F.producer_of(op.operands[0])
    if combine is None or producer is None:
        return None
    returned = F.returned_op(producer) if producer.name == "func.call" else None
    called = returned is not None
    if returned is not None:
        producer = returned[0]
    if producer.name != "stablehlo.concatenate" or len(producer.operands) < 2:
        return None
    dim = int(O.read_attrs(producer.attributes)["dimension"])
    if dim not in (O.read_attrs(op.attributes).get("dimensions") or []):
        return None
    return (combine, dim, [int(ir.RankedTensorType(v.type).shape[dim]) for v in producer.operands],
            [] if called else list(producer.operands))


def _reduce_through_moves(op: Any) -> Optional[Tuple[Any, List[int], Optional[List[int]]]]:
    """(the value, the dimensions to reduce over it, None) where XLA's simplifier reduces through the reshapes and
    transposes that feed a reduce of one operand (AlgebraicSimplifier::HandleReduce): through a reshape whose kept
    dimensions it leaves unmodified (here: the kept dimensions are a leading run of both shapes, every dimension
    reduced included), and through a transpose when the reduce's result has rank 0 or 1. Where the reduce reads
    elementwise ops of transposes instead (and of broadcasts and splats), layout assignment gives those ops the
    transposed layout, so the sum's order is again the untransposed one (jnp.sum(jnp.exp(x.T - m), 1), as in
    jax.nn.log_softmax(x.T, axis=1): fuzz seed 20271301 #436): (the reduce's operand, the dimensions to reduce once it
    is transposed back, that permutation). None where neither applies."""
    if len(op.operands) != 2 or len(op.results) != 1 or not A.is_a(ir.RankedTensorType, op.operands[0].type):
        return None
    return _moved_reduce(op.operands[0], O.read_attrs(op.attributes).get("dimensions") or [],
                         len(op.results[0].type.shape))


def _moved_reduce(value: Any, dims: List[int], rank: int) -> Optional[Tuple[Any, List[int], Optional[List[int]]]]:
    """_reduce_through_moves of a reduce of `value` over `dims` to a result of rank `rank`."""
    dims, moved = sorted(dims), False
    while (producer := F.producer_of(value)) is not None and \
            producer.name in ("stablehlo.reshape", "stablehlo.transpose"):
        source = producer.operands[0]
        if not A.is_a(ir.RankedTensorType, source.type):
            break
        out_shape, in_shape = list(value.type.shape), list(source.type.shape)
        if producer.name == "stablehlo.reshape":
            kept = [d for d in range(len(out_shape)) if d not in dims]
            if in_shape == out_shape:
                pass
            elif kept == list(range(len(kept))) and in_shape[:len(kept)] == out_shape[:len(kept)]:
                dims = list(range(len(kept), len(in_shape)))
            else:
                break
        else:
            if rank >= 2:
                break
            permutation = list(O.read_attrs(producer.attributes)["permutation"])
            dims = sorted(permutation[d] for d in dims)
        value, moved = source, True
    if moved:
        return value, dims, None
    transposed = _transposed_elementwise(value) if rank < 2 else None
    if transposed is None:
        return None
    return value, sorted(transposed[d] for d in dims), [transposed.index(d) for d in range(len(transposed))]


def _transposed_elementwise(value: Any, depth: int = 6) -> Optional[List[int]]:
    """The permutation of the transposes an elementwise op (of elementwise ops...) reads, where every operand that is
    not a splat constant or a broadcast is a transpose by that same permutation (not the identity); else None."""
    producer = F.producer_of(value)
    if producer is None and (outer := F.passed_in(value)) is not None:  # (jax.nn.log_softmax's call, inlined)
        producer = F.producer_of(outer)
    if producer is None or depth == 0 or len(producer.results) != 1:
        return None
    if producer.name == "stablehlo.transpose" and depth < 6:
        permutation = list(O.read_attrs(producer.attributes)["permutation"])
        return permutation if permutation != sorted(permutation) else None
    entry = O.registry().get(producer.name.split(".", 1)[-1]) if producer.name.startswith("stablehlo.") else None
    if entry is None or entry["family"] not in ("unary", "binary"):
        return None
    found = []
    for operand in producer.operands:
        below = F.producer_of(operand)
        if F.splat_value(operand) is not None or (below is not None and below.name == "stablehlo.broadcast_in_dim"):
            continue
        found.append(_transposed_elementwise(operand, depth - 1))
    return found[0] if found and all(f is not None and f == found[0] for f in found) else None


def _one_element_windows(op: Any) -> bool:
    """A reduce_window of one operand whose every window is one element (sizes, strides and dilations all 1)."""
    if len(op.operands) != 2:
        return False
    attrs = O.read_attrs(op.attributes)
    return all(all(d == 1 for d in attrs.get(name) or [1])
               for name in ("window_dimensions", "window_strides", "base_dilations", "window_dilations"))


def _reduce_pieces(t: Any, entry: Dict[str, Any], op: Any, combine: str, dim: int, sizes: List[int],
                   values: List[Any]) -> List[Dict[str, Any]]:
    """XLA's simplifier (both series): reduce(concatenate(A, B, ...)) over the concatenated dimension is
    combine(combine(reduce(A), reduce(B)), ...), each reduce from the init value (HandleReduce), so the pieces are
    summed apart and their sums added: jnp.sum(jnp.roll(x, -2)) is sum(x[2:]) + sum(x[:2]) on cpu (fuzz seed
    20271501 #1057). The pieces are sliced back out of the concatenation (bit for bit what it holds), which may
    be a called function's result; a piece that is a move of this function's (`values`) is reduced through it as
    any reduce is (_moved_reduce): jnp.sum(jnp.concatenate([x.T, x.T], 1), 1) is sum(x, 0) + sum(x, 0) on cpu, in
    x's order (f32 on jaxlib 0.4.13: fuzz seed 20286731 #744). Not for a reduce to a scalar, whose pieces jaxlib
    0.4.13 reduces as they are moved (measured: jnp.sum(jnp.concatenate([x.T, y.T], 1)) sums the transposes)."""
    dtype, shape = t.tensor(op.operands[0])
    out = entry["results"][0]
    if out["dtype"] == "bool":  # (XLA's convention for bool reductions, as the emulator's reduce)
        combine = {"add": "or", "multiply": "and"}.get(combine, combine)
    rank = len(shape)
    ops: List[Dict[str, Any]] = []
    total: Optional[Dict[str, Any]] = None
    start = 0
    for k, size in enumerate(sizes):
        limit = list(shape)
        limit[dim] = start + size
        begin = [0] * rank
        begin[dim] = start
        piece = t.fresh(dtype, [hi - lo for lo, hi in zip(begin, limit)])
        attrs = entry["attrs"]
        moved = _moved_reduce(values[k], attrs["dimensions"], len(out["shape"])) if values and out["shape"] and \
            math.prod(piece["shape"]) > math.prod(out["shape"]) else None
        if moved is None:
            ops.append(W.derived(entry, "slice", [entry["operands"][0]], [piece],
                                {"start_indices": begin, "limit_indices": limit, "strides": [1] * rank}))
        else:
            piece_dtype, piece_shape = t.tensor(moved[0])
            piece = {"id": t.use(moved[0])}
            if moved[2] is not None:  # (elementwise ops of transposes: the same values in the source's order)
                piece = t.fresh(piece_dtype, [piece_shape[d] for d in moved[2]])
                ops.append(W.derived(entry, "transpose", [t.use(moved[0])], [piece], {"permutation": moved[2]}))
            attrs = dict(attrs, dimensions=moved[1])
        last = k == len(sizes) - 1
        reduced = t.fresh(out["dtype"], out["shape"])
        ops.append(dict(entry, operands=[piece["id"], entry["operands"][1]], results=[reduced], attrs=attrs))
        if total is None:
            total = reduced
        else:
            combined = out if last else t.fresh(out["dtype"], out["shape"])
            ops.append(W.derived(entry, combine, [total["id"], reduced["id"]], [combined]))
            total = combined
        start += size
    return ops


class _TreeScan:
    """A cumulative reduce_window (jnp.cumsum, cumprod, cummax and cummin as jaxlib 0.12 lowers them: a window
    of the whole axis) as XLA:CPU's ReduceWindowRewriter (base length 16) rewrites it, so the ipu combines the
    elements in cpu's order, in linear time: the axis, moved last and padded with the init value to a multiple
    of 16, scanned in rows of 16; the rows' last (first, in reverse) elements scanned exclusively, the same
    way, and combined with each row's scan; the padding sliced off again. (A class, not closures: the scan
    recurses, and a closure that calls itself is a reference cycle that keeps the document for the garbage
    collector.)"""

    def __init__(self, t: Any, entry: Dict[str, Any], forward: bool) -> None:
        self.rewrite = W.Rewrite(t, entry)
        self.init = entry["operands"][1]
        self.computation = entry["attrs"].get("computation")  # None: a body of several ops (cumlogsumexp's)
        self.region = entry["regions"][0] if self.computation is None else None
        self.t, self.forward = t, forward

    def reduce_window(self, x: int, out_shape: List[int], attrs: Dict[str, Any]) -> int:
        if self.computation is not None:
            attrs["computation"] = self.computation
        result = self.rewrite.emit("reduce_window", [x, self.init], shape=out_shape, attrs=attrs)
        if self.region is not None:
            self.rewrite.ops[-1]["regions"] = [_renumbered(self.t, self.region)]
        return result

    def window(self, x: int, x_shape: List[int], size: int, pad: int, out_len: int) -> int:
        rank = len(x_shape)
        return self.reduce_window(x, x_shape[:-1] + [out_len], {
            "window_dimensions": [1] * (rank - 1) + [size], "window_strides": [1] * rank,
            "base_dilations": [1] * rank, "window_dilations": [1] * rank,
            "padding": [[0, 0]] * (rank - 1) + [[pad, 0] if self.forward else [0, pad]]})

    def combine(self, a: int, b: int, shape: List[int]) -> int:
        """The body applied to a and b elementwise (XLA's map of it)."""
        if self.region is None:
            return self.rewrite.emit(self.computation, [a, b], shape=shape)
        values = {p["id"]: v for p, v in zip(self.region["params"], (a, b))}
        for inner in self.region["body"]:
            dtype = inner["results"][0]["dtype"]
            if inner["op"] == "constant":
                scalar = self.rewrite.emit("constant", [], dtype, shape=[], attrs=inner["attrs"])
                values[inner["results"][0]["id"]] = self.rewrite.emit(
                    "broadcast_in_dim", [scalar], dtype, shape=shape, attrs={"broadcast_dimensions": []}) \
                    if shape else scalar
            else:
                values[inner["results"][0]["id"]] = self.rewrite.emit(
                    inner["op"], [values[o] for o in inner["operands"]], dtype, shape=shape, attrs=inner["attrs"])
        return values[self.region["results"][0]]

    def scan(self, x: int, x_shape: List[int], d: int, excl: bool) -> int:
        rank, length = len(x_shape), x_shape[d]
        if length <= _SCAN_BASE:  # XLA:CPU's own window, each output from init in the window's order
            pad = length if excl else length - 1
            out_shape = list(x_shape)
            out_shape[d] += 1 if excl else 0
            window_dims, padding = [1] * rank, [[0, 0]] * rank
            window_dims[d], padding[d] = length, [pad, 0] if self.forward else [0, pad]
            return self.reduce_window(x, out_shape, {
                "window_dimensions": window_dims, "window_strides": [1] * rank, "base_dilations": [1] * rank,
                "window_dilations": [1] * rank, "padding": padding})
        perm = list(range(rank))
        perm[d], perm[-1] = perm[-1], perm[d]
        moved = [x_shape[p] for p in perm]
        if d != rank - 1:
            x = self.rewrite.emit("transpose", [x], shape=moved, attrs={"permutation": perm})
        padded = -(-length // _SCAN_BASE) * _SCAN_BASE
        if padded != length:
            x = self.rewrite.emit("pad", [x, self.init], shape=moved[:-1] + [padded], attrs={
                "edge_padding_low": [0] * rank, "edge_padding_high": [0] * (rank - 1) + [padded - length],
                "interior_padding": [0] * rank})
        columns = padded // _SCAN_BASE
        tiled = moved[:-1] + [columns, _SCAN_BASE]
        x = self.rewrite.emit("reshape", [x], shape=tiled)
        rows = self.window(x, tiled, _SCAN_BASE, _SCAN_BASE - 1, _SCAN_BASE)
        edge = _SCAN_BASE - 1 if self.forward else 0
        column = self.rewrite.emit("slice", [rows], shape=tiled[:-1] + [1], attrs={
            "start_indices": [0] * rank + [edge], "limit_indices": tiled[:-1] + [edge + 1],
            "strides": [1] * (rank + 1)})
        column = self.rewrite.emit("reshape", [column], shape=tiled[:-1])
        carried = self.scan(column, tiled[:-1], rank - 1, True)  # [..., columns + 1]
        start = 0 if self.forward else 1
        carried = self.rewrite.emit("slice", [carried], shape=tiled[:-1], attrs={
            "start_indices": [0] * (rank - 1) + [start], "limit_indices": tiled[:-2] + [start + columns],
            "strides": [1] * rank})
        carried = self.rewrite.emit("broadcast_in_dim", [carried], shape=tiled,
                                    attrs={"broadcast_dimensions": list(range(rank))})
        out = self.combine(rows, carried, tiled)
        out = self.rewrite.emit("reshape", [out], shape=moved[:-1] + [padded])
        full = list(x_shape)
        full[d] = padded
        if d != rank - 1:
            out = self.rewrite.emit("transpose", [out], shape=full, attrs={"permutation": perm})
        if padded != length:
            out = self.rewrite.emit("slice", [out], shape=x_shape, attrs={
                "start_indices": [0] * rank, "limit_indices": list(x_shape), "strides": [1] * rank})
        if excl:
            out_shape = list(x_shape)
            out_shape[d] += 1
            low, high = [0] * rank, [0] * rank
            (low if self.forward else high)[d] = 1
            out = self.rewrite.emit("pad", [out, self.init], shape=out_shape, attrs={
                "edge_padding_low": low, "edge_padding_high": high, "interior_padding": [0] * rank})
        return out


def _scan_as_tree(t: Any, entry: Dict[str, Any], shape: List[int], dim: int, forward: bool,
                  exclusive: bool) -> List[Dict[str, Any]]:
    """_TreeScan's ops for the reduce_window ``entry``."""
    scan = _TreeScan(t, entry, forward)
    scan.scan(entry["operands"][0], shape, dim, exclusive)
    scan.rewrite.ops[-1]["results"] = entry["results"]  # the last op writes the reduce_window's own result
    return scan.rewrite.ops


def _renumbered(t: Any, region: Dict[str, Any]) -> Dict[str, Any]:
    """A copy of a translated region with fresh ids for its values (for a second op with the same body)."""
    ids: Dict[int, int] = {}

    def fresh(value: Dict[str, Any]) -> Dict[str, Any]:
        new = t.fresh(value["dtype"], value["shape"])
        ids[value["id"]] = new["id"]
        return new

    params = [fresh(p) for p in region["params"]]
    body = []
    for inner in region["body"]:
        operands = [ids.get(o, o) for o in inner["operands"]]
        body.append(dict(inner, operands=operands, results=[fresh(r) for r in inner["results"]]))
    return dict(region, params=params, body=body, results=[ids.get(r, r) for r in region["results"]])


def scan_as_tree(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.reduce_window" and not scalar_body and _jax.is_current_series()
            and (scan := _scan_window(op)) is not None):
        return False
    body.extend(_scan_as_tree(t, t.entry(op), *scan))
    return True


def one_element_windows(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.reduce_window" and not scalar_body and _one_element_windows(op)
            and F.body_computation(op, False) in _ONE_ELEMENT_WINDOW_IS_THE_ELEMENT
            and not (_jax.is_current_series() and t.dtype_of(op) == "bf16")):
        return False
    # XLA's simplifier: a window of one element, stride 1, no dilation, is that element; padding is
    # the init value (a sum does not turn -0 into +0, a maximum does not flush a denormal). Not a bf16
    # one in jaxlib 0.12: its float normalization has already put it between converts to and from f32,
    # where it is computed (init + x, flushing a denormal)
    entry = t.entry(op)
    padding = entry["attrs"].get("padding") or []
    if not any(lo or hi for lo, hi in padding):
        t.ids[op.results[0]] = t.use(op.operands[0])
    else:
        body.append(W.derived(entry, "pad", entry["operands"][:2], entry["results"], {
            "edge_padding_low": [lo for lo, _ in padding], "edge_padding_high": [hi for _, hi in padding],
            "interior_padding": [0] * len(padding)}))
    return True


def reduce_of_concatenate(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.reduce" and not scalar_body and (pieces := _reduce_of_concatenate(op))):
        return False
    body.extend(_reduce_pieces(t, t.entry(op), op, *pieces))
    return True


def reduce_through_moves(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.reduce" and not scalar_body and not _reduces_one_element(op)
            and (moved := _reduce_through_moves(op)) is not None):
        return False
    # XLA's simplifier reduces the value a reshape or transpose moved (reduce(reshape(x)) => reduce(x)
    # over x's dimensions): the sum's order is then that of x's shape, not the moved one's
    entry = t.entry(op)
    entry["operands"][0] = t.use(moved[0])
    entry["attrs"]["dimensions"] = moved[1]
    if moved[2] is not None:  # (elementwise ops of transposes: the same values in the source's order)
        dtype, shape = t.tensor(moved[0])
        back = t.fresh(dtype, [shape[d] for d in moved[2]])
        body.append(W.derived(entry, "transpose", [entry["operands"][0]], [back],
                             {"permutation": moved[2]}))
        entry["operands"][0] = back["id"]
    body.append(entry)
    return True


def reduce_of_one_element(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.reduce" and not scalar_body and _reduces_one_element(op)
            and t.real_float(op)):
        return False
    # XLA's simplifier: a reduce with as many results as operand elements is a reshape (its init value
    # the identity), so a denormal or a -0 stays; only where the init is the identity, as jax's is
    entry = t.entry(op)
    body.append(W.derived(entry, "reshape", entry["operands"][:1], entry["results"]))
    return True
