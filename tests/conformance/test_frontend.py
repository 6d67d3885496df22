"""Unit tests of the compiler front end: StableHLO modules from jax in, "jax-ipu-program" JSON out.

They need jax but not the ipu backend: modules come from ``jax.jit(f).lower(...)`` on cpu or are written by hand.
"""

from __future__ import annotations

import base64
import io
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import CURRENT_SERIES, EXACT, check
from jax import lax

from jax_ipu.compiler import CompileError, compile_to_program

NUMPY_DTYPES = {"bool": np.bool_, "f16": "<f2", "f32": "<f4", "f64": "<f8", "i8": "i1", "u8": "u1", "i16": "<i2",
                "u16": "<u2", "i32": "<i4", "u32": "<u4", "i64": "<i8", "u64": "<u8", "c64": "<c8", "bf16": "<u2"}


def lower(f, *args):
    return jax.jit(f).lower(*args).compiler_ir("stablehlo")


def bytecode(module) -> bytes:
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    return buffer.getvalue()


def program(f, *args, text: bool = False) -> dict:
    module = lower(f, *args)
    data = str(module).encode() if text else bytecode(module)
    return json.loads(compile_to_program(data))


def from_text(mlir: str) -> dict:
    return json.loads(compile_to_program(mlir.encode()))


def function(prog: dict, name: str = "main") -> dict:
    return next(fn for fn in prog["functions"] if fn["name"] == name)


def ops(body: list, recursive: bool = True) -> list:
    found = []
    for op in body:
        found.append(op)
        if recursive:
            for region in op["regions"]:
                found.extend(ops(region["body"]))
    return found


def only(prog: dict, name: str) -> dict:
    matches = [op for fn in prog["functions"] for op in ops(fn["body"]) if op["op"] == name]
    assert len(matches) == 1, [op["op"] for fn in prog["functions"] for op in ops(fn["body"])]
    return matches[0]


def constant_array(op: dict) -> np.ndarray:
    result = op["results"][0]
    data = np.frombuffer(base64.b64decode(op["attrs"]["value"]), dtype=NUMPY_DTYPES[result["dtype"]])
    if op["attrs"]["splat"]:
        assert data.size == 1
        return np.broadcast_to(data[0], result["shape"])
    return data.reshape(result["shape"])


def strip_locations(value):
    if isinstance(value, dict):
        return {k: strip_locations(v) for k, v in value.items() if k != "loc"}
    if isinstance(value, list):
        return [strip_locations(v) for v in value]
    return value


# --- the document ----------------------------------------------------------------------------------------------


def test_document_shape_and_elementwise_op():
    prog = program(lambda x, y: x + y, np.ones(3, np.float32), np.ones(3, np.float32))
    header = (prog["format"], prog["version"], prog["name"], prog["entry"])
    assert header == ("jax-ipu-program", 1, "jit__lambda" if CURRENT_SERIES else "jit__lambda_", "main")  # jax's name
    main = function(prog)
    assert main["params"] == [{"id": 0, "dtype": "f32", "shape": [3]}, {"id": 1, "dtype": "f32", "shape": [3]}]
    (add,) = main["body"]
    assert add["op"] == "add" and add["mlir"] == "stablehlo.add"
    assert add["operands"] == [0, 1] and add["attrs"] == {} and add["regions"] == []
    assert add["results"] == [{"id": 2, "dtype": "f32", "shape": [3]}]
    assert main["results"] == [2]
    assert add["loc"].startswith("test_frontend.py:")
    assert "aliases" not in prog


def test_bytecode_and_text_agree():
    def f(x, i):
        return jnp.sum(jnp.where(x > 0, x, 0.0) @ x.T, axis=1), lax.fori_loop(0, i, lambda k, c: c + k, 0)

    args = (np.ones((3, 4), np.float32), 5)
    assert strip_locations(program(f, *args)) == strip_locations(program(f, *args, text=True))


def test_accepts_str_and_bytearray():
    text = str(lower(lambda x: -x, np.ones(2, np.float32)))
    from_bytearray = json.loads(compile_to_program(bytearray(text.encode())))
    assert json.loads(compile_to_program(text))["functions"] == from_bytearray["functions"]


@pytest.mark.parametrize("mlir_type, dtype", [
    ("i1", "bool"), ("f16", "f16"), ("f32", "f32"), ("bf16", "bf16"), ("f64", "f64"), ("i8", "i8"), ("ui8", "u8"),
    ("i16", "i16"), ("ui16", "u16"), ("i32", "i32"), ("ui32", "u32"), ("i64", "i64"), ("ui64", "u64"),
    ("complex<f32>", "c64"), ("complex<f64>", "c128"),
])
def test_dtype_names(mlir_type, dtype):
    prog = from_text(f"""
      func.func public @main(%a: tensor<2x0x3x{mlir_type}>, %s: tensor<{mlir_type}>) -> tensor<2x0x3x{mlir_type}> {{
        %0 = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<{mlir_type}>) -> tensor<2x0x3x{mlir_type}>
        return %0 : tensor<2x0x3x{mlir_type}>
      }}""")
    main = function(prog)
    assert main["params"] == [{"id": 0, "dtype": dtype, "shape": [2, 0, 3]}, {"id": 1, "dtype": dtype, "shape": []}]
    assert main["body"][0]["results"][0] == {"id": 2, "dtype": dtype, "shape": [2, 0, 3]}


def test_aliases_from_donation_attributes():
    prog = from_text("""
      module @jit_step {
        func.func public @main(%a: tensor<3xf32> {tf.aliasing_output = 1 : i32}, %b: tensor<3xf32>,
                               %c: tensor<3xi32> {jax.arg_info = "c", tf.aliasing_output = 0 : i32})
            -> (tensor<3xi32>, tensor<3xf32>) {
          %0 = stablehlo.add %a, %b : tensor<3xf32>
          return %c, %0 : tensor<3xi32>, tensor<3xf32>
        }
      }""")
    assert prog["name"] == "jit_step"
    assert prog["aliases"] == [[0, 1], [2, 0]]
    assert function(prog)["results"] == [2, 3]


