"""Tile-level programming of the IPU from JAX, in TessellateIPU's vocabulary: arrays placed on tiles you choose,
lax primitives mapped over those tiles, and the tiles' cycle counter.

A :class:`TileShardedArray` is an array whose first dimension has one row per tile: row ``r`` lives on tile
``tiles[r]``. On the ipu backend the emulator maps it so (its memory is on those tiles in the profile report, and
``Out of memory on tile N`` names them); the ops of :func:`tile_map` compute on each tile from its own row, so an
elementwise primitive moves nothing over the exchange. Moving rows between tiles (a halo exchange) is a
``tile_put_sharded`` of rows taken from another tile-sharded array: its exchange is counted.

    from jax import lax
    from jax_ipu import tile

    @jax.jit
    def step(u):                                  # u: f32[4, 256], one row per tile
        x = tile.tile_put_sharded(u, (0, 1, 2, 3))
        y = tile.tile_map(lax.mul_p, x, x)        # each tile squares its own row
        y, counts = tile.ipu_cycle_count(y)       # u32[4, 2]: cycles so far, per tile (low word first)
        return y.array, counts.array

    jax.jit(step, backend="ipu")(u)

:func:`tile_map` takes the lax primitives listed in ``TILE_MAP_PRIMITIVES``: the elementwise ones run where their
operands are; a reduction or a ``dot_general`` runs as the emulator lowers it and its result is placed back on the
tiles (that move is counted). On other backends (cpu) placement means nothing: the same programs compute the same
values there, which is how the tests compare. The cycle counter exists only on the ipu.

Custom vertices are Poplar codelets in C++ (a class deriving from ``poplar::Vertex`` with ``Input``/``Output``
fields, ``compute()`` and optionally a ``cycles()`` estimate), compiled on first use with the zig C++ compiler
(``pip install 'jax-ipu-plugin[vertices]'``) and cached (:mod:`jax_ipu.codelets`):

    saxpy = tile.vertex(SOURCE, "Saxpy")           # SOURCE: the C++ text, or a pathlib.Path to it
    y = tile.tile_map(saxpy, x, y, a=2.0)          # fields x, y (Input), out (Output), a (a value)

They run on the ipu backend only: one vertex per tile, on that tile's rows, costed by their estimate.
"""

from __future__ import annotations

import ctypes
import functools
import json
import operator
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from jax_ipu import _jax, codelets
from jax_ipu.config import PLATFORM

__all__ = ["TileShardedArray", "tile_put_sharded", "tile_put_replicated", "tile_map", "ipu_cycle_count",
           "TILE_MAP_PRIMITIVES", "Vertex", "vertex"]


# The lax primitives tile_map applies per tile (by name, so that both jax series' spellings are one list).
ELEMENTWISE_PRIMITIVES = (
    "neg", "sign", "floor", "ceil", "round", "is_finite", "exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt",
    "abs", "not", "erf", "erfc", "erf_inv", "lgamma", "digamma", "integer_pow", "square", "population_count", "clz",
    "add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "and", "or", "xor", "nextafter",
    "shift_left", "shift_right_arithmetic", "shift_right_logical",
    "eq", "ne", "lt", "le", "gt", "ge", "select_n", "clamp", "convert_element_type",
)
REDUCING_PRIMITIVES = ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
                       "argmax", "argmin", "dot_general", "cumsum", "cumprod", "cummax", "cummin")
TILE_MAP_PRIMITIVES = ELEMENTWISE_PRIMITIVES + REDUCING_PRIMITIVES
# Parameters the current series' primitives take that jax 0.4.13's do not, with the values jax's own lax functions
# give them: tile_map fills in those not given, so that one program runs on both series.
CURRENT_SERIES_PARAMS = {
    **{name: {"accuracy": None} for name in ("exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin",
                                             "cos", "tan", "sqrt", "rsqrt", "cbrt")},
    **{name: {"out_sharding": None} for name in ("reduce_sum", "reduce_max", "reduce_min", "dot_general")},
    "mul": {"out_dtype": None}, "convert_element_type": {"sharding": None},
}


