"""XLA's constant folding, before anything else sees the module: an elementwise op of constants is evaluated on the
host, as XLA evaluates it, and becomes a constant.

XLA:CPU folds such ops before its simplifier's rules run (``x / exp(c)`` is ``x * (1 / C)`` with ``C = exp(c)``
folded, not ``x * exp(-c)``; ``exp(c) * exp(x)`` stays a product; measured on both series over 150 constants each),
and it folds them with the host's libm, where the ipu, like XLA:CPU's compiled loops, computes XLA's own
approximations: one ulp apart on 5-35% of f32 inputs (tanh 36%, rsqrt 19%, exp 9%). So
``x * jnp.tanh(jnp.float32(0.3))`` differed on the ipu until this pass. It runs on the module the front end reads, so
every rule sees the constants XLA's rules see.

Two folders, measured against cpu on 20,000 constants per op and dtype (f32, f16, bf16), dense and splat:
- MLIR's (StableHLO to HLO) come first: exp, log, sin, cos, tan, tanh, sqrt, rsqrt and (jaxlib 0.12)
  erf in double precision, rounded once to the type; jaxlib 0.4.13's fold at most 65,536 elements. They see a
  constant of an enclosing block (a conditional's branch reads it) and, through the canonicalizer, one a loop
  carries unchanged (jax passes what a ``fori_loop`` body captures so).
- XLA's evaluator (HloConstantFolding) folds the rest once XLA has inlined the calls (jaxlib 0.4.13's
  ``@sigmoid`` of a constant), and with it what reads an op MLIR's folders leave (``tanh(expm1(c))``): in float
  (f16 and bf16 through float, rounded once), with libm's float functions (expf, tanhf, expm1f, log1pf, cbrtf,
  atan2f, powf...).
The arithmetic both do is IEEE's in float (add, subtract, multiply, divide, negate, abs, and converts between
floats and from integers), which the ipu computes alike but for NaN's sign (MLIR's APFloat gives +NaN for 0 / 0
and inf - inf, the host -NaN; jaxlib 0.4.13 folds no log of a non-positive value): it is folded so that what reads
it is seen to read a constant. So is data movement of constants (reshape, reverse, slice, concatenate by MLIR's
folders, and jaxlib 0.12's transpose; 0.4.13's transpose and a pad by XLA's evaluator: measured by what reads them
folding in double or in float). A broadcast of a scalar constant counts as that constant (XLA sinks it past the
op first).

Exact ops fold too (the extrema, sign, roundings, comparisons, logic, selects, remainders), where XLA folds them:
their value is the same in any precision, but what reads them folds in double after MLIR's folders and in float
after XLA's evaluator (floor and ceil, jaxlib 0.4.13's select, and whatever a call of jax's functions computes:
``jnp.where``, ``jnp.clip``). Their special values are XLA's: the first NaN operand of a maximum or minimum, -0
below +0, +NaN for an invalid remainder.

Left to the ipu's run time (each as XLA:CPU's compiled code computes it, which differs): the ops XLA expands into
polynomials of other ops before it folds them (jaxlib 0.4.13's erf_inv, lgamma, digamma and erf; jaxlib 0.12's
lgamma, whose expansion reads its argument's bits as integers); ops on complex numbers and integers, reductions,
dot products, sorts and gathers (jax 0.4.13's strided slice) of constants; constants of more than
``MAX_ELEMENTS`` elements."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
from collections import ChainMap
from typing import Any, Callable, Dict, List, MutableMapping, Optional

import numpy as np
from jax._src.lib.mlir import ir
from jax._src.lib.mlir.dialects import hlo

from jax_ipu import _jax

from . import attributes as A
from . import facts as F
from . import ops as O
from . import types as T

# A constant larger than this is not read here (the ipu computes what is made of it at run time).
MAX_ELEMENTS = 1 << 20
# jaxlib 0.4.13's MLIR folders leave an op of more elements to XLA's evaluator (float precision).
MLIR_FOLD_LIMIT_0_4_13 = 65536

FLOATS = ("f32", "f16", "bf16")


@functools.lru_cache(maxsize=None)
def _libm() -> Any:
    return ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")


@functools.lru_cache(maxsize=None)
def _libm_function(name: str, arity: int, double: bool) -> Callable[..., np.ndarray]:
    """libm's ``name`` over arrays, element by element (np.frompyfunc), in double or float."""
    c_type = ctypes.c_double if double else ctypes.c_float
    function = getattr(_libm(), name)
    function.restype, function.argtypes = c_type, [c_type] * arity
    np_type = np.float64 if double else np.float32
    each = np.frompyfunc(function, arity, 1)
    return lambda *args: np.asarray(each(*[np.asarray(a, np_type) for a in args]), np_type)


