"""Collectives under pmap over several emulated IPUs (JAX_IPU_DEVICE_COUNT=N), against the cpu backend with as many
host devices (XLA_FLAGS=--xla_force_host_platform_device_count=N), or numpy where XLA:CPU is wrong.

Device counts are fixed when a backend starts, so every case runs in two fresh processes per N (one ipu, one cpu):
this module is also the script they run (``python test_collectives.py BACKEND N OUT``), writing each case's result to
an .npz that the tests compare. Tolerances:
- float sums: a few ulp, because XLA:CPU's in-process all-reduce adds the replicas in the order they arrive (it
  changes from run to run); ours adds them in replica-group order;
- pmax/pmin of floats against numpy: XLA:CPU 0.4.13 starts a float max from FLT_MIN (so pmax of negative values
  gives 1.2e-38) and drops NaNs;
- everything else exact.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any, Callable, Dict, Tuple

import numpy as np
import pytest
from _conformance import CURRENT_SERIES, compile_text, enable_x64, numbered, run_device_script, text_of_jax_0_4_13

HERE = os.path.dirname(os.path.abspath(__file__))
COUNTS = (2, 4)
SUM = {"rtol": 1e-6, "atol": 1e-6}
TRAIN = {"rtol": 2e-5, "atol": 1e-6}
GRAD = {"rtol": 1e-5, "atol": 1e-4}  # tanh and dot rounding, summed over replicas with cancellation
HALF = {"rtol": 2e-3, "atol": 3e-2}  # 3 f16 adds in another order than cpu: 1.5 ulp of partials up to 32
EXACT: Dict[str, float] = {"rtol": 0.0, "atol": 0.0}

# case -> (reference, tolerance); reference "cpu" or "numpy" (computed in the ipu process from the same inputs).
CASES: Dict[str, Tuple[str, Dict[str, float]]] = {
    "psum_f32": ("cpu", SUM),
    "psum_i32_wraps": ("cpu", EXACT),
    "psum_f16": ("cpu", HALF),
    "psum_u32_2d": ("cpu", EXACT),
    "psum_c64": ("cpu", SUM),
    "psum_c128": ("cpu", SUM),
    "pmean_f32": ("cpu", SUM),
    "pmax_f32": ("numpy", EXACT),
    "pmin_f32": ("numpy", EXACT),
    "pmax_pmin_i32": ("cpu", EXACT),
    "pmax_pmin_bool": ("cpu", EXACT),
    "all_gather": ("cpu", EXACT),
    "all_gather_tiled_axis1": ("cpu", EXACT),
    "all_gather_i32_bool": ("cpu", EXACT),
    "ppermute_ring": ("cpu", EXACT),
    "ppermute_partial_gives_zeros": ("cpu", EXACT),
    "all_to_all_0_0": ("cpu", EXACT),
    "all_to_all_1_0": ("cpu", EXACT),
    "all_to_all_0_1": ("cpu", EXACT),
    "psum_scatter": ("cpu", SUM),
    "psum_scatter_tiled_axis1": ("cpu", SUM),
    "axis_index": ("cpu", EXACT),
    "axis_index_groups": ("cpu", SUM),
    "grad_through_psum": ("cpu", GRAD),
    "pmap_of_vmap": ("cpu", SUM),
    "nested_pmap": ("cpu", SUM),
    "training_step": ("cpu", TRAIN),
    "general_body_all_reduce": ("numpy", EXACT),
    "shard_map_2d_mesh": ("cpu", SUM),
    # its pmap's psum over 4 devices: jaxlib 0.4.13's cpu adds the replicas in the order its threads arrive
    "sharded_jit_2d_mesh": ("cpu", SUM),
}
# Cases jax itself no longer runs, on any backend, in the current series.
NOT_IN_CURRENT_JAX = {
    "nested_pmap": "jax 0.12's pmap does not nest (jax raises before lowering, on cpu too); shard_map_2d_mesh runs "
                   "collectives over the axes of a 2-D mesh instead",
}

# ---------------------------------------------------------------------------------------------- the script side


def _cases(backend: str, n: int) -> Dict[str, Callable[[], Any]]:
    """Each case returns its result; a case whose reference is numpy returns (result, expected)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    devices = jax.devices(backend)[:n]
    pmap = functools.partial(jax.pmap, axis_name="i", devices=devices)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 6, 4 * n)).astype(np.float32)
    ints = rng.integers(-2**31, 2**31, size=(n, 100), dtype=np.int64).astype(np.int32)
    half = rng.uniform(-8, 8, (n, 64)).astype(np.float16)
    negative = -np.abs(x) - 1
    negative[0, 0, :4] = [-0.0, 0.0, np.inf, -np.inf]
    small = rng.integers(0, 1000, size=(n, 5, 3)).astype(np.uint32)
    flags = rng.random((n, 33)) < 0.5
    weights = rng.standard_normal((n, 4 * n, 3)).astype(np.float32)
    complexes = (x + 1j * x[:, ::-1]).astype(np.complex64)
    doubles = (x.astype(np.float64) * 1e300 + 1j * x[:, ::-1] * 1e-300).astype(np.complex128)  # past f32's range

    def with_x64(case: Callable[[], Any]) -> Any:  # 64-bit types on for one case (emulated on the ipu)
        with enable_x64():
            return jax.tree_util.tree_map(np.asarray, case())

    def everywhere(value: np.ndarray) -> np.ndarray:  # what every replica of an all-reduce holds
        return np.broadcast_to(value, (n,) + value.shape)

    def training_step():
        # A data-parallel MLP step: replicated params, the batch split over the replicas, grads averaged with pmean.
        k1, k2 = (rng.standard_normal((8, 16)).astype(np.float32) * 0.3,
                  rng.standard_normal((16, 1)).astype(np.float32) * 0.3)
        params = jax.tree_util.tree_map(lambda p: np.broadcast_to(p, (n,) + p.shape),
                                        (k1, np.zeros(16, np.float32), k2))
        xs = rng.standard_normal((n, 4, 8)).astype(np.float32)
        ys = np.sin(xs.sum(-1, keepdims=True)).astype(np.float32)

        def loss(p, xb, yb):
            w1, b1, w2 = p
            return jnp.mean((jnp.tanh(xb @ w1 + b1) @ w2 - yb) ** 2)

        @pmap
        def step(p, xb, yb):
            value, grads = jax.value_and_grad(loss)(p, xb, yb)
            grads = lax.pmean(grads, "i")
            return jax.tree_util.tree_map(lambda w, g: w - 0.1 * g, p, grads), lax.pmean(value, "i")

        losses = []
        for _ in range(5):
            params, value = step(params, xs, ys)
            losses.append(value)
        return [np.asarray(p) for p in params] + [np.asarray(losses)]

    def general_body():
        # An all_reduce whose body is not a single op (a compare/select max), with the channel_handle and
        # use_global_device_ids that jax writes under SPMD: compiled from StableHLO text through the backend.
        from jax._src import xla_bridge
        from jax._src.lib import xla_client

        client = xla_bridge.get_backend(backend)
        text = f"""
        module @general attributes {{mhlo.num_partitions = 1 : i32, mhlo.num_replicas = {n} : i32}} {{
          func.func public @main(%x: tensor<1x8xf32>) -> (tensor<1x8xf32>, tensor<ui32>) {{
            %0 = "stablehlo.all_reduce"(%x) ({{
            ^bb0(%a: tensor<f32>, %b: tensor<f32>):
              %c = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
              %m = stablehlo.select %c, %a, %b : tensor<i1>, tensor<f32>
              stablehlo.return %m : tensor<f32>
            }}) {{replica_groups = dense<[{list(range(n))}]> : tensor<1x{n}xi64>,
                 channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, use_global_device_ids}}
                 : (tensor<1x8xf32>) -> tensor<1x8xf32>
            %1 = stablehlo.partition_id : tensor<ui32>
            return %0, %1 : tensor<1x8xf32>, tensor<ui32>
          }}
        }}"""
        options = xla_client.CompileOptions()
        options.num_replicas = n
        options.device_assignment = xla_client.DeviceAssignment.create(np.arange(n).reshape(n, 1))
        values = rng.standard_normal((n, 1, 8)).astype(np.float32)
        executable = compile_text(text, options, backend)
        if hasattr(client, "compile_and_load"):  # the current series: global arrays in and out
            from jax.sharding import Mesh, NamedSharding, PartitionSpec

            sharding = NamedSharding(Mesh(np.array(devices), ("i",)), PartitionSpec("i"))
            arg = jax.make_array_from_single_device_arrays(
                (n, 8), sharding, [jax.device_put(values[i], d) for i, d in enumerate(devices)])
            outs = executable.execute_sharded([arg]).disassemble_into_single_device_arrays()
        else:
            args = [[client.buffer_from_pyval(values[i], executable.local_devices()[i]) for i in range(n)]]
            outs = executable.execute_sharded_on_local_devices(args)
        got = [np.stack([np.asarray(b) for b in out]) for out in outs]
        return got, [everywhere(values.max(0)), np.zeros(n, np.uint32)]

    def shard_map_2d_mesh():
        # jit of a shard_map over a 2 x n/2 mesh, every axis manual: collectives over one axis, the other, both.
        from jax.sharding import Mesh
        from jax.sharding import PartitionSpec as P

        mesh = Mesh(np.array(devices).reshape(2, n // 2), ("a", "b"))

        def body(v, w):
            total = lax.psum(v, "a") + lax.all_gather(w, "b", tiled=True).sum() + lax.psum(v, ("a", "b"))
            ring = [(j, (j + 1) % (n // 2)) for j in range(n // 2)]
            return total, lax.ppermute(v, "b", ring) * (1 + lax.axis_index("a"))

        f = _shard_map()(body, mesh=mesh, in_specs=(P("a", "b"), P(None, "b")), out_specs=(P(None, "b"), P("a", "b")))
        return jax.jit(f)(x[0, :4], x[1, :2])

    def sharded_jit_2d_mesh():
        # jit of global arrays split over a 2 x n/2 mesh (XLA's SPMD partitioning on cpu; on ipu every IPU gathers
        # the whole inputs and keeps its piece of each result), and indexing a pmap result (a jit over the devices).
        from jax.sharding import Mesh, NamedSharding
        from jax.sharding import PartitionSpec as P

        mesh = Mesh(np.array(devices).reshape(2, n // 2), ("a", "b"))
        v = jax.device_put(x[0, :4], NamedSharding(mesh, P("a", "b")))
        w = jax.device_put(x[1, :2], NamedSharding(mesh, P(None, "b")))
        f = jax.jit(lambda v, w: ((v[:2] * w).T, v[1] - w.sum(0), jnp.cumsum(v, 1)),
                    out_shardings=(NamedSharding(mesh, P("b", "a")), NamedSharding(mesh, P()),
                                   NamedSharding(mesh, P(("b", "a")))))
        replicated = pmap(lambda v: lax.psum(v, "i"))(x)
        return list(f(v, w)) + [replicated[0], replicated[n - 1, 2:]]

    outer = n // 2
    groups = [list(range(0, n, 2)), list(range(1, n, 2))]
    return {
        "psum_f32": lambda: pmap(lambda v: lax.psum(v, "i"))(x),
        "psum_i32_wraps": lambda: pmap(lambda v: lax.psum(v, "i"))(ints),
        "psum_f16": lambda: pmap(lambda v: lax.psum(v, "i"))(half),
        "psum_u32_2d": lambda: pmap(lambda v: lax.psum(v, "i"))(small),
        "psum_c64": lambda: pmap(lambda v: (lax.psum(v, "i"), lax.psum_scatter(v, "i", scatter_dimension=1,
                                                                                tiled=True)))(complexes),
        "psum_c128": lambda: with_x64(lambda: pmap(lambda v: (lax.psum(v, "i"), lax.psum_scatter(
            v, "i", scatter_dimension=1, tiled=True)))(doubles)),
        "pmean_f32": lambda: pmap(lambda v: lax.pmean(v, "i"))(x),
        "pmax_f32": lambda: (pmap(lambda v: lax.pmax(v, "i"))(negative), everywhere(negative.max(0))),
        "pmin_f32": lambda: (pmap(lambda v: lax.pmin(v, "i"))(-negative), everywhere((-negative).min(0))),
        "pmax_pmin_i32": lambda: pmap(lambda v: (lax.pmax(v, "i"), lax.pmin(v, "i")))(ints),
        "pmax_pmin_bool": lambda: pmap(lambda v: (lax.pmax(v, "i"), lax.pmin(v, "i")))(flags),
        "all_gather": lambda: pmap(lambda v: lax.all_gather(v, "i"))(x),
        "all_gather_tiled_axis1": lambda: pmap(lambda v: lax.all_gather(v, "i", axis=1, tiled=True))(x),
        "all_gather_i32_bool": lambda: pmap(lambda a, b: (lax.all_gather(a, "i"), lax.all_gather(b, "i")))(ints, flags),
        "ppermute_ring": lambda: pmap(lambda v: lax.ppermute(v, "i", [(j, (j + 1) % n) for j in range(n)]))(x),
        "ppermute_partial_gives_zeros": lambda: pmap(lambda v: lax.ppermute(v, "i", [(0, n - 1)]))(x),
        "all_to_all_0_0": lambda: pmap(lambda v: lax.all_to_all(v.reshape(n, -1), "i", 0, 0))(x),
        "all_to_all_1_0": lambda: pmap(lambda v: lax.all_to_all(v.reshape(2, n, -1), "i", 1, 0))(x),
        "all_to_all_0_1": lambda: pmap(lambda v: lax.all_to_all(v.reshape(n, 3, -1), "i", 0, 1))(x),
        "psum_scatter": lambda: pmap(lambda v: lax.psum_scatter(v.reshape(n, -1), "i"))(x),
        "psum_scatter_tiled_axis1": lambda: pmap(
            lambda v: lax.psum_scatter(v, "i", scatter_dimension=1, tiled=True))(x),
        "axis_index": lambda: pmap(lambda v: v * lax.axis_index("i"))(x),
        "axis_index_groups": lambda: pmap(lambda v: lax.psum(v, "i", axis_index_groups=groups))(x),
        "grad_through_psum": lambda: pmap(jax.grad(
            lambda w, v: lax.psum(jnp.sum(jnp.tanh(v @ w)), "i") * (1 + lax.axis_index("i"))))(weights, x),
        "pmap_of_vmap": lambda: pmap(jax.vmap(
            lambda v: lax.psum(v, ("i", "b")) + lax.psum(v, "i") * lax.axis_index("i"), axis_name="b"))(x),
        "nested_pmap": lambda: jax.pmap(jax.pmap(
            lambda v: (lax.psum(v, "j") * 3 + lax.psum(v, "i") + lax.psum(v, ("i", "j")), lax.axis_index("j")),
            axis_name="j"), axis_name="i", devices=devices)(x.reshape(outer, 2, 6, -1)),
        "training_step": training_step,
        "general_body_all_reduce": general_body,
        "shard_map_2d_mesh": shard_map_2d_mesh,
        "sharded_jit_2d_mesh": sharded_jit_2d_mesh,
    }


def _shard_map() -> Callable[..., Any]:
    import jax

    if hasattr(jax, "shard_map"):  # the current series
        return jax.shard_map
    from jax.experimental.shard_map import shard_map

    return shard_map


def _main(backend: str, n: int, out: str) -> None:
    arrays: Dict[str, np.ndarray] = {}
    errors: Dict[str, str] = {}
    for name, case in _cases(backend, n).items():
        try:
            result = case()
        except Exception as error:  # noqa: BLE001 - reported per case to the test that reads it
            errors[name] = f"{type(error).__name__}: {error}"
            continue
        got, want = result if CASES[name][0] == "numpy" else (result, None)
        import jax

        for i, leaf in enumerate(jax.tree_util.tree_leaves(got)):
            arrays[f"{name}/{i}"] = np.asarray(leaf)
        for i, leaf in enumerate(jax.tree_util.tree_leaves(want) if want is not None else []):
            arrays[f"{name}/numpy/{i}"] = np.asarray(leaf)
    extra = _cycles(backend, n)
    np.savez(out, **arrays)
    with open(out + ".json", "w") as f:
        json.dump({"errors": errors, **extra}, f)


def _cycles(backend: str, n: int) -> Dict[str, Any]:
    """ipu only: estimated cycles of psum at a few sizes, and what a jit sharded over the devices says."""
    if backend != "ipu":
        return {}
    import jax
    from jax import lax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import jax_ipu

    devices = jax.devices(backend)[:n]
    cycles = {}
    for size in (1024, 16384, 131072):  # small enough for the 7-tile IPU Model the conformance session also uses
        jax.pmap(lambda v: lax.psum(v, "i"), axis_name="i", devices=devices)(np.ones((n, size), np.float32))
        cycles[str(size)] = [jax_ipu.last_execution(d)["total_cycles"] for d in devices]
    sharding = NamedSharding(Mesh(np.array(devices), ("x",)), PartitionSpec("x"))
    try:
        doubled = jax.jit(lambda a: a * 2, in_shardings=sharding, out_shardings=sharding)(
            np.arange(4 * n, dtype=np.float32))
        sharded = {"values": np.asarray(doubled).tolist(),
                   "shards": [[s.device.id, s.index[0].start] for s in doubled.addressable_shards]}
    except Exception as error:  # noqa: BLE001
        sharded = str(error)
    mismatched = jax.pmap(lambda v: lax.cond(lax.axis_index("i") == 0, lambda v: lax.psum(v, "i"), lambda v: v, v),
                          axis_name="i", devices=devices)
    try:
        mismatched(np.ones((n, 3), np.float32)).block_until_ready()  # a run's error surfaces where it is awaited
        mismatch = "no error"
    except Exception as error:  # noqa: BLE001
        mismatch = str(error)
    partial: Any = "no shard_map with auto axes in this jax"
    if hasattr(jax, "shard_map") and n >= 4:  # a shard_map manual over "a" only: XLA partitions the rest
        mesh = Mesh(np.array(devices).reshape(2, n // 2), ("a", "b"))
        spec = PartitionSpec("a")
        try:
            partial = np.asarray(jax.jit(jax.shard_map(lambda v: lax.psum(v, "a"), mesh=mesh, in_specs=spec,
                                                       out_specs=spec, axis_names={"a"}))(
                np.arange(16, dtype=np.float32).reshape(4, 4))).tolist()
        except Exception as error:  # noqa: BLE001
            partial = str(error)
    return {"cycles": cycles, "sharded_jit": sharded, "mismatch": mismatch, "partial_shard_map": partial}


# ---------------------------------------------------------------------------------------------- the test side

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    cache: Dict[Tuple[str, int], Any] = {}

    def get(backend: str, n: int):
        if (backend, n) not in cache:
            cache[backend, n] = run_device_script(__file__, backend, n,
                                                  str(tmp_path_factory.mktemp("coll") / f"{backend}{n}.npz"))
        return cache[backend, n]

    return get


@pytest.mark.parametrize("n", COUNTS)
@pytest.mark.parametrize("case", list(CASES))
def test_collective(runs, case, n):
    if case in NOT_IN_CURRENT_JAX and CURRENT_SERIES:
        pytest.skip(NOT_IN_CURRENT_JAX[case])
    reference, tolerance = CASES[case]
    got_arrays, got_info = runs("ipu", n)
    assert case not in got_info["errors"], got_info["errors"][case]
    got = numbered(got_arrays, f"{case}/")
    if reference == "numpy":
        want = numbered(got_arrays, f"{case}/numpy/")
    else:
        want_arrays, want_info = runs("cpu", n)
        assert case not in want_info["errors"], f"cpu: {want_info['errors'][case]}"
        want = numbered(want_arrays, f"{case}/")
    assert len(got) == len(want) > 0
    for index, (g, w) in enumerate(zip(got, want)):
        where = f"{case} x {n} IPUs, output {index} ({w.dtype}{list(w.shape)})"
        assert g.dtype == w.dtype and g.shape == w.shape, f"{where}: ipu gave {g.dtype}{list(g.shape)}"
        if tolerance == EXACT or w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=where)
            if w.dtype.kind == "f":
                np.testing.assert_array_equal(np.signbit(g), np.signbit(w), err_msg=f"{where}: signs")
        else:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), equal_nan=True, err_msg=where,
                                       **tolerance)


def test_psum_cycles_rise_with_size_and_ipu_count(runs):
    two, four = runs("ipu", 2)[1]["cycles"], runs("ipu", 4)[1]["cycles"]
    for cycles in (two, four):
        for per_device in cycles.values():
            assert len(set(per_device)) == 1  # every replica ran the same steps
        sizes = sorted(cycles, key=int)
        assert all(cycles[a][0] < cycles[b][0] for a, b in zip(sizes, sizes[1:])), cycles
    # A ring all-reduce sends 2(n-1)/n of the data per IPU in 2(n-1) steps: more IPUs, more link time.
    assert all(four[s][0] > two[s][0] for s in four), (two, four)


def test_sharded_jit_keeps_each_piece_on_its_ipu(runs):
    sharded = runs("ipu", 2)[1]["sharded_jit"]
    assert sharded == {"values": [2.0 * i for i in range(8)], "shards": [[0, 0], [1, 4]]}, sharded


def test_shard_map_with_auto_axes_runs(runs):
    import jax

    if not hasattr(jax, "shard_map"):
        pytest.skip("jax 0.4.13 has no shard_map axis_names (its auto axes are a different API)")
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    assert runs("ipu", 4)[1]["partial_shard_map"] == np.tile(x[:2] + x[2:], (2, 1)).tolist()


def test_replicas_at_different_collectives_fail_instead_of_waiting(runs):
    message = runs("ipu", 2)[1]["mismatch"]
    assert "every replica must run the same collectives" in message, message


# ---------------------------------------------------------------------------------------------- the front end alone

NESTED = """
module @pmap_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<ui32>) {
    %0 = "stablehlo.all_reduce"(%x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.maximum %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 2, -1], [1, 3, -1]]> : tensor<2x3xi64>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %1 = "stablehlo.cross-replica-sum"(%0) {replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>}
         : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %2 = "stablehlo.slice"(%1) {start_indices = dense<0> : tensor<2xi64>, limit_indices = dense<[1, 8]> : tensor<2xi64>,
         strides = dense<1> : tensor<2xi64>} : (tensor<2x8xf32>) -> tensor<1x8xf32>
    %3 = stablehlo.reshape %2 : (tensor<1x8xf32>) -> tensor<8xf32>
    %4 = "stablehlo.collective_permute"(%3) {source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>,
         channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>} : (tensor<8xf32>) -> tensor<8xf32>
    %5 = stablehlo.broadcast %4, sizes = [2] : (tensor<8xf32>) -> tensor<2x8xf32>
    %6 = "stablehlo.all_to_all"(%5) {split_dimension = 1 : i64, concat_dimension = 0 : i64, split_count = 2 : i64,
         replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>} : (tensor<2x8xf32>) -> tensor<4x4xf32>
    %7 = stablehlo.reshape %6 : (tensor<4x4xf32>) -> tensor<16xf32>
    %8 = "stablehlo.reduce_scatter"(%7) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {scatter_dimension = 0 : i64, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>,
        channel_handle = #stablehlo.channel_handle<handle = 4, type = 1>, use_global_device_ids}
        : (tensor<16xf32>) -> tensor<8xf32>
    %9 = stablehlo.replica_id : tensor<ui32>
    return %5, %8, %4, %9 : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<ui32>
  }
}
"""


@text_of_jax_0_4_13()
def test_front_end_writes_replicas_and_collective_attrs():
    from jax_ipu.compiler import compile_to_program

    program = json.loads(compile_to_program(NESTED))
    assert program["replicas"] == 4
    ops = {op["op"] + ("" if op["mlir"].split(".")[1] == op["op"] else "<-" + op["mlir"]): op
           for op in program["functions"][0]["body"]}
    assert ops["all_reduce"]["attrs"] == {"replica_groups": [[0, 2], [1, 3]], "computation": "maximum"}
    assert len(ops["all_reduce"]["regions"]) == 1
    assert ops["all_reduce<-stablehlo.cross-replica-sum"]["attrs"] == {"replica_groups": [[0, 1], [2, 3]],
                                                                       "computation": "add"}
    assert ops["collective_permute"]["attrs"] == {"source_target_pairs": [[0, 1], [1, 0]], "channel_id": 3,
                                                  "channel_type": 1}
    assert ops["broadcast_in_dim<-stablehlo.broadcast"]["attrs"] == {"broadcast_dimensions": [1]}
    assert ops["all_to_all"]["attrs"] == {"split_dimension": 1, "concat_dimension": 0, "split_count": 2,
                                          "replica_groups": [[0, 1], [2, 3]]}
    assert ops["reduce_scatter"]["attrs"] == {"scatter_dimension": 0, "replica_groups": [[0, 1], [2, 3]],
                                              "channel_id": 4, "channel_type": 1, "use_global_device_ids": True,
                                              "computation": "add"}
    assert ops["replica_id"]["results"][0] == {"id": ops["replica_id"]["results"][0]["id"], "dtype": "u32", "shape": []}


@text_of_jax_0_4_13()
def test_front_end_reads_the_compile_options():
    from jax._src.lib import xla_client

    from jax_ipu.compiler import CompileError, compile_to_program

    options = xla_client.CompileOptions()
    options.num_replicas = 2
    assert json.loads(compile_to_program(NESTED, options.SerializeAsString()))["replicas"] == 2
    options.num_replicas, options.num_partitions = 1, 2  # XLA's partitioner's own rule, by name
    with pytest.raises(CompileError, match=r"partition the program over 2 ipu devices.*num_partitions=2 but SPMD "
                                           r"partitioning not enabled"):
        compile_to_program(NESTED, options.SerializeAsString())


if __name__ == "__main__":
    _main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
