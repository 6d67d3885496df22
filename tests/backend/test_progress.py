"""The compile progress bar (TF_POPLAR_FLAGS=--show_progress_bar=...): on stderr for compiles that take more than
a moment when asked for, silent for fast compiles and when off."""

from __future__ import annotations

import io
import re
import time

import pytest

# A compile slow enough for the bar: a scan unrolled 1000 times (a large module), with the front end held for a
# second more so that the compile takes longer than the bar's delay however fast the machine is.
HOLD = """
import time
from jax_ipu.backend import plugin
front_end = plugin._compile
def held(module, options):
    time.sleep(1.2)
    return front_end(module, options)
plugin._compile = held
"""
SLOW = """
import jax, jax.numpy as jnp, numpy as np
{setup}
def f(x):
    return jax.lax.scan(lambda c, _: (jnp.tanh(c * 1.01 + 0.5), None), x, None, length=1000, unroll=1000)[0]
print(np.asarray(jax.jit(f, backend="ipu")(np.ones(8, np.float32))))
"""

FAST = """
import jax, jax.numpy as jnp, numpy as np
{setup}
print(np.asarray(jax.jit(lambda x: x + 1, backend="ipu")(np.arange(4.0))))
"""

BAR = re.compile(r"Compiling (\S+) \[([# ]+)\] +(\d+)% ([a-z ]+) \((\d+\.\d) s\)")


def run(python, script, flags, setup=""):
    env = {"TF_POPLAR_FLAGS": flags} if flags else {}
    proc = python(script.format(setup=setup), env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def bars(stderr):
    """Every drawing of the bar, in order: (program, percent, stage)."""
    return [(m.group(1), int(m.group(3)), m.group(4)) for m in BAR.finditer(stderr)]


def test_a_slow_compile_shows_a_bar_that_ends_at_100_percent(python):
    drawn = bars(run(python, SLOW, "--show_progress_bar=true", setup=HOLD))
    assert drawn, "no progress bar"
    assert all(name.startswith("jit_") for name, _, _ in drawn)
    percents = [p for _, p, _ in drawn]
    assert percents == sorted(percents) and percents[-1] == 100
    assert drawn[-1][2] == "done"
    assert "front end" in {stage for _, _, stage in drawn}


def test_off_or_not_a_terminal_shows_nothing(python):
    assert "Compiling" not in run(python, SLOW, "--show_progress_bar=false")
    assert "Compiling" not in run(python, SLOW, "")  # the flag unset and stderr a pipe: silent


def test_a_fast_compile_shows_nothing(python):
    assert "Compiling" not in run(python, FAST, "--show_progress_bar=true")


def test_stages_in_order_with_the_delay_lowered(python, tmp_path):
    # The test hook: a bar from the first moment, so that every stage of a small compile is drawn. The front end
    # is slowed down so that the bar is drawn during it.
    setup = """
import time
from jax_ipu.backend import plugin, progress
progress.DELAY_SECONDS = 0.0
front_end = plugin._compile
def slow(module, options):
    time.sleep(0.5)
    return front_end(module, options)
plugin._compile = slow
"""
    stderr = run(python, FAST, "--show_progress_bar", setup=setup)
    stages = [stage for _, _, stage in bars(stderr)]
    assert stages[0] in ("starting", "front end") and stages[-1] == "done"
    assert stages.index("front end") < len(stages) - 1
    # With the executable cache, a second process's bar says where the program came from.
    flags = f"--show_progress_bar=true --executable_cache_path={tmp_path}"
    slow_load = setup + """
from jax_ipu import executable_cache
load = executable_cache.ExecutableCache.load
def slow_load(self, key):
    time.sleep(0.5)
    return load(self, key)
executable_cache.ExecutableCache.load = slow_load
"""
    run(python, FAST, flags, setup=slow_load)  # the same script (source lines are part of the key) fills the cache
    stages = [stage for _, _, stage in bars(run(python, FAST, flags, setup=slow_load))]
    assert "loading from the executable cache" in stages and "front end" not in stages


def test_the_bar_moves_within_a_stage_and_jumps_at_the_next(monkeypatch):
    from jax_ipu.backend import progress

    monkeypatch.setattr(progress, "DELAY_SECONDS", 0.0)
    monkeypatch.setattr(progress, "REFRESH_SECONDS", 0.02)
    out = io.StringIO()
    with progress.compiling("jit_f", True, stream=out):
        progress.stage("front end")
        time.sleep(0.3)
        progress.stage("lowering onto tiles")
        time.sleep(0.2)
    drawn = bars(out.getvalue())
    front = [p for _, p, s in drawn if s == "front end"]
    lowering = [p for _, p, s in drawn if s == "lowering onto tiles"]
    assert len(set(front)) > 1 and max(front) < 75  # creeping, but not past the stage's end
    assert min(lowering) >= 75 and max(lowering) < 100
    assert drawn[-1][1:] == (100, "done") and out.getvalue().endswith("\n")


def test_a_failed_compile_ends_its_bar_and_raises(monkeypatch):
    from jax_ipu.backend import progress

    monkeypatch.setattr(progress, "DELAY_SECONDS", 0.0)
    out = io.StringIO()
    with pytest.raises(RuntimeError, match="boom"):
        with progress.compiling("jit_f", True, stream=out):
            progress.stage("front end")
            raise RuntimeError("boom")
    assert bars(out.getvalue())[-1][2] == "failed"
    # The next compile gets a bar again: nothing stayed locked.
    with progress.compiling("jit_g", True, stream=out):
        pass
    assert bars(out.getvalue())[-1][:1] == ("jit_g",)


def test_flag_parsing():
    from jax_ipu import config

    assert config.read(environ={"TF_POPLAR_FLAGS": "--show_progress_bar=true"}).show_progress_bar is True
    assert config.read(environ={"TF_POPLAR_FLAGS": "--show_progress_bar"}).show_progress_bar is True
    assert config.read(environ={"TF_POPLAR_FLAGS": "--show_progress_bar=false"}).show_progress_bar is False
    assert config.read(environ={}).show_progress_bar is None
    with pytest.raises(ValueError, match="show_progress_bar=maybe"):
        config.read(environ={"TF_POPLAR_FLAGS": "--show_progress_bar=maybe"})