# op -> libm's function, evaluated in double by MLIR's folders (rounded once to the type)
_DOUBLE = {"exponential": "exp", "log": "log", "sine": "sin", "cosine": "cos", "tan": "tan", "tanh": "tanh"}
_DOUBLE_CURRENT = {"erf": "erf"}  # jaxlib 0.12 only: 0.4.13 expands erf into a polynomial first
# op -> libm's float function, which XLA's evaluator calls (and MLIR's folders leave to it)
_FLOAT = {"exponential_minus_one": ("expm1f", 1), "log_plus_one": ("log1pf", 1), "cbrt": ("cbrtf", 1),
          "atan2": ("atan2f", 2), "power": ("powf", 2)}
_ARITHMETIC = ("add", "subtract", "multiply", "divide", "negate", "abs", "sqrt", "convert")
_APFLOAT = ("add", "subtract", "multiply", "divide")  # MLIR folds these with APFloat (a negative sqrt: the host's)
# Data movement of constants: MLIR's folders move these (jaxlib 0.12 a transpose too; measured by what reads them
# folding in double); XLA's evaluator the rest (in float after them).
_MOVES_MLIR = ("reshape", "reverse", "slice", "concatenate")
_MOVES_MLIR_CURRENT = _MOVES_MLIR + ("transpose",)
_MOVES = _MOVES_MLIR_CURRENT + ("pad",)
# Exact ops (their value is the same in any precision; where they are folded decides the precision of what reads
# them, measured through a tanh of them on both series): MLIR's folders fold the extrema, sign, roundings to nearest,
# comparisons, logic and remainders (and on jaxlib 0.12 a select), so what reads them folds in double; XLA's
# evaluator floor and ceil (and on 0.4.13 a select), so what reads them folds in float.
_EXACT_MLIR = ("maximum", "minimum", "clamp", "sign", "round_nearest_even", "round_nearest_afz", "compare", "and",
               "or", "not", "remainder")
_EXACT_MLIR_CURRENT = _EXACT_MLIR + ("select",)
_EXACT = _EXACT_MLIR_CURRENT + ("floor", "ceil")
_BOOL_RESULTS = ("compare", "and", "or", "not")  # kept as values, never written as constants (see _Folder.fold)
_FOLDED = frozenset((*_DOUBLE, *_DOUBLE_CURRENT, *_FLOAT, *_ARITHMETIC, *_MOVES, *_EXACT, "rsqrt"))


def _name(op: Any) -> str:
    """``exponential`` for stablehlo.exponential and chlo's ops (jaxlib 0.4.13's chlo.tan; jaxlib 0.12's chlo.erf,
    or a composite of it) that this module folds, else ''."""
    name = op.name
    if name == "stablehlo.composite":
        name = A.string(op.attributes["name"])
    dialect, _, short = name.partition(".")
    return short if dialect in ("stablehlo", "chlo") and short in _FOLDED else ""


