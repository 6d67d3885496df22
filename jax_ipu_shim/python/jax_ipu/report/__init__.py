"""Profile reports: what Poplar's ``autoReport`` wrote for PopVision, here from the emulator's own estimates.

With ``POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true","autoReport.directory":"DIR"}'`` every program compiled
for the ipu gets a folder ``DIR/<program>/`` (``jit_f``, then ``jit_f_1``, ... for further programs of the same
name in one process) holding

- ``profile.json``: the report, format ``jax-ipu-profile`` version 1 (schema in jax_ipu_shim/README.md,
  "Profile reports"), and
- ``profile.html``: the same report as a self-contained page (no network) to open in a browser.

When they are written: the graph profile (target, memory per tile by category, liveness, program tree, static
cycles) when the program is compiled; the execution profile (the cycles of the program's most recent run on each
device, per step and per op) when the next program is compiled, when ``jax_ipu.last_execution()`` is called,
when ``update()`` is called, and at process exit. Nothing is added to the dispatch of a call.

Graph profiles are read from the executable PJRT lowered and runs (the plugin's compiled hook hands it over, see
jax_ipu_shim/include/jax_ipu/c_api.h): nothing is lowered twice.

``python -m jax_ipu.report DIR`` re-renders the HTML pages of the reports under DIR from their JSON.
"""

from __future__ import annotations

import atexit
import datetime
import json
import logging
import os
import re
import struct
import threading
from typing import Any, Dict, List, Optional, Sequence

from jax_ipu import _native
from jax_ipu import engine_options as _options

logger = logging.getLogger(__name__)

FORMAT = "jax-ipu-profile"
VERSION = 1
JSON_NAME = "profile.json"
HTML_NAME = "profile.html"
_CATEGORIES = ("variables", "not_always_live", "exchange_buffers", "vertex_state", "code")

_lock = threading.Lock()
_target: Dict[str, Any] = {"version": "ipu2", "num_tiles": 0, "num_devices": 1}
_reports: Dict[str, Dict[str, Any]] = {}  # program name -> {"path", "profile", "seen": {device: executions}}
_folders: Dict[str, int] = {}  # program name -> programs of that name so far in this process
_active = False  # a report has been written: execution profiles are worth collecting
_exit_hook = False


def set_target(version: str, num_tiles: int, num_devices: int) -> None:
    """The chip the ipu client was created for (called by the plugin when the backend is created)."""
    _target.update(version=version, num_tiles=int(num_tiles), num_devices=int(num_devices))
    _options.engine_options()  # a malformed POPLAR_ENGINE_OPTIONS fails the backend's creation, naming the option


def on_compile() -> None:
    """Called by the plugin before the emulator lowers each program: a malformed POPLAR_ENGINE_OPTIONS fails the
    compile, naming the option."""
    _options.engine_options()


def on_compiled(handle: int, program: bytes, device_ids: Sequence[int]) -> None:
    """Called by the plugin with each executable PJRT lowered (a handle of this function's own, released here), the
    program the front end wrote and the devices it was compiled for: the graph profile of that executable."""
    from jax_ipu import emulator

    owned = False  # once an Executable holds the handle, it (its close, or its __del__) releases it
    try:
        try:
            options: Optional[_options.EngineOptions] = _options.engine_options()
        except ValueError:  # on_compile has refused it already: nothing was lowered
            options = None
        if options is None or not options.reports:
            return
        owned = True
        executable = emulator.Executable(handle)
        try:
            update()
            _write_graph_report(executable, program, list(device_ids) or [0], options)
        except Exception as error:  # noqa: BLE001 - a report must never fail the user's compile
            logger.warning("ipu: could not write the profile report: %s", error, exc_info=True)
        finally:
            executable.close()
    finally:
        if not owned:
            _native.load().JaxIpu_Destroy(handle)


def _write_graph_report(executable: Any, program: bytes, device_ids: List[int],
                        options: _options.EngineOptions) -> None:
    global _active, _exit_hook
    profile = graph_profile(executable.info, _executable_profile(executable), device_ids, options)
    profile["partitioning"] = partitioning(program)
    name = profile["program"]
    with _lock:
        count = _folders.get(name, 0)
        _folders[name] = count + 1
        folder = os.path.join(options.directory, _safe(name) + (f"_{count}" if count else ""))
        _reports[name] = {"path": folder, "profile": profile, "seen": {}}
        _active = True
        if not _exit_hook:
            atexit.register(_at_exit)
            _exit_hook = True
    write(profile, folder)
    if profile["memory"] and profile["memory"]["overflowing_tiles"]:
        logger.warning("ipu: program %s does not fit in tile memory (debug.allowOutOfMemory): %d tile(s) overflow, "
                       "the worst is tile %d with %d bytes; see %s", name, len(profile["memory"]["overflowing_tiles"]),
                       profile["memory"]["worst_tile"], profile["memory"]["worst_bytes"],
                       os.path.join(folder, HTML_NAME))


