"""A product moved (reversed, transposed, reshaped, sliced) and then added: its multiply moves after the moves, where
XLA:CPU contracts it into the add.

XLA:CPU fuses the moves it can compute as index arithmetic into the loop of the add that reads them, and LLVM
contracts a multiply into the add or subtract that is its one user: one fused multiply-add, one rounding. The
emulator contracts a multiply into the add of its fused vertex (elementwise.cc) only where both are in one group of
elementwise ops, which a move ends. This pass writes ``add(move(a * b), c)`` as ``add(move(a) * move(b), c)``: the
same products of the same elements (a move only selects and orders elements), so every value is unchanged but the
sum, which then rounds once as on cpu (``jnp.flip(x * y, 0) - y``). Which moves XLA:CPU fuses so was measured per
series (f32[6, 6] and f32[16, 16], each result against a fused and an unfused reference):

- jaxlib 0.4.13: transpose, reshape, slice, and a reverse of leading dimensions (not of the minor one);
- jaxlib 0.12: reverse, reshape and slice (a transpose is its own loop there: no contraction).

A call of a function whose body is one such move of its parameter (jnp.flip is a jitted function) is that move: XLA
inlines calls before it fuses. Only f32 (where contraction happens), and a multiply and moves read once (by the
chain; otherwise XLA computes the product apart)."""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, Optional

from . import id_counter

MOVES = ("reverse", "transpose", "reshape", "slice")
ADDS = ("add", "subtract")


def _fuses(move: Dict[str, Any], operand_rank: int, current_series: bool) -> bool:
    if move["op"] == "transpose":
        return not current_series
    if move["op"] == "reverse" and not current_series:
        return operand_rank - 1 not in move["attrs"].get("dimensions", [])
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


def _value(fresh_id: Callable[[], int], dtype: str, shape: List[int]) -> Dict[str, Any]:
    """A new value of the function (numbered after its others)."""
    return {"id": fresh_id(), "dtype": dtype, "shape": list(shape)}


def run(functions: List[Dict[str, Any]], anchors: Dict[str, Any], current_series: bool) -> List[Dict[str, Any]]:
    """Rewrites the program's functions in place (``anchors``: per function, the values jax's dce_sinks read);
    returns those it changed. What a rewrite bypasses is removed with it."""
    moves = {f["name"]: m for f in functions if (m := _single_move(f)) is not None}
    changed = []
    for function in functions:
        fresh = functools.partial(_value, id_counter(function))
        if _block(function, fresh, anchors.get(function["name"], ()), moves, current_series):
            changed.append(function)
    return changed


def _block(block: Dict[str, Any], fresh: Any, anchors: Any, moves: Dict[str, Dict[str, Any]],
           current_series: bool) -> bool:
    changed = False
    for entry in block["body"]:
        for region in entry.get("regions", ()):
            changed = _block(region, fresh, anchors, moves, current_series) or changed
    uses: Dict[int, int] = {}

    def count(b: Dict[str, Any]) -> None:
        for e in b["body"]:
            for v in e["operands"]:
                uses[v] = uses.get(v, 0) + 1
            for region in e.get("regions", ()):
                count(region)
    count(block)
    for v in list(block["results"]) + list(anchors):
        uses[v] = uses.get(v, 0) + 1
    producer = {r["id"]: e for e in block["body"] for r in e["results"]}
    types = {r["id"]: r for e in block["body"] for r in e["results"]}
    types.update({p["id"]: p for p in block.get("params", ())})

    def as_move(entry: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        if entry["op"] in MOVES:
            return entry
        if entry["op"] == "call" and entry["attrs"].get("callee") in moves and len(entry["operands"]) == 1:
            return dict(moves[entry["attrs"]["callee"]], results=entry["results"], operands=entry["operands"])
        return None

    body: List[Dict[str, Any]] = []
    dead: List[int] = []  # the chains' moves (or calls) and products: read once, by what the rewrite bypasses
    for entry in block["body"]:
        if entry["op"] in ADDS and entry["results"][0]["dtype"] == "f32":
            for side, operand in enumerate(entry["operands"]):
                chain, entries, value = [], [], operand
                while value in producer and uses.get(value) == 1 and (move := as_move(producer[value])) is not None:
                    source = move["operands"][0]
                    if source not in types or not _fuses(move, len(types[source]["shape"]), current_series):
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
