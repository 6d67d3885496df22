"""IPUs of several processes (jax.distributed on localhost): the same data-parallel training step (pmap) and
sharded jit on 4 IPUs as 1, 2 and 4 processes give the same results, bit for bit; jax.devices() lists every
process's IPUs; a process that dies fails the others at once, naming it.

Run as a script (``python test_multihost.py WORKER OUT``), it is one process of the job; the tests start them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from typing import Any, Dict, List, NoReturn

import pytest

IPUS = 4  # in every layout: 1 process x 4 IPUs, 2 x 2, 4 x 1
STEPS = 3
_FLAGS = ("TF_POPLAR_FLAGS", "XLA_IPU_PLATFORM_DEVICE_COUNT", "JAX_PLATFORMS", "JAX_PLATFORM_NAME", "JAX_IPU_USE_MODEL",
          "JAX_IPU_DEVICE_COUNT", "JAX_IPU_VISIBLE_DEVICES", "XLA_FLAGS", "POPLAR_ENGINE_OPTIONS")


# ---------------------------------------------------------------------------------------------- the worker side

def _worker(out: str) -> None:
    import jax

    processes, me = int(os.environ["MH_PROCESSES"]), int(os.environ["MH_ID"])
    jax.distributed.initialize(coordinator_address=os.environ["MH_COORDINATOR"], num_processes=processes,
                               process_id=me)
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    info: Dict[str, Any] = {}
    if os.environ.get("MH_GONE") == str(me):
        _gone_after_publishing(jax, processes, me, out)
    try:
        devices = jax.devices("ipu")
    except Exception as error:  # noqa: BLE001 - reported to the test (an exception here would leave through
        _leave(info, out, error)  # jax.distributed's shutdown, which waits for a dead process's heartbeats)
    local = jax.local_devices(backend="ipu")
    info.update(devices=[[d.id, d.process_index] for d in devices], local=[d.id for d in local],
                process_index=jax.process_index("ipu"))
    if os.environ.get("MH_DIE") == str(me):
        os._exit(3)  # gone before the first collective: the others must fail, naming this process

    rng = np.random.default_rng(0)
    batch = rng.standard_normal((IPUS, 8, 16)).astype(np.float32)  # the global batch, one slice per IPU
    targets = rng.standard_normal((IPUS, 8, 4)).astype(np.float32)
    w = (rng.standard_normal((16, 4)) * 0.3).astype(np.float32)

    def loss(w: Any, x: Any, y: Any) -> Any:
        return jnp.mean((jnp.tanh(x @ w) - y) ** 2)

    def update(w: Any, x: Any, y: Any) -> Any:
        value, grad = jax.value_and_grad(loss)(w, x, y)
        return w - 0.5 * lax.pmean(grad, "i"), lax.pmean(value, "i")

    step = jax.pmap(update, axis_name="i")

    # This process's IPUs take their slices of the global batch (jax's multi-controller model).
    mine = [devices.index(d) for d in local]
    weights = np.broadcast_to(w, (len(local),) + w.shape)
    losses = []
    try:
        for index in range(STEPS):
            if index == 1:
                start = time.perf_counter()  # compiled: the wall time of the steps after the first
            weights, value = step(weights, batch[mine], targets[mine])
            losses.append(float(np.asarray(value.addressable_shards[0].data).reshape(-1)[0]))
        info["step_seconds"] = (time.perf_counter() - start) / (STEPS - 1)
        import jax_ipu

        info["cycles"] = jax_ipu.last_execution(local[0])["total_cycles"]  # the step's estimate on an IPU
        info["weights"] = np.asarray(weights.addressable_shards[0].data).reshape(w.shape).tolist()
        info["losses"] = losses
        info["sharded_jit"] = _sharded_jit(jax, np, batch, w, devices, local)
    except Exception as error:  # noqa: BLE001 - reported to the test
        _leave(info, out, error)
    _leave(info, out, None)


def _leave(info: Dict[str, Any], out: str, error: Any) -> NoReturn:
    if error is not None:
        info["error"] = f"{type(error).__name__}: {error}"
    with open(out, "w") as f:
        json.dump(info, f)
    sys.stdout.flush()
    if error is None:  # the others may still be computing: leave together (jax notices a process go)
        from jax._src import distributed

        try:
            distributed.global_state.client.wait_at_barrier("jax_ipu_test_done", 60_000)
        except Exception:  # noqa: BLE001 - the result is written; the test reads it
            pass
    os._exit(0)  # without jax.distributed's shutdown barrier, which a dead process would hold up


def _gone_after_publishing(jax: Any, processes: int, me: int, out: str) -> NoReturn:
    """A process that published its address and died before the others connected to it: the address is
    published, nothing listens there. Stays (for jax's coordination service) until process 0 has reported."""
    from jax._src import distributed

    from jax_ipu.backend import multihost

    distributed.global_state.client.key_value_set(
        multihost.KEY.format(me), json.dumps({"address": f"127.0.0.1:{_free_port()}", "devices": IPUS // processes}))
    first = os.path.join(os.path.dirname(out), f"p{processes}_0.json")
    deadline = time.monotonic() + 60
    while not os.path.exists(first) and time.monotonic() < deadline:
        time.sleep(0.05)
    os._exit(3)


def _sharded_jit(jax: Any, np: Any, batch: Any, w: Any, devices: List[Any], local: List[Any]) -> Any:
    """A jit over a mesh of every process's IPUs, the batch split over them: each process puts its pieces on its
    IPUs; the result (the loss's parts summed over the mesh) is whole on every IPU."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(devices), ("data",))
    flat = batch.reshape(-1, batch.shape[-1])  # (IPUS * 8, 16), rows split over the IPUs
    split, whole = NamedSharding(mesh, PartitionSpec("data")), NamedSharding(mesh, PartitionSpec())
    rows = flat.shape[0] // len(devices)
    x = jax.make_array_from_single_device_arrays(
        flat.shape, split, [jax.device_put(flat[devices.index(d) * rows:(devices.index(d) + 1) * rows], d)
                            for d in local])
    v = jax.make_array_from_single_device_arrays(w.shape, whole, [jax.device_put(w, d) for d in local])
    out = jax.jit(lambda x, v: (jax.numpy.tanh(x @ v) ** 2).sum(0), out_shardings=whole)(x, v)
    return np.asarray(out.addressable_shards[0].data).tolist()


# ---------------------------------------------------------------------------------------------- the test side

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _job(tmp_path: Any, processes: int, die: int = -1, timeout: float = 240, gone: int = -1) -> List[Dict[str, Any]]:
    coordinator = f"127.0.0.1:{_free_port()}"
    procs = []
    for me in range(processes):
        env = {k: v for k, v in os.environ.items() if k not in _FLAGS}
        env.update(JAX_PLATFORMS="ipu", JAX_IPU_DEVICE_COUNT=str(IPUS // processes), MH_PROCESSES=str(processes),
                   MH_ID=str(me), MH_COORDINATOR=coordinator, JAX_IPU_COLLECTIVE_TIMEOUT="60")
        if die >= 0:
            env["MH_DIE"] = str(die)
        if gone >= 0:
            env["MH_GONE"] = str(gone)
        out = str(tmp_path / f"p{processes}_{me}.json")
        procs.append((subprocess.Popen([sys.executable, os.path.abspath(__file__), "worker", out], env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True), out))
    results = []
    start = time.monotonic()
    for proc, out in procs:
        try:
            _, stderr = proc.communicate(timeout=max(1.0, timeout - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            for p, _ in procs:
                p.kill()
            pytest.fail(f"a process of the {processes}-process job did not finish in {timeout} s")
        info = json.load(open(out)) if os.path.exists(out) else {}
        info["returncode"], info["stderr"] = proc.returncode, stderr[-3000:]
        results.append(info)
    return results


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    (only,) = _job(tmp_path_factory.mktemp("mh1"), 1)
    assert "weights" in only and "error" not in only and only["returncode"] == 0, only
    return only


@pytest.mark.parametrize("processes", [2, 4])
def test_a_data_parallel_step_over_processes_matches_one_process(tmp_path, one_process, processes):
    results = _job(tmp_path, processes)
    for me, info in enumerate(results):
        assert "weights" in info and "error" not in info, (me, info)  # written before the process ends
        # every process sees every IPU, numbered process by process, and runs its own
        assert info["devices"] == [[d, d // (IPUS // processes)] for d in range(IPUS)]
        assert info["local"] == [d for d in range(IPUS) if d // (IPUS // processes) == me]
        assert info["process_index"] == me
        assert info["weights"] == one_process["weights"] and info["losses"] == one_process["losses"], me
        assert info["sharded_jit"] == one_process["sharded_jit"], me
        # the gradient's all-reduce crosses hosts: over the GW-Links, slower than the IPU-Links of one host
        assert info["cycles"] > one_process["cycles"], (info["cycles"], one_process["cycles"])
    assert one_process["losses"][-1] < one_process["losses"][0]  # it trains


def test_a_process_that_dies_fails_the_others_naming_it(tmp_path):
    start = time.monotonic()
    results = _job(tmp_path, 2, die=1, timeout=120)
    assert results[1]["returncode"] == 3
    # Whoever notices first: our transport (the collective fails, naming the process), or jax's coordination
    # service, which ends the surviving process with an error naming the task that went away.
    survivor = results[0]
    ours = "process 1" in survivor.get("error", "")
    jaxs = survivor["returncode"] != 0 and "task:1" in survivor["stderr"]
    assert ours or jaxs, survivor
    assert time.monotonic() - start < 100  # at once, not after the collective timeout


def test_a_process_gone_before_the_others_connect_fails_them_at_once_naming_it(tmp_path):
    start = time.monotonic()
    results = _job(tmp_path, 2, gone=1, timeout=120)
    assert results[1]["returncode"] == 3
    survivor = results[0]
    assert "process 1" in survivor.get("error", "") and "refused the connection" in survivor["error"], survivor
    assert time.monotonic() - start < 50  # at once, not after the collective timeout (60 s here)


if __name__ == "__main__":
    _worker(sys.argv[2])
