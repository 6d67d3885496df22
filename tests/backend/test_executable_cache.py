"""The executable cache (TF_POPLAR_FLAGS=--executable_cache_path=DIR) and jax's persistent compilation cache on
the ipu: a second process reusing the directory compiles nothing and computes the same; keys change with what
changes the program; damaged or foreign entries are warned about and recompiled.

Compiles are counted (calls of the front end, jax_ipu.backend.plugin._compile), never timed."""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import pytest

# Runs two jitted programs on the ipu and prints what the front end compiled, the cache's statistics and the
# results. Extra code (`setup`) runs after jax is imported and before the first compile.
SCRIPT = """
import json, sys, warnings
import numpy as np
import jax, jax.numpy as jnp
from jax_ipu import executable_cache
from jax_ipu.backend import plugin
compiled = []
front_end = plugin._compile
def counting(module, options):
    compiled.append(len(module))
    return front_end(module, options)
plugin._compile = counting
{setup}
rng = np.random.RandomState(0)
w, x = rng.randn(16, 8).astype(np.float32), rng.randn(4, 16).astype(np.float32)
layer = jax.jit(lambda w, x: jnp.tanh(x @ w).sum(axis=0), backend="ipu")
scan = jax.jit(lambda x: jax.lax.cumsum(x * 2.0 + 1.0, axis=1), backend="ipu")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = [np.asarray(layer(w, x)), np.asarray(scan(x))]
print(json.dumps({{
    "compiled": len(compiled),
    "stats": executable_cache.stats(),
    "warnings": [str(w.message) for w in caught if issubclass(w.category, executable_cache.CacheWarning)],
    "all_warnings": [str(w.message) for w in caught],
    "out": [o.tolist() for o in out],
    "want": [np.tanh(x @ w).sum(axis=0).tolist(), np.cumsum(x * 2.0 + 1.0, axis=1).tolist()],
}}))
"""


def run(python, directory, extra_flags="", setup="", env=None):
    environ = {"TF_POPLAR_FLAGS": f"--executable_cache_path={directory} {extra_flags}".strip()}
    environ.update(env or {})
    proc = python(SCRIPT.format(setup=setup), env=environ)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for got, want in zip(result["out"], result["want"]):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    result["stderr"] = proc.stderr
    return result


def entries(directory):
    return sorted(glob.glob(os.path.join(str(directory), "*.poplar_exec")))


def test_second_process_compiles_nothing_and_computes_the_same(python, tmp_path):
    first = run(python, tmp_path)
    assert first["compiled"] == 2
    assert first["stats"] == {"hits": 0, "misses": 2, "writes": 2, "rejected": 0}
    assert len(entries(tmp_path)) == 2
    assert not glob.glob(os.path.join(str(tmp_path), ".tmp-*"))  # temporary files were renamed into place

    second = run(python, tmp_path)
    assert second["compiled"] == 0
    assert second["stats"] == {"hits": 2, "misses": 0, "writes": 0, "rejected": 0}
    assert second["out"] == first["out"]  # bit for bit
    assert second["warnings"] == []


def test_processes_sharing_the_directory_at_once(python, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: run(python, tmp_path), range(3)))
    assert all(r["warnings"] == [] for r in results)
    assert all(r["out"] == results[0]["out"] for r in results)
    assert len(entries(tmp_path)) == 2
    assert not glob.glob(os.path.join(str(tmp_path), ".tmp-*"))
    assert run(python, tmp_path)["compiled"] == 0


@pytest.mark.parametrize(
    "flags, env",
    [("--ipu_model_tiles=16", {}), ("--ipu_model_version=ipu21", {}), ("", {"JAX_IPU_FUSION": "0"}),
     ("", {"JAX_IPU_DEVICE_COUNT": "2"}), ("", {"JAX_IPU_AVAILABLE_MEMORY_PROPORTION": "0.3"}),
     ("", {"JAX_IPU_PARTIALS_TYPE": "half"})],
    ids=["tiles", "chip", "fusion", "devices", "memory_proportion", "partials_type"],
)
def test_a_different_device_or_lowering_flag_compiles_again(python, tmp_path, flags, env):
    run(python, tmp_path)
    other = run(python, tmp_path, extra_flags=flags, env=env)
    assert other["compiled"] == 2
    assert len(entries(tmp_path)) == 4
    assert run(python, tmp_path, extra_flags=flags, env=env)["compiled"] == 0


