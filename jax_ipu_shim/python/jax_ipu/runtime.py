"""What the backend reports about its devices while programs run. Does not import jax."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from jax_ipu import _native, report


def device_stats(device: Any = 0) -> Optional[Dict[str, Any]]:
    """Host transfers and the last execution of an ipu device (a jax Device or its id).

    Returns None before the ipu backend has been created. ``last_profile`` holds the emulator's cycle
    estimate of the most recent program run on the device: total, compute, exchange and sync cycles and the
    number of BSP supersteps.
    """
    return _native.device_stats(device if isinstance(device, int) else int(device.id))


def tile_memory_stats(device: Any = 0) -> Dict[str, int]:
    """What ``device.memory_stats()`` adds for an ipu device to jax's keys: ``largest_tile_bytes_in_use``, the
    busiest tile of the program loaded on the IPU (the last one run there; an IPU's memory is per tile, and a
    program that does not fit on one tile fails to compile however much the chip has free), and
    ``tile_bytes_limit``, a tile's SRAM. Empty before the ipu backend exists."""
    stats = device_stats(device)
    if not stats:
        return {}
    memory = stats["memory"]
    return {"largest_tile_bytes_in_use": memory["largest_tile_bytes_in_use"],
            "tile_bytes_limit": memory["tile_bytes_limit"]}


def last_execution(device: Any = 0) -> Optional[Dict[str, Any]]:
    """The cycle estimate of the most recent program run on an ipu device, with its per-step trace.

    Keys: ``program``, ``total_cycles``, ``compute_cycles``, ``exchange_cycles``, ``sync_cycles``, ``supersteps``
    and ``steps``: one dict per step of the program tree that ran, in program order, with

    - ``id``: the step's place in the program (depth first); ``type``: Poplar's program class (``Execute`` a
      compute set, ``Copy``, ``RepeatWhileTrue`` / ``Switch`` for their decisions, ``StreamCopy``, ``HostCall``);
    - ``name``: the op it was lowered from (``stablehlo.add``), ``loc``: its source location (``model.py:12``, or
      empty when jax gave none);
    - ``executions`` (a loop body's steps count every iteration), ``cycles`` and its ``compute_cycles``,
      ``exchange_cycles``, ``sync_cycles``, and ``supersteps``, summed over the executions.

    The steps add up exactly to the totals. ``format_trace()`` prints them as a table.

    Execution is asynchronous: this first waits for the work already queued on the ipu devices, so that "last"
    means the last call made, not the last one that happened to finish.

    >>> jax_ipu.last_execution()["total_cycles"]  # doctest: +SKIP
    >>> [(s["name"], s["loc"], s["cycles"]) for s in jax_ipu.last_execution()["steps"]]  # doctest: +SKIP
    """
    synchronize = getattr(_native.load(), "JaxIpu_Synchronize", None)
    if synchronize is not None:
        synchronize()
    report.update()  # POPLAR_ENGINE_OPTIONS autoReport: the run goes into its program's report too
    stats = device_stats(device)
    if not stats or stats["last_profile"] is None:
        return None
    return dict(stats["last_profile"], program=stats["last_program"])


def format_trace(profile: Optional[Dict[str, Any]] = None, device: Any = 0, top: Optional[int] = None) -> str:
    """The steps of a run as a text table: ``profile`` (a ``last_execution()`` dict or an emulator
    ``last_profile``), by default the last run on ``device``. ``top``: only the ``top`` costliest steps, costliest
    first; otherwise every step in program order.

    >>> print(jax_ipu.runtime.format_trace(top=10))  # doctest: +SKIP
    """
    if profile is None:
        profile = last_execution(device)
        if profile is None:
            return "no program has run on the ipu device yet"
    steps: List[Dict[str, Any]] = list(profile.get("steps", []))
    if top is not None:
        steps = sorted(steps, key=lambda s: -s["cycles"])[:top]
    total = max(1, int(profile["total_cycles"]))
    header = ("id", "type", "name", "loc", "runs", "cycles", "%", "compute", "exchange", "sync")
    rows = [header]
    for s in steps:
        rows.append((str(s["id"]), s["type"], s["name"], s["loc"] or "-", str(s["executions"]), str(s["cycles"]),
                     f"{100.0 * s['cycles'] / total:.1f}", str(s["compute_cycles"]), str(s["exchange_cycles"]),
                     str(s["sync_cycles"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    numeric = {0, 4, 5, 6, 7, 8, 9}
    lines = ["  ".join(c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
             for r in rows]
    title = (f"{profile.get('program', 'program')}: {profile['total_cycles']} cycles"
             f" in {profile['supersteps']} supersteps")
    return "\n".join([title] + lines)
