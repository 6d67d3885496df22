"""A jit sharded over a mesh of IPUs is partitioned as XLA partitions it for cpu: the same values, the same
sharding of every result (which device holds which piece), each IPU holding and computing only its piece, with
the collectives the shardings need between them.

Run as a script (``python test_partitioning.py BACKEND N OUT``) it computes every case on N devices of BACKEND (one
process per backend: jax makes its devices once) into OUT.npz and OUT.json; the tests compare the ipu's with cpu's,
which runs with the same number of forced host devices.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, Dict, List

import numpy as np
import pytest
from _conformance import numbered, save_results, script_runs

N = 8  # a 4 x 2 mesh ("data", "model"), as in seed 004
TRAIN = {"rtol": 2e-5, "atol": 2e-6}  # dots and sums split over devices, added in another order
SUM = {"rtol": 1e-5, "atol": 1e-6}
EXACT: Dict[str, float] = {"rtol": 0.0, "atol": 0.0}

# case -> tolerance against cpu
CASES: Dict[str, Dict[str, float]] = {
    "seed_004_matmul": SUM,
    "mlp_2d_training_step": TRAIN,
    "zero_optimizer_state": TRAIN,
    "constraint_in_loop": SUM,
    "jit_calling_shard_map": SUM,
    "shard_map_auto_axes": SUM,
    "all_to_all_by_resharding": EXACT,
    "collective_permute_by_roll": EXACT,
    "reduce_scatter_by_contraction": SUM,
    "pjit": SUM,
    "positional_sharding": SUM,
    "gspmd_sharding": SUM,
    "int_and_bool_pieces": EXACT,
    "sum_over_every_partition": SUM,
    "top_k_of_sharded_rows": EXACT,
    "unreduced_results": SUM,
    "scatter_add_in_an_explicit_mesh": EXACT,
    "linear_algebra_in_an_explicit_mesh": {"rtol": 1e-4, "atol": 1e-5},  # factorisations in another order
    "complex_factorisation_of_sharded_rows": {"rtol": 1e-4, "atol": 1e-5},
}
# The collectives each of these programs needs (any of them), which the ipu must run: XLA's partitioner inserts them
# for cpu too (a reduce-scatter is an all-reduce and a slice where the pass that fuses them has not run yet)
COLLECTIVES = {
    "all_to_all_by_resharding": ("all_to_all",),
    "collective_permute_by_roll": ("collective_permute",),
    "reduce_scatter_by_contraction": ("reduce_scatter", "all_reduce"),
    "mlp_2d_training_step": ("all_reduce",),
}

# ---------------------------------------------------------------------------------------------- the script side


def _layout(array: Any) -> List[List[Any]]:
    """Which device holds which piece of an array: [device id, [[start, stop] per dimension]], by device id."""
    pieces = []
    for device, index in array.sharding.devices_indices_map(array.shape).items():
        bounds = [[s.start or 0, array.shape[d] if s.stop is None else s.stop] for d, s in enumerate(index)]
        pieces.append([device.id, bounds])
    return sorted(pieces)


def _cases(backend: str) -> Dict[str, Callable[[], Any]]:
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    devices = jax.devices(backend)[:N]
    mesh = Mesh(np.array(devices).reshape(4, 2), ("data", "model"))

    def put(value: np.ndarray, *spec: Any) -> Any:
        return jax.device_put(value, NamedSharding(mesh, P(*spec)))

    def at(*spec: Any) -> Any:
        return NamedSharding(mesh, P(*spec))

    rng = np.random.default_rng(0)

    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    x, w = normal(16, 8), normal(8, 6)
    batch, targets = normal(32, 16), normal(32, 8)
    w1, b1, w2, b2 = normal(16, 32) * 0.3, normal(32) * 0.1, normal(32, 8) * 0.3, normal(8) * 0.1
    square = normal(16, 16)

    def mlp_loss(params: Any, x: Any, y: Any) -> Any:
        w1, b1, w2, b2 = params
        h = jnp.tanh(x @ w1 + b1)
        return jnp.mean((h @ w2 + b2 - y) ** 2)

    def seed_004_matmul() -> Any:
        return jax.jit(lambda x, w: x @ w)(put(x, "data", None), put(w, None, "model"))

    def mlp_2d_training_step() -> Any:
        # data x model parallel: each IPU holds half of each weight and a quarter of the batch
        params = (put(w1, None, "model"), put(b1, "model"), put(w2, "model", None), put(b2))

        @functools.partial(jax.jit, donate_argnums=0)
        def step(params: Any, x: Any, y: Any) -> Any:
            loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
            return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), loss

        params, first = step(params, put(batch, "data", None), put(targets, "data", None))
        params, second = step(params, put(batch, "data", None), put(targets, "data", None))
        return list(params) + [first, second]

    def zero_optimizer_state() -> Any:
        # ZeRO-1: weights whole on every IPU, Adam's moments split over the data axis
        params = put(w1)
        m, v = put(np.zeros_like(w1), "data", None), put(np.zeros_like(w1), "data", None)

        @functools.partial(jax.jit, out_shardings=(at(), at("data", None), at("data", None)))
        def adam(p: Any, m: Any, v: Any, x: Any) -> Any:
            g = jax.grad(lambda p: jnp.sum(jnp.tanh(x @ p) ** 2))(p)
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g * g
            return p - 0.01 * m / (jnp.sqrt(v) + 1e-8), m, v

        for _ in range(2):
            params, m, v = adam(params, m, v, put(batch, "data", None))
        return [params, m, v]

    def constraint_in_loop() -> Any:
        def body(_: Any, c: Any) -> Any:
            c = jnp.tanh(c @ square)
            return lax.with_sharding_constraint(c, at("data", "model"))

        return jax.jit(lambda c: lax.fori_loop(0, 3, body, c))(put(square, None, "model"))

    def jit_calling_shard_map() -> Any:
        inner = _shard_map()(lambda a: lax.psum(a.sum(0, keepdims=True), "data"), mesh=mesh,
                             in_specs=P("data", "model"), out_specs=P(None, "model"))
        return jax.jit(lambda v: inner(jnp.sin(v) * 2.0) + v.mean())(put(square, "data", None))

    def shard_map_auto_axes() -> Any:
        if not hasattr(jax, "shard_map"):
            return None  # jax 0.4.13's shard_map is manual over every axis
        inner = jax.shard_map(lambda a: lax.psum(a @ a.T, "data"), mesh=mesh, in_specs=P("data"),
                              out_specs=P(), axis_names={"data"})
        return jax.jit(lambda v: inner(v) * 0.5)(put(square, "data", "model"))

    def all_to_all_by_resharding() -> Any:
        return jax.jit(lambda v: v * 3.0, out_shardings=at(None, "data"))(put(square, "data", None))

    def collective_permute_by_roll() -> Any:
        return jax.jit(lambda v: jnp.roll(v, 1, axis=0))(put(square, "data", None))

    def reduce_scatter_by_contraction() -> Any:
        return jax.jit(lambda a, b: a @ b, out_shardings=at("data", None))(
            put(square, None, "data"), put(square.T.copy(), "data", None))

    def pjit_case() -> Any:
        from jax.experimental.pjit import pjit

        f = pjit(lambda a, b: jnp.tanh(a @ b), in_shardings=(at("data", None), at(None, "model")),
                 out_shardings=at("data", "model"))
        with mesh:
            return f(x, w)

    def positional_sharding() -> Any:
        from jax import sharding

        if not hasattr(sharding, "PositionalSharding"):
            return None  # removed from the current series
        tiles = sharding.PositionalSharding(np.array(devices)).reshape(4, 2)
        return jax.jit(lambda v: jnp.exp(v) + v.T, out_shardings=tiles)(jax.device_put(square, tiles))

    def gspmd_sharding() -> Any:
        from jax import sharding

        if not hasattr(sharding, "GSPMDSharding"):
            return None  # not public in the current series
        op = at("model", "data")._to_xla_hlo_sharding(2)
        spec = sharding.GSPMDSharding(tuple(devices), op)
        return jax.jit(lambda v: v @ v, out_shardings=spec)(jax.device_put(square, spec))

    def sum_over_every_partition() -> Any:
        # jax 0.4.13's pjit_test testEvalJaxpr: on a 2 x 1 mesh XLA sums the halves with an all-reduce whose
        # replica_groups={{0}} (a channel, no global device ids) mean "replica 0, every partition"
        small = Mesh(np.array(devices[:2]).reshape(2, 1), ("x", "y"))
        f = jax.jit(lambda a, b: a.sum() + jnp.sin(b), out_shardings=NamedSharding(small, P("y")))
        return f(jax.device_put(np.arange(4, dtype=np.float32), NamedSharding(small, P("x"))),
                 jax.device_put(np.arange(5, dtype=np.float32), NamedSharding(small, P("y"))))

    def int_and_bool_pieces() -> Any:
        ints = put(np.arange(256, dtype=np.int32).reshape(16, 16), "data", "model")
        return list(jax.jit(lambda i: (i.sum(0), i.T > 100, jnp.cumsum(i, 1)))(ints))

    def top_k_of_sharded_rows() -> Any:
        # XLA's partitioner hands back its TopK, which the current series' HLO importer writes as mhlo.topk
        rows = put(np.sin(np.arange(256, dtype=np.float32)).reshape(16, 16), "data", None)
        cols = put(np.cos(np.arange(256, dtype=np.float32)).reshape(16, 16), None, "data")
        return [*jax.jit(lambda v: jax.lax.top_k(v, 3))(rows), *jax.jit(lambda v: jax.lax.top_k(v, 4))(cols)]

    def unreduced_results() -> Any:
        # jax's unreduced arrays (current series): a matmul contracting over a mesh axis and leaving its partial sums
        # unreduced, on a mesh with another axis (XLA's last_tile_dims={unreduced, replicated}) and on a mesh whose
        # other axis has one device (XLA's {unreduced}: partial sums of the whole array on every device)
        if not hasattr(jax.sharding, "AxisType") or not hasattr(jax, "reshard"):
            return None
        out = []
        for shape in ((4, 2), (1, 2)):
            explicit = jax.make_mesh(shape, ("data", "model"), axis_types=(jax.sharding.AxisType.Explicit,) * 2,
                                     devices=devices[:shape[0] * shape[1]])
            with jax.set_mesh(explicit):
                a = jax.reshard(normal(8, 6), P(None, "model"))
                b = jax.reshard(normal(6, 4), P("model", None))
                want = P(None, None, unreduced={"model"})
                z = jax.jit(lambda a, b, want=want: jnp.matmul(a, b, out_sharding=want))(a, b)
                out += [jax.reshard(z, P()), jax.device_put(np.array(z.sharding.spec == want), devices[0])]
        return out

    def scatter_add_in_an_explicit_mesh() -> Any:
        # (current series) jax puts a sharding constraint on every value of the update computation; XLA's
        # partitioner leaves them as copies, which are the values they copy: the body is still one add (c64's too)
        if not hasattr(jax.sharding, "AxisType") or not hasattr(jax, "set_mesh"):
            return None
        explicit = jax.make_mesh((2,), ("x",), axis_types=(jax.sharding.AxisType.Explicit,), devices=devices[:2])
        out = []
        with jax.set_mesh(explicit):
            for dtype in (np.float32, np.complex64):
                x = jnp.zeros((4, 3), dtype)
                u = jnp.asarray((np.arange(9.0).reshape(3, 3) * (1 + 2j if dtype == np.complex64 else 1)).astype(dtype))
                out.append(jax.jit(lambda x, i, u: x.at[i].add(u))(x, jnp.array([0, 2, 0]), u))
        return out

    def linear_algebra_in_an_explicit_mesh() -> Any:
        # (current series) the ipu's own lu and triangular solve (jax_ipu/backend/linalg.py) traced outside the mesh
        # whose shardings the operands carry: a batch of determinants and solves split over the mesh (jax's
        # pjit_test test_linalg_slogdet_and_solve, test_triangular_solve_vmap)
        if not hasattr(jax.sharding, "AxisType") or not hasattr(jax, "set_mesh"):
            return None
        explicit = jax.make_mesh((2,), ("x",), axis_types=(jax.sharding.AxisType.Explicit,), devices=devices[:2])
        with jax.set_mesh(explicit):
            a = jax.reshard(normal(8, 4, 4), P("x"))
            b = jax.reshard(normal(8, 4), P("x"))
            rhs = jax.reshard(normal(64, 16), P("x"))
            square = normal(16, 16) + 4 * np.eye(16, dtype=np.float32)
            return [*jnp.linalg.slogdet(a), jax.vmap(jnp.linalg.slogdet)(a)[1], jax.vmap(jnp.linalg.solve)(a, b),
                    jax.jit(jax.vmap(jnp.linalg.solve, in_axes=(None, 0)))(jax.reshard(square, P()), rhs)]

    def complex_factorisation_of_sharded_rows() -> Any:
        # a c64 matrix split by rows, factorised whole: XLA's partitioner gathers it and hands back its products of
        # complex vectors and matrices as stablehlo.dot (jax's linalg_sharding_test test_non_batch_axis_sharding)
        z = normal(8, 8) + 1j * normal(8, 8)
        hermitian = (z @ z.conj().T + 8 * np.eye(8)).astype(np.complex64)
        return [jax.jit(jax.lax.linalg.cholesky, out_shardings=at())(put(hermitian, "data", None))]

    return {
        "complex_factorisation_of_sharded_rows": complex_factorisation_of_sharded_rows,
        "linear_algebra_in_an_explicit_mesh": linear_algebra_in_an_explicit_mesh,
        "scatter_add_in_an_explicit_mesh": scatter_add_in_an_explicit_mesh,
        "unreduced_results": unreduced_results,
        "seed_004_matmul": seed_004_matmul, "mlp_2d_training_step": mlp_2d_training_step,
        "zero_optimizer_state": zero_optimizer_state, "constraint_in_loop": constraint_in_loop,
        "jit_calling_shard_map": jit_calling_shard_map, "shard_map_auto_axes": shard_map_auto_axes,
        "all_to_all_by_resharding": all_to_all_by_resharding, "collective_permute_by_roll": collective_permute_by_roll,
        "reduce_scatter_by_contraction": reduce_scatter_by_contraction, "pjit": pjit_case,
        "positional_sharding": positional_sharding, "gspmd_sharding": gspmd_sharding,
        "int_and_bool_pieces": int_and_bool_pieces, "sum_over_every_partition": sum_over_every_partition,
        "top_k_of_sharded_rows": top_k_of_sharded_rows,
    }


def _shard_map() -> Callable[..., Any]:
    import jax

    if hasattr(jax, "shard_map"):
        return jax.shard_map
    from jax.experimental.shard_map import shard_map

    return shard_map


def _steps(backend: str) -> List[str]:
    """The ops of the most recent run on the first device (ipu only)."""
    if backend != "ipu":
        return []
    import jax_ipu

    return sorted({s["name"] for s in jax_ipu.last_execution(0)["steps"]})


def _main(backend: str, out: str) -> None:
    import jax

    arrays: Dict[str, np.ndarray] = {}
    info: Dict[str, Any] = {"errors": {}, "layouts": {}, "skipped": [], "ops": {}}
    for name, case in _cases(backend).items():
        try:
            result = case()
            if result is None:
                info["skipped"].append(name)
                continue
            leaves = jax.tree_util.tree_leaves(result)
            jax.block_until_ready(leaves)
            info["ops"][name] = _steps(backend)
            info["layouts"][name] = [_layout(leaf) for leaf in leaves]
            for index, leaf in enumerate(leaves):
                arrays[f"{name}/{index}"] = np.asarray(leaf)
        except Exception as error:  # noqa: BLE001 - reported per case by the test side
            info["errors"][name] = f"{type(error).__name__}: {error}"
    save_results(out, arrays, info)


# ---------------------------------------------------------------------------------------------- the test side

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return script_runs(tmp_path_factory, __file__, N, "partition", 900)


@pytest.mark.parametrize("case", list(CASES))
def test_partitioned_jit_matches_cpu(runs, case):
    (got, got_info), (want, want_info) = runs("ipu"), runs("cpu")
    if case in want_info["skipped"]:
        pytest.skip(f"{case}: this jax has not the API")
    assert case not in want_info["errors"], f"cpu: {want_info['errors'][case]}"
    assert case not in got_info["errors"], got_info["errors"][case]
    # every result is split as cpu splits it: the same piece on the same device
    assert got_info["layouts"][case] == want_info["layouts"][case]
    got_values, want_values = numbered(got, case + "/"), numbered(want, case + "/")
    assert len(got_values) == len(want_values) > 0
    for index, (g, w) in enumerate(zip(got_values, want_values)):
        where = f"{case}, output {index} ({w.dtype}{list(w.shape)})"
        assert g.dtype == w.dtype and g.shape == w.shape, f"{where}: ipu gave {g.dtype}{list(g.shape)}"
        if CASES[case] == EXACT or w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=where)
        else:
            np.testing.assert_allclose(g, w, err_msg=where, **CASES[case])


@pytest.mark.parametrize("case", list(COLLECTIVES))
def test_the_collectives_the_shardings_need_run_on_the_ipus(runs, case):
    ops = runs("ipu")[1]["ops"][case]
    assert any(name in op for op in ops for name in COLLECTIVES[case]), ops


def test_an_ipu_computes_only_its_piece(runs):
    # x @ w with x split 4 ways by rows and w 2 ways by columns: each IPU multiplies its own pieces, no collective
    ops = runs("ipu")[1]["ops"]["seed_004_matmul"]
    assert not any(name in op for op in ops for name in ("all_gather", "all_reduce", "all_to_all")), ops


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[3])  # BACKEND N OUT (N is the module's)
