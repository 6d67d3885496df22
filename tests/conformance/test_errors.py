"""What users see for things the ipu backend does not run: a clean compile-time error naming the op or dtype."""

from __future__ import annotations

import functools
import logging
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import BACKEND, check
from jax._src.interpreters import mlir
from jax._src.lax import linalg as lax_linalg

pytestmark = pytest.mark.skipif(BACKEND != "ipu", reason="error tests need the ipu backend (harness debug mode)")


def compile_on_ipu(f, *args):
    """Lowers and compiles only: the errors below must come at compile time, before anything runs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return jax.jit(f, backend="ipu").lower(*args).compile()


# stablehlo.triangular_solve itself is an op the emulator does not implement (jax_ipu.backend.linalg lowers
# lax.linalg.triangular_solve to loops of ops it does): a primitive lowered with jax's own generic rule emits it.
try:  # the current series: Primitive lives in jax.extend.core
    from jax.extend.core import Primitive
except ImportError:  # jax 0.4.13
    from jax.core import Primitive
_raw_triangular_solve_p = Primitive("raw_triangular_solve")
_raw_triangular_solve_p.def_abstract_eval(lambda a, b: b)
_raw_triangular_solve_p.def_impl(lambda a, b: jax.lax.linalg.triangular_solve(a, b, left_side=True, lower=True))


def triangular_solve(a, b):
    # Registered on first use: the current series knows the "ipu" platform only once its backends are set up.
    jax.devices("ipu")
    mlir.register_lowering(_raw_triangular_solve_p, functools.partial(
        lax_linalg._triangular_solve_lowering, left_side=True, lower=True, transpose_a=False, conjugate_a=False,
        unit_diagonal=False), platform="ipu")
    return _raw_triangular_solve_p.bind(a, b)


def test_unsupported_op_names_the_op_and_its_types():
    # An op the emulator does not implement is refused by name and types (XlaRuntimeError is a RuntimeError).
    with pytest.raises(RuntimeError, match=r"stablehlo\.triangular_solve") as error:
        compile_on_ipu(triangular_solve, np.eye(3, dtype=np.float32), np.ones((3, 2), np.float32))
    assert "tensor<3x3xf32>" in str(error.value) and "tensor<3x2xf32>" in str(error.value)


# 8/16-bit integers and bf16 are first-class (test_dtypes.py), c64 is emulated as pairs of f32 (test_complex.py),
# the 64-bit types and c128 as software (test_x64.py); fp8 on a chip without it is refused: its message names the
# type and what to use instead.
def test_unsupported_dtype_names_the_dtype(monkeypatch):
    from _conformance import enable_x64

    monkeypatch.setenv("JAX_IPU_EMULATE_64BIT", "0")
    with enable_x64():
        with pytest.raises(RuntimeError, match=r"c128.*emulation is off.*complex64"):
            compile_on_ipu(lambda x, y: x + y, jnp.ones(3, jnp.complex128), jnp.ones(3, jnp.complex128))


def test_complex64_is_emulated():
    x, y = np.array([1 + 2j, -3j, 4], np.complex64), np.full(3, 2 - 1j, np.complex64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        got = jax.jit(lambda a, b: a * b, backend=BACKEND)(x, y)
    assert got.dtype == np.complex64
    np.testing.assert_array_equal(np.asarray(got), x * y)


def test_custom_calls_other_than_host_callbacks_are_refused():
    # jax's cpu callback custom call (0.4.13: a tuple result and an XLA descriptor; since: an FFI target) means
    # nothing to the ipu: the front end refuses the first, the emulator the target it does not implement.
    from jax_ipu import emulator
    from jax_ipu.compiler import CompileError, compile_to_program

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = jax.jit(lambda x: jax.pure_callback(np.sin, jax.ShapeDtypeStruct((3,), np.float32), x),
                         backend="cpu").lower(np.ones(3, np.float32)).compiler_ir("stablehlo")

    unknown = r"stablehlo\.custom_call.*(tuple<tensor<3xf32>>|the custom call target 'xla_ffi_python_cpu_callback')"
    with pytest.raises((CompileError, emulator.EmulatorError), match=unknown):
        emulator.compile(compile_to_program(str(module).encode()))


def test_the_process_survives_errors():
    with pytest.raises(RuntimeError):
        compile_on_ipu(triangular_solve, np.eye(4, dtype=np.float32), np.ones((4, 1), np.float32))
    check(lambda x: x + 1, np.arange(4, dtype=np.float32))


def test_compile_options_are_checked():
    """compiler_options reach the ipu compiler: an unknown key or a bad bool is refused with XLA's words, a known one
    compiles (each its own executable)."""
    lowered = jax.jit(lambda x: jnp.sqrt(x ** 2) + 1.0, backend=BACKEND).lower(np.float32(2))
    with pytest.raises(RuntimeError, match="No such compile option: 'invalid_key'"):
        lowered.compile(compiler_options={"invalid_key": "invalid_value"})
    with pytest.raises(RuntimeError, match="is not a valid bool value."):
        lowered.compile(compiler_options={"xla_embed_ir_in_executable": "invalid_value"})
    on, off = (lowered.compile(compiler_options={"xla_embed_ir_in_executable": v}) for v in (True, False))
    assert on is not off and float(on(np.float32(-2))) == float(off(np.float32(2))) == 3.0


def test_xla_options_for_other_compilers_are_checked_then_ignored(caplog):
    """An option XLA knows that acts on its own passes (another backend's, XLA:CPU's) is checked as cpu checks it
    (a bad value refused with XLA's words) and then ignored with a warning, not refused: equinox and others pass
    ``xla_gpu_*`` options to every backend."""
    lowered = jax.jit(lambda x: x * 2.0 + 1.0, backend=BACKEND).lower(np.float32(2))
    with pytest.raises(RuntimeError, match="While setting option xla_gpu_autotune_level, 'abc' is not a valid int32"):
        lowered.compile(compiler_options={"xla_gpu_autotune_level": "abc"})
    with pytest.raises(RuntimeError, match="No such compile option: 'xla_gpu_no_such_thing'"):
        lowered.compile(compiler_options={"xla_gpu_no_such_thing": True})
    with caplog.at_level(logging.WARNING):
        compiled = lowered.compile(compiler_options={"xla_cpu_enable_fast_math": True})
    assert float(compiled(np.float32(2))) == 5.0
    if BACKEND == "ipu":
        assert "xla_cpu_enable_fast_math=True is XLA's and means nothing to the ipu compiler" in caplog.text


def test_xla_dump_to_is_ignored_on_the_ipu_and_writes_nothing(tmp_path, caplog):
    """The ipu's compiler is not XLA's: ``xla_dump_to`` is accepted and ignored with a warning, and checking it does
    not leave XLA's dump of some other module in the user's directory."""
    lowered = jax.jit(lambda x: x * 3.0, backend=BACKEND).lower(np.float32(2))
    with caplog.at_level(logging.WARNING):
        compiled = lowered.compile(compiler_options={"xla_dump_to": str(tmp_path)})
    assert float(compiled(np.float32(2))) == 6.0
    if BACKEND == "ipu":
        assert "xla_dump_to" in caplog.text and "means nothing to the ipu compiler" in caplog.text
        assert sorted(os.listdir(str(tmp_path))) == []
