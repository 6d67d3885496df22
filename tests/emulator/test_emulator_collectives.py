"""Collectives in the emulator through jax_ipu.emulator: programs with a "replicas" field, one replica's semantics (a
group of one), compile-time checks, and the static cycle estimates of the IPU-Link cost model.

jax_ipu.emulator runs one replica per call (its C API has no replica group), so the data movement between several
replicas is tested through jax in tests/conformance/test_collectives.py; here programs for several replicas are
compiled and costed, and running one of them alone must fail with a clear error.
"""

from __future__ import annotations

import numpy as np
import pytest

from jax_ipu import emulator as E


def program(op, x_shape, out_shape, attrs=None, dtype="f32", replicas=1, body=None, operands=1):
    p = E.Program()
    xs = [p.main.param(dtype, x_shape) for _ in range(operands)]
    regions = []
    if body:
        region = p.main.region()
        a, b = region.param(dtype), region.param(dtype)
        region.ret(body(region, a, b))
        regions = [region]
    p.main.ret(p.main.op(op, xs, dtype, out_shape, attrs, regions=regions))
    doc = p.to_dict()
    doc["replicas"] = replicas
    return doc


def add_body(region, a, b):
    return region.op("add", [a, b], "f32")


def max_by_select(region, a, b):  # not a single op: interpreted
    gt = region.op("compare", [a, b], "bool", (), {"comparison_direction": "GT", "compare_type": "FLOAT"})
    return region.op("select", [gt, a, b], "f32")


def run1(doc, *inputs):
    return E.compile(doc).run(*inputs)[0]


@pytest.fixture
def x(rng):
    v = rng.standard_normal((4, 6)).astype(np.float32)
    v[0, :3] = [-0.0, np.nan, np.inf]
    return v


@pytest.mark.parametrize("body", [add_body, max_by_select], ids=["add", "general"])
def test_one_replica_all_reduce_passes_its_operand_through(x, body):
    got = run1(program("all_reduce", x.shape, x.shape, {"replica_groups": [[0]]}, body=body), x)
    np.testing.assert_array_equal(got, x)
    assert np.signbit(got[0, 0])  # not 0 + -0


def test_one_replica_data_movement(x):
    assert np.array_equal(run1(program("all_gather", x.shape, (4, 6), {"all_gather_dim": 1}), x), x, equal_nan=True)
    assert np.array_equal(run1(program("all_to_all", x.shape, x.shape, {"split_dimension": 0, "concat_dimension": 1,
                                                                         "split_count": 1}), x), x, equal_nan=True)
    assert np.array_equal(run1(program("reduce_scatter", x.shape, x.shape, {"scatter_dimension": 0}, body=add_body), x),
                          x, equal_nan=True)
    assert np.array_equal(run1(program("collective_permute", x.shape, x.shape, {"source_target_pairs": [[0, 0]]}), x),
                          x, equal_nan=True)
    zeros = run1(program("collective_permute", x.shape, x.shape, {"source_target_pairs": []}), x)
    np.testing.assert_array_equal(zeros, np.zeros_like(x))
    assert not np.signbit(zeros).any()


@pytest.mark.parametrize("dtype", ["f16", "i32", "u32", "bool"])
def test_one_replica_all_reduce_every_dtype(rng, dtype):
    x = (rng.random((37,)) < 0.5) if dtype == "bool" else (rng.standard_normal(37) * 100).astype(E.NUMPY_DTYPES[dtype])
    for computation in ("add", "maximum", "minimum"):
        got = run1(program("all_reduce", x.shape, x.shape, {"computation": computation}, dtype=dtype), x)
        np.testing.assert_array_equal(got, x)


@pytest.mark.parametrize("op", ["replica_id", "partition_id"])
def test_replica_and_partition_id_of_a_lone_replica(op):
    p = E.Program()
    p.main.ret(p.main.op(op, [], "u32", ()))
    assert E.compile(p).run()[0] == 0


