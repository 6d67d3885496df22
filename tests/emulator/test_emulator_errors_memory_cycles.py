"""Error messages (unsupported, malformed, out of memory), the cycle model's calibration point, memory figures."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jax_ipu import emulator as E

OOM = "Out of memory on tile {}: {} bytes used but tiles only have 638976 bytes of memory"


def one_op(op, dtype, shape=(4,), out_dtype=None, attrs=None, loc=None, n=1):
    p = E.Program()
    xs = [p.main.param(dtype, shape) for _ in range(n)]
    p.main.ret(p.main.op(op, xs, out_dtype or dtype, shape, attrs, loc=loc))
    return p


def test_unsupported_op_dtype_names_op_types_and_loc():
    with pytest.raises(E.EmulatorError) as e:
        E.compile(one_op("cosine", "i32", loc="f.py:12"))
    assert e.value.code == "UNIMPLEMENTED"
    assert str(e.value) == ("Unsupported operation stablehlo.cosine(tensor<4xi32>) -> tensor<4xi32> on the IPU: "
                            "cosine is implemented for f16, bf16, f32, c64, f64, c128 (at f.py:12)")


def test_unknown_op():
    with pytest.raises(E.EmulatorError, match=r"Unsupported operation stablehlo.cholesky\(tensor<4xf32>\) -> "
                                              r"tensor<4xf32> on the IPU: the emulator does not implement") as e:
        E.compile(one_op("cholesky", "f32"))
    assert e.value.code == "UNIMPLEMENTED"


@pytest.mark.parametrize("dtype,advice", [
    ("f64", "the IPU has no f64 hardware and 64-bit emulation is off (compile option emulate_64bit); use f32 "
            "(jax_enable_x64=False)"),
    ("i64", "64-bit emulation is off (compile option emulate_64bit); use i32"),
    ("u64", "64-bit emulation is off (compile option emulate_64bit); use u32"),
    ("c128", "the IPU has no f64 (complex128's parts) hardware and 64-bit emulation is off (compile option "
             "emulate_64bit); use complex64 (jax_enable_x64=False)")])
def test_64_bit_types_are_refused_when_their_emulation_is_off(dtype, advice):
    p = E.Program()
    x = p.main.param("f32", (4,))
    y = p.main.op("convert", [x], dtype, (4,))
    p.main.ret(p.main.op("add", [y, y], dtype, (4,)))
    E.compile(p)  # emulated by default
    with pytest.raises(E.EmulatorError, match="Unsupported element type " + dtype) as e:
        E.compile(p, options={"emulate_64bit": False})
    assert e.value.code == "UNIMPLEMENTED" and advice in str(e.value)


def test_f64_add_message_when_refused():
    with pytest.raises(E.EmulatorError) as e:
        E.compile(one_op("add", "f32", n=2, out_dtype="f64"), options={"emulate_64bit": False})
    assert str(e.value) == ("Unsupported element type f64 in stablehlo.add(tensor<4xf32>, tensor<4xf32>) -> "
                            "tensor<4xf64> : the IPU has no f64 hardware and 64-bit emulation is off (compile option "
                            "emulate_64bit); use f32 (jax_enable_x64=False)")


@pytest.mark.parametrize("op, dtype, low, high", [
    # (op, type, at least, at most x the f32 or i32 op's compute cycles): the emulated sequences of the registry
    ("add", "f64", 20, 80), ("multiply", "f64", 25, 110), ("divide", "f64", 20, 60), ("exponential", "f64", 100, 900),
    ("add", "i64", 1.2, 3), ("multiply", "i64", 2.5, 5), ("and", "i64", 1.5, 3),
])
def test_emulated_64_bit_ops_cost_their_instruction_sequences(op, dtype, low, high):
    narrow = "f32" if dtype == "f64" else "i32"
    n = 6000

    def compute_cycles(t):
        exe = E.compile(one_op(op, t, shape=(n,), n=2 if op != "exponential" else 1), num_tiles=1)
        a = np.ones(n, {"f64": np.float64, "f32": np.float32, "i64": np.int64, "i32": np.int32}[t])
        exe.run(*([a] * (2 if op != "exponential" else 1)))
        return exe.last_profile["compute_cycles"]

    ratio = compute_cycles(dtype) / compute_cycles(narrow)
    assert low <= ratio <= high, f"{op} on {dtype}: {ratio:.1f}x the {narrow} op's cycles"


def test_reduce_body_with_an_unsupported_op_is_unimplemented():
    p = E.Program()
    x = p.main.param("f32", (4,))
    i = p.main.param("i32", (4,))
    inits = [p.main.constant(np.float32(0)), p.main.constant(np.int32(0))]
    body = p.main.region()
    a, ai, b, bi = body.param("f32"), body.param("i32"), body.param("f32"), body.param("i32")
    gt = body.op("compare", [a, b], "bool", (), {"comparison_direction": "GT"})
    bi2 = body.op("dot_general", [bi, bi], "i32", (), {})
    body.ret(body.op("select", [gt, a, b], "f32"), body.op("select", [gt, ai, bi2], "i32"))
    p.main.ret(*p.main.op_multi("reduce", [x, i] + inits, [("f32", ()), ("i32", ())], {"dimensions": [0]},
                                regions=[body]))
    with pytest.raises(E.EmulatorError, match="stablehlo.dot_general is not implemented in a reduce body") as e:
        E.compile(p)
    assert e.value.code == "UNIMPLEMENTED"


@pytest.mark.parametrize("text,fragment", [
    ("{", "JSON parse error at offset 1"),
    ("[]", "the document must be a JSON object"),
    ('{"format": "other", "version": 1}', '"format" must be "jax-ipu-program"'),
    ('{"format": "jax-ipu-program", "version": 2}', '"version" must be 1'),
    ('{"format": "jax-ipu-program", "version": 1, "entry": "main", "functions": []}', "entry function 'main'"),
    ('{"format": "jax-ipu-program", "version": 1, "entry": "main", "functions": [{"name": "main", "params": [],'
     ' "body": [{"op": "add", "operands": [1, 2], "results": []}], "results": []}]}', "operand %1 of stablehlo.add"),
    ('{"format": "jax-ipu-program", "version": 1, "entry": "main", "functions": [{"name": "main", "params": '
     '[{"id": 0, "dtype": "f32", "shape": [-1]}], "body": [], "results": [0]}]}', "negative dimension"),
    ('{"format": "jax-ipu-program", "version": 1, "entry": "main", "functions": [{"name": "main", "params": '
     '[{"id": 0, "dtype": "q7", "shape": []}], "body": [], "results": [0]}]}', "unknown dtype 'q7'"),
])
def test_malformed_programs(text, fragment):
    with pytest.raises(E.EmulatorError) as e:
        E.compile(text)
    assert e.value.code == "INVALID_ARGUMENT"
    assert fragment in str(e.value)


def test_shape_mismatch_is_invalid_not_a_crash():
    p = E.Program()
    x, y = p.main.param("f32", (4,)), p.main.param("f32", (5,))
    p.main.ret(p.main.op("add", [x, y], "f32", (4,)))
    with pytest.raises(E.EmulatorError, match="operand 1 does not have the result's shape"):
        E.compile(p)
    p = E.Program()
    x = p.main.param("f32", (4, 3))
    p.main.ret(p.main.op("transpose", [x], "f32", (4, 3), {"permutation": [1, 0]}))
    with pytest.raises(E.EmulatorError, match="result shape does not match the permutation"):
        E.compile(p)


def test_wrong_input_count_at_run():
    exe = E.compile(one_op("negate", "f32"))
    with pytest.raises(E.EmulatorError, match="expected 1 inputs"):
        exe.run()


def million_element_program():
    p = E.Program()
    x = p.main.param("f32", (1000, 1000))
    y = p.main.op("exponential", [x], "f32", (1000, 1000))
    p.main.ret(p.main.op("add", [y, x], "f32", (1000, 1000)))
    return p


def test_out_of_memory_wording_and_more_tiles_fit():
    with pytest.raises(E.EmulatorError) as e:
        E.compile(million_element_program(), num_tiles=4)
    assert e.value.code == "RESOURCE_EXHAUSTED"
    first, _, hint = str(e.value).partition("\n")
    tile, used = first.split("tile ")[1].split(":")[0], first.split(": ")[1].split(" bytes")[0]
    assert first == OOM.format(tile, used) and int(used) > 638976
    assert "JAX_IPU_MODEL_NUM_TILES" in hint and "--ipu_model_tiles" in hint
    exe = E.compile(million_element_program())  # all 1472 tiles
    mem = exe.info["memory"]
    assert mem["worst_bytes"] <= 638976 and mem["tiles_used"] > 1000
    x = np.ones((1000, 1000), np.float32)
    np.testing.assert_allclose(exe.run(x)[0], np.exp(x) + x, rtol=1e-6)


def test_small_program_fits_one_tile():
    exe = E.compile(one_op("add", "f32", shape=(64, 64), n=2), num_tiles=1)
    mem = exe.info["memory"]
    # two inputs + one output, 16 KiB each, plus code and vertex state
    assert 3 * 16384 < mem["worst_bytes"] < 3 * 16384 + 4096


def test_liveness_frees_dead_intermediates():
    p = E.Program()
    x = p.main.param("f32", (4096,))
    v = x
    for _ in range(8):
        v = p.main.op("negate", [v], "f32", (4096,))
    p.main.ret(v)
    mem = E.compile(p, num_tiles=1).info["memory"]["worst_bytes"]
    assert mem < 4 * 16384 + 8192  # never more than param + two intermediates + result live


def test_cycle_estimate_6000_f32_adds_on_one_tile():
    exe = E.compile(one_op("add", "f32", shape=(6000,), n=2), num_tiles=1)
    a = np.ones(6000, np.float32)
    exe.run(a, a)
    profile = exe.last_profile
    assert abs(profile["total_cycles"] - 9185) <= 0.1 * 9185
    assert profile["supersteps"] == 1 and profile["exchange_cycles"] == 0 and profile["sync_cycles"] > 0
    assert profile["total_cycles"] == profile["compute_cycles"] + profile["exchange_cycles"] + profile["sync_cycles"]
    assert exe.info["estimated_cycles"] == profile["total_cycles"]


def test_more_tiles_fewer_cycles_and_exchange_counted():
    a = np.ones(40000, np.float32)
    one = E.compile(one_op("add", "f32", shape=(40000,), n=2), num_tiles=1)
    many = E.compile(one_op("add", "f32", shape=(40000,), n=2), num_tiles=100)
    one.run(a, a)
    many.run(a, a)
    assert many.last_profile["total_cycles"] * 10 < one.last_profile["total_cycles"]
    p = E.Program()
    x = p.main.param("f32", (300, 200))
    p.main.ret(p.main.op("transpose", [x], "f32", (200, 300), {"permutation": [1, 0]}))
    exe = E.compile(p, num_tiles=16)
    exe.run(np.zeros((300, 200), np.float32))
    assert exe.last_profile["exchange_cycles"] > 0


def test_executable_info_is_json():
    exe = E.compile(one_op("add", "f32", n=2))
    info = exe.info
    assert info["inputs"] == [{"dtype": "f32", "shape": [4], "bytes": 16}] * 2
    assert info["outputs"] == [{"dtype": "f32", "shape": [4], "bytes": 16}]
    assert info["device"]["version"] == "ipu2" and info["estimated_cycles"] > 0
    assert "add<f32>" in info["codelets"]
    json.dumps(info)
