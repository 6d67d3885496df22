"""Host streams of an ipu device: ``device.transfer_to_infeed(...)`` and ``device.transfer_from_outfeed(shape)``.

jaxlib's C API client raises UNIMPLEMENTED for both, so :func:`install_device_methods` replaces them on jaxlib's
``Device`` class (methods cannot be set on an instance): ipu devices go to the native library's C functions
``JaxIpu_InfeedPush`` / ``JaxIpu_OutfeedPop``, every other device to jaxlib's own methods.

Each infeed entry is the flattened leaves of one ``transfer_to_infeed`` value, in the order ``lax.infeed`` flattens
its ``shape``; each ``lax.outfeed`` appends one entry that ``transfer_from_outfeed`` takes, oldest first.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

from jax_ipu import _native
from jax_ipu.config import PLATFORM

_dtype_names: Dict[np.dtype, str] = {}


def dtype_names() -> Dict[np.dtype, str]:
    """The program format's element types (the one table, compiler/types.py): the only ones an ipu stream carries.
    Imported on first use: feeds is installed while jax imports itself, before the compiler can be. Made once: a
    training loop fed from the host pushes an entry per step, and building the table took a third of a push."""
    if not _dtype_names:
        from jax_ipu.compiler import types
        _dtype_names.update(types.ipu_numpy_dtypes())
    return _dtype_names


def _dtype_name(dtype: Any, what: str) -> str:
    names = dtype_names()
    name = names.get(np.dtype(dtype))
    if name is None:
        raise TypeError(f"{what} has dtype {np.dtype(dtype).name}, which an ipu host stream cannot carry: "
                        f"supported dtypes are {', '.join(d.name for d in names)}")
    return name


def _as_array(leaf: Any) -> np.ndarray:
    # Python scalars take jax's default (32-bit) types; arrays keep theirs and are checked.
    if isinstance(leaf, bool):
        return np.asarray(leaf, np.bool_)
    if isinstance(leaf, int):
        return np.asarray(leaf, np.int32)
    if isinstance(leaf, float):
        return np.asarray(leaf, np.float32)
    array = np.asarray(leaf)
    return array if array.flags.c_contiguous else array.copy(order="C")


class _Layout:
    """The ctypes arguments that describe a list of arrays' types and shapes: dtype names, ranks, dimension arrays.
    The same for every entry of a stream, so made once per layout (_layout)."""

    def __init__(self, signature: Tuple[Tuple[np.dtype, Tuple[int, ...]], ...], what: str) -> None:
        n = len(signature)
        names = [_dtype_name(dtype, f"{what} {i}").encode() for i, (dtype, _) in enumerate(signature)]
        self._dims = [(ctypes.c_int64 * max(1, len(shape)))(*shape) for _, shape in signature]
        self.n = ctypes.c_size_t(n)
        self.dtypes = (ctypes.c_char_p * n)(*names)
        self.ranks = (ctypes.c_int * n)(*[len(shape) for _, shape in signature])
        self.dims = (ctypes.POINTER(ctypes.c_int64) * n)(
            *[ctypes.cast(d, ctypes.POINTER(ctypes.c_int64)) for d in self._dims])
        self.pointers = ctypes.c_void_p * n


@functools.lru_cache(maxsize=64)
def _layout(signature: Tuple[Tuple[np.dtype, Tuple[int, ...]], ...], what: str) -> _Layout:
    return _Layout(signature, what)


class _Arrays:
    """ctypes views of a list of arrays: their layout's arguments (dtype names, ranks, dimension arrays) and their
    data pointers."""

    def __init__(self, arrays: List[np.ndarray], what: str) -> None:
        layout = _layout(tuple((a.dtype, a.shape) for a in arrays), what)
        self.n, self.dtypes, self.ranks, self.dims = layout.n, layout.dtypes, layout.ranks, layout.dims
        self.data = layout.pointers(*[a.__array_interface__["data"][0] for a in arrays])


def _lib() -> ctypes.CDLL:
    lib = _native.load()
    for name in ("JaxIpu_InfeedPush", "JaxIpu_OutfeedPop"):
        if not hasattr(lib, name):
            raise NotImplementedError(f"this libjax_ipu.so has no {name}: ipu host streams need a newer build")
    return lib


def _check(lib: ctypes.CDLL, status: int, error: ctypes.c_void_p, what: str) -> None:
    if status == 0:
        return
    from jax._src.lib import xla_client

    message = _native.take_string(lib, error.value) or f"{what} failed without a message"
    raise xla_client.XlaRuntimeError(message)


def transfer_to_infeed(device: Any, value: Any) -> None:
    """Appends one infeed entry to an ipu device: an array, a tuple, or any pytree of arrays (flattened in the
    order ``lax.infeed`` flattens its ``shape``)."""
    from jax import tree_util

    arrays = [_as_array(leaf) for leaf in tree_util.tree_leaves(value)]
    views = _Arrays(arrays, "transfer_to_infeed: leaf")
    lib = _lib()
    error = ctypes.c_void_p()
    status = lib.JaxIpu_InfeedPush(int(device.id), views.n, views.dtypes, views.ranks, views.dims, views.data,
                                   ctypes.byref(error))
    _check(lib, status, error, "transfer_to_infeed")


def _flatten_shape(shape: Any) -> Tuple[List[Tuple[Tuple[int, ...], np.dtype]], Callable[[List[Any]], Any]]:
    """Leaves (dims, dtype) of an xla_client.Shape (array or nested tuple) and how to rebuild the value."""
    if shape.is_tuple():
        parts = [_flatten_shape(s) for s in shape.tuple_shapes()]
        leaves = [leaf for part, _ in parts for leaf in part]

        def rebuild(arrays: List[Any]) -> Any:
            out, start = [], 0
            for part, build in parts:
                out.append(build(arrays[start:start + len(part)]))
                start += len(part)
            return tuple(out)
        return leaves, rebuild
    return [(tuple(int(d) for d in shape.dimensions()), np.dtype(shape.numpy_dtype()))], lambda arrays: arrays[0]


def transfer_from_outfeed(device: Any, shape: Any) -> Any:
    """Takes the oldest outfeed entry of an ipu device, waiting for one: numpy arrays shaped like ``shape``
    (an ``xla_client.Shape``: an array shape gives an array, a tuple shape a tuple)."""
    leaves, rebuild = _flatten_shape(shape)
    arrays = [np.empty(dims, dtype) for dims, dtype in leaves]
    views = _Arrays(arrays, "transfer_from_outfeed: shape element")
    lib = _lib()
    error = ctypes.c_void_p()
    # Blocks (the GIL released) until an entry arrives; the library fails the wait if none ever could.
    status = lib.JaxIpu_OutfeedPop(int(device.id), views.n, views.dtypes, views.ranks, views.dims, views.data,
                                   ctypes.c_double(-1.0), ctypes.byref(error))
    _check(lib, status, error, "transfer_from_outfeed")
    return rebuild(arrays)


def install_device_methods() -> None:
    """Routes ``transfer_to_infeed`` / ``transfer_from_outfeed`` of ipu devices here (once)."""
    from jax._src.lib import xla_client

    device_class = xla_client.Device
    if getattr(device_class, "_jax_ipu_feeds", False):
        return
    original_to_infeed = device_class.transfer_to_infeed
    original_from_outfeed = device_class.transfer_from_outfeed

    def to_infeed(self, literal):
        if self.platform == PLATFORM:
            return transfer_to_infeed(self, literal)
        return original_to_infeed(self, literal)

    def from_outfeed(self, shape):
        if self.platform == PLATFORM:
            return transfer_from_outfeed(self, shape)
        return original_from_outfeed(self, shape)

    to_infeed.__doc__ = original_to_infeed.__doc__
    from_outfeed.__doc__ = original_from_outfeed.__doc__
    device_class.transfer_to_infeed = to_infeed
    device_class.transfer_from_outfeed = from_outfeed
    device_class._jax_ipu_feeds = True