class TileShardedArray:
    """An array whose rows live on tiles: row ``r`` (of the first dimension) on tile ``tiles[r]``.

    ``array`` is the jax array itself (use it with any jax function: the result is placed as the emulator maps
    it); ``tiles`` the tile of each row; ``tile_shape`` the shape of one row."""

    __slots__ = ("array", "tiles")

    def __init__(self, array: Any, tiles: Sequence[int]):
        self.array = array
        self.tiles = _check_tiles(tiles, array)

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self.array.shape)

    @property
    def dtype(self) -> Any:
        return self.array.dtype

    @property
    def tile_shape(self) -> Tuple[int, ...]:
        return tuple(self.array.shape[1:])

    @property
    def num_tiles(self) -> int:
        return len(self.tiles)

    def __len__(self) -> int:
        return len(self.tiles)

    def __getitem__(self, index: Any) -> Any:
        """``x[i]``: tile ``tiles[i]``'s row (an array); ``x[a:b]``: the rows of tiles ``tiles[a:b]``, still placed."""
        if isinstance(index, slice):
            return TileShardedArray(self.array[index], self.tiles[index])
        return self.array[index]

    def __array__(self, dtype: Any = None) -> np.ndarray:
        return np.asarray(self.array, dtype=dtype)

    def __repr__(self) -> str:
        return f"TileShardedArray(shape={self.shape}, dtype={self.dtype}, tiles={_tiles_text(self.tiles)})"


def _flatten(x: TileShardedArray) -> Tuple[Tuple[Any], Tuple[int, ...]]:
    return (x.array,), x.tiles


def _unflatten(tiles: Tuple[int, ...], children: Sequence[Any]) -> TileShardedArray:
    x = object.__new__(TileShardedArray)  # jax rebuilds it with placeholders too: no checks here
    x.array, x.tiles = children[0], tiles
    return x


def _tiles_text(tiles: Sequence[int]) -> str:
    text = ", ".join(str(t) for t in tiles[:8])
    return f"({text}{', ...' if len(tiles) > 8 else ''})"


def _check_tiles(tiles: Sequence[int], array: Any = None) -> Tuple[int, ...]:
    try:
        tiles = tuple(operator.index(t) for t in tiles)
    except TypeError:
        raise TypeError(f"tiles must be a sequence of tile numbers (ints), not {tiles!r}") from None
    if not tiles:
        raise ValueError("tiles is empty: a tile-sharded array has at least one tile")
    negative = [t for t in tiles if t < 0]
    if negative:
        raise ValueError(f"tile {negative[0]} is negative: tiles are numbered from 0")
    seen = set()
    for t in tiles:
        if t in seen:
            raise ValueError(f"tile {t} is named twice in tiles {_tiles_text(tiles)}: each row has a tile of its own")
        seen.add(t)
    if array is not None and (np.ndim(array) == 0 or np.shape(array)[0] != len(tiles)):
        raise ValueError(f"a tile-sharded array has one row per tile: {len(tiles)} tiles, but the array's shape is "
                         f"{tuple(np.shape(array))}")
    return tiles