def test_program_for_several_replicas_refuses_to_run_alone(x):
    exe = E.compile(program("all_reduce", x.shape, x.shape, {"computation": "add"}, replicas=2))
    with pytest.raises(E.EmulatorError, match=r"stablehlo.all_reduce was compiled for 2 replicas but runs as replica 0 "
                                              r"of 1: .*jax.pmap over 2 ipu devices") as e:
        exe.run(x)
    assert e.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize("op, attrs, out_shape, message", [
    ("all_reduce", {"replica_groups": [[0, 4]]}, (4, 6), "replica 4 in replica_groups is not one of the program's 4"),
    ("all_reduce", {"replica_groups": [[0, 1], [1, 2]]}, (4, 6), "replica 1 is in more than one replica group"),
    ("all_gather", {"all_gather_dim": 1}, (4, 6), r"the result shape must be tensor<4x24xf32>"),
    ("all_gather", {"all_gather_dim": 2}, (4, 24), "all_gather_dim is out of range"),
    ("all_gather", {"all_gather_dim": 0, "replica_groups": [[0, 1, 2], [3]]}, (12, 6), "same size"),
    ("reduce_scatter", {"scatter_dimension": 1}, (4, 6), r"the result shape must be tensor<4x\dxf32>|divide"),
    ("all_to_all", {"split_dimension": 0, "concat_dimension": 1, "split_count": 2}, (1, 24), "split_count must be"),
    ("collective_permute", {"source_target_pairs": [[0, 1], [2, 1]]}, (4, 6), "twice as a source or twice as a target"),
    ("collective_permute", {"source_target_pairs": [[0, 9]]}, (4, 6), "outside the program's 4"),
])
def test_malformed_collectives_are_named(op, attrs, out_shape, message):
    body = add_body if op in ("all_reduce", "reduce_scatter") else None
    with pytest.raises(E.EmulatorError, match=message) as e:
        E.compile(program(op, (4, 6), out_shape, attrs, replicas=4, body=body))
    assert e.value.code == "INVALID_ARGUMENT" and "stablehlo." + op in str(e.value)


def test_replicas_field_is_checked():
    doc = program("all_reduce", (4,), (4,), {"computation": "add"})
    doc["replicas"] = 0
    with pytest.raises(E.EmulatorError, match='"replicas" must be between 1 and 1024'):
        E.compile(doc)


def test_general_reduction_body_with_an_unsupported_op_is_unimplemented():
    def body(region, a, b):
        return region.op("cosine", [region.op("add", [a, b], "f32")], "f32")  # fine: cosine on f32 exists

    E.compile(program("all_reduce", (4,), (4,), replicas=2, body=body))

    def bad(region, a, b):
        return region.op("fft", [a, b], "f32")

    with pytest.raises(E.EmulatorError, match=r"stablehlo.all_reduce.*in the reduction body") as e:
        E.compile(program("all_reduce", (4,), (4,), replicas=2, body=bad))
    assert e.value.code == "UNIMPLEMENTED"


# ---- the cost model: estimates rise with the data and with the IPUs the data crosses ----

def cycles(op, elements, replicas, **kwargs):
    shapes = {
        "all_reduce": ((elements,), (elements,), {"computation": "add"}),
        "reduce_scatter": ((elements,), (elements // replicas,), {"computation": "add", "scatter_dimension": 0}),
        "all_gather": ((elements,), (elements * replicas,), {"all_gather_dim": 0}),
        "all_to_all": ((elements,), (elements,),
                       {"split_dimension": 0, "concat_dimension": 0, "split_count": replicas}),
        "collective_permute": ((elements,), (elements,), {"source_target_pairs": [[i, (i + 1) % replicas]
                                                                                  for i in range(replicas)]}),
    }
    x_shape, out_shape, attrs = shapes[op]
    return E.compile(program(op, x_shape, out_shape, attrs, replicas=replicas), **kwargs).info["estimated_cycles"]


OPS = ["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "collective_permute"]


@pytest.mark.parametrize("op", OPS)
def test_cycles_rise_with_data_size(op):
    estimates = [cycles(op, n, 4) for n in (1024, 16384, 262144, 1 << 20)]
    assert estimates == sorted(estimates) and len(set(estimates)) == len(estimates), estimates


@pytest.mark.parametrize("op", OPS[:4])
def test_cycles_rise_with_replica_count(op):
    estimates = [cycles(op, 1 << 18, r) for r in (1, 2, 4, 8)]
    assert estimates == sorted(estimates) and len(set(estimates)) == len(estimates), estimates


def test_all_reduce_is_link_bound_and_follows_the_ring():
    # 2(n-1) steps of B/n bytes each over 160 GB/s per direction: with 1M f32 (4 MB) the link time dominates, so going
    # from 2 to 8 IPUs costs about (2*7/8) / (2*1/2) = 1.75x more (plus per-step latency and sync).
    two, eight = cycles("all_reduce", 1 << 20, 2), cycles("all_reduce", 1 << 20, 8)
    assert 1.6 < eight / two < 2.3, (two, eight)
    link_seconds = 2 * (2 - 1) / 2 * 4 * 2**20 / 160e9
    clock = E.device_info("ipu2")["tile_clock_frequency"]
    assert 0.9 * link_seconds * clock < two < 1.3 * link_seconds * clock


def test_a_group_of_one_costs_no_link_time():
    assert cycles("all_reduce", 1 << 20, 1) < cycles("all_reduce", 1 << 20, 2) / 10


def test_collective_shows_in_the_profile(x):
    exe = E.compile(program("all_reduce", x.shape, x.shape, {"computation": "add"}))
    exe.run(x)
    assert exe.last_profile["total_cycles"] == exe.info["estimated_cycles"] > 0
    assert any(c.startswith("all_reduce") for c in exe.info["codelets"]), exe.info["codelets"]
