"""A product moved (reversed, transposed, reshaped, sliced) and then added: its multiply moves after the moves, where
XLA:CPU contracts it into the add.

XLA:CPU fuses the moves it can compute as index arithmetic into the loop of the add that reads them, and LLVM
contracts a multiply into the add or subtract that is its one user: one fused multiply-add, one rounding. The
emulator contracts a multiply into the add of its fused vertex (elementwise.cc) only where both are in one group of
elementwise ops, which a move ends. This pass writes ``add(move(a * b), c)`` as ``add(move(a) * move(b), c)``: the
same products of the same elements (a move only selects and orders elements), so every value is unchanged but the
sum, which then rounds once as on cpu (``jnp.flip(x * y, 0) - y``). Which moves XLA:CPU fuses so was measured per
series (f32[6, 6] and f32[16, 16], each result against a fused and an unfused reference):

- jaxlib 0.4.13: transpose, reshape, slice, and a reverse of leading dimensions (of the minor one only where the
  add's other operand is a splat constant: ``2 - jnp.flip(x * x, 1)``);
- jaxlib 0.12: reverse, reshape and slice (a transpose is its own loop there: no contraction), and a transpose that
  the add reads directly when the add's other operand is a broadcast or a constant: 0.12's simplifier moves the
  transpose below the add, transposing that operand instead, ``transpose(x * x) + b[None, :]`` =>
  ``transpose(x * x + b[:, None])`` (f32[64, 5]: a scalar, a row, a column, a constant; an array argument is not
  moved; fuzz seed 20261801 #283).

A concatenate of products is contracted as well where XLA:CPU contracts it (``concatenated_products``): the add then
reads ``concatenate(a1, a2) * concatenate(b1, b2)`` in place of ``concatenate(a1 * b1, a2 * b2)``.

A call of a function whose body is one such move of its parameter (jnp.flip is a jitted function) is that move: XLA
inlines calls before it fuses. Only f32 (where contraction happens), and a multiply and moves read once (by the
chain; otherwise XLA computes the product apart)."""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import id_counter

MOVES = ("reverse", "transpose", "reshape", "slice")
ADDS = ("add", "subtract")


def fuses(move: Dict[str, Any], operand_rank: int, current_series: bool, sinks: bool = False,
          splat: bool = False) -> bool:
    """Whether XLA:CPU computes ``move`` inside the loop of the add its chain feeds. ``sinks``: the move is a
    transpose the add reads directly and the add's other operand absorbs it (jaxlib 0.12 moves it below the add).
    ``splat``: the move is one the add reads directly and the add's other operand is a splat constant."""
    if move["op"] == "transpose":
        return not current_series or sinks
    if move["op"] == "reverse" and not current_series:
        return splat or operand_rank - 1 not in move["attrs"].get("dimensions", [])
    return move["op"] in MOVES


