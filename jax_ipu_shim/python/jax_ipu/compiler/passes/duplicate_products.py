"""A product that several ops read is computed again inside each add or subtract among them, where XLA:CPU contracts
the copy into the add.

XLA's instruction fusion duplicates a cheap producer into every consumer loop it fuses with, unless its global rule
(``ComputeGloballyUnfusible``) forbids it. A multiply may be duplicated when it is effectively unary (at most one of
its operands is neither a broadcast, an iota nor a scalar constant: ``x * 3.7``, ``x / t`` after XLA's reciprocal
rewrite, ``x * scale[None, :]``), when its distinct operands hold no more elements than it does (``x * x``), or when
every reader can take a copy (all of them elementwise, or reduces XLA fuses, in the same computation, and every path
from the product to one of them fusible: through elementwise ops and moves, no expensive one read twice: ``x * y +
1`` and ``x * y - 2``, ``t + 1`` beside ``t * exp(t)``). In the copy inside an add or subtract's loop, LLVM
contracts the multiply into the add: one fused multiply-add, one rounding. So ``t = x * 3.7; (t + y, jnp.sum(t))``
adds an unrounded product on cpu, and softmax's ``t - max(t)`` of a scaled ``t`` is the product's rounding error,
not 0, where the max was taken (its exp of a huge ``t`` overflows: cpu's logsumexp is NaN there).

This pass gives each f32 add or subtract that reads such a multiply (with other readers) its own copy of it, placed
just before the add, also where the add reads it through moves that XLA fuses into the add's loop
(contract_through_moves' rules: ``jnp.square(x).T + 1`` beside ``logsumexp(jnp.square(x), 0)``; the copy multiplies
the moved factors, the same products in the same places); the emulator's fusion then contracts the copy as it
contracts any multiply read once (fusion.cc). The copy computes the same product of the same operands, so only the
add's rounding changes, to cpu's. The original stays for its other readers; one that no longer has any is removed.
Readers that XLA fuses into one loop together (their results meet in an op, through elementwise ops and moves, or in
a reduce) share one copy there, which LLVM does not contract: those adds keep the rounded product (``(t + 1) - (t -
y) * 0.5``). Measured on both series (f32[64, 33], every element against cpu): ``x * c + y`` and ``x * x - y``
beside a reduction of the product, ``x * c - max(x * c)``. A reduce takes a copy only where XLA:CPU fuses it
(_reduce_fuses): ``x * y`` read by an add and a sum over 64 rows stays one product on cpu, beside an argmin or a sum
of rows of 20 it is copied."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

from .. import ops as O
from . import id_counter
from .common_subexpressions import merge
from .contract_through_moves import as_move, beside, fuses, single_moves

ADDS = ("add", "subtract")
FREE_OPERANDS = ("broadcast_in_dim", "iota")  # operands XLA's EffectivelyAtMostUnary does not count
LOOP_MOVES = ("broadcast_in_dim", "reshape", "transpose", "reverse", "slice", "pad", "concatenate")
CONTROL_FLOW = ("while", "case", "if")  # their regions are computations of their own, fused apart
# jax's repeats of these stand for XLA's copies, as written: the emulator contracts erf_inv's last product into the
# add that reads it (elementwise.cc), and XLA copies that product (x * p(w), its operands elementwise) into each
COPIED_AS_WRITTEN = ("erf_inv",)


def _elementwise(op: str) -> bool:
    """What XLA's fusion can clone a multiply into: its loop fusions' elementwise ops, the registry's elementwise
    families, which the emulator fuses too (fusion.cc)."""
    return O.is_elementwise(op)


def _elements(shape: List[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def run(functions: List[Dict[str, Any]], anchors: Dict[str, Any], current_series: bool) -> List[Dict[str, Any]]:
    """Rewrites the program's functions in place (``anchors``: per function, the values jax's dce_sinks read);
    returns those it changed (the moves of a chain a copy bypasses are left for the dead-code pass)."""
    changed = []
    moves = single_moves(functions)
    for function in functions:
        if _block(function, id_counter(function), set(anchors.get(function["name"], ())), (current_series, moves)):
            changed.append(function)
    return changed


def _block(block: Dict[str, Any], fresh: Any, anchors: Any, series: Any,
           outer: Optional[Dict[int, List[int]]] = None) -> bool:
    """``series``: (whether the current series, the single-move functions) for the chains of moves."""
    """``outer``: the shapes of the values of the enclosing blocks, which a region may read (XLA passes them to its
    computation as parameters)."""
    shapes = dict(outer or {})
    shapes.update({r["id"]: r["shape"] for e in block["body"] for r in e["results"]})
    shapes.update({p["id"]: p["shape"] for p in block.get("params", ())})
    changed = False
    for entry in block["body"]:
        if entry["op"] in CONTROL_FLOW:
            for region in entry.get("regions", ()):
                changed = _block(region, fresh, set(), series, shapes) or changed
    changed = _merge_repeats(block, anchors) or changed
    readers: Dict[int, List[Dict[str, Any]]] = {}  # the block's own ops; a nested region or the results escape
    escaping = set(block["results"]) | anchors
    for entry in block["body"]:
        for v in dict.fromkeys(entry["operands"]):
            readers.setdefault(v, []).append(entry)
        for region in entry.get("regions", ()):
            escaping |= _read(region)
    producer = {r["id"]: e for e in block["body"] for r in e["results"]}

    def free(v: int) -> bool:
        p = producer.get(v)
        return p is not None and (p["op"] in FREE_OPERANDS or (p["op"] == "constant" and shapes[v] == []))

    def duplicable(m: Dict[str, Any]) -> bool:
        result = m["results"][0]
        if sum(not free(v) for v in m["operands"]) <= 1:
            return True
        if sum(_elements(shapes[v]) for v in dict.fromkeys(m["operands"])) <= _elements(result["shape"]):
            return True
        users = readers[result["id"]]
        return result["id"] not in escaping and \
            all(_takes_a_copy(r, result["id"], readers, shapes, series) for r in users) and \
            _fuses_on_all_paths(users, readers)

    copies: Dict[int, List[Dict[str, Any]]] = {}  # id(add) -> the copies to place before it
    copied: Set[int] = set()
    for m in block["body"]:
        if m["op"] != "multiply" or m["results"][0]["dtype"] != "f32":
            continue
        product = m["results"][0]["id"]
        ends = _loops_reading(product, readers, escaping, shapes, producer, series)
        if len(ends) < 2 or not duplicable(m):
            continue
        shared = _fused_together([add for _, add, _ in ends if add is not None], readers)
        for chain, add, read in ends:
            if add is None or id(add) in shared:
                continue
            if add["op"] not in ADDS or add["results"][0]["dtype"] != "f32" or add["operands"].count(read) != 1:
                continue
            factors = list(m["operands"])
            placed: List[Dict[str, Any]] = []
            for move in chain:  # the product's elements as the chain orders them: each factor moved alike
                results = [dict(move["results"][0], id=fresh()) for _ in factors]
                placed.extend(dict(move, operands=[f], results=[r]) for f, r in zip(factors, results))
                factors = [r["id"] for r in results]
            copy = dict(m, operands=factors, results=[dict(m["results"][0], id=fresh(),
                                                           shape=list(shapes[read]))])
            add["operands"] = [copy["results"][0]["id"] if v == read else v for v in add["operands"]]
            copies.setdefault(id(add), []).extend(placed + [copy])
            copied.add(product)
            changed = True
    if not copies:
        return changed
    still_read = escaping | {v for e in block["body"] for v in e["operands"]}
    body: List[Dict[str, Any]] = []
    for entry in block["body"]:
        if entry["op"] == "multiply" and entry["results"][0]["id"] in copied - still_read:
            continue  # every reader took a copy
        body.extend(copies.get(id(entry), ()))
        body.append(entry)
    block["body"] = body
    return True


def _merge_repeats(block: Dict[str, Any], anchors: Set[int]) -> bool:
    """jax writes a value twice where Python computes it twice (``(x * y + z, x * y)``, and jax's own rules
    often); XLA's CSE makes them one before it fuses, and its fusion then copies a product into the loops of its
    readers or not (``duplicable``, below). So the repeats of a pure float op of this block (not of the regions in
    it) are merged here into the first (renaming what read the others), before the copying,
    which then decides as XLA does: beside a result, a loop body's result, a reduce XLA does not fuse or a matmul
    the add reads the rounded product on cpu, and where two adds of one loop read it, neither contracts it
    (``max(x * y - z, z - x * y)``); jax's repeats had made each add contract a copy of its own (measured on both
    series, f32[24, 40]). The ops merged compute the same values, so no value changes but through that rounding.
    (common_subexpressions merges integer and boolean ops before the rules; float ones wait for this pass, whose
    chains of moves read jax's repeats first.) Returns whether anything changed."""
    return merge(block, anchors, ("f32", "f16", "bf16"), skip=COPIED_AS_WRITTEN)


def _takes_a_copy(reader: Dict[str, Any], value: int, readers: Dict[int, List[Dict[str, Any]]],
                  shapes: Dict[int, List[int]], series: Any) -> bool:
    """Whether XLA:CPU's fusion can copy a producer of ``value`` into the loop of ``reader``: an elementwise op; a
    reduce it fuses (_reduce_fuses); a dynamic_update_slice of it (in place, in a loop that computes the update: a
    scan's stacked output); a broadcast that only adds dimensions of one (a reshape to XLA) whose readers take one;
    a transpose (jaxlib 0.12: a loop of its own; (t + 1, t.T) of t = x * y contracts the add's copy on cpu);
    with jaxlib 0.4.13 any move (fuzz seed 20280501 #6125 with x * y: jnp.flip(x * y,
    0) read by 2 - t and returned; jaxlib 0.12 keeps it one loop there); on both series a reshape that only such
    reduces read (jnp.argmin's flattening, a bitcast in the reduce's loop)."""
    current_series, moves = series
    if _elementwise(reader["op"]):
        return True
    if reader["op"] == "reduce":
        return _reduce_fuses(reader, value, shapes, current_series)
    if reader["op"] == "dynamic_update_slice" and reader["operands"][1:2] == [value] and \
            reader["operands"][0] != value:
        return True  # XLA:CPU updates in place in a loop that computes the update (a scan's stacked output)
    if reader["op"] == "broadcast_in_dim" and \
            _elements(reader["results"][0]["shape"]) == _elements(shapes.get(value, [-1])):
        flat = reader["results"][0]["id"]  # (dimensions of one added: a reshape to XLA, as its readers take it)
        return bool(readers.get(flat)) and all(_takes_a_copy(r, flat, readers, shapes, series) for r in readers[flat])
    move = as_move(reader, moves)
    if move is None:
        return False
    if not current_series or move["op"] == "transpose":
        return True  # (jaxlib 0.12: a transpose is a loop of its own, which takes a copy)
    flat = reader["results"][0]["id"]
    return move["op"] == "reshape" and bool(readers.get(flat)) and \
        all(r["op"] == "reduce" and _reduce_fuses(r, flat, shapes, current_series) for r in readers[flat])


def _reduce_fuses(reduce: Dict[str, Any], value: int, shapes: Dict[int, List[int]], current_series: bool) -> bool:
    """Whether XLA:CPU computes ``reduce`` of ``value`` as one loop that its producers fuse into, so that a cheap
    product read by it and by an add is copied into both (and contracted in the add's copy). Its TreeReductionRewriter
    turns a reduce with a reduced dimension longer than its window (32) into reduce_window and reduce, which fuse
    nothing, but leaves variadic ones (argmin, argmax) alone; jaxlib 0.4.13 also keeps a reduce that leaves the
    innermost dimension out of its loop fusion. Measured on both series (the copies of t = x * y in the optimised
    HLO of (t + 1, reduction of t)): jnp.sum of f32[5, 2, 4] copies on both, over axis 0 on 0.12 only; of f32[64, 33]
    on neither; jnp.sum(t, 1) of f32[40, 20] on both; jnp.argmin of f32[64, 33] on both (fuzz seed 20282001 #9347:
    x ** 3 - y beside jnp.argmin(x ** 3)); jnp.argmax(t, 0) on 0.12 only."""
    shape = shapes.get(value)
    dims = reduce["attrs"].get("dimensions", [])
    if shape is None or value not in reduce["operands"][:len(reduce["results"])]:
        return False
    if not current_series and len(shape) - 1 not in dims and shape:
        return False
    window = O.xla_cpu()["tree_window"]
    return len(reduce["results"]) > 1 or all(shape[d] <= window for d in dims)


def _loops_reading(product: int, readers: Dict[int, List[Dict[str, Any]]], escaping: Set[int],
                   shapes: Dict[int, List[int]], producer: Dict[int, Dict[str, Any]], series: Any) -> List[Any]:
    """The loops XLA:CPU reads the product in, each as (moves, op, value): an op reading the product, or reading it
    through moves XLA fuses into that op's loop (contract_through_moves' rules) and that op, reading the chain's last
    value; op None where that value is a result of the block, or a move that some of its readers do not fuse (a loop of
    its own, which no add shares). A move that several ops read is copied into each of their loops with the product
    (``t = jnp.flip(x * x, 0)`` read by ``2 - t`` and returned as well: cpu contracts the square into the subtract;
    fuzz seed 20280501 #6125, both series), so the walk branches there, each reader with its own rule (jaxlib 0.12
    sinks ``(x * x).T`` below ``2 - t`` but not below the output's reshape); ``jnp.square(x).T + 1`` beside a
    reduction of the square is one chain of one such loop."""
    ends: List[Any] = []
    if product in escaping:
        ends.append(([], None, product))
    walk = _LoopWalk(readers, escaping, shapes, producer, series, ends)
    for op in readers.get(product, []):
        walk.visit(op, product, [])
    return ends


class _LoopWalk:
    """_loops_reading's walk down the moves from a product (a class: the walk recurses, and a closure that calls
    itself is a reference cycle that keeps the document for the garbage collector)."""

    def __init__(self, readers: Dict[int, List[Dict[str, Any]]], escaping: Set[int], shapes: Dict[int, List[int]],
                 producer: Dict[int, Dict[str, Any]], series: Any, ends: List[Any]) -> None:
        self.readers, self.escaping, self.shapes, self.producer, self.ends = readers, escaping, shapes, producer, ends
        self.current_series, self.moves = series

    def visit(self, op: Dict[str, Any], value: int, chain: List[Dict[str, Any]]) -> None:
        move = as_move(op, self.moves)
        if move is None or op["operands"] != [value]:
            self.ends.append((chain, op, value))
            return
        result = op["results"][0]["id"]
        rank = len(self.shapes[value])
        if result in self.escaping:
            self.ends.append((chain + [move], None, result))
        apart = False  # a reader the move does not fuse into: the move is a loop of its own (op None there too)
        for reader in self.readers.get(result, []):
            if fuses(move, rank, self.current_series, *beside(reader, result, self.producer)):
                self.visit(reader, result, chain + [move])
            elif not apart:
                apart = True
                self.ends.append((chain, None, value))


def _fused_together(users: List[Dict[str, Any]], readers: Dict[int, List[Dict[str, Any]]]) -> Set[int]:
    """The ``users`` (by ``id``) that XLA fuses into one loop with another of them, where the product is one value
    that both read: LLVM contracts a multiply only into its one user, so none of them gets a fused multiply-add
    (``(t + 1) - (t - i) * 0.5`` of ``t = acc * c`` is one fusion, rounding ``t``, on both series). Two users are
    fused together where what they compute meets in one op through ops XLA fuses into a loop (the elementwise
    families, the moves it computes as index arithmetic) or in a reduce, which takes its elementwise producers into
    its own fusion."""
    cones = []
    for user in users:
        cone, frontier = {id(user)}, [user]
        while frontier:
            op = frontier.pop()
            if not _loop_fusible(op["op"]):
                continue  # a reduce joins the fusion; what reads it is another one
            for r in op["results"]:
                for reader in readers.get(r["id"], ()):
                    if id(reader) not in cone and (_loop_fusible(reader["op"]) or reader["op"] == "reduce"):
                        cone.add(id(reader))
                        frontier.append(reader)
        cones.append(cone)
    shared: Set[int] = set()
    for i, cone in enumerate(cones):
        if any(j != i and cone & other for j, other in enumerate(cones)):
            shared.add(id(users[i]))
    return shared


def _loop_fusible(op: str) -> bool:
    return _elementwise(op) or op in LOOP_MOVES


# XLA's HloInstruction::IsExpensive among the elementwise ops: fusion never copies one into a second loop
# (InstructionFusion::ShouldFuse refuses a duplicating fusion of an expensive producer).
EXPENSIVE = frozenset(("atan2", "cosine", "divide", "erf", "exponential", "exponential_minus_one", "log",
                       "log_plus_one", "logistic", "power", "remainder", "rsqrt", "sine", "sqrt", "cbrt", "tan",
                       "tanh"))


def _fuses_on_all_paths(users: List[Dict[str, Any]], readers: Dict[int, List[Dict[str, Any]]]) -> bool:
    """Whether XLA can fuse the product into each of its ``users`` along every path from it to them
    (InstructionFusion's CanFuseOnAllPaths, which ComputeGloballyUnfusible asks before it lets a multiply with more
    operand elements than result elements be copied): every op such a path passes through is one XLA fuses into a
    loop (the elementwise families, the moves), and none is an expensive op that more than one op reads, which
    fusion would have to copy. Measured on both series (f32[64, 33] against cpu): ``t = x * y`` read by ``t + 1``
    and ``t * exp(t)``, ``t / (1 + t * t)`` or ``t * sqrt(1 - t * t)`` is copied into the add (contracted there);
    beside ``t * e + e * 2`` of ``e = exp(t)`` it stays one product; ``x * x * x + x`` beside ``arcsin(x * x * x)``
    (jaxlib 0.12 expands the arcsin into elementwise ops that read the cube twice) is copied (fuzz seed 20261901
    #283)."""
    reach: Dict[int, Dict[str, Any]] = {}  # ops reachable from the product, by id
    frontier = list(users)
    while frontier:
        op = frontier.pop()
        if id(op) in reach:
            continue
        reach[id(op)] = op
        for r in op["results"]:
            frontier.extend(readers.get(r["id"], ()))
    made_by = {r["id"]: op for op in reach.values() for r in op["results"]}
    between: Dict[int, Dict[str, Any]] = {}  # the ops on a path from the product to a user, the users excluded
    frontier = list(users)
    while frontier:  # backwards from the users, through what the product reaches
        for v in frontier.pop()["operands"]:
            maker = made_by.get(v)
            if maker is not None and id(maker) not in between:
                between[id(maker)] = maker
                frontier.append(maker)
    for op in between.values():
        if not _loop_fusible(op["op"]):
            return False
        if op["op"] in EXPENSIVE and sum(len(readers.get(r["id"], ())) for r in op["results"]) > 1:
            return False
    return True


def _read(block: Dict[str, Any]) -> Set[int]:
    """Every value a region reads, its own nested regions' included (values of the enclosing block among them)."""
    read = set(block["results"])
    for entry in block["body"]:
        read.update(entry["operands"])
        for region in entry.get("regions", ()):
            read |= _read(region)
    return read