def _evaluate(name: str, args: List[np.ndarray], dtype: str, elements: int, mlir: bool,
              attrs: Dict[str, Any]) -> Optional[np.ndarray]:
    """XLA's value of op ``name`` of constant ``args`` (arrays of the operands' types), in the result's numpy type;
    None where XLA's folding is not modelled. ``mlir``: MLIR's folders may see the op (not inside a call)."""
    out = T.numpy_dtypes_by_name()[dtype]
    current = _jax.is_current_series()
    mlir_folds = mlir and (current or elements <= MLIR_FOLD_LIMIT_0_4_13)
    if name in _EXACT:
        if mlir and not (mlir_folds and name in (_EXACT_MLIR_CURRENT if current else _EXACT_MLIR)):
            return None  # XLA's evaluator's (what reads it then folds in float)
        return _exact(name, args, attrs).astype(out)
    with np.errstate(all="ignore"):
        if name == "convert":
            return np.asarray(args[0]).astype(np.float32).astype(out)
        x = [np.asarray(a, np.float32) for a in args]
        if name in _ARITHMETIC:
            value = np.asarray({"add": lambda: x[0] + x[1], "subtract": lambda: x[0] - x[1],
                                "multiply": lambda: x[0] * x[1], "divide": lambda: x[0] / x[1],
                                "negate": lambda: -x[0], "abs": lambda: np.abs(x[0]),
                                "sqrt": lambda: np.sqrt(x[0])}[name](), np.float32)
            if mlir_folds and name in _APFLOAT:  # an invalid operation (0 / 0, inf - inf): APFloat's NaN is +NaN
                invalid = np.isnan(value) & ~functools.reduce(np.logical_or, [np.isnan(a) for a in x])
                value = np.where(invalid, np.float32(np.nan), value)
            return value.astype(out)
        double = dict(_DOUBLE, **(_DOUBLE_CURRENT if current else {}))
        if name == "log" and not current and np.any(~(x[0] > 0)):
            return None  # jaxlib 0.4.13 folds a log of positive values only (cpu's log(-1) is +NaN, libm's -NaN)
        if name in double or name == "rsqrt":
            if not mlir_folds:  # XLA's evaluator: in float, with libm's float functions
                if name == "rsqrt":
                    return (np.float32(1) / np.sqrt(x[0])).astype(out)
                return _libm_function(double[name] + "f", 1, False)(x[0]).astype(out)
            if name == "rsqrt":
                return _rounded(1.0 / np.sqrt(x[0].astype(np.float64)), out)
            return _rounded(_libm_function(double[name], 1, True)(x[0]), out)
        if name in _FLOAT and not mlir:  # (MLIR's folders leave them, and what reads them, to XLA's evaluator)
            function, arity = _FLOAT[name]
            return _libm_function(function, arity, False)(*x).astype(out)
    return None


def _extremum(a: np.ndarray, b: np.ndarray, larger: bool) -> np.ndarray:
    """XLA's maximum (``larger``) or minimum: a NaN operand is the result (the first of two), and +0 is above -0."""
    zeros = (a == 0) & (b == 0)
    pick_a = np.signbit(a) != larger  # between zeros: a when it has the wanted sign (+0 for max, -0 for min)
    r = np.where(zeros, np.where(pick_a, a, b), np.where(a > b if larger else a < b, a, b))
    return np.where(np.isnan(a), a, np.where(np.isnan(b), b, r))


def _total_order(x: np.ndarray) -> np.ndarray:
    """Integers ordered as StableHLO's TOTALORDER orders floats (-NaN < -inf < ... < -0 < +0 < ... < NaN)."""
    bits = x.view(np.int16 if x.dtype.itemsize == 2 else np.int32).astype(np.int64)
    top = (1 << (8 * x.dtype.itemsize - 1)) - 1
    return np.where(bits < 0, -(bits & top) - 1, bits)