@functools.lru_cache(maxsize=None)
def _primitives() -> Tuple[Any, Any, Any]:
    """tile_put, cycle_count and custom vertices, with their lowerings (created on first use, once jax is imported)."""
    from jax._src import core as jax_core
    from jax.interpreters import ad, mlir

    _jax.ensure_plugins_registered()  # the tile API may be the first thing a program runs
    put = _jax.new_primitive("ipu_tile_put")
    put.def_abstract_eval(lambda x, *, tiles: jax_core.ShapedArray(x.shape, x.dtype))

    def put_ipu(ctx: Any, x: Any, *, tiles: Tuple[int, ...]) -> Any:
        (out_type,) = _jax.ir_types(ctx, ctx.avals_out[0])
        return _jax.custom_call("jax_ipu_tile_put", [out_type], [x], ",".join(str(t) for t in tiles)).results

    mlir.register_lowering(put, put_ipu, platform=PLATFORM)
    mlir.register_lowering(put, lambda ctx, x, *, tiles: [x])  # elsewhere placement means nothing
    ad.deflinear2(put, lambda ct, x, *, tiles: [put.bind(ct, tiles=tiles)])

    count = _jax.new_primitive("ipu_cycle_count", multiple_results=True)

    def count_abstract(*xs: Any, tiles: Tuple[int, ...]) -> Any:
        return [jax_core.ShapedArray(x.shape, x.dtype) for x in xs] + \
            [jax_core.ShapedArray((len(tiles), 2), np.dtype(np.uint32))]

    count.def_abstract_eval(count_abstract)

    def count_ipu(ctx: Any, *xs: Any, tiles: Tuple[int, ...]) -> Any:
        types = [_jax.ir_types(ctx, aval)[0] for aval in ctx.avals_out]
        return _jax.custom_call("jax_ipu_cycle_count", types, list(xs), ",".join(str(t) for t in tiles)).results

    mlir.register_lowering(count, count_ipu, platform=PLATFORM)
    mlir.register_lowering(count, _only_on_ipu("jax_ipu.tile.ipu_cycle_count reads the IPU's cycle counter"))

    vertex_p = _jax.new_primitive("ipu_tile_vertex", multiple_results=True)
    vertex_p.def_abstract_eval(lambda *xs, vertex, tiles, values, outputs: [
        jax_core.ShapedArray(shape, np.dtype(dtype)) for shape, dtype in outputs])

    def vertex_ipu(ctx: Any, *xs: Any, vertex: Vertex, tiles: Tuple[int, ...], values: Any, outputs: Any) -> Any:
        types = [_jax.ir_types(ctx, aval)[0] for aval in ctx.avals_out]
        config = {"library": str(vertex.library), "codelet": vertex.name, "tiles": list(tiles),
                  "values": dict(values), "perf_estimate": vertex.perf_estimate}
        return _jax.custom_call("jax_ipu_tile_vertex", types, list(xs), json.dumps(config, sort_keys=True)).results

    mlir.register_lowering(vertex_p, vertex_ipu, platform=PLATFORM)
    mlir.register_lowering(vertex_p, _only_on_ipu("a custom vertex (jax_ipu.tile.vertex) is run by the emulator"))
    return put, count, vertex_p


def _only_on_ipu(what: str) -> Any:
    def elsewhere(ctx: Any, *xs: Any, **params: Any) -> Any:
        platforms = getattr(ctx.module_context, "platforms", None) or [getattr(ctx.module_context, "platform", "?")]
        raise NotImplementedError(f"{what}: it runs only on the ipu backend, not on {', '.join(platforms)} "
                                  f"(jax.jit(f, backend='ipu'))")
    return elsewhere


def tile_put_sharded(array: Any, tiles: Sequence[int]) -> TileShardedArray:
    """``array`` placed one row per tile: row ``r`` (of its first dimension, which has ``len(tiles)`` rows) on tile
    ``tiles[r]``. Rows already on their tiles stay; others move over the exchange."""
    import jax.numpy as jnp

    if isinstance(array, TileShardedArray):
        array = array.array
    array = jnp.asarray(array)
    tiles = _check_tiles(tiles, array)
    put, _, _ = _primitives()
    return _unflatten(tiles, [put.bind(array, tiles=tiles)])


def tile_put_replicated(array: Any, tiles: Sequence[int]) -> TileShardedArray:
    """A copy of ``array`` on each of ``tiles``: a tile-sharded array of shape ``(len(tiles),) + array.shape``."""
    import jax.numpy as jnp

    array = jnp.asarray(array)
    tiles = _check_tiles(tiles)
    return tile_put_sharded(jnp.broadcast_to(array[None], (len(tiles),) + array.shape), tiles)


class Vertex:
    """A custom vertex: codelet ``name`` of a compiled library (:func:`vertex` makes one). ``fields`` are its
    fields in declaration order (:class:`jax_ipu.codelets.Field`); ``perf_estimate`` the worker cycles one vertex
    takes when given, which overrides the class's ``cycles()``."""

    __slots__ = ("name", "fields", "library", "perf_estimate")

    def __init__(self, name: str, fields: Sequence[codelets.Field], library: Path,
                 perf_estimate: Optional[int]) -> None:
        self.name, self.fields, self.library, self.perf_estimate = name, tuple(fields), library, perf_estimate

    def _key(self) -> Tuple[Any, ...]:
        return (self.name, str(self.library), self.perf_estimate)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Vertex) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Vertex({self.name}: {', '.join(f.describe() for f in self.fields)})"


