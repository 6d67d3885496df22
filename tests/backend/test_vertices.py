"""Custom vertices from JAX (jax_ipu.tile.vertex): Poplar codelets in C++ compiled on first use with zig, cached, and
run per tile by the emulator. Values are compared with numpy on the same inputs; the cost with the codelet's own
estimate; errors name the codelet, the field and what to do."""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path

import jax
import numpy as np
import pytest

import jax_ipu
from jax_ipu import codelets, tile

TILES = (3, 700, 12, 1471)

SOURCE = """
#include <poplar/Vertex.hpp>
#include <cmath>

// y = a * x + y, and its cost: 20 cycles to start, 2 per element (one worker).
class Saxpy : public poplar::Vertex {
 public:
  poplar::Input<poplar::Vector<float>> x;
  poplar::Input<poplar::Vector<float, poplar::VectorLayout::SPAN, 8>> y;
  poplar::Output<poplar::Vector<float>> out;
  float a;

  bool compute() {
    for (unsigned i = 0; i < out.size(); ++i) out[i] = a * x[i] + y[i];
    return true;
  }
  std::uint64_t cycles() const { return 20 + 2 * out.size(); }
};

// The sum of a tile's ints (one element per tile), and a count kept in place.
struct RowSum : public poplar::Vertex {
  poplar::Input<poplar::Vector<int>> in;
  poplar::Output<int> total;
  poplar::InOut<poplar::Vector<unsigned>> seen;
  bool compute() {
    int s = 0;
    for (int v : in) s += v;
    total = s;
    for (auto& c : seen) c += 1;
    return true;
  }
};

// Fails on a tile whose first element is negative.
class Checked : public poplar::Vertex {
 public:
  poplar::InOut<poplar::Vector<float>> v;
  bool compute() { return v[0] >= 0; }
};
"""


@pytest.fixture(autouse=True)
def codelet_cache(tmp_path_factory, monkeypatch):
    """One fresh codelet cache for this module (compiled once here, then reused from it)."""
    monkeypatch.setenv("JAX_IPU_CODELET_CACHE", str(tmp_path_factory.getbasetemp() / "codelets"))


