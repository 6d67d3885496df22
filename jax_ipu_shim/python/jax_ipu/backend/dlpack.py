"""DLPack with ipu arrays (``jax.dlpack``, ``jnp.from_dlpack``, ``np.from_dlpack(x)``, ``x.__dlpack__()``).

jaxlib exchanges DLPack tensors only through the cpu and GPU clients: its PJRT C API client has no external
references (``UNIMPLEMENTED: PJRT C API does not support AcquireExternalReference``), and ``from_dlpack`` of a
capsule in jax 0.4.13 needs the cpu backend (``Unknown backend cpu`` with ``JAX_PLATFORMS=ipu``). An IPU's memory is
not the host's, so an ipu array is exported as a host copy, as a device whose memory a consumer cannot address
does it: its ``__dlpack_device__`` is the cpu's (kDLCPU, 0) and its capsule is numpy's, of that copy. A request that
forbids the copy (``copy=False``) or asks for another device is refused with ``BufferError``, as the array API asks
of a producer. Importing onto an ipu (``from_dlpack(x, device=ipu)``) reads the tensor on the host and puts it on
the device, a copy (refused with ``copy=False``, as jax refuses any transfer then); without a cpu backend the tensor
goes to the default device the same way. Everything else is jax's own path.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional

import numpy as np

from jax_ipu.config import PLATFORM

_KDLCPU = 1  # DLDeviceType.kDLCPU


def _on_ipu(x: Any) -> bool:
    from jax._src import array

    if not isinstance(x, array.ArrayImpl):
        return False
    return any(d.platform == PLATFORM for d in x.sharding.device_set)


def _host_capsule(x: Any, max_version: Any) -> Any:
    host = np.array(x)  # the copy the capsule describes (numpy's capsule keeps it alive)
    if max_version is not None:
        try:
            return host.__dlpack__(max_version=tuple(max_version))
        except TypeError:  # numpy before 2.1: unversioned capsules only
            pass
    return host.__dlpack__()


def _arguments(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The call's arguments by name, in the series' own signature of ``original``."""
    return inspect.signature(original).bind(*args, **kwargs).arguments


def _to_dlpack(original: Callable[..., Any], x: Any, *args: Any, **kwargs: Any) -> Any:
    if not _on_ipu(x):
        return original(x, *args, **kwargs)
    kwargs = _arguments(original, x, *args, **kwargs)
    if len(x.sharding.device_set) > 1:
        raise BufferError("to_dlpack can only pack a dlpack tensor from an array on one device, but this ipu array "
                          f"is sharded over {len(x.sharding.device_set)} devices")
    if kwargs.get("copy") is False:
        raise BufferError("an ipu array is exported to DLPack as a host copy (the IPU's memory is not the host's), "
                          "but copy=False forbids a copy: pass copy=True or copy=None")
    dl_device = kwargs.get("dl_device")
    if dl_device is not None and int(dl_device[0]) != _KDLCPU:
        raise BufferError(f"an ipu array is exported to DLPack on the host (kDLCPU), not on {dl_device}")
    capsule = _host_capsule(x, kwargs.get("max_version"))
    if kwargs.get("take_ownership"):  # jax 0.4.13
        x.delete()  # as jax does when it hands the buffer over
    return capsule


def _ipu_device(device: Any) -> Optional[Any]:
    """The ipu device a from_dlpack ``device`` (a Device or a one-device Sharding) names, else None."""
    if device is None:
        return None
    devices = getattr(device, "device_set", None) or {device}
    if len(devices) != 1:
        return None
    (only,) = devices
    return only if getattr(only, "platform", None) == PLATFORM else None


class _Capsule:
    """A bare DLPack capsule (jax 0.4.13's from_dlpack argument) as the object numpy's from_dlpack reads."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> Any:
        return (_KDLCPU, 0)


def _from_dlpack(original: Callable[..., Any], external: Any, *args: Any, **kwargs: Any) -> Any:
    import jax
    from jax._src import xla_bridge

    named = _arguments(original, external, *args, **kwargs)
    device = named.get("device")
    target = _ipu_device(device)
    if target is None:
        if device is not None:
            return original(external, *args, **kwargs)
        try:
            xla_bridge.get_backend("cpu")
            return original(external, *args, **kwargs)
        except RuntimeError:  # no cpu backend (JAX_PLATFORMS=ipu): through the host onto the default device
            target = jax.devices()[0]
    if named.get("copy") is False:
        raise ValueError(f"Specified device={target!r} which requires a copy from the DLPack tensor's host memory, "
                         "however copy=False. Set copy=True or copy=None to perform the requested operation.")
    source = external if hasattr(external, "__dlpack__") else _Capsule(external)
    return jax.device_put(np.from_dlpack(source), target)


def _dlpack_device(original: Optional[Callable[..., Any]], x: Any) -> Any:
    if _on_ipu(x):
        from jax._src import dlpack

        device_type = getattr(dlpack, "DLDeviceType", None)
        return (device_type.kDLCPU if device_type is not None else _KDLCPU), 0
    if original is None:  # jax 0.4.13 has none: a cpu array's, as numpy needs it
        if x.platform() == "cpu":
            return _KDLCPU, 0
        raise BufferError(f"__dlpack_device__ is not supported for arrays on {x.platform()}")
    return original(x)


def install() -> None:
    """Routes jax's DLPack functions and ArrayImpl.__dlpack_device__ for ipu arrays here (once)."""
    import jax.dlpack
    from jax._src import array
    from jax._src import dlpack as jax_dlpack

    if getattr(jax_dlpack, "_jax_ipu_dlpack", False):
        return
    to_dlpack = functools.wraps(jax_dlpack.to_dlpack)(functools.partial(_to_dlpack, jax_dlpack.to_dlpack))
    from_dlpack = functools.wraps(jax_dlpack.from_dlpack)(functools.partial(_from_dlpack, jax_dlpack.from_dlpack))
    # Array.__dlpack__ and jnp.from_dlpack import these names from the modules when they are called.
    for module in (jax_dlpack, jax.dlpack):
        module.to_dlpack, module.from_dlpack = to_dlpack, from_dlpack  # type: ignore[attr-defined]
    original_device = getattr(array.ArrayImpl, "__dlpack_device__", None)

    def __dlpack_device__(self: Any) -> Any:
        return _dlpack_device(original_device, self)

    array.ArrayImpl.__dlpack_device__ = __dlpack_device__
    jax_dlpack._jax_ipu_dlpack = True  # type: ignore[attr-defined]