def vertex(source: Union[str, Path], name: str, *, perf_estimate: Optional[int] = None,
           compile_flags: Sequence[str] = ()) -> Vertex:
    """Codelet ``name`` of the C++ ``source`` (its text, or a ``pathlib.Path`` to it), compiled on first use (see
    :mod:`jax_ipu.codelets`). ``perf_estimate``: the worker cycles of one vertex, required unless the class has a
    ``cycles()`` member. Raises :class:`jax_ipu.codelets.CodeletError` when it cannot be read or compiled."""
    library, classes = codelets.compile_codelets(source, compile_flags)
    if name not in classes:
        raise codelets.CodeletError(f"the source defines no codelet '{name}' (it defines {', '.join(classes)})")
    if perf_estimate is not None and (not isinstance(perf_estimate, int) or perf_estimate < 0):
        raise ValueError(f"perf_estimate must be a count of cycles (an int >= 0), not {perf_estimate!r}")
    has_cycles = getattr(ctypes.CDLL(str(library)), f"jax_ipu_codelet_{name}_has_cycles")
    if perf_estimate is None and not has_cycles():
        raise codelets.CodeletError(f"codelet '{name}' has no cycle estimate: give the class a cycles() member "
                                    f"(std::uint64_t cycles() const) or vertex(..., perf_estimate=N)")
    return Vertex(name, classes[name], library, perf_estimate)


def tile_map(primitive: Any, *args: Any, **params: Any) -> Any:
    """Applies a lax ``primitive`` (``jax.lax.add_p``, ...; its ``params`` as keywords, for one tile's row) on every
    tile to that tile's rows of ``args``, tile-sharded arrays on the same tiles. Returns tile-sharded arrays on
    those tiles (a tuple for a primitive with several results).

    ``primitive`` may be a :class:`Vertex`: ``args`` connect its Input and InOut fields in declaration order, its
    value fields are keywords, and an Output field's keyword, if given, is one tile's shape of it (by default the
    first operand's tile shape for a Vector field, ``()`` for a single element). Returns its InOut and Output
    fields, in declaration order (the array itself when there is one)."""
    import jax

    if isinstance(primitive, Vertex):
        return _map_vertex(primitive, args, params)
    name = getattr(primitive, "name", None)
    if name not in TILE_MAP_PRIMITIVES:
        raise NotImplementedError(
            f"tile_map does not map {name or repr(primitive)} per tile: it maps the lax primitives in "
            f"jax_ipu.tile.TILE_MAP_PRIMITIVES ({', '.join(TILE_MAP_PRIMITIVES[:6])}, ...)")
    tiles = _common_tiles(f"tile_map({name})", "operand", args)
    if _jax.is_current_series():
        params = {**CURRENT_SERIES_PARAMS.get(name, {}), **params}
    out = jax.vmap(lambda *rows: primitive.bind(*rows, **params))(*(a.array for a in args))
    # An elementwise op's result is mapped as its operands are (they share their tiles): it needs no put, which
    # would also keep it from fusing with the next elementwise op as XLA:CPU fuses them (one rounding of a * b + c).
    place = (lambda o: _unflatten(tiles, [o])) if name in ELEMENTWISE_PRIMITIVES else \
        (lambda o: tile_put_sharded(o, tiles))
    if getattr(primitive, "multiple_results", False):
        return tuple(place(o) for o in out)
    return place(out)