def partitioning(program: bytes) -> Optional[Dict[str, Any]]:
    """How a program over several IPUs was partitioned (translate's document: partitions, shardings, what XLA's
    partitioner warned of), or None for a program on one IPU or replicated by pmap."""
    from jax_ipu.compiler.program_format import CONTAINER_MAGIC

    data = bytes(program)
    if data.startswith(CONTAINER_MAGIC):
        (size,) = struct.unpack_from("<Q", data, len(CONTAINER_MAGIC))
        data = data[len(CONTAINER_MAGIC) + 8:len(CONTAINER_MAGIC) + 8 + size]
    document = json.loads(data)
    if "partitions" not in document:
        return None
    shardings = document.get("shardings", {})
    return {"partitions": document["partitions"], "params": shardings.get("params", []),
            "results": shardings.get("results", []), "warnings": document.get("partitioner_warnings", [])}


def _executable_profile(executable: Any) -> Dict[str, Any]:
    lib = _native.load()
    text = _native.take_string(lib, lib.JaxIpu_ExecutableProfile(executable._handle))
    if not text:
        raise RuntimeError("the emulator gave no graph profile (JaxIpu_ExecutableProfile)")
    return json.loads(text)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "program"


def _ops(steps: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Steps summed by op and source line, costliest first."""
    ops: Dict[Any, Dict[str, Any]] = {}
    for s in steps:
        op = ops.setdefault((s["name"], s["loc"]), {
            "name": s["name"], "loc": s["loc"], "steps": 0, "executions": 0, "cycles": 0, "compute_cycles": 0,
            "exchange_cycles": 0, "sync_cycles": 0})
        op["steps"] += 1
        op["executions"] += int(s.get("executions", 1))
        for key in ("cycles", "compute_cycles", "exchange_cycles", "sync_cycles"):
            op[key] += int(s[key])
    return sorted(ops.values(), key=lambda o: (-o["cycles"], o["name"], o["loc"]))


def _annotate_tree(node: Optional[Dict[str, Any]], cycles: Dict[int, int]) -> int:
    """Adds each node's static cycles (one execution of every step below it); returns them."""
    if node is None:
        return 0
    own = cycles.get(node["id"], 0) if node["id"] >= 0 else 0
    total = own + sum(_annotate_tree(c, cycles) for c in node.get("children", []))
    node["cycles"] = total
    return total


def graph_profile(info: Dict[str, Any], graph: Dict[str, Any], device_ids: Sequence[int],
                  options: _options.EngineOptions) -> Dict[str, Any]:
    """The report of a compiled program: ``info`` is the emulator's ``Executable.info``, ``graph`` its
    ``JaxIpu_ExecutableProfile``."""
    device = info["device"]
    clock = float(device.get("tile_clock_frequency") or 1)
    limit = int(info["memory"]["bytes_per_tile_limit"])
    tiles = graph["tiles"]
    num_tiles = len(tiles["bytes"])
    steps = info["steps"]
    profile: Dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "program": info["name"],
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "options": dict(options.raw),
        "target": {
            "chip": device.get("version"), "tiles": num_tiles, "tiles_per_chip": device.get("tiles_per_chip"),
            "ipus": len(device_ids), "ipus_in_system": _target["num_devices"], "device_ids": list(device_ids),
            "clock_hz": clock, "bytes_per_tile": limit, "num_worker_contexts": device.get("num_worker_contexts"),
            "exchange_bytes_per_cycle": device.get("exchange_bytes_per_cycle"),
            "global_sync_cycles": device.get("global_sync_cycles"),
        },
        "estimate": {
            "cycles": info["estimated_cycles"], "seconds": info["estimated_cycles"] / clock,
            "supersteps": info["static_supersteps"], "flops": info["flops"],
            # the steps on f64/i64/u64 values, which the IPU has no hardware for (run in software)
            "emulated_64bit_cycles": sum(s["cycles"] for s in steps if s.get("emulated_64bit")),
        },
        "memory": None, "liveness": None, "program_tree": None, "steps": None, "ops": None,
        "host": {
            "inputs": info["inputs"], "outputs": info["outputs"], "aliases": info["aliases"],
            "streams": [s for s in steps if s["type"] == "StreamCopy"],
            "callbacks": [s for s in steps if s["type"] == "HostCall"],
            "transfers": None,
        },
        "execution": None,
    }
    if options.output_graph_profile:
        totals = [int(b) for b in tiles["bytes"]]
        worst = sorted(range(num_tiles), key=lambda t: (-totals[t], t))[:10]
        chip = limit * num_tiles
        profile["memory"] = {
            "total_bytes": sum(totals), "chip_bytes": chip, "percent_of_chip": 100.0 * sum(totals) / max(1, chip),
            "bytes_per_tile_limit": limit, "worst_tile": worst[0] if worst else 0,
            "worst_bytes": totals[worst[0]] if worst else 0, "tiles_used": sum(1 for b in totals if b > 0),
            "overflowing_tiles": [t for t in range(num_tiles) if totals[t] > limit],
            "by_category": {c: sum(int(b) for b in tiles[c]) for c in _CATEGORIES},
            "worst_tiles": [dict({"tile": t, "bytes": totals[t]}, **{c: int(tiles[c][t]) for c in _CATEGORIES})
                            for t in worst if totals[t] > 0],
            "per_tile": {k: [int(b) for b in tiles[k]] for k in ("bytes",) + _CATEGORIES},
        }
        live = graph["liveness"]
        peak = max(range(len(live["bytes"])), key=lambda i: live["bytes"][i]) if live["bytes"] else -1
        profile["liveness"] = {
            "bytes": live["bytes"], "max_tile_bytes": live["max_tile_bytes"], "max_tile": live["max_tile"],
            "peak_step": peak, "peak_bytes": live["bytes"][peak] if peak >= 0 else 0,
        }
        tree = graph["program_tree"]
        _annotate_tree(tree, {s["id"]: s["cycles"] for s in steps})
        profile["program_tree"] = tree
        profile["steps"] = steps
        profile["ops"] = _ops(steps)
    return profile