# --- constants -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [
    np.array([1.5, -0.0, np.inf, -np.inf, np.nan, 3.4e38], np.float32),
    np.array([[1.0, -0.0, 65504.0], [np.nan, -np.inf, 6e-8]], np.float16),
    np.array([True, False, True, True], np.bool_),
    np.array([0, 1, 4294967295, 2**31], np.uint32),
    np.array([-2**31, 2**31 - 1, 0, -1], np.int32),
    np.arange(1000, dtype=np.float32).reshape(10, 100),
    np.zeros((0,), np.float32),
    np.zeros((3, 0), np.bool_),
    np.linspace(-3, 3, 500).astype(jnp.bfloat16),  # large constants print as raw hex: dense<"0x...">
    (np.linspace(-3, 3, 300) + 1j * np.linspace(0, 1, 300)).astype(np.complex64),
    np.array([1.5, -0.0, 2.0], jnp.bfloat16),
], ids=["f32", "f16", "bool", "u32", "i32", "large", "empty", "empty_bool", "large_bf16", "large_c64", "bf16"])
def test_constants_round_trip(value):
    prog = program(lambda: jnp.asarray(value))
    const = only(prog, "constant")
    assert const["results"][0]["shape"] == list(value.shape)
    np.testing.assert_array_equal(constant_array(const),
                                  value.view(np.uint16) if value.dtype == jnp.bfloat16 else value)
    assert const["attrs"]["splat"] is False


def _constant_of(mlir: str) -> dict:
    """The program's constant op for a module returning ``stablehlo.constant <mlir>``."""
    tensor_type = mlir.rsplit(":", 1)[1].strip()
    return only(from_text(f"""
      func.func public @main() -> {tensor_type} {{
        %0 = stablehlo.constant {mlir}
        return %0 : {tensor_type}
      }}"""), "constant")


@pytest.mark.parametrize("mlir, dtype, fill", [
    ("dense<-2.5> : tensor<1000x1000xf32>", np.float32, -2.5),
    ("dense<1.000000e-01> : tensor<1000x1000xf16>", np.float16, 0.1),
    ("dense<-7> : tensor<1000x1000xi32>", np.int32, -7),
    ("dense<4294967295> : tensor<1000x1000xui32>", np.uint32, 4294967295),
    ("dense<true> : tensor<1000x1000xi1>", np.bool_, True),
])
def test_splat_constants_hold_one_element(mlir, dtype, fill):
    const = _constant_of(mlir)
    assert const["attrs"]["splat"] is True
    assert len(base64.b64decode(const["attrs"]["value"])) == np.dtype(dtype).itemsize
    assert const["results"][0]["shape"] == [1000, 1000]
    assert constant_array(const)[0, 0] == np.array(fill, dtype)


@pytest.mark.parametrize("mlir", ["dense<1.0> : tensor<3x0x2xbf16>", "dense<(1.0,2.0)> : tensor<0x4xcomplex<f32>>",
                                  "dense<1.0> : tensor<0xf32>", "dense<true> : tensor<2x0xi1>"])
def test_empty_splat_constants_hold_nothing(mlir):
    """An empty array printed as a splat holds no bytes (jaxlib 0.12's acosh and atanh of an empty bf16 array have
    such a constant; the emulator refused it: '"value" holds 2 bytes but the result needs 0')."""
    const = _constant_of(mlir)
    assert base64.b64decode(const["attrs"]["value"]) == b""


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "complex64"])
def test_functions_of_empty_arrays(dtype):
    x = jnp.zeros((3, 0, 2), dtype)
    check(lambda x: [jnp.arccosh(x), jnp.arctanh(x), jnp.arcsinh(x), jnp.tanh(x), lax.erf_inv(x.real)], x)


def test_splat_constants_read_only_elementwise_become_a_broadcast_scalar():
    # jax 0.12 folds broadcast scalars into splat constants (erf's decomposition has 16 of the full shape): read
    # only by elementwise ops, one is a scalar broadcast the emulator fuses into them, never stored as an array.
    prog = from_text("""
      func.func public @main(%x: tensor<1000xf32>) -> (tensor<1000xf32>, tensor<10x100xf32>) {
        %c = stablehlo.constant dense<2.5> : tensor<1000xf32>
        %k = stablehlo.constant dense<-1.0> : tensor<1000xf32>
        %0 = stablehlo.multiply %x, %c : tensor<1000xf32>
        %1 = stablehlo.add %0, %c : tensor<1000xf32>
        %2 = stablehlo.reshape %k : (tensor<1000xf32>) -> tensor<10x100xf32>
        return %1, %2 : tensor<1000xf32>, tensor<10x100xf32>
      }""")
    body = function(prog)["body"]
    constants = [op for op in body if op["op"] == "constant"]
    # (the reshape of %k is folded into a splat constant of its shape, as XLA folds it: returned, it stays a splat)
    assert [(c["results"][0]["shape"], c["attrs"]["splat"]) for c in constants] == [([], False), ([10, 100], True)]
    assert constant_array(constants[0]) == np.float32(2.5)
    (broadcast,) = [op for op in body if op["op"] == "broadcast_in_dim"]
    assert broadcast["operands"] == [constants[0]["results"][0]["id"]]
    assert broadcast["results"][0]["shape"] == [1000] and broadcast["attrs"] == {"broadcast_dimensions": []}
    multiply = next(op for op in body if op["op"] == "multiply")
    assert multiply["operands"][1] == broadcast["results"][0]["id"]


@pytest.mark.parametrize("mlir, dtype, expected", [
    ("dense<[1.0, -2.5, 0x7FC0]> : tensor<3xbf16>", "bf16", np.array([0x3F80, 0xC020, 0x7FC0], np.uint16)),
    ("dense<[(1.0, 2.0), (-3.0, 0.5)]> : tensor<2xcomplex<f32>>", "c64", np.array([1 + 2j, -3 + 0.5j], np.complex64)),
    ("dense<[1, -1]> : tensor<2xi64>", "i64", np.array([1, -1], np.int64)),
    ("dense<[true, false]> : tensor<2xi1>", "bool", np.array([True, False])),
    ("dense<7> : tensor<ui8>", "u8", np.array(7, np.uint8)),
])
def test_constants_of_every_dtype(mlir, dtype, expected):
    tensor_type = mlir.rsplit(":", 1)[1].strip()
    prog = from_text(f"""
      func.func public @main() -> {tensor_type} {{
        %0 = stablehlo.constant {mlir}
        return %0 : {tensor_type}
      }}""")
    const = only(prog, "constant")
    assert const["results"][0]["dtype"] == dtype
    np.testing.assert_array_equal(constant_array(const), expected)


# --- op attributes ---------------------------------------------------------------------------------------------


def test_compare_attrs():
    prog = program(lambda x, y, a, b: (x < y, a != b), np.ones(2, np.float32), np.ones(2, np.float32),
                   np.ones(2, np.uint32), np.ones(2, np.uint32))
    compares = [op for op in function(prog)["body"] if op["op"] == "compare"]
    assert [c["attrs"] for c in compares] == [
        {"comparison_direction": "LT", "compare_type": "FLOAT"},
        {"comparison_direction": "NE", "compare_type": "UNSIGNED"},
    ]
    assert compares[0]["results"][0]["dtype"] == "bool"