def _map_vertex(v: Vertex, args: Sequence[Any], params: Dict[str, Any]) -> Any:
    what = f"tile_map({v.name})"
    connected = [f for f in v.fields if f.direction in ("in", "inout")]
    if len(args) != len(connected):
        raise TypeError(f"{what} takes {len(connected)} operands (fields "
                        f"{', '.join(f.name for f in connected) or 'none'}), not {len(args)}")
    tiles = _common_tiles(what, "operand", args)
    for i, (f, a) in enumerate(zip(connected, args)):
        if np.dtype(a.dtype) != f.numpy_dtype:
            raise TypeError(f"{what}: field '{f.name}' is {f.dtype} in the codelet, but operand {i} is {a.dtype}")
        if not f.vector and int(np.prod(a.tile_shape)) != 1:
            raise ValueError(f"{what}: field '{f.name}' is one element per tile, but operand {i} has tile shape "
                             f"{a.tile_shape}")
    values, shapes = {}, []
    known = {f.name for f in v.fields if f.direction in ("value", "out")}
    for key in params:
        if key not in known:
            raise TypeError(f"{what} has no value or Output field '{key}' (its fields: "
                            f"{', '.join(f.name for f in v.fields)})")
    default = next((a.tile_shape for f, a in zip(connected, args) if f.vector), None)
    for f in v.fields:
        if f.direction == "value":
            if f.name not in params:
                raise TypeError(f"{what}: value field '{f.name}' ({f.dtype}) is not given")
            value = params[f.name]
            if not isinstance(value, (bool, int, float, np.number, np.bool_)):
                raise TypeError(f"{what}: value field '{f.name}' takes a number, not {type(value).__name__}")
            values[f.name] = value.item() if isinstance(value, (np.number, np.bool_)) else value
        elif f.direction == "out":
            shape = params.get(f.name, default if f.vector else ())
            if shape is None:
                raise TypeError(f"{what}: give Output field '{f.name}' one tile's shape ({f.name}=(n,)): no operand "
                                f"is a Vector to take it from")
            shape = (shape,) if isinstance(shape, int) else tuple(shape)
            if not f.vector and int(np.prod(shape)) != 1:
                raise ValueError(f"{what}: Output field '{f.name}' is one element per tile, not shape {shape}")
            shapes.append((len(tiles),) + shape)
        elif f.direction == "inout":
            shapes.append(tuple(args[connected.index(f)].shape))
    outputs = tuple((s, f.numpy_dtype.name) for s, f in
                    zip(shapes, [f for f in v.fields if f.direction in ("inout", "out")]))
    _, _, vertex_p = _primitives()
    out = vertex_p.bind(*(a.array for a in args), vertex=v, tiles=tiles, values=tuple(sorted(values.items())),
                        outputs=outputs)
    results = tuple(_unflatten(tiles, [o]) for o in out)
    return results[0] if len(results) == 1 else results


def _common_tiles(what: str, kind: str, args: Sequence[Any]) -> Tuple[int, ...]:
    """The tiles of ``args``, tile-sharded arrays that must all be on the same tiles."""
    if not args:
        raise TypeError(f"{what} needs at least one tile-sharded {kind}")
    for i, a in enumerate(args):
        if not isinstance(a, TileShardedArray):
            raise TypeError(f"{what}: {kind} {i} is a {type(a).__name__}, not a TileShardedArray: place it with "
                            f"tile_put_sharded or tile_put_replicated first")
        if a.tiles != args[0].tiles:
            raise ValueError(f"{what}: {kind} {i} is on tiles {_tiles_text(a.tiles)}, {kind} 0 on "
                             f"{_tiles_text(args[0].tiles)}: each tile computes from its own rows, so they must "
                             f"share their tiles (move one with tile_put_sharded)")
    return args[0].tiles


def ipu_cycle_count(*args: TileShardedArray) -> Tuple[Any, ...]:
    """Reads the cycle counter of the tiles ``args`` live on, once what computes ``args`` has run: returns ``args``
    unchanged (use them, so that what follows runs after the read) and a tile-sharded ``u32[tiles, 2]`` of the
    cycles the run has taken so far on each tile, low word first (``counts[:, 0] + (counts[:, 1] << 32)``). The
    difference of two reads is the cycles of the steps between them in the emulator's estimate. ipu backend only."""
    tiles = _common_tiles("ipu_cycle_count", "argument", args)
    _, count, _ = _primitives()
    out = count.bind(*(a.array for a in args), tiles=tiles)
    return tuple(_unflatten(tiles, [o]) for o in out)


def cycles(counts: Any) -> np.ndarray:
    """The counts of :func:`ipu_cycle_count` (``u32[tiles, 2]``, or a tile-sharded array of them) as uint64 cycles
    per tile."""
    counts = np.asarray(counts.array if isinstance(counts, TileShardedArray) else counts, dtype=np.uint64)
    return counts[..., 0] + (counts[..., 1] << np.uint64(32))


def _register_pytree() -> None:
    from jax import tree_util

    tree_util.register_pytree_node(TileShardedArray, _flatten, _unflatten)


_register_pytree()