def rows(seed, shape, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def vertex_step():
    """The run's step of the (one) vertex: an Execute of the custom call."""
    (found,) = [s for s in jax_ipu.last_execution()["steps"] if s["name"] == "stablehlo.custom_call"]
    assert found["type"] == "Execute"
    return found


def test_a_custom_vertex_computes_on_each_tile_as_numpy():
    saxpy = tile.vertex(SOURCE, "Saxpy")
    x, y = rows(1, (len(TILES), 100)), rows(2, (len(TILES), 100))

    @partial(jax.jit, backend="ipu")
    def f(x, y):
        out = tile.tile_map(saxpy, tile.tile_put_sharded(x, TILES), tile.tile_put_sharded(y, TILES), a=2.5)
        return out.array

    np.testing.assert_array_equal(np.asarray(f(x, y)), np.float32(2.5) * x + y)
    # Its superstep costs what the codelet estimates, on one of the tile's six workers, plus the supervisor's share
    assert vertex_step()["compute_cycles"] == (20 + 2 * 100) * 6 + 50


def test_scalar_outputs_inout_fields_and_a_given_estimate():
    rowsum = tile.vertex(SOURCE, "RowSum", perf_estimate=77)
    ints = np.arange(len(TILES) * 9, dtype=np.int32).reshape(len(TILES), 9) - 11
    seen = np.array([[0, 5], [1, 1], [7, 2], [9, 9]], np.uint32)

    @partial(jax.jit, backend="ipu")
    def f(ints, seen):
        total, seen = tile.tile_map(rowsum, tile.tile_put_sharded(ints, TILES), tile.tile_put_sharded(seen, TILES))
        return total.array, seen.array

    total, new_seen = (np.asarray(v) for v in f(ints, seen))
    assert total.dtype == np.int32 and total.shape == (len(TILES),)
    np.testing.assert_array_equal(total, ints.sum(1))
    np.testing.assert_array_equal(new_seen, seen + 1)
    assert vertex_step()["compute_cycles"] == 77 * 6 + 50


def test_operands_on_other_tiles_are_moved_to_the_vertex_first():
    saxpy = tile.vertex(SOURCE, "Saxpy")
    x = rows(3, (len(TILES), 64))

    @partial(jax.jit, backend="ipu")
    def f(x):
        placed = tile.tile_put_sharded(x, TILES)
        elsewhere = tile.tile_put_sharded(x * 3, (0, 1, 2, 4))
        return tile.tile_map(saxpy, placed, tile.TileShardedArray(elsewhere.array, TILES), a=-1.0).array

    np.testing.assert_allclose(np.asarray(f(x)), 2 * x, rtol=1e-6)
    moves = [s for s in jax_ipu.last_execution()["steps"] if s["name"] == "tile_vertex"]
    assert moves and all(s["exchange_cycles"] > 0 for s in moves)


def test_a_compiled_codelet_is_cached_and_a_changed_library_is_compiled_again():
    first = tile.vertex(SOURCE, "Saxpy")
    again = tile.vertex(SOURCE, "Saxpy")
    assert again.library == first.library
    stamp = first.library.stat().st_mtime_ns
    assert tile.vertex(SOURCE, "Saxpy").library.stat().st_mtime_ns == stamp  # not compiled again
    data = bytearray(first.library.read_bytes())
    data[-1] ^= 0xFF
    changed = first.library.with_name("changed")
    changed.write_bytes(bytes(data))
    os.replace(changed, first.library)  # a new file: the loaded library's pages stay as they were
    assert tile.vertex(SOURCE, "Saxpy").library.read_bytes() != bytes(data)  # its sum no longer matched


def test_a_vertex_that_returns_false_fails_the_run_by_name():
    checked = tile.vertex(SOURCE, "Checked", perf_estimate=10)
    f = jax.jit(lambda v: tile.tile_map(checked, tile.tile_put_sharded(v, TILES)).array, backend="ipu")
    ok = np.ones((len(TILES), 3), np.float32)
    np.testing.assert_array_equal(np.asarray(f(ok)), ok)
    with pytest.raises(Exception, match="vertex 'Checked': compute\\(\\) returned false"):
        np.asarray(f(-ok))


@pytest.mark.parametrize("source, name, message", [
    (SOURCE.replace("out[i] = a * x[i] + y[i];", "out[i] = a * x[i] + undefined_name;"), "Saxpy",
     r"codelets Saxpy, RowSum, Checked did not compile \(zig c\+\+ exited 1[\s\S]*undefined_name"),
    ("#include <poplar/Vertex.hpp>\nstruct H : poplar::Vertex { poplar::Output<poplar::Vector<half>> out; "
     "bool compute() { return true; } };", "H", "codelet 'H': field 'out' has element type 'half'"),
    ("#include <poplar/Vertex.hpp>\nstruct M : poplar::MultiVertex { poplar::Output<float> o; };", "M",
     "codelet 'M' derives from poplar::MultiVertex"),
    ("#include <poplar/Vertex.hpp>\nstruct N : poplar::Vertex { poplar::Input<float> i; bool compute(); };", "N",
     "codelet 'N' has no Output or InOut field"),
    ("int main() { return 0; }", "X", "the source defines no codelet"),
    (SOURCE, "Missing", "the source defines no codelet 'Missing' \\(it defines Saxpy, RowSum, Checked\\)"),
    (SOURCE, "RowSum", "codelet 'RowSum' has no cycle estimate: give the class a cycles\\(\\) member"),
])
def test_bad_codelets_are_refused_naming_what_is_wrong(source, name, message):
    with pytest.raises(codelets.CodeletError, match=message):
        tile.vertex(source, name)


def test_bad_mappings_are_refused_naming_the_field():
    saxpy = tile.vertex(SOURCE, "Saxpy")
    x = tile.tile_put_sharded(np.ones((len(TILES), 4), np.float32), TILES)
    i = tile.tile_put_sharded(np.ones((len(TILES), 4), np.int32), TILES)
    with pytest.raises(TypeError, match="field 'y' is f32 in the codelet, but operand 1 is int32"):
        tile.tile_map(saxpy, x, i, a=1.0)
    with pytest.raises(TypeError, match="value field 'a' \\(f32\\) is not given"):
        tile.tile_map(saxpy, x, x)
    with pytest.raises(TypeError, match="has no value or Output field 'b'"):
        tile.tile_map(saxpy, x, x, a=1.0, b=2.0)
    with pytest.raises(TypeError, match="takes 2 operands \\(fields x, y\\), not 1"):
        tile.tile_map(saxpy, x, a=1.0)


def test_vertices_run_only_on_the_ipu():
    saxpy = tile.vertex(SOURCE, "Saxpy")
    x = np.ones((len(TILES), 4), np.float32)
    f = lambda x: tile.tile_map(saxpy, *(tile.tile_put_sharded(x, TILES),) * 2, a=1.0).array  # noqa: E731
    with pytest.raises(NotImplementedError, match="runs only on the ipu backend, not on cpu"):
        jax.jit(f, backend="cpu")(x)


def test_without_the_compiler_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ziglang", None)  # import ziglang raises ImportError
    with pytest.raises(codelets.CodeletError, match=r"needs the zig C\+\+ compiler .*pip install ziglang"):
        tile.vertex(SOURCE.replace("20 + 2", "21 + 2"), "Saxpy")


def test_the_vertex_header_ships_with_the_package():
    assert (Path(codelets.__file__).parent / "include" / "poplar" / "Vertex.hpp").is_file()
