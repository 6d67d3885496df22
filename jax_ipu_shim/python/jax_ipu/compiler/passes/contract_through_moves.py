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

A call of a function whose body is one such move of its parameter (jnp.flip is a jitted function) is that move: XLA
inlines calls before it fuses. Only f32 (where contraction happens), and a multiply and moves read once (by the
chain; otherwise XLA computes the product apart)."""

from __future__ import annotations

import functools
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


def beside(add: Dict[str, Any], value: int, producer: Dict[int, Dict[str, Any]]) -> Tuple[bool, bool]:
    """What ``fuses`` asks of the add or subtract at the end of a chain that reads ``value`` once: whether its other
    operand absorbs a transpose (``sinks``) and whether it is a splat constant (``splat``); neither for another op."""
    if add["op"] not in ADDS or len(add["operands"]) != 2 or add["operands"].count(value) != 1:
        return False, False
    other = next(v for v in add["operands"] if v != value)
    return absorbs_transpose(other, producer), splat_constant(other, producer)


def absorbs_transpose(value: int, producer: Dict[int, Dict[str, Any]]) -> bool:
    """Whether jaxlib 0.12's simplifier can write ``value`` transposed for free: a broadcast (of anything) or a
    constant, the other operand of an add it then computes before the transpose."""
    p = producer.get(value)
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