_COMPARISONS: Dict[str, Callable[[Any, Any], Any]] = {
    "EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal}


def _exact(name: str, args: List[np.ndarray], attrs: Dict[str, Any]) -> np.ndarray:
    """An exact op of constants (measured against cpu's folding over NaNs of both signs, zeros of both signs,
    infinities and halves, f32 on both series)."""
    x = args[0]
    with np.errstate(all="ignore"):
        if name in ("maximum", "minimum"):
            return _extremum(x, args[1], larger=name == "maximum")
        if name == "clamp":  # clamp(lo, x, hi) = min(max(lo, x), hi): a NaN bound is the result
            return _extremum(_extremum(x, args[1], larger=True), args[2], larger=False)
        if name == "sign":
            return np.where(np.isnan(x) | (x == 0), x, np.sign(x))
        if name in ("floor", "ceil"):
            return np.floor(x) if name == "floor" else np.ceil(x)
        if name == "round_nearest_even":
            return np.rint(x)
        if name == "round_nearest_afz":
            t = np.trunc(x)
            return np.where(np.abs(x.astype(np.float64) - t) >= 0.5, t + np.sign(x), t)
        if name == "remainder":  # fmod; an invalid one (inf % y, x % 0) is +NaN
            r = np.fmod(x, args[1])
            return np.where(np.isnan(r) & ~np.isnan(x) & ~np.isnan(args[1]), np.float32(np.nan).astype(r.dtype), r)
        if name == "select":
            return np.where(x, args[1], args[2])
        if name == "compare":
            a, b = x, args[1]
            if attrs.get("compare_type") == "TOTALORDER":
                a, b = _total_order(a), _total_order(b)
            return _COMPARISONS[attrs["comparison_direction"]](a, b)
        if name == "not":
            return np.logical_not(x)
        return (np.logical_and if name == "and" else np.logical_or)(x, args[1])


def _rounded(x: np.ndarray, out: np.dtype) -> np.ndarray:
    """Doubles rounded once to ``out``, to nearest even, as MLIR's folders convert them (APFloat). ml_dtypes takes
    a double to bf16 through float, rounding twice: the float is rounded to odd first, which makes the second
    rounding the one correct rounding."""
    if out.itemsize != 2 or out == np.float16:
        return x.astype(out)
    f = x.astype(np.float32)
    toward_zero = np.where(np.abs(f.astype(np.float64)) > np.abs(x), np.nextafter(f, np.float32(0)), f)
    inexact = (toward_zero.astype(np.float64) != x) & np.isfinite(x)
    odd = (np.asarray(toward_zero, np.float32).view(np.uint32) | inexact.astype(np.uint32)).view(np.float32)
    return odd.astype(out)


def _read_constant(op: Any, tensor: Any) -> Optional[np.ndarray]:
    """A stablehlo.constant's value (0-d for a splat), or None for one this module does not read."""
    dtype, shape = tensor
    if not (dtype in FLOATS or T.dtype_kind(dtype) in "iub") or dtype in T.sub_byte_bits() or \
            math.prod(shape) > MAX_ELEMENTS:  # (the sub-byte integers' ops are computed in 8 bits: narrow_types)
        return None
    try:
        np_type = T.numpy_dtypes_by_name()[dtype]
        attrs = O.read_attrs(op.attributes)
    except (KeyError, ValueError, TypeError):
        return None
    data = np.frombuffer(bytes(attrs["value"]), np_type)
    if data.size == 1 and (attrs.get("splat") or not shape):
        return data.reshape(())
    return data.reshape(shape) if data.size == math.prod(shape) else None


def _fold_op(op: Any, args: List[Optional[np.ndarray]], mlir: bool) -> Optional[np.ndarray]:
    """The constant XLA folds op ``op`` of constant ``args`` to, or None."""
    name = _name(op)
    if not name or len(op.results) != 1 or not args or any(a is None for a in args):
        return None
    tensor = T.tensor_type(op.results[0].type)
    types = [T.tensor_type(v.type) for v in op.operands]
    if tensor is None or math.prod(tensor[1]) > MAX_ELEMENTS or any(t is None for t in types):
        return None
    # Ops of floats (and converts to them); bools only as comparisons of floats, logic of those, and predicates.
    bools = [t[0] == "bool" for t in types]  # type: ignore[index]
    if name in _BOOL_RESULTS:
        if tensor[0] != "bool" or not all(t[0] in FLOATS for t in types if t[0] != "bool"):  # type: ignore[index]
            return None
    elif tensor[0] not in FLOATS or (name != "convert" and not all(
            t[0] in FLOATS or (name == "select" and i == 0 and bools[0])  # type: ignore[index]
            for i, t in enumerate(types))):
        return None
    elements = max(1 if a.ndim == 0 else a.size for a in args)  # type: ignore[union-attr]
    if name in _MOVES:
        if name not in (_MOVES_MLIR_CURRENT if _jax.is_current_series() else _MOVES_MLIR) and mlir:
            return None  # (XLA's evaluator moves it, after MLIR's folders: what reads it folds in float)
        if all(a.ndim == 0 and a.tobytes() == args[0].tobytes() for a in args):  # type: ignore[union-attr]
            return args[0]  # a splat moved is that splat (no array of its shape is made)
        full = [np.broadcast_to(a, t[1]) for a, t in zip(args, types)]  # type: ignore[index, arg-type]
        return _move(name, full, O.read_attrs(op.attributes), tensor[1])
    attrs = O.read_attrs(op.attributes) if name == "compare" else {}
    return _evaluate(name, args, tensor[0], elements, mlir, attrs)  # type: ignore[arg-type]


def _move(name: str, args: List[np.ndarray], attrs: Dict[str, Any], shape: List[int]) -> np.ndarray:
    """A data movement op of constants, as StableHLO defines it."""
    x = args[0]
    if name == "reshape":
        return x.reshape(shape)
    if name == "transpose":
        return np.transpose(x, attrs["permutation"])
    if name == "reverse":
        return np.flip(x, tuple(attrs["dimensions"])) if attrs["dimensions"] else x
    if name == "slice":
        return x[tuple(slice(b, e, st) for b, e, st in
                       zip(attrs["start_indices"], attrs["limit_indices"], attrs["strides"]))]
    if name == "concatenate":
        return np.concatenate(args, axis=attrs["dimension"])
    # pad: interior padding between elements, then edge padding (negative: cut)
    value = args[1].reshape(())
    for axis, (low, high, interior) in enumerate(zip(attrs["edge_padding_low"], attrs["edge_padding_high"],
                                                     attrs["interior_padding"])):
        n = x.shape[axis]
        spaced = np.full(x.shape[:axis] + (max(0, n + (n - 1) * interior),) + x.shape[axis + 1:], value, x.dtype)
        index = [slice(None)] * x.ndim
        index[axis] = slice(0, None, interior + 1)
        spaced[tuple(index)] = x
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(low, 0), max(high, 0))
        x = np.pad(spaced, widths, constant_values=value)
        cut = [slice(None)] * x.ndim
        cut[axis] = slice(max(-low, 0), x.shape[axis] - max(-high, 0))
        x = x[tuple(cut)]
    return x.reshape(shape)