def test_dot_general_dimension_numbers():
    prog = program(lambda a, b: jnp.einsum("bij,bkj->bik", a, b), np.ones((2, 3, 4), np.float32),
                   np.ones((2, 5, 4), np.float32))
    dot = only(prog, "dot_general")
    assert dot["attrs"] == {"lhs_batching_dimensions": [0], "rhs_batching_dimensions": [0],
                            "lhs_contracting_dimensions": [2], "rhs_contracting_dimensions": [2]}
    assert dot["results"][0]["shape"] == [2, 3, 5]


def test_matmul_without_batch_dims():
    dot = only(program(lambda v, m: v @ m, np.ones(4, np.float32), np.ones((4, 6), np.float32)), "dot_general")
    assert dot["attrs"]["lhs_batching_dimensions"] == [] and dot["attrs"]["lhs_contracting_dimensions"] == [0]


def test_shape_op_attrs():
    def f(x, i):
        return (jnp.broadcast_to(x[:, None, :], (3, 2, 4)), x.T, lax.slice(x, (0, 1), (3, 4), (2, 3)),
                jnp.concatenate([x, x], axis=1),
                lax.pad(x, 0.0, [(1, -1, 0), (-2, 3, 2)]), jnp.arange(5), lax.dynamic_slice(x, (i, 0), (2, 3)),
                lax.dynamic_update_slice(x, jnp.ones((1, 2)), (i, i)), x.reshape(12))

    body = ops(function(program(f, np.ones((3, 4), np.float32), 1))["body"])
    by_op = {}
    for op in body:
        by_op.setdefault(op["op"], []).append(op["attrs"])
    assert {"broadcast_dimensions": [0, 2]} in by_op["broadcast_in_dim"]
    assert by_op["transpose"] == [{"permutation": [1, 0]}]
    assert by_op["slice"] == [{"start_indices": [0, 1], "limit_indices": [3, 4], "strides": [2, 3]}]
    assert by_op["concatenate"] == [{"dimension": 1}]
    assert by_op["pad"] == [{"edge_padding_low": [1, -2], "edge_padding_high": [-1, 3], "interior_padding": [0, 2]}]
    assert by_op["iota"] == [{"iota_dimension": 0}]
    assert by_op["dynamic_slice"] == [{"slice_sizes": [2, 3]}]
    assert by_op["dynamic_update_slice"] == [{}]
    assert by_op["reshape"] and all(attrs == {} for attrs in by_op["reshape"])


# --- regions and functions -------------------------------------------------------------------------------------


@pytest.mark.parametrize("reduce_fn, computation", [
    (jnp.sum, "add"), (jnp.prod, "multiply"), (jnp.max, "maximum"), (jnp.min, "minimum"),
    (lambda x: jnp.all(x > 0), "and"), (lambda x: jnp.any(x > 0), "or"),
])
def test_reduce_computation_and_body(reduce_fn, computation):
    red = only(program(lambda x: reduce_fn(x, axis=(0, 2)) if computation in ("add", "multiply", "maximum", "minimum")
                       else reduce_fn(x), np.ones((2, 3, 4), np.float32)), "reduce")
    assert red["attrs"]["computation"] == computation
    assert len(red["operands"]) == 2 and len(red["regions"]) == 1
    (body,) = red["regions"]
    assert len(body["params"]) == 2 and [op["op"] for op in body["body"]] == [computation]
    assert body["results"] == [body["body"][0]["results"][0]["id"]]
    assert body["body"][0]["operands"] in ([p["id"] for p in body["params"]], [p["id"] for p in body["params"]][::-1])


def test_reduce_dimensions():
    red = only(program(lambda x: jnp.sum(x, axis=(0, 2)), np.ones((2, 3, 4), np.float32)), "reduce")
    assert red["attrs"]["dimensions"] == [0, 2]
    assert red["results"][0]["shape"] == [3]


def test_variadic_reduce_keeps_only_its_body():
    red = only(program(lambda x: jnp.argmax(x, axis=1), np.ones((2, 5), np.float32)), "reduce")
    assert "computation" not in red["attrs"]
    assert len(red["operands"]) == 4 and len(red["results"]) == 2
    assert len(red["regions"][0]["params"]) == 4 and len(red["regions"][0]["results"]) == 2


def test_while_and_case_regions():
    def f(x, i):
        y = lax.fori_loop(0, 3, lambda k, c: c * 2.0, x)
        return lax.switch(i, [lambda: y, lambda: y + x, lambda: -y])

    prog = program(f, np.ones(3, np.float32), 1)
    loop, case = only(prog, "while"), only(prog, "case")
    cond, body = loop["regions"]
    assert len(cond["params"]) == len(body["params"]) == len(loop["operands"]) == len(loop["results"])
    cond_result = next(r for op in cond["body"] for r in op["results"] if r["id"] == cond["results"][0])
    assert cond_result["dtype"] == "bool" and cond_result["shape"] == []
    assert len(body["results"]) == len(loop["results"])
    assert len(case["regions"]) == 3 and all(r["params"] == [] for r in case["regions"])
    # the branches read `y` and `x` from the enclosing function (implicit capture)
    outer_ids = {p["id"] for p in function(prog)["params"]} | {r["id"] for r in loop["results"]}
    captured = {i for r in case["regions"] for op in r["body"] for i in op["operands"]}
    assert captured & outer_ids


def test_ops_nothing_reads_are_dropped_as_xla_drops_them():
    body = """
      %u = stablehlo.cosine %arg0 : tensor<3xf32>
      %v = stablehlo.sine %u : tensor<3xf32>
      %w = stablehlo.exponential %arg0 : tensor<3xf32>
      %c = stablehlo.constant dense<2.0> : tensor<3xf32>
      %s = stablehlo.multiply %arg0, %c : tensor<3xf32>
      %t = stablehlo.negate %s : tensor<3xf32>
      %r = stablehlo.negate %w : tensor<3xf32>
      %n = "stablehlo.while"(%t) ({
        ^bb0(%a: tensor<3xf32>):
          %one = stablehlo.constant dense<true> : tensor<i1>
          %dead = stablehlo.abs %a : tensor<3xf32>
          stablehlo.return %one : tensor<i1>
        }, {
        ^bb0(%a: tensor<3xf32>):
          %dead2 = stablehlo.floor %a : tensor<3xf32>
          %used = stablehlo.ceil %r : tensor<3xf32>
          stablehlo.return %used : tensor<3xf32>
        }) : (tensor<3xf32>) -> tensor<3xf32>
      %k = stablehlo.tanh %arg0 : tensor<3xf32>
      stablehlo.custom_call @dce_sink(%k) {has_side_effect = true} : (tensor<3xf32>) -> ()
      return %s : tensor<3xf32>"""
    main = function(from_text("func.func @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {" + body + "\n}"))
    names = [op["op"] for op in ops(main["body"])]
    # cosine and sine are read by nothing; the while is kept (loops stay), and with it what it and its body read
    # (%t, %r, %w); inside it, abs and floor are dropped; tanh is kept by jax's dce_sink. (The splat %c is a scalar
    # constant broadcast.)
    assert names == ["exponential", "constant", "broadcast_in_dim", "multiply", "negate", "negate", "while", "constant",
                     "ceil", "tanh"]