def test_keys_cover_module_options_compiler_and_device(monkeypatch):
    from jax._src.lib import xla_client

    from jax_ipu import executable_cache as cache

    def options(replicas: int) -> bytes:
        o = xla_client.CompileOptions()
        o.num_replicas = replicas
        return o.SerializeAsString()

    one, two = options(1), options(2)
    device = {"version": "ipu2", "num_tiles": 1472, "num_devices": 1}
    base = cache.cache_key(b"module", one, device, environ={})
    assert base == cache.cache_key(b"module", options(1), dict(device), environ={})
    variants = [
        cache.cache_key(b"module2", one, device, environ={}),
        cache.cache_key(b"module", two, device, environ={}),
        cache.cache_key(b"modul", one, device, environ={}),
        cache.cache_key(b"module", one, dict(device, num_tiles=16), environ={}),
        cache.cache_key(b"module", one, dict(device, version="ipu21"), environ={}),
        cache.cache_key(b"module", one, dict(device, num_devices=2), environ={}),
        cache.cache_key(b"module", one, device, environ={"JAX_IPU_FUSION": "0"}),
        cache.cache_key(b"module", one, device, environ={"JAX_IPU_EXCHANGE_PER_ELEMENT": "1"}),
    ]
    monkeypatch.setattr(cache, "compiler_fingerprint", lambda: "another jax-ipu build")
    variants.append(cache.cache_key(b"module", one, device, environ={}))
    assert len(set(variants + [base])) == len(variants) + 1


def test_the_compiler_fingerprint_covers_the_native_library(monkeypatch, tmp_path):
    from jax_ipu import _native
    from jax_ipu import executable_cache as cache

    lib = tmp_path / "libjax_ipu.so"
    lib.write_bytes(b"one build")
    monkeypatch.setenv("JAX_IPU_LIBRARY", str(lib))
    cache.compiler_fingerprint.cache_clear()
    try:
        assert _native.library_path() == str(lib)
        one = cache.compiler_fingerprint()
        lib.write_bytes(b"another build")
        cache.compiler_fingerprint.cache_clear()
        assert cache.compiler_fingerprint() != one
        # A library with a GNU build id is known by it (the linker's hash of what it linked), not by its bytes.
        note = b"\x04\x00\x00\x00\x14\x00\x00\x00\x03\x00\x00\x00GNU\x00"
        fingerprints = []
        for build_id, padding in ((b"\x01" * 20, b"a"), (b"\x01" * 20, b"b"), (b"\x02" * 20, b"a")):
            lib.write_bytes(b"\x7fELF" + b"\0" * 60 + note + build_id + padding)
            cache.compiler_fingerprint.cache_clear()
            fingerprints.append(cache.compiler_fingerprint())
        assert fingerprints[0] == fingerprints[1] != fingerprints[2]
    finally:
        cache.compiler_fingerprint.cache_clear()


def test_the_loaded_library_is_known_by_its_build_id(tmp_path):
    """The library this process loaded names itself (JaxIpu_BuildId: a hash of what the build linked it from), so a
    process's first cached compile does not hash the whole library; a copy elsewhere is known by its bytes."""
    import re
    import shutil

    from jax_ipu import _native
    from jax_ipu import executable_cache as cache

    path = _native.library_path()
    _native.load()  # as the ipu backend has before any compile
    own = _native.build_id(path)
    assert own is not None and re.fullmatch(r"[0-9a-f]{64}", own)
    assert cache._library_identity(path) == b"jax-ipu build " + own.encode()
    copy = tmp_path / "libjax_ipu.so"
    shutil.copyfile(path, str(copy))
    assert _native.build_id(str(copy)) is None
    assert cache._library_identity(str(copy)).startswith(b"sha256 ")


def damage_truncate(path, data):
    return data[: len(data) // 2]


def damage_flip(path, data):
    middle = len(data) - 10
    return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:]