class _Run:
    """One run over a module: its functions by name; how many ops were folded; whether an op of constants was
    left for XLA's evaluator (else it has nothing to fold)."""

    def __init__(self, funcs: Dict[str, Any], checkpoint: Callable[[], None]) -> None:
        self.funcs = funcs
        self.checkpoint = checkpoint
        self.folded = 0
        self.deferred = False


class _Folder:
    """Folds the ops of one block in order; knows the constants (and broadcast scalar constants) defined there and,
    for MLIR's folders, in the blocks around it (a region sees them; XLA's computations take them as parameters)."""

    def __init__(self, run: _Run, mlir: bool, outer: Optional[MutableMapping[Any, Any]] = None) -> None:
        self.run = run
        self.mlir = mlir  # MLIR's folders (else XLA's evaluator, after inlining the calls)
        self.own: Dict[Any, Any] = {}  # MLIR value -> its constant or broadcast op, in the block being walked
        self.defined: MutableMapping[Any, Any] = ChainMap(self.own, outer) if mlir and outer is not None else self.own
        self.values: Dict[Any, Optional[np.ndarray]] = {}  # MLIR value -> its value (0-d: a splat), or None

    def value(self, v: Any) -> Optional[np.ndarray]:
        """The value of ``v`` if it is a constant, or a broadcast scalar constant, of the block being walked."""
        if v in self.values:
            return self.values[v]
        owner = self.defined.get(v)
        if owner is None and isinstance(v.owner, ir.Block):
            owner = F.sunk_constant(v)  # a loop's argument it passes on unchanged: the canonicalizer reads the operand
        result = None
        if owner is not None:
            tensor = T.tensor_type(v.type)
            if owner.name == "stablehlo.constant" and tensor is not None and tensor[0] != T.TOKEN:
                result = _read_constant(owner, tensor)
            elif owner.name == "stablehlo.broadcast_in_dim":
                scalar = self.value(owner.operands[0])
                result = scalar if scalar is not None and scalar.ndim == 0 else None
        self.values[v] = result
        return result

    def see(self, op: Any) -> None:
        if op.name in ("stablehlo.constant", "stablehlo.broadcast_in_dim") and len(op.results) == 1:
            self.own[op.results[0]] = op

    def fold(self, op: Any) -> bool:
        """Replaces ``op`` by the constant XLA folds it to; True if it did."""
        call = op.name == "func.call"
        if not (call or _name(op)):
            return False
        args = []
        for v in op.operands:  # (no constant is read for an op of a non-constant)
            args.append(self.value(v))
            if args[-1] is None:
                return False
        if call and self.mlir:
            self.run.deferred = True  # a call of constants: XLA's evaluator may fold it once it is inlined
            return False
        if call:
            return self._fold_call(op)
        folded = _fold_op(op, args, mlir=self.mlir)
        if folded is None:
            if self.mlir and (T.tensor_type(op.results[0].type) or ("",))[0] in (*FLOATS, "bool"):
                self.run.deferred = True  # an op of constants MLIR's folders leave: XLA's evaluator's turn
            return False
        if folded.dtype == np.bool_:
            # A comparison's value is known, but it stays an op (no constant of i1 is written): a select that
            # reads it folds, and it is erased with the constants once nothing reads it.
            self.values[op.results[0]] = folded
            self.own[op.results[0]] = op
            return True
        self._replace(op, [folded])
        return True

    def _fold_call(self, call: Any) -> bool:
        """A call of a private function of elementwise ops whose arguments are all constants: XLA inlines it
        (CallInliner) before its evaluator folds it, in float (jaxlib 0.4.13's ``@sigmoid``)."""
        callee = self.run.funcs.get(A.symbol(call.attributes["callee"]))
        args = [self.value(v) for v in call.operands]
        if callee is None or not call.results or any(a is None for a in args) or \
                len(callee.regions[0].blocks) != 1:
            return False
        block = callee.regions[0].blocks[0]
        known: Dict[Any, Optional[np.ndarray]] = dict(zip(block.arguments, args))
        results = None
        for inner in block.operations:
            inner = getattr(inner, "operation", inner)
            if inner.name == "func.return":
                results = [known.get(v) for v in inner.operands]
                break
            if inner.regions or len(inner.results) != 1:
                return False
            tensor = T.tensor_type(inner.results[0].type)
            if inner.name == "stablehlo.constant" and tensor is not None:
                value = _read_constant(inner, tensor)
            elif inner.name == "stablehlo.broadcast_in_dim":
                scalar = known.get(inner.operands[0])
                value = scalar if scalar is not None and scalar.ndim == 0 else None
            else:
                value = _fold_op(inner, [known.get(v) for v in inner.operands], mlir=False)
            if value is None:
                return False
            known[inner.results[0]] = value
        if results is None or any(r is None for r in results) or \
                any((T.tensor_type(r.type) or ("",))[0] not in FLOATS for r in call.results):
            return False
        self._replace(call, results)
        return True

    def _replace(self, op: Any, folded: List[np.ndarray]) -> None:
        constants = []
        with op.location, ir.InsertionPoint(op):
            for result, value in zip(op.results, folded):
                result_type = ir.RankedTensorType(result.type)
                element = result_type.element_type
                if value.ndim == 0:
                    attr = ir.DenseElementsAttr.get_splat(result_type, ir.FloatAttr.get(element, float(value)))
                else:
                    data = np.ascontiguousarray(value.reshape(result_type.shape))
                    if data.dtype.itemsize == 2 and data.dtype != np.float16:  # bf16: its bits
                        data = data.view(np.uint16)
                    attr = ir.DenseElementsAttr.get(data, type=element, shape=list(result_type.shape))
                constants.append(hlo.ConstantOp(attr))
        operands = list(op.operands)
        for result, constant in zip(op.results, constants):
            result.replace_all_uses_with(constant.result)
        op.erase()
        for constant, value in zip(constants, folded):
            self.see(constant.operation)
            self.values[constant.result] = value
        self.run.folded += 1
        for v in operands:  # the constants (and broadcasts of them) only the folded op read
            self._erase_if_unread(v)

    def _erase_if_unread(self, v: Any) -> None:
        owner = self.own.get(v)  # (not another block's: its walk holds it)
        if owner is None or any(True for _ in v.uses):
            return
        inner = list(owner.operands)
        self.own.pop(v)
        self.values.pop(v, None)
        owner.erase()
        for u in inner:
            self._erase_if_unread(u)