def test_a_divide_rewritten_leaves_no_unread_operand():
    main = function(program(lambda x, y: x / jnp.sqrt(y), np.ones(3, np.float32), np.ones(3, np.float32)))
    assert [op["op"] for op in main["body"]] == ["rsqrt", "multiply"]


def test_repeated_ops_are_computed_once_as_xla_cse_does():
    """lax.scan indexes xs and ys with its counter once a step each (a dynamic_slice, a dynamic_update_slice), with
    equal constants written where each is used: the document computes each once, in the loop body and outside, and
    the results are cpu's."""
    def rnn(h, w, xs):
        return lax.scan(lambda h, x: (jnp.tanh(h @ w + x),) * 2, h, xs)

    args = (np.zeros(8, np.float32), np.eye(8, dtype=np.float32) * 0.5, np.ones((5, 8), np.float32))
    main = function(program(rnn, *args))
    (loop,) = [op for op in main["body"] if op["op"] == "while"]
    for block in (main["body"], loop["regions"][1]["body"]):
        seen = [json.dumps([op["op"], op["operands"], op["attrs"], [(r["dtype"], r["shape"]) for r in op["results"]]])
                for op in block if not op["regions"]]
        assert len(seen) == len(set(seen)), seen
    if not CURRENT_SERIES:  # jax 0.4.13 fixes the index up (compare, convert, add, select) once per use of it: the
        # counter's range decides the compare (test_a_compare_of_a_loop_counter_its_range_decides_is_folded)
        assert [op["op"] for op in loop["regions"][1]["body"]].count("select") == 0
    check(rnn, *args)


def test_only_pure_ops_of_one_block_are_merged():
    """Equal pure ops merge, as XLA's CSE merges them, a value jax's dce_sink reads under its first copy: integer
    ones before the rules, float ones (exp, then the adds of it that became equal) once the rules have read jax's
    repeats (passes/duplicate_products.py); host transfers (outfeed) and equal ops in different blocks (a loop's
    body and the function) do not."""
    body = """
      %i = stablehlo.convert %arg0 : (tensor<3xf32>) -> tensor<3xi32>
      %j = stablehlo.convert %arg0 : (tensor<3xf32>) -> tensor<3xi32>
      %ij = stablehlo.add %i, %j : tensor<3xi32>
      %f = stablehlo.convert %ij : (tensor<3xi32>) -> tensor<3xf32>
      %a0 = stablehlo.exponential %arg0 : tensor<3xf32>
      %b0 = stablehlo.exponential %arg0 : tensor<3xf32>
      %a = stablehlo.add %a0, %f : tensor<3xf32>
      %b = stablehlo.add %b0, %f : tensor<3xf32>
      %t0 = stablehlo.create_token : !stablehlo.token
      %t1 = "stablehlo.outfeed"(%a, %t0) {outfeed_config = ""} : (tensor<3xf32>, !stablehlo.token) -> !stablehlo.token
      %t2 = "stablehlo.outfeed"(%a, %t0) {outfeed_config = ""} : (tensor<3xf32>, !stablehlo.token) -> !stablehlo.token
      stablehlo.custom_call @dce_sink(%b, %t1, %t2) {has_side_effect = true} : (tensor<3xf32>, !stablehlo.token,
        !stablehlo.token) -> ()
      %n = "stablehlo.while"(%a) ({
        ^bb0(%x: tensor<3xf32>):
          %one = stablehlo.constant dense<false> : tensor<i1>
          stablehlo.return %one : tensor<i1>
        }, {
        ^bb0(%x: tensor<3xf32>):
          %e = stablehlo.convert %arg0 : (tensor<3xf32>) -> tensor<3xi32>
          %g = stablehlo.convert %e : (tensor<3xi32>) -> tensor<3xf32>
          stablehlo.return %g : tensor<3xf32>
        }) : (tensor<3xf32>) -> tensor<3xf32>
      %s = stablehlo.add %a, %b : tensor<3xf32>
      %r = stablehlo.add %s, %n : tensor<3xf32>
      return %r : tensor<3xf32>"""
    main = function(from_text("func.func @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {" + body + "\n}"))
    names = [op["op"] for op in main["body"]]
    assert names.count("exponential") == 1 and names.count("outfeed") == 2, names
    float_adds = [op for op in main["body"] if op["op"] == "add" and op["results"][0]["dtype"] == "f32"]
    assert len(float_adds) == 3, names  # %a and %b are one, then %s and %r
    to_int = [op for op in main["body"] if op["op"] == "convert" and op["results"][0]["dtype"] == "i32"]
    assert len(to_int) == 1, names
    assert [op["op"] for op in ops(main["body"])].count("convert") == 4  # 1 + the float one + the loop body's two
    (int_add,) = [op for op in main["body"] if op["op"] == "add" and op["results"][0]["dtype"] == "i32"]
    assert int_add["operands"] == [to_int[0]["results"][0]["id"]] * 2


def test_value_ids_are_unique_within_a_function():
    def f(x):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + jnp.sum(c[1])), (0, x))

    for fn in program(f, np.ones(4, np.float32))["functions"]:
        ids = [p["id"] for p in fn["params"]]
        for op in ops(fn["body"]):
            ids += [r["id"] for r in op["results"]] + [p["id"] for r in op["regions"] for p in r["params"]]
        assert len(ids) == len(set(ids))