def damage_foreign(path, data):
    return b"\x7fELF not a cache entry at all"


def damage_future_format(path, data):
    return data.replace(b"jax-ipu-executable-cache 1", b"jax-ipu-executable-cache 9", 1)


@pytest.mark.parametrize(
    "damage, reason",
    [(damage_truncate, "truncated"), (damage_flip, "corrupt"), (damage_foreign, "not a jax-ipu executable cache"),
     (damage_future_format, "reads version 1")],
    ids=["truncated", "corrupt", "foreign", "future-format"],
)
def test_a_damaged_entry_is_warned_about_recompiled_and_replaced(python, tmp_path, damage, reason):
    run(python, tmp_path)
    paths = entries(tmp_path)
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(damage(path, data))

    again = run(python, tmp_path)
    assert again["compiled"] == 2
    assert again["stats"]["rejected"] == 2
    assert len(again["warnings"]) == 2
    for path in paths:
        assert any(path in w and reason in w for w in again["warnings"]), again["warnings"]
    assert run(python, tmp_path)["compiled"] == 0  # the entries were rewritten


def test_an_entry_of_another_program_under_this_name_is_not_used(python, tmp_path):
    run(python, tmp_path)
    a, b = entries(tmp_path)
    with open(a, "rb") as f:
        data = f.read()
    with open(b, "wb") as f:
        f.write(data)  # b's file now holds a's program: running it would compute the wrong function
    again = run(python, tmp_path)
    assert again["compiled"] == 1
    assert [w for w in again["warnings"] if b in w and "not of its file name" in w]


