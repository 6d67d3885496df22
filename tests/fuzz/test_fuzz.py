"""A fixed-seed slice of the differential fuzzer (fuzz.py) against the installed wheels, and checks of the fuzzer.

Each chunk of the slice runs its programs on cpu and on ipu in a worker process (fuzz.py's, so a crash or a hang
costs one program and is reported as a mismatch of it); it fails on any mismatch that fuzz_tolerances.py does not
explain, with the minimised reproducers in the message. Differences listed there as "open" pass here and are counted
in the summary: `nox -s fuzz -- --n 10000 --seed 1` prints them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import fuzz
import fuzz_compare as fc
import fuzz_programs as fp
import fuzz_tolerances as ft
import numpy as np
import pytest

SEED = 20_261
PROGRAMS = 400  # about 90 s per series on two cores
CHUNKS = 4


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_fixed_seed_slice(chunk: int, tmp_path) -> None:  # noqa: ANN001 - pytest's tmp_path
    size = PROGRAMS // CHUNKS
    code = fuzz.main(["--seed", str(SEED), "--start", str(chunk * size), "--n", str(size), "--out", str(tmp_path),
                      "--quiet"])
    with open(tmp_path / "summary.json") as f:
        summary = json.load(f)
    assert summary["programs"] == size
    if code:
        scripts = "".join(f"\n\n--- {m['reproducer']}\n" + open(m["reproducer"]).read()
                          for m in summary["mismatches"][:3] if m.get("reproducer"))
        pytest.fail(fuzz.report(summary) + scripts, pytrace=False)


def test_programs_come_from_their_index_alone() -> None:
    assert fp.render(fp.generate(SEED, 7)) == fp.render(fp.generate(SEED, 7))
    assert fp.render(fp.generate(SEED, 7)) != fp.render(fp.generate(SEED, 8))
    assert [i.seed for i in fp.generate(SEED, 7).inputs] == [i.seed for i in fp.generate(SEED, 7).inputs]


def test_every_op_has_one_tolerance_row() -> None:
    """The table covers every op the generator makes, and the accepted list names only ops of the table."""
    ops = {s.op for i in range(1500) for s in fp.generate(SEED, i).ops()}
    assert ops <= set(ft.TOLERANCES), sorted(ops - set(ft.TOLERANCES))
    for entry in ft.ACCEPTED:
        assert set(entry.ops) <= set(ft.TOLERANCES), entry.reason
        assert entry.open == entry.reason.startswith("open: "), entry.reason
        assert not entry.when or entry.when in ft.WHEN, entry.reason


def test_the_window_sum_entry_holds_only_where_cpus_own_sum_is_wrong() -> None:
    """jaxlib 0.12's XLA:CPU drops terms from some padded window sums (fuzz seed 20282601 #425): the accepted entry
    is judged by cpu's own sum of the step's operands against the exact one, so it never covers a sum cpu gets
    right, and 0.4.13 (whose sums are right) never needs it."""
    def holds(padding: str, x: np.ndarray) -> bool:
        step = fp.Step("window_sum", [], f"lax.reduce_window(a, 0, lax.add, (3, 1), (1, 1), {padding})", ["a"],
                       x.dtype.name)
        return ft.WHEN["cpu_window_sum_wrong"](step, None, lambda: [x])

    x = np.array([[1, 2, 3, 4], [10, 20, 30, 40], [100, 200, 300, 400]], np.int32)
    on_012 = fc.series().startswith("0.12")
    assert holds("((1, 1), (1, 0))", x) == on_012
    assert holds("((1, 1), (1, 0))", x.astype(np.float32)) == on_012
    assert not holds("((1, 1), (1, 1))", x)
    assert not holds("'SAME'", x.astype(np.float32))


def test_a_clamp_a_concatenation_reads_into_an_odd_minor_dimension_is_a_scalar_loop() -> None:
    """jaxlib 0.4.13's XLA:CPU fuses jnp.clip(x, 0, 1e-40) of f32[2, 1, 2, 4] into the loop of its concatenation
    with an f32[2, 1, 2, 3] (minor dimension 7, unvectorised) and keeps the denormal bound there (fuzz seed 20285310
    #561); concatenated into a minor dimension of 8 it is read as a zero, as the ipu does."""
    def holds(minor: int) -> bool:
        x, y = fp.Var("x", "float32", (2, 1, 2, 4)), fp.Var("y", "float32", (2, 1, 2, minor - 4))
        clip = fp.Step("clamp", [fp.Var("c", "float32", x.shape)], "jnp.clip(x, 0.0, 1e-40)", ["x"], "float32")
        cat = fp.Step("concatenate", [fp.Var("v", "float32", (2, 1, 2, minor))], "jnp.concatenate([c, y], axis=3)",
                      ["c", "y"], "float32")
        program = fp.Program(0, 0, [fp.Input(x, 1, "ints"), fp.Input(y, 2, "ints")], [clip, cat], ["v"])
        return ft.WHEN["scalar_loop"](clip, program, lambda: [])

    assert holds(7)
    assert not holds(8)


def test_complex_sqrt_is_accepted_only_near_the_negative_real_axis() -> None:
    """jaxlib 0.4.13's polar complex sqrt loses the real part where t / 2 rounds to pi / 2 (fuzz seed 20285421
    #1365): the entry holds for an operand within 2^-10 of the negative real axis, as one complex array or as the
    two parts lax.complex builds it of, and not elsewhere."""
    near = ft.WHEN["near_negative_real_axis"]
    z = np.array([1 + 1j, -4 + 1e-7j], np.complex64)
    assert near(None, None, lambda: [z])
    assert near(None, None, lambda: [z.real, z.imag])
    assert not near(None, None, lambda: [z[:1]])
    assert not near(None, None, lambda: [np.array([-4 + 0.01j, 4 + 1e-7j], np.complex64)])


def test_a_sum_is_accepted_only_where_cpus_own_sum_is_far_from_the_exact_one() -> None:
    """jaxlib 0.12's XLA:CPU adds some long f32 sums in one accumulator (fuzz seed 20285422 #1253): the entry is
    judged by cpu's own sum of the operand against the exact one, so a sum of values that no order of adding moves
    by 2 ulps of the scale is not covered, whatever cpu's order."""
    step = fp.Step("reduce_sum", [fp.Var("s", "float32", ())], "jnp.sum(v, axis=(0, 1))", ["v"], "float32")
    tiny = np.full((32, 15), 2.0 ** -24, np.float32)
    tiny[0, 0] = 1.0
    exact = np.ones((32, 15), np.float32)
    when = ft.WHEN["cpu_sum_inaccurate"]
    assert not when(step, None, lambda: [exact])
    if fc.series().startswith("0.12"):
        assert when(step, None, lambda: [tiny])


def test_a_tanh_is_accepted_in_a_loop_epilogue_of_2_or_4_only() -> None:
    """jaxlib 0.12's XLA:CPU rounds an f32 tanh an ulp otherwise in the last 2 or 4 elements of a loop over more than
    8 (fuzz seed 20285512 #379): f32[250] and [12] are covered, f32[8], [9] and [251] are not."""
    when = ft.WHEN["epilogue_of_2_or_4"]

    def step(n: int) -> fp.Step:
        return fp.Step("tanh", [fp.Var("t", "float32", (n,))], "jnp.tanh(x)", ["x"], "float32")

    assert when(step(250), None, lambda: []) and when(step(12), None, lambda: [])
    assert not any(when(step(n), None, lambda: []) for n in (4, 8, 9, 251))


def _exact_programs(count: int):  # noqa: ANN202
    """Programs with a float output and only bit-exact ops (under no accepted entry), with their inputs."""
    s = fc.series()
    found = 0
    for i in range(500):
        program = fp.generate(SEED + 1, i)
        if program.big or any(ft.tolerance(step, s) for step in program.ops()):
            continue
        if any(a.applies(program.ops(), s) for a in ft.ACCEPTED):
            continue
        float_out = [o for o in program.outputs if program.var(o).dtype in fp.FLOATS and program.var(o).size]
        if not float_out:
            continue
        program.outputs = float_out
        outcome = fc.judge(program)
        if outcome.status != "ok":
            continue
        yield program
        found += 1
        if found == count:
            return


def test_one_ulp_off_is_a_mismatch() -> None:
    """Where the table asks for cpu's bits, an ipu result one ulp away fails."""
    programs = list(_exact_programs(4))
    assert programs
    for program in programs:
        outcome = fc.judge(program, perturb_ipu=True)
        assert outcome.status == "mismatch", (outcome, fp.render(program))


def test_runs_that_differ_are_a_mismatch(monkeypatch) -> None:
    """The emulator's bits do not depend on how its host threads share a run: a second run that differs fails."""
    program = next(_exact_programs(1))
    real = fc.run
    calls = []

    def flipped(a: np.ndarray) -> np.ndarray:  # its last byte's lowest bit changed
        b = np.array(a, copy=True)
        if b.size:
            b.reshape(-1).view(np.uint8)[-1] ^= 1
        return b

    def flaky(f, backend, args):  # noqa: ANN001 - the second ipu run differs
        out = real(f, backend, args)
        if backend == "ipu":
            calls.append(1)
            if len(calls) == 2:
                out = [flipped(a) for a in out]
        return out

    monkeypatch.setattr(fc, "run", flaky)
    outcome = fc.judge(program)
    assert outcome.status == "mismatch" and "differ between two runs" in outcome.reason, outcome


def test_a_reproducer_runs_by_itself(tmp_path) -> None:  # noqa: ANN001
    import fuzz_minimise as fm

    program = fp.generate(SEED, 3)
    path = tmp_path / "reproducer.py"
    fm.write(str(path), fm.reproducer(program, fm.header(program, fc.series(), "a check", "")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    env["JAX_PLATFORMS"] = "cpu,ipu"
    proc = subprocess.run([sys.executable, str(path)], cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "output 0:" in proc.stdout