def test_calls_to_private_functions_are_inlined_as_xla_inlines_them():
    """XLA inlines every call before it simplifies and fuses (CallInliner): so does the front end, each call site
    getting its own copy of the callee's ops (rules/structure.py, inlined_call); then XLA's CSE makes the copies
    that compute the same values one (the two sin(x) of inner(x), not sin(sin(x) * 2))."""
    inner = jax.jit(lambda x: jnp.sin(x) * 2)
    outer = jax.jit(lambda x: inner(inner(x)) + 1)
    f = lambda x: outer(x) - inner(x)  # noqa: E731

    prog = program(f, np.ones(3, np.float32))
    assert [fn["name"] for fn in prog["functions"]] == ["main"]
    body = list(ops(prog["functions"][0]["body"]))
    assert not [op for op in body if op["op"] == "call"]
    assert [op["op"] for op in body].count("sine") == 2
    check(f, np.linspace(-3, 3, 16, dtype=np.float32), **EXACT)


# --- what the front end passes on or refuses -------------------------------------------------------------------


def test_unknown_ops_pass_through_for_the_emulator_to_refuse():
    # An unknown op keeps its name, operands and results; its attrs are dropped.
    prog = from_text("""func.func @main(%a: tensor<3x3xf32>, %b: tensor<3x2xf32>) -> tensor<3x2xf32> {
      %0 = "stablehlo.triangular_solve"(%a, %b) {left_side = true, lower = true, unit_diagonal = false,
        transpose_a = #stablehlo<transpose NO_TRANSPOSE>} : (tensor<3x3xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
      func.return %0 : tensor<3x2xf32>
    }""")
    solve = only(prog, "triangular_solve")
    assert solve["mlir"] == "stablehlo.triangular_solve" and solve["attrs"] == {} and solve["regions"] == []
    assert solve["operands"] == [0, 1]
    assert solve["results"][0]["dtype"] == "f32" and solve["results"][0]["shape"] == [3, 2]


def test_rng_keeps_its_distribution_and_leaves_the_shape_to_its_type():
    prog = program(lambda a: lax.rng_uniform(a, a + 1, (4,)), np.float32(0))
    rng = only(prog, "rng")
    assert rng["mlir"] == "stablehlo.rng" and rng["attrs"] == {"rng_distribution": "UNIFORM"}
    assert len(rng["operands"]) == 2 and rng["operands"][0] == 0
    assert rng["results"][0]["dtype"] == "f32" and rng["results"][0]["shape"] == [4]
    assert not [op for op in function(prog)["body"] if op["results"] and op["results"][0]["dtype"] == "i64"]


def test_window_attrs():
    f = lambda x: lax.reduce_window(x, 0., lax.add, (2, 3), (1, 2), ((1, 0), (2, -1)), (1, 2), (2, 1))  # noqa: E731
    window = only(program(f, np.ones((5, 6), np.float32)), "reduce_window")
    assert window["attrs"] == {"window_dimensions": [2, 3], "window_strides": [1, 2], "padding": [[1, 0], [2, -1]],
                               "base_dilations": [1, 2], "window_dilations": [2, 1], "computation": "add"}
    assert len(window["regions"]) == 1
    precision = only(program(lambda x: lax.reduce_precision(x, 5, 10), np.ones(3, np.float32)), "reduce_precision")
    assert precision["attrs"] == {"exponent_bits": 5, "mantissa_bits": 10}


def test_convolution_attrs():
    f = lambda x, w: lax.conv_general_dilated(x, w, (2, 1), ((1, 2), (-1, 0)), lhs_dilation=(1, 2),  # noqa: E731
                                              rhs_dilation=(3, 1), dimension_numbers=("NHWC", "OIHW", "CNHW"),
                                              feature_group_count=2)
    conv = only(program(f, np.ones((2, 9, 8, 4), np.float32), np.ones((6, 2, 3, 3), np.float32)), "convolution")
    assert conv["regions"] == [] and conv["attrs"] == {
        "input_batch_dimension": 0, "input_feature_dimension": 3, "input_spatial_dimensions": [1, 2],
        "kernel_input_feature_dimension": 1, "kernel_output_feature_dimension": 0, "kernel_spatial_dimensions": [2, 3],
        "output_batch_dimension": 1, "output_feature_dimension": 0, "output_spatial_dimensions": [2, 3],
        "window_strides": [2, 1], "padding": [[1, 2], [-1, 0]], "lhs_dilation": [1, 2], "rhs_dilation": [3, 1],
        "window_reversal": [False, False], "feature_group_count": 2, "batch_group_count": 1}
    # Absent window fields stay absent (the emulator's defaults: stride 1, no padding or dilation, no reversal).
    text = """func.func @main(%x: tensor<1x2x5xf32>, %w: tensor<3x2x2xf32>) -> tensor<1x3x4xf32> {
      %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {}
           {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
           : (tensor<1x2x5xf32>, tensor<3x2x2xf32>) -> tensor<1x3x4xf32>
      return %0 : tensor<1x3x4xf32>
    }"""
    attrs = only(from_text(text), "convolution")["attrs"]
    assert attrs["input_spatial_dimensions"] == [2] and attrs["feature_group_count"] == 1
    assert not {"window_strides", "padding", "lhs_dilation", "rhs_dilation", "window_reversal"} & set(attrs)


def test_chlo_ops_keep_their_dialect_in_mlir():
    erf_inv = only(program(lax.erf_inv, np.ones(2, np.float32)), "erf_inv")
    assert erf_inv["mlir"] == "chlo.erf_inv"


def test_tokens_infeed_and_outfeed():
    prog = from_text("""
      func.func public @main(%a: tensor<f32>) -> tensor<f32> {
        %t = stablehlo.create_token : !stablehlo.token
        %u = stablehlo.after_all %t, %t : !stablehlo.token
        %x:2 = "stablehlo.infeed"(%u) {infeed_config = "", layout = [[1, 0]]}
            : (!stablehlo.token) -> (tensor<3x4xf32>, !stablehlo.token)
        %o = "stablehlo.outfeed"(%x#0, %x#1) {outfeed_config = ""}
            : (tensor<3x4xf32>, !stablehlo.token) -> !stablehlo.token
        return %a : tensor<f32>
      }""")
    create, after, infeed, outfeed = function(prog)["body"]
    assert create["results"] == [{"id": 1, "dtype": "token", "shape": []}]
    assert after["operands"] == [1, 1] and after["results"][0]["dtype"] == "token"
    assert infeed["op"] == "infeed" and infeed["attrs"] == {"infeed_config": ""}  # layout left out
    assert [r["dtype"] for r in infeed["results"]] == ["f32", "token"] and infeed["results"][0]["shape"] == [3, 4]
    assert outfeed["operands"] == [infeed["results"][0]["id"], infeed["results"][1]["id"]]