def update() -> List[str]:
    """Adds the most recent run of each reported program, on every ipu device, to its report (when
    ``autoReport.outputExecutionProfile`` is on). Returns the folders rewritten."""
    if not _active:
        return []
    lib = _native.load()
    synchronize = getattr(lib, "JaxIpu_Synchronize", None)
    if synchronize is not None:
        synchronize()
    changed: Dict[str, Dict[str, Any]] = {}
    with _lock:
        for device in range(int(_target["num_devices"])):
            stats = _native.device_stats(device)
            if not stats or not stats.get("last_profile"):
                continue
            entry = _reports.get(stats["last_program"])
            if entry is None or entry["seen"].get(device) == stats["executions"]:
                continue
            profile = entry["profile"]
            if profile["steps"] is not None:  # a run of another program of the same name: steps would not match
                ids = {s["id"] for s in profile["steps"]}
                if any(s["id"] not in ids for s in stats["last_profile"]["steps"]):
                    continue
            entry["seen"][device] = stats["executions"]
            transfers = {k: v for k, v in stats.items() if k not in ("last_profile", "last_program")}
            profile["host"]["transfers"] = dict(profile["host"]["transfers"] or {}, **{str(device): transfers})
            if not _options.engine_options().output_execution_profile:
                changed[entry["path"]] = profile
                continue
            run = dict(stats["last_profile"], device=device, device_executions=stats["executions"])
            run["seconds"] = run["total_cycles"] / profile["target"]["clock_hz"]
            run["ops"] = _ops(run["steps"])
            execution = profile["execution"] or {"runs": []}
            execution["runs"] = [r for r in execution["runs"] if r["device"] != device] + [run]
            execution["runs"].sort(key=lambda r: r["device"])
            profile["execution"] = execution
            changed[entry["path"]] = profile
    for path, profile in changed.items():
        write(profile, path)
    return list(changed)


def _at_exit() -> None:
    try:
        update()
    except Exception as error:  # noqa: BLE001 - interpreter shutdown: say so, never raise
        logger.warning("ipu: could not add the execution profile to the reports at exit: %s", error)


def write(profile: Dict[str, Any], folder: str) -> None:
    """Writes ``profile.json`` and ``profile.html`` into ``folder`` (each replaced whole, never half written)."""
    from jax_ipu.report import html

    os.makedirs(folder, exist_ok=True)
    _replace(os.path.join(folder, JSON_NAME), json.dumps(profile, indent=1, sort_keys=False))
    _replace(os.path.join(folder, HTML_NAME), html.render(profile))


def _replace(path: str, text: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def load(path: str) -> Dict[str, Any]:
    """Reads a report (``profile.json`` or its folder), checking its format and version."""
    if os.path.isdir(path):
        path = os.path.join(path, JSON_NAME)
    with open(path, encoding="utf-8") as f:
        profile = json.load(f)
    if not isinstance(profile, dict) or profile.get("format") != FORMAT:
        raise ValueError(f"{path}: not a {FORMAT} report")
    if profile.get("version") != VERSION:
        raise ValueError(f"{path}: {FORMAT} version {profile.get('version')}; this jax_ipu reads version {VERSION}")
    return profile