def run(module: Any, checkpoint: Callable[[], None] = lambda: None) -> int:
    """Folds the module's constant elementwise ops in place, block by block in program order (what an op reads is
    folded before it is seen), as MLIR's folders do, then the calls of constants and what reads them, as XLA's
    evaluator does once it has inlined them; returns how many ops it folded. ``checkpoint`` is called before each op
    (the backend's Ctrl-C check: what it raises ends the compile, as in the translator's walk)."""
    funcs = {}
    for func in module.body.operations:
        func = getattr(func, "operation", func)
        if func.name == "func.func":
            funcs[A.string(func.attributes["sym_name"])] = func
    run = _Run(funcs, checkpoint)
    for func in funcs.values():  # MLIR's folders first
        _walk(func, run, True)
    if run.deferred:  # then XLA's evaluator, on what inlining the calls makes constant
        for func in funcs.values():
            _walk(func, run, False)
    return run.folded


def _walk(operation: Any, run: _Run, mlir: bool, outer: Optional[MutableMapping[Any, Any]] = None) -> None:
    for region in operation.regions:
        for block in region.blocks:
            folder = _Folder(run, mlir, outer)
            for op in list(block.operations):
                run.checkpoint()
                op = getattr(op, "operation", op)
                if op.regions:
                    _walk(op, run, mlir, folder.defined)
                elif not folder.fold(op):
                    folder.see(op)