def test_host_callback_custom_call_keeps_its_target_and_id():
    prog = from_text("""
      func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {
        %t = stablehlo.create_token : !stablehlo.token
        %r:2 = stablehlo.custom_call @jax_ipu_host_callback(%t, %a)
            {api_version = 2 : i32, backend_config = "42", has_side_effect = true}
            : (!stablehlo.token, tensor<2xf32>) -> (!stablehlo.token, tensor<2xf32>)
        return %r#1 : tensor<2xf32>
      }""")
    call = function(prog)["body"][1]
    assert call["attrs"] == {"call_target_name": "jax_ipu_host_callback", "backend_config": "42",
                             "has_side_effect": True}
    assert [r["dtype"] for r in call["results"]] == ["token", "f32"]


def test_tokens_in_the_entry_signature_cross_as_bool0():
    # The current series leaves !stablehlo.token in main's signature and passes bool[0] buffers at run time: the
    # program takes and returns bool[0] there, and the token inside comes from a create_token.
    program = from_text("""
      func.func public @main(%t: !stablehlo.token, %x: tensor<2xf32>) -> (!stablehlo.token, tensor<2xf32>) {
        return %t, %x : !stablehlo.token, tensor<2xf32>
      }""")
    main = program["functions"][0]
    assert [(p["dtype"], p["shape"]) for p in main["params"]] == [("bool", [0]), ("f32", [2])]
    ops = {op["op"]: op for op in main["body"]}
    assert ops["create_token"]["results"][0]["dtype"] == "token"
    assert ops["constant"]["results"][0] == {"id": main["results"][0], "dtype": "bool", "shape": [0]}
    assert main["results"][1] == main["params"][1]["id"]
    got = jax_run_of_token_program()
    np.testing.assert_array_equal(got, np.array([1.0, 2.0], np.float32))


def jax_run_of_token_program():
    """An ordered effect makes jax thread a token through main's signature; the program runs."""
    from jax.experimental import io_callback

    seen = []

    def f(x):
        io_callback(lambda v: seen.append(np.asarray(v)), None, x, ordered=True)
        return x

    out = jax.jit(f, backend="ipu")(np.array([1.0, 2.0], np.float32))
    jax.effects_barrier()
    assert len(seen) == 1
    return np.asarray(out)


def test_tuple_params_are_refused():
    with pytest.raises(CompileError, match=r"tuple<tensor<f32>>.* not supported on the ipu backend"):
        from_text("""
          func.func public @main(%a: tuple<tensor<f32>>) -> tuple<tensor<f32>> {
            return %a : tuple<tensor<f32>>
          }""")


def test_garbage_is_a_compile_error():
    assert issubclass(CompileError, ValueError)
    with pytest.raises(CompileError, match="cannot parse"):
        compile_to_program(b"not a module")


# --- the attribute-reading layer (absorbs jaxlib binding differences) ---------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("dense<[1, -2, 3]> : tensor<3xi64>", [1, -2, 3]),
    ("dense<0> : tensor<2xi64>", [0, 0]),
    ("dense<> : tensor<0xi64>", []),
    ("array<i64: 4, -5>", [4, -5]),
    ("array<i64>", []),
    ("[1, 2]", [1, 2]),
])
def test_int_lists_in_both_spellings(text, expected):
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir

    from jax_ipu.compiler import attributes

    with jmlir.make_ir_context():
        assert attributes.int_list(ir.Attribute.parse(text)) == expected


def test_enum_and_dot_dimension_attributes():
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir

    from jax_ipu.compiler import attributes

    with jmlir.make_ir_context():
        parse = ir.Attribute.parse
        assert attributes.enum(parse("#stablehlo<comparison_direction GE>")) == "GE"
        assert attributes.enum(parse("#stablehlo<comparison_type TOTALORDER>")) == "TOTALORDER"
        assert attributes.dot_dimension_numbers(parse(
            "#stablehlo.dot<lhs_batching_dimensions = [0, 1], rhs_batching_dimensions = [0, 1], "
            "lhs_contracting_dimensions = [3], rhs_contracting_dimensions = [2]>"
        )) == {"lhs_batching_dimensions": [0, 1], "rhs_batching_dimensions": [0, 1], "lhs_contracting_dimensions": [3],
               "rhs_contracting_dimensions": [2]}
        assert attributes.dot_dimension_numbers(parse(
            "#stablehlo.dot<lhs_contracting_dimensions = [1], "
            "rhs_contracting_dimensions = [0]>"
        ))["lhs_batching_dimensions"] == []
        # Another attribute class is refused, not misread.
        for read, other in ((attributes.dot_dimension_numbers, "#stablehlo<comparison_direction GE>"),
                            (attributes.enum, "dense<[1, 2]> : tensor<2xi64>"), (attributes.integer, '"3"'),
                            (attributes.int_list, '"1, 2"')):
            with pytest.raises(ValueError):
                read(parse(other))


def test_conv_dimension_numbers_attributes():
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir

    from jax_ipu.compiler import attributes

    with jmlir.make_ir_context():
        conv = lambda text: attributes.conv_dimension_numbers(ir.Attribute.parse(text))  # noqa: E731
        assert conv("#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>") == {
            "input_batch_dimension": 0, "input_feature_dimension": 3, "input_spatial_dimensions": [1, 2],
            "kernel_input_feature_dimension": 2, "kernel_output_feature_dimension": 3,
            "kernel_spatial_dimensions": [0, 1], "output_batch_dimension": 0, "output_feature_dimension": 3,
            "output_spatial_dimensions": [1, 2]}
        # spatial dims listed out of order, and the 0-D (no spatial dims) case
        assert conv("#stablehlo.conv<[f, 1, b, 0]x[1, o, 0, i]->[1, 0, f, b]>")["input_spatial_dimensions"] == [3, 1]
        assert conv("#stablehlo.conv<[b, f]x[i, o]->[f, b]>")["output_batch_dimension"] == 1
        raw = ("#stablehlo.conv<raw input_batch_dimension = 0, input_feature_dimension = 1, "
               "input_spatial_dimensions = [2], kernel_input_feature_dimension = 1, "
               "kernel_output_feature_dimension = 0, kernel_spatial_dimensions = [2], output_batch_dimension = 0, "
               "output_feature_dimension = 1, output_spatial_dimensions = [2]>")
        assert conv(raw)["kernel_output_feature_dimension"] == 0
        with pytest.raises(ValueError):
            attributes.conv_dimension_numbers(ir.Attribute.parse("#stablehlo<comparison_direction GE>"))
    with jmlir.make_ir_context():
        assert attributes.padding_pairs(
            ir.Attribute.parse("dense<[[1, -2], [0, 3]]> : tensor<2x2xi64>")) == [[1, -2], [0, 3]]
        assert attributes.padding_pairs(ir.Attribute.parse("dense<0> : tensor<1x2xi64>")) == [[0, 0]]
        assert attributes.padding_pairs(ir.Attribute.parse("dense<> : tensor<0x2xi64>")) == []
        assert attributes.bool_list(ir.Attribute.parse("dense<[true, false]> : tensor<2xi1>")) == [True, False]
        assert attributes.bool_list(ir.Attribute.parse("dense<false> : tensor<2xi1>")) == [False, False]
        with pytest.raises(ValueError):
            attributes.padding_pairs(ir.Attribute.parse("dense<[1, 2, 3]> : tensor<3xi64>"))


