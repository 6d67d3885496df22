"""What the backend reports about its devices while programs run. Does not import jax."""

from __future__ import annotations

import ctypes
import json
from typing import Any, Dict, Optional

from jax_ipu import _native


def device_stats(device: Any = 0) -> Optional[Dict[str, Any]]:
    """Host transfers and the last execution of an ipu device (a jax Device or its id).

    Returns None before the ipu backend has been created. ``last_profile`` holds the emulator's cycle
    estimate of the most recent program run on the device: total, compute, exchange and sync cycles and the
    number of BSP supersteps.
    """
    device_id = device if isinstance(device, int) else int(device.id)
    lib = _native.load()
    lib.JaxIpu_DeviceStats.restype = ctypes.c_void_p
    lib.JaxIpu_DeviceStats.argtypes = [ctypes.c_int]
    text = _native.take_string(lib, lib.JaxIpu_DeviceStats(device_id))
    return json.loads(text) if text else None


def last_execution(device: Any = 0) -> Optional[Dict[str, Any]]:
    """The cycle estimate of the most recent program run on an ipu device, with the program's name.

    >>> jax_ipu.last_execution()["total_cycles"]  # doctest: +SKIP
    """
    stats = device_stats(device)
    if not stats or stats["last_profile"] is None:
        return None
    return dict(stats["last_profile"], program=stats["last_program"])