def test_an_unwritable_cache_directory_warns_and_still_compiles(python, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = run(python, blocker / "cache")
    assert result["compiled"] == 2
    assert len(result["warnings"]) == 1 and "cannot write" in result["warnings"][0]


# ------------------------------------------------------------------------------------------- jax's own cache

JAX_CACHE_SETUP = """
import logging
logging.basicConfig(level=logging.WARNING)
logging.getLogger("jax._src.dispatch").setLevel(logging.INFO)  # jax 0.4.13 logs cache hits here
logging.getLogger("jax._src.compiler").setLevel(logging.DEBUG)  # the current series here, at debug level
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
{how}
"""


def run_jax_cache(python, directory, how="jax.config.update('jax_compilation_cache_dir', {directory!r})", env=None):
    setup = JAX_CACHE_SETUP.format(how=how.format(directory=str(directory)))
    proc = python(SCRIPT.format(setup=setup), env=env or {})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for got, want in zip(result["out"], result["want"]):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    result["hits"] = proc.stderr.count("Persistent compilation cache hit")
    return result


def test_jax_persistent_cache_hits_on_ipu(python, tmp_path):
    first = run_jax_cache(python, tmp_path)
    assert first["compiled"] == 2 and first["hits"] == 0
    assert len([p for p in os.listdir(str(tmp_path)) if not p.startswith("_temp")]) == 2
    second = run_jax_cache(python, tmp_path)
    assert second["compiled"] == 0 and second["hits"] == 2
    assert second["out"] == first["out"]


def test_jax_persistent_cache_from_the_environment_and_the_experimental_api(python, tmp_path):
    env = {"JAX_COMPILATION_CACHE_DIR": str(tmp_path)}
    assert run_jax_cache(python, tmp_path, how="", env=env)["compiled"] == 2
    # jax 0.4.13's initialize_cache, the current series' set_cache_dir
    api = ("from jax.experimental.compilation_cache import compilation_cache as cc; "
           "getattr(cc, 'initialize_cache', None) or cc.set_cache_dir; "
           "(getattr(cc, 'initialize_cache', None) or cc.set_cache_dir)({directory!r})")
    again = run_jax_cache(python, tmp_path, how=api)
    assert again["compiled"] == 0 and again["hits"] == 2


def test_jax_persistent_cache_keys_change_with_the_tile_count(python, tmp_path):
    run_jax_cache(python, tmp_path)
    other = run_jax_cache(python, tmp_path, env={"JAX_IPU_MODEL_NUM_TILES": "16"})
    assert other["compiled"] == 2 and other["hits"] == 0


def test_jax_persistent_cache_entry_that_is_not_an_ipu_executable_is_recompiled(python, tmp_path):
    from jax._src import compilation_cache

    run_jax_cache(python, tmp_path)
    foreign = b"jax-ipu-executable 7\nsomething else entirely"
    if compilation_cache.zstandard:
        foreign = compilation_cache.zstandard.ZstdCompressor().compress(foreign)
    else:
        foreign = __import__("zlib").compress(foreign)
    for name in os.listdir(str(tmp_path)):
        (tmp_path / name).write_bytes(foreign)
    proc = python(SCRIPT.format(setup=JAX_CACHE_SETUP.format(
        how=f"jax.config.update('jax_compilation_cache_dir', {str(tmp_path)!r})")))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["compiled"] == 2
    errors = [w for w in result["all_warnings"] if w.startswith("Error reading persistent compilation cache entry")]
    # jax 0.4.13 hands the bytes to us; the current series' jaxlib wraps executables in metadata of its own and
    # refuses the entry before we see it. Either way the entry is named and the program compiled again.
    assert len(errors) == 2 and all("not a loadable serialised ipu executable" in w or
                                    "Failed to parse SerializedXlaExecutableMetadata" in w for w in errors), errors
    for got, want in zip(result["out"], result["want"]):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


# Two functions with host callbacks (the same module, different Python callbacks), compiled again after
# jax.clear_caches() (their callbacks get new ids each time), then in the order swapped: each call must reach its own
# callbacks.
CALLBACKS_SCRIPT = """
import json
import numpy as np
import jax, jax.numpy as jnp
from jax_ipu import executable_cache
from jax_ipu.backend import plugin
compiled, seen = [], []
front_end = plugin._compile
def counting(module, options):
    compiled.append(len(module))
    return front_end(module, options)
plugin._compile = counting

def make(tag):
    def f(x):
        y = jax.pure_callback(lambda v: (v * {{"a": 2, "b": 3}}[tag]).astype(v.dtype), x, x)
        jax.debug.callback(lambda v: seen.append((tag, float(v[0]))), y)
        return y + 1
    return f

x = np.arange(4, dtype=np.float32)
out = []
for order in {orders}:
    for tag in order:
        out.append([tag, np.asarray(jax.jit(make(tag), backend="ipu")(x)).tolist()])
    jax.effects_barrier()
    jax.clear_caches()
print(json.dumps({{"compiled": len(compiled), "stats": executable_cache.stats(), "out": out, "seen": seen}}))
"""


def test_host_callbacks_hit_the_cache_after_clear_caches_and_call_their_own(python, tmp_path):
    # Before, a callback's id (a counter) was part of the key: every compile after clear_caches missed and the
    # directory grew by one entry per compile; a hit must still call this lowering's callbacks, not the ids it was
    # compiled with.
    def run_callbacks(orders):
        proc = python(CALLBACKS_SCRIPT.format(orders=orders),
                      env={"TF_POPLAR_FLAGS": f"--executable_cache_path={tmp_path}"})
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])

    # "a" and "b" lower to the same module (only their Python callbacks differ): one program, each call binding
    # its own callbacks
    first = run_callbacks([("a", "b"), ("a", "b"), ("b", "a")])
    assert first["compiled"] == 1
    assert first["stats"] == {"hits": 5, "misses": 1, "writes": 1, "rejected": 0}
    assert len(entries(tmp_path)) == 1
    want = {"a": [1.0, 3.0, 5.0, 7.0], "b": [1.0, 4.0, 7.0, 10.0]}
    assert all(values == want[tag] for tag, values in first["out"])
    assert first["seen"] == [["a", 0.0], ["b", 0.0]] * 2 + [["b", 0.0], ["a", 0.0]]

    second = run_callbacks([("b", "a")])  # another process, the other order: other ids
    assert second["compiled"] == 0 and second["stats"]["hits"] == 2
    assert all(values == want[tag] for tag, values in second["out"])
    assert second["seen"] == [["b", 0.0], ["a", 0.0]]
    assert len(entries(tmp_path)) == 1