# --- one op registry, binary program container -------------------------------------------------------------------

def test_front_end_learns_ops_from_the_native_registry():
    from jax_ipu.compiler import ops as O

    registry = O.registry()
    # Families and dtypes come from the C++ table, e.g. tanh is a float-only unary op, add a reducer.
    assert registry["tanh"]["family"] == "unary" and set(registry["tanh"]["dtypes"]) >= {"f16", "f32"}
    assert "i32" not in registry["tanh"]["dtypes"]
    assert registry["add"]["reducer"] and not registry["subtract"]["reducer"]
    assert all(O.is_known(name) for name in registry)
    assert registry["fft"]["family"] == "complex" and "c64" in registry["fft"]["dtypes"]
    assert not O.is_known("batch_norm_training")
    # What the front end's passes ask of an op comes from the same rows: which ops fuse elementwise (duplicate_products,
    # the splat and loop rules) and which only compute their results (dead_code removes those when unread).
    assert {n for n in registry if O.is_elementwise(n)} >= {"add", "tanh", "compare", "select", "clamp", "convert"}
    assert not any(O.is_elementwise(n) for n in ("broadcast_in_dim", "reduce", "dot_general", "while", "fft"))
    assert all(O.is_pure(n) for n in ("add", "reshape", "gather", "dot_general", "reduce", "sort", "reduce_window"))
    assert not any(O.is_pure(n) for n in ("while", "call", "case", "outfeed", "custom_call", "all_reduce",
                                          "optimization_barrier"))


@pytest.mark.parametrize("swapped", [False, True])
def test_one_body_recogniser_for_reduce_and_scatter(swapped):
    # A scatter body that combines (update, current) instead of (current, update) is the same commutative op.
    order = "%b, %a" if swapped else "%a, %b"
    prog = from_text(f"""
      func.func public @main(%x: tensor<8xf32>, %i: tensor<3x1xi32>, %u: tensor<3xf32>)
          -> (tensor<8xf32>, tensor<f32>) {{
        %0 = "stablehlo.scatter"(%x, %i, %u) ({{
          ^bb0(%a: tensor<f32>, %b: tensor<f32>):
            %s = stablehlo.maximum {order} : tensor<f32>
            stablehlo.return %s : tensor<f32>
        }}) {{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0],
             scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}}
          : (tensor<8xf32>, tensor<3x1xi32>, tensor<3xf32>) -> tensor<8xf32>
        %z = stablehlo.constant dense<0.0> : tensor<f32>
        %1 = stablehlo.reduce(%x init: %z) applies stablehlo.multiply across dimensions = [0]
          : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
        return %0, %1 : tensor<8xf32>, tensor<f32>
      }}""")
    assert only(prog, "scatter")["attrs"]["computation"] == "maximum"
    assert only(prog, "reduce")["attrs"]["computation"] == "multiply"


def test_binary_container_carries_constants_as_raw_blobs():
    from jax_ipu import emulator
    from jax_ipu.compiler import compile_to_binary, decode
    from jax_ipu.compiler.program_format import CONTAINER_MAGIC

    table = np.arange(4096, dtype=np.float32).reshape(64, 64) / 7
    module = bytecode(lower(lambda x: x @ table + 1.0, np.ones((2, 64), np.float32)))
    text, binary = compile_to_program(module), compile_to_binary(module)
    assert binary.startswith(CONTAINER_MAGIC)
    # The 16 KiB table travels once, raw: the container is smaller than the base64 text and holds its bytes.
    assert table.tobytes() in binary and base64.b64encode(table.tobytes()) not in binary
    assert len(binary) < len(text)
    assert decode(binary) == json.loads(text)
    x = np.random.RandomState(0).rand(2, 64).astype(np.float32)
    expected = x @ table + 1.0
    for form in (text, binary):
        np.testing.assert_allclose(emulator.compile(form).run(x)[0], expected, rtol=1e-5)
    # A malformed container is refused with a message naming the container, not a crash.
    with pytest.raises(emulator.EmulatorError, match="binary program container"):
        emulator.compile(binary[:-10])


# ------------------------------------------------------------------------------------------------ reference cycles
def _cycles_left(run) -> list:
    """What the garbage collector finds after ``run()``: objects only a reference cycle keeps."""
    import gc

    gc.collect()
    debug = gc.get_debug()
    try:
        run()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        return [f"{type(o).__name__}: {getattr(o, '__qualname__', '')}" for o in gc.garbage]
    finally:
        gc.set_debug(debug)
        gc.garbage.clear()


# Programs that take the front end through its recursive walks: calls (facts.call_constants), reassociated
# constants, a product read through moves (duplicate_products, contract_through_moves), a divide of a divide
# (divide.py's loop), a long scan (reductions._TreeScan, the current series' cumsum).
_WALKED = {
    "calls": lambda x: jax.jit(lambda y: y * 2 + 1)(x) - jax.jit(lambda y: y * 2 + 1)(x + 1),
    "constants": lambda x: (x + 1.0) + 2.0 - (3.0 - x) * jnp.log(2.0),
    "moves": lambda x: (2 - jnp.flip(x * x, 0), jnp.square(x).T.reshape(-1)),
    "divides": lambda x: x / (x / (x + 3.0)) + 1 / (1 / (1 / jnp.sqrt(jnp.abs(x) + 1))),
    "scan": lambda x: jnp.cumsum(x, axis=1) if CURRENT_SERIES else x,  # 0.4.13 lowers cumsum itself: cycles of jax's
}


@pytest.mark.parametrize("name", sorted(_WALKED))
def test_compiling_leaves_no_reference_cycles(name):
    # A compile's document (its constants' bytes included) is freed when the compile returns, not at the next
    # collection: jax's own core_test.test_reference_cycles_jit checks the same of a whole jit on the device.
    x = np.linspace(-3, 3, 8 * 40, dtype=np.float32).reshape(8, 40)
    module = bytecode(lower(_WALKED[name], x))
    assert _cycles_left(lambda: compile_to_program(module)) == []