def _single_move(function: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The move a function is, if its body is one move of its one parameter that it returns."""
    body = function["body"]
    if len(function["params"]) != 1 or len(body) != 1 or body[0]["op"] not in MOVES:
        return None
    move = body[0]
    if move["operands"] != [function["params"][0]["id"]] or function["results"] != [move["results"][0]["id"]]:
        return None
    return move


def single_moves(functions: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """The functions that are one move of their parameter (jnp.flip), by name: a call of one is that move."""
    return {f["name"]: m for f in functions if (m := _single_move(f)) is not None}


def as_move(entry: Dict[str, Any], moves: Dict[str, Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """``entry`` as a move: itself, or the move a call of one of ``moves`` is (with the call's operand and result)."""
    if entry["op"] in MOVES:
        return entry
    if entry["op"] == "call" and entry["attrs"].get("callee") in moves and len(entry["operands"]) == 1:
        return dict(moves[entry["attrs"]["callee"]], results=entry["results"], operands=entry["operands"])
    return None


def _value(fresh_id: Callable[[], int], dtype: str, shape: List[int]) -> Dict[str, Any]:
    """A new value of the function (numbered after its others)."""
    return {"id": fresh_id(), "dtype": dtype, "shape": list(shape)}


def run(functions: List[Dict[str, Any]], anchors: Dict[str, Any], current_series: bool) -> List[Dict[str, Any]]:
    """Rewrites the program's functions in place (``anchors``: per function, the values jax's dce_sinks read);
    returns those it changed. What a rewrite bypasses is removed with it."""
    moves = single_moves(functions)
    changed = []
    for function in functions:
        fresh = functools.partial(_value, id_counter(function))
        if _block(function, fresh, anchors.get(function["name"], ()), moves, current_series):
            changed.append(function)
    return changed


def _count_uses(block: Dict[str, Any], uses: Dict[int, int]) -> None:
    """Adds to ``uses`` how many times each value is an operand in ``block``, its regions included."""
    for entry in block["body"]:
        for v in entry["operands"]:
            uses[v] = uses.get(v, 0) + 1
        for region in entry.get("regions", ()):
            _count_uses(region, uses)


def _block(block: Dict[str, Any], fresh: Any, anchors: Any, moves: Dict[str, Dict[str, Any]],
           current_series: bool) -> bool:
    changed = False
    for entry in block["body"]:
        for region in entry.get("regions", ()):
            changed = _block(region, fresh, anchors, moves, current_series) or changed
    uses: Dict[int, int] = {}
    _count_uses(block, uses)
    for v in list(block["results"]) + list(anchors):
        uses[v] = uses.get(v, 0) + 1
    producer = {r["id"]: e for e in block["body"] for r in e["results"]}
    types = {r["id"]: r for e in block["body"] for r in e["results"]}
    types.update({p["id"]: p for p in block.get("params", ())})

    body: List[Dict[str, Any]] = []
    dead: List[int] = []  # the chains' moves (or calls) and products: read once, by what the rewrite bypasses
    for entry in block["body"]:
        if entry["op"] in ADDS and entry["results"][0]["dtype"] == "f32":
            for side, operand in enumerate(entry["operands"]):
                chain: List[Dict[str, Any]] = []
                entries: List[Dict[str, Any]] = []
                value = operand
                sinks, splat = beside(entry, operand, producer)
                while value in producer and uses.get(value) == 1 and \
                        (move := as_move(producer[value], moves)) is not None:
                    source = move["operands"][0]
                    if source not in types or \
                            not fuses(move, len(types[source]["shape"]), current_series, sinks and not chain,
                                      splat and not chain):
                        break
                    chain.append(move)
                    entries.append(producer[value])
                    value = source
                product = producer.get(value)
                if not chain and product is not None and product["op"] == "concatenate" and uses.get(value) == 1:
                    rewritten = _contract_concatenate(body, fresh, entry, side, product, producer, uses, types, dead,
                                                      current_series)
                    if rewritten is None:
                        continue
                    entry, changed = rewritten, True
                    break
                if not chain or product is None or product["op"] != "multiply" or uses.get(value) != 1 \
                        or product["results"][0]["dtype"] != "f32":
                    continue
                dead.extend(id(e) for e in entries + [product])
                factors = []
                for factor in product["operands"]:
                    for move in reversed(chain):  # innermost first
                        result = fresh(move["results"][0]["dtype"], move["results"][0]["shape"])
                        body.append(dict(move, operands=[factor], results=[result]))
                        factor = result["id"]
                    factors.append(factor)
                moved = fresh("f32", chain[0]["results"][0]["shape"])
                body.append(dict(product, operands=factors, results=[moved]))
                entry = dict(entry, operands=[moved["id"] if i == side else v
                                              for i, v in enumerate(entry["operands"])])
                changed = True
        body.append(entry)
    block["body"] = [e for e in body if id(e) not in dead]
    return changed


def _contract_concatenate(body: List[Dict[str, Any]], fresh: Any, add: Dict[str, Any], side: int,
                          concat: Dict[str, Any], producer: Dict[int, Dict[str, Any]], uses: Dict[int, int],
                          types: Dict[int, Dict[str, Any]], dead: List[int],
                          current_series: bool) -> Optional[Dict[str, Any]]:
    """The add or subtract that reads ``concat`` (on ``side``, once) rewritten where XLA:CPU contracts the products
    the concatenate joins into it, or None; what it bypasses goes to ``dead``."""
    products = concatenated_products(concat, producer, uses, current_series)
    if products is not None:
        dead.extend(id(e) for e in [concat] + products)
        moved = _product_of_concatenates(body, fresh, concat, products)
        return dict(add, operands=[moved if i == side else v for i, v in enumerate(add["operands"])])
    if current_series and _some_products(concat, producer, uses):
        dead.append(id(concat))
        return _added_per_piece(body, fresh, add, side, concat, types)
    return None


def concatenated_products(concat: Dict[str, Any], producer: Dict[int, Dict[str, Any]], uses: Dict[int, int],
                          current_series: bool) -> Optional[List[Dict[str, Any]]]:
    """The f32 products a concatenate (read once, by an add or subtract) joins, if XLA:CPU contracts them into that
    add: each of its operands a multiply that only the concatenate reads (the same one several times, or different
    ones). XLA fuses the concatenate into the add's loop and computes each piece in a block of its own; LLVM sinks the
    multiply all the blocks end with into the add's block, and contracts it there. A piece of another op (an argument,
    a negation) ends a block differently, and nothing is sunk. Measured per series (f32[R, C] pieces, R in 3, 8, 40,
    C in 1 to 32, both dimensions, beside a whole array and a broadcast row, fuzz seed 20286112 #700):

    - one product repeated, its pieces one element wide in the minor dimension, is rounded
      (``jnp.concatenate([x * y] * 2, 1)`` of f32[8, 1]; jaxlib 0.12 contracts it for f32[40, 1]: not modelled);
    - jaxlib 0.12: a concatenate of the minor dimension is rounded where the result holds 512 elements or more and
      its rows 16 or more (_vectorised_across_pieces). Short rows concatenated along the major dimension beside a
      broadcast row are contracted or not by the vectoriser's remainder loop (f32[8, 3]): not modelled."""
    operands = concat["operands"]
    products = [producer.get(v) for v in dict.fromkeys(operands)]
    if any(p is None or p["op"] != "multiply" or p["results"][0]["dtype"] != "f32" or
           uses.get(p["results"][0]["id"]) != operands.count(p["results"][0]["id"]) for p in products):
        return None
    shape, dim = concat["results"][0]["shape"], concat["attrs"].get("dimension")
    minor = dim == len(shape) - 1
    piece = producer[operands[0]]["results"][0]["shape"]
    if len(products) < len(operands) and minor and piece[dim] == 1:
        return None
    if current_series and _vectorised_across_pieces(concat):
        return None
    return products  # type: ignore[return-value]


def _vectorised_across_pieces(concat: Dict[str, Any]) -> bool:
    """Whether jaxlib 0.12's XLA:CPU computes the add of ``concat`` in a loop vectorised across its pieces, where it
    selects between the pieces and contracts nothing: a concatenate of the minor dimension, with 512 elements or
    more and rows of 16 or more (measured: f32[R, C] pieces, R and C powers of two up to 64 and 128)."""
    shape, dim = concat["results"][0]["shape"], concat["attrs"].get("dimension")
    return dim == len(shape) - 1 and shape[-1] >= 16 and math.prod(shape) >= 512


def _some_products(concat: Dict[str, Any], producer: Dict[int, Dict[str, Any]], uses: Dict[int, int]) -> bool:
    """Whether some piece of a concatenate (but not every one: concatenated_products) is an f32 product only the
    concatenate reads, which jaxlib 0.12's XLA:CPU contracts into the add that reads the concatenate: its fused loop
    computes the add piece by piece there (f32[R, C] pieces beside an argument: every product piece contracted, but
    along the minor dimension of 512 elements or more, as in concatenated_products; jaxlib 0.4.13 contracts a lone
    product piece of f32[16, 16] and f32[64, 64] along the major dimension, not of f32[40, 4] or f32[8, 8], nor
    along the minor one: not modelled)."""
    operands = concat["operands"]
    if _vectorised_across_pieces(concat):
        return False
    return any((p := producer.get(v)) is not None and p["op"] == "multiply" and p["results"][0]["dtype"] == "f32"
               and uses.get(v) == operands.count(v) for v in operands)


def _added_per_piece(body: List[Dict[str, Any]], fresh: Any, add: Dict[str, Any], side: int,
                     concat: Dict[str, Any], types: Dict[int, Dict[str, Any]]) -> Dict[str, Any]:
    """``add(concatenate(p1, p2...), d)`` (the concatenate on ``side``) as ``concatenate(add(p1, d1), add(p2,
    d2)...)`` of the slices ``d_i`` of ``d`` beside each piece: the same sums of the same elements, each piece's
    product now in the add's fused vertex. Appends the slices and adds; returns the concatenate, which defines the
    add's result."""
    other = add["operands"][1 - side]
    shape, dim = concat["results"][0]["shape"], concat["attrs"]["dimension"]
    pieces, start = [], 0
    for piece in concat["operands"]:
        size = types[piece]["shape"][dim]
        part = list(shape)
        part[dim] = size
        cut = fresh("f32", part)
        body.append(dict(add, op="slice", mlir="stablehlo.slice", operands=[other], results=[cut], regions=[],
                         attrs={"start_indices": [start if d == dim else 0 for d in range(len(shape))],
                                "limit_indices": [start + size if d == dim else n for d, n in enumerate(shape)],
                                "strides": [1] * len(shape)}))
        summed = fresh("f32", part)
        body.append(dict(add, operands=[piece, cut["id"]] if side == 0 else [cut["id"], piece], results=[summed]))
        pieces.append(summed["id"])
        start += size
    return dict(concat, operands=pieces, results=add["results"])


def _product_of_concatenates(body: List[Dict[str, Any]], fresh: Any, concat: Dict[str, Any],
                             products: List[Dict[str, Any]]) -> int:
    """Appends ``concatenate(a1, a2...) * concatenate(b1, b2...)`` for the concatenate of products ``a_i * b_i``
    (the same products of the same elements, in the same places); returns the product's id."""
    by_id = {p["results"][0]["id"]: p for p in products}
    factors = []
    for side in (0, 1):
        joined = fresh("f32", concat["results"][0]["shape"])
        body.append(dict(concat, operands=[by_id[v]["operands"][side] for v in concat["operands"]], results=[joined]))
        factors.append(joined["id"])
    moved = fresh("f32", concat["results"][0]["shape"])
    body.append(dict(products[0], operands=factors, results=[moved]))
    return moved["id"]


def beside(add: Dict[str, Any], value: int, producer: Dict[int, Dict[str, Any]]) -> Tuple[bool, bool]:
    """What ``fuses`` asks of the add or subtract at the end of a chain that reads ``value`` once: whether its other
    operand absorbs a transpose (``sinks``) and whether it is a splat constant (``splat``); neither for another op."""
    if add["op"] not in ADDS or len(add["operands"]) != 2 or add["operands"].count(value) != 1:
        return False, False
    other = next(v for v in add["operands"] if v != value)
    return absorbs_transpose(other, producer, producer.get(value)), splat_constant(other, producer)


def absorbs_transpose(value: int, producer: Dict[int, Dict[str, Any]],
                      transpose: Optional[Dict[str, Any]] = None) -> bool:
    """Whether jaxlib 0.12's simplifier can write ``value`` transposed for free: a broadcast (of anything) or a
    constant, the other operand of an add it then computes before the transpose; or, beside ``transpose``, a
    transpose by the same permutation (XLA's ReshapeMover moves both below the add: ``(x * y).T + z.T`` is
    ``(x * y + z).T``, contracted, on jaxlib 0.12)."""
    p = producer.get(value)
    if p is not None and transpose is not None and p["op"] == transpose["op"] == "transpose":
        return p["attrs"].get("permutation") == transpose["attrs"].get("permutation") and \
            p["results"][0]["shape"] == transpose["results"][0]["shape"]
    return p is not None and p["op"] in ("broadcast_in_dim", "constant")


def splat_constant(value: Optional[int], producer: Dict[int, Dict[str, Any]]) -> bool:
    """Whether ``value`` is one constant number: a scalar constant, or one broadcast (the front end writes a splat
    constant that elementwise ops read so). Beside one, jaxlib 0.4.13's XLA:CPU contracts a product into the add
    through a reverse of the minor dimension too (``2 - jnp.flip(x * x, 1)``; beside an argument, a broadcast
    argument or a constant array it rounds the product: f32[8, 6], fuzz seed 20280501 #6125)."""
    p = producer.get(value) if value is not None else None
    if p is not None and p["op"] == "broadcast_in_dim":
        p = producer.get(p["operands"][0])
    return p is not None and p["op"] == "constant" and p["results"][0]["shape"] == []
