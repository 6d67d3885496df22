"""IPUs of several processes (several hosts): a ``jax.distributed`` job.

After ``jax.distributed.initialize(coordinator_address=..., num_processes=N, process_id=i)``, each process creates
its own emulated IPUs (``JAX_IPU_DEVICE_COUNT`` of them); ``jax.devices("ipu")`` lists every process's, with their
``process_index``, numbered process by process. ``pmap`` and sharded ``jit`` run over them: each process runs its
IPUs' replicas, and the collectives between IPUs of different processes travel over TCP (pjrt/transport.cc),
costed as the GW-Links between IPU-Machines.

Rendezvous goes through jax's own coordination service: when the ipu client is created, each process starts
listening on a port, puts ``address:port`` and its device count in jax's key-value store under
``jax_ipu/process/<i>``, and reads every other process's. No cluster manager or rendezvous of our own.

The address published is the one this host reaches the coordinator from (``JAX_IPU_PROCESS_ADDRESS`` overrides it).
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
from typing import Any, Dict, List, Optional

KEY = "jax_ipu/process/{}"
# How long a process waits for the others to publish their address (they create their clients at about the same
# time, when each first uses jax's backends).
RENDEZVOUS_TIMEOUT_MS = 120_000

_processes: Optional[List[Dict[str, Any]]] = None  # every process's {"address", "devices"}, once connected


def distributed_state() -> Any:
    """jax's distributed runtime state if ``jax.distributed.initialize`` was called with several processes."""
    try:
        from jax._src import distributed
    except ImportError:  # pragma: no cover
        return None
    state = distributed.global_state
    if state.client is None or (state.num_processes or 1) <= 1:
        return None
    return state


def _own_address(coordinator: Optional[str]) -> str:
    """This host's address as the coordinator's host sees it (the interface that routes there)."""
    given = os.environ.get("JAX_IPU_PROCESS_ADDRESS")
    if given:
        return given
    host = (coordinator or "127.0.0.1").rsplit(":", 1)[0].strip("[]") or "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((socket.gethostbyname(host), 9))  # no packet is sent: only the route is chosen
            return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def rendezvous(lib: ctypes.CDLL, num_devices: int, timeout_seconds: int) -> Dict[str, Any]:
    """The client options of this process of a jax.distributed job (empty when there is one process): listens,
    publishes its address and device count, and reads every other process's from jax's key-value store."""
    global _processes
    state = distributed_state()
    if state is None:
        return {}
    port = lib.JaxIpu_TransportListen()
    if port <= 0:
        raise RuntimeError("ipu: cannot listen for the other processes of the jax.distributed job (no free port)")
    me, count = int(state.process_id), int(state.num_processes)
    mine: Dict[str, Any] = {"address": f"{_own_address(getattr(state, 'coordinator_address', None))}:{port}",
                            "devices": num_devices}
    state.client.key_value_set(KEY.format(me), json.dumps(mine))
    processes: List[Dict[str, Any]] = []
    for j in range(count):
        if j == me:
            processes.append(mine)
            continue
        try:
            text = state.client.blocking_key_value_get(KEY.format(j), RENDEZVOUS_TIMEOUT_MS)
        except Exception as error:  # noqa: BLE001 - jaxlib's error types differ by series
            raise RuntimeError(f"ipu: process {j} of the jax.distributed job did not publish its IPUs within "
                               f"{RENDEZVOUS_TIMEOUT_MS // 1000} s ({error}): every process must create its ipu "
                               "backend (use jax) after jax.distributed.initialize") from None
        processes.append(json.loads(text))
    _processes = processes
    return {
        "process_index": me,
        "peers": ",".join(str(p["address"]) for p in processes),
        "process_devices": ",".join(str(p["devices"]) for p in processes),
        "collective_timeout": timeout_seconds,
    }


def hosts_of(device_ids: List[int]) -> Optional[List[int]]:
    """The process of each global device id (for the program's cost model), or None with one process."""
    if _processes is None:
        return None
    owner: List[int] = []
    for process, entry in enumerate(_processes):
        owner += [process] * int(entry["devices"])
    return [owner[d] if 0 <= d < len(owner) else 0 for d in device_ids]