@pytest.mark.filterwarnings("ignore:backend and device argument on jit is deprecated")
def test_a_jit_on_the_ipu_leaves_no_reference_cycles():
    f = jax.jit(lambda x: jnp.sum(x) / (x / (x + 3.0)), backend="ipu")
    assert _cycles_left(lambda: f(jnp.ones(4, jnp.float32)).block_until_ready()) == []


def test_a_select_of_a_compared_predicate_selects_on_the_predicate():
    """jax 0.4.13 writes every select of a boolean predicate as ``select(p == true, ...)``; XLA's simplifier selects
    on p itself (and on p with the branches swapped for ``p == false``, ``p != true`` or ``not p``), so relu's
    gradient runs one compare per element, not two. Values are cpu's, exactly."""
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)

    def relu_grad(x, w):
        return jax.grad(lambda w: jnp.sum(jax.nn.relu(x * w + 0.5)))(w)

    names = [op["op"] for fn in program(relu_grad, x, x)["functions"] for op in ops(fn["body"])]
    assert names.count("compare") == 1, names

    def selects(x, y, mask):
        return [lax.select(mask, x, y), lax.select(mask == False, x, y),  # noqa: E712 (an i1 compare, as jax writes)
                lax.select(mask != True, x, y), lax.select(~mask, x, y),  # noqa: E712
                lax.select(True == mask, x, y), jnp.where(mask, x, -y)]  # noqa: E712

    mask = x > 0.3
    check(selects, x, -x, mask, **EXACT)
    # a compare of complex values is no predicate compared with a constant (it was read as one, and refused)
    z = (x + 1j * x[::-1]).astype(np.complex64)
    z[0, :3] = 0
    check(lambda z, x: lax.select(z == 0, x, -x), z, x, **EXACT)
    names = [op["op"] for fn in program(selects, x, -x, mask)["functions"] for op in ops(fn["body"])]
    assert "compare" not in names and "not" not in names, names


def _counted_loop(init: int, limit: int, step: int, direction: str, test: str, constant: int,
                  test_type: str = "SIGNED") -> str:
    """A while loop whose body selects on `i <test> constant` for its counter i (init, step, `i <direction> limit`)."""
    return f"""
module @m {{
  func.func public @main(%arg0: tensor<f32>) -> tensor<f32> {{
    %0 = stablehlo.constant dense<{init}> : tensor<i32>
    %1:2 = stablehlo.while(%i = %0, %x = %arg0) : tensor<i32>, tensor<f32>
     cond {{
      %2 = stablehlo.constant dense<{limit}> : tensor<i32>
      %3 = stablehlo.compare  {direction}, %i, %2,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %3 : tensor<i1>
    }} do {{
      %2 = stablehlo.constant dense<{constant}> : tensor<i32>
      %3 = stablehlo.compare  {test}, %i, %2,  {test_type} : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %4 = stablehlo.negate %x : tensor<f32>
      %5 = stablehlo.select %3, %4, %x : tensor<i1>, tensor<f32>
      %6 = stablehlo.constant dense<{step}> : tensor<i32>
      %7 = stablehlo.add %i, %6 : tensor<i32>
      stablehlo.return %7, %5 : tensor<i32>, tensor<f32>
    }}
    return %1#1 : tensor<f32>
  }}
}}"""


@pytest.mark.parametrize("init, limit, step, direction, test, constant, decided", [
    (0, 200, 1, "LT", "LT", 0, True),  # jax 0.4.13's scan: select(i < 0, i + n, i)
    (3, 200, 2, "LE", "GE", 3, True),
    (0, 200, 1, "LT", "EQ", 200, True),  # never equal: the last trip sees 199
    (0, 200, 1, "LT", "NE", -1, True),
    (0, 200, 1, "LT", "LT", 100, False),  # undecided: the first 100 trips differ from the rest
    (0, 200, 1, "LT", "EQ", 199, False),
    (200, 0, -1, "GT", "LT", 0, False),  # counts down: not an upper limit
    (0, 2147483647, 2, "LT", "LT", 0, False),  # the step after 2147483646 wraps around to a negative counter
    (0, 2147483647, 1, "LT", "LT", 0, True),  # 2147483646 + 1 does not wrap
    (0, 200, 1, "LT", "LT UNSIGNED", -1, False),  # unsigned, every counter is below -1: the signed range says no
])
def test_a_compare_of_a_loop_counter_its_range_decides_is_folded(init, limit, step, direction, test, constant,
                                                                 decided):
    """jax 0.4.13's scan fixes up a negative index on every trip (``select(i < 0, i + n, i)`` of its counter i);
    like XLA's while-loop analysis, the front end knows the range of a counter that counts up from a constant to
    an upper limit without wrapping around, so a compare the range decides selects the same operand on every trip
    and the select is that operand (the values are the same; the compare is dropped as dead code)."""
    test, _, test_type = test.partition(" ")
    names = [op["op"] for op in ops(function(from_text(_counted_loop(init, limit, step, direction, test, constant,
                                                                     test_type or "SIGNED")))["body"])]
    assert ("select" not in names) == decided, names
    assert names.count("compare") == (1 if decided else 2), names


def test_a_select_on_a_compare_of_complex_values_with_a_constant_compiles():
    """The loop-counter rule looks at every select's compare: a compare of complex values with a complex constant
    (``jax.jvp(jnp.abs)`` of a complex number: ``select(z == 0, ...)``) is none of its business. The bindings of the
    current series cannot read a complex constant's attribute, so the rule read it once and the compile failed
    (jax's api_test.py test_heterogeneous_grad)."""
    for z in (np.complex64(-2.5 + 0.5j), np.array([1 + 1j, 0, -2.5 + 0.5j, 3e-3j], np.complex64)):
        check(lambda z, t: jax.jvp(jnp.abs, (z,), (t,)), z, np.conj(z), rtol=1e-6)
        check(lambda z: jnp.where(z == 0, jnp.ones_like(z), z), z, **EXACT)


def test_a_scan_selects_no_index_on_its_trips():
    """End to end: a scan reading and writing row i of its inputs and outputs (jax 0.4.13 fixes each index up)
    runs no select of its counter and gives cpu's values."""
    xs = np.linspace(-1, 1, 40, dtype=np.float32).reshape(8, 5)

    def scan(xs):
        return lax.scan(lambda h, x: (jnp.tanh(h + x), h * x), jnp.zeros(5, jnp.float32), xs)

    check(scan, xs, **EXACT)
    names = [op["op"] for fn in program(scan, xs)["functions"] for op in ops(fn["body"])]
    assert "select" not in names, names
