"""The emulator's estimates against published IPU figures (`nox -s fidelity`).

    python fidelity.py [--only ID[,ID]] [--skip-models] [--json PATH]

For every row of published.FIGURES it measures the emulator's figure, prints the table (figure, chip, published
value and source, estimate, ratio, band) and writes it as JSON. Exits 1 when a row with a band falls outside it.

How each figure is measured:
- chip rows: programs compiled with jax_ipu.emulator for the row's chip, timed by the estimate, e.g. the peak AMP
  rate is a [16,K]x[K,16] matmul on one tile (its compute cycles), the memory's read and write rates those of the
  fastest reading and writing vertices (a sum, a fill) on one tile, the exchange bandwidth a transpose across
  every tile (bytes over its exchange cycles); per-tile figures are scaled to the chip's tiles and clock;
- tile.add_f32_*, tile.exchange_congestion: tile_programs.py, with jax_ipu.tile in a process of its own;
- tile.amp_fp16_*: TessellateIPU's peak-flops benchmark: an [N,16]x[16,16] f16 matmul on one tile (every tile of
  the chip runs the same), its compute cycles;
- models: one micro-batch of the model's training step on one emulated IPU through jax (models.py), configured as
  MODELS says (each setting cites Graphcore's configuration); the estimate is the step's cycles at the chip's clock.

Nothing is fitted to a row: the cost model's constants are derived from the chip rows or calibrated against the
measured ones (docs/ipu-model.md, tests/toolchain/test_fidelity_table.py)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent.parent / "examples"))  # _resnet50: the model resnet_bow.py runs too

import _resnet50  # noqa: E402
import numpy as np  # noqa: E402
import published  # noqa: E402

# How each whole model is run, with where each setting comes from. What the emulated run must do differently is
# said in "differs".
MODELS: Dict[str, Dict[str, Any]] = {
    "model.resnet50": _resnet50.GRAPHCORE,
    "model.bert_large_128": {
        "micro_batch": 8, "layers": 7, "ipus_per_replica": 4, "recompute": True, "dtype": "float16",
        "available_memory_proportion": 0.19, "partials_type": "half",
        "source": "graphcore/examples @3cc8f81, nlp/bert/tensorflow2/configs/pretrain_large_128_phase1.json: "
                  "micro_batch_size 8, replicas 4, grad_acc_steps_per_replica 2040, pipeline stages "
                  "[emb + 3 layers, 7, 7, 7, heads on IPU 0] over 4 IPUs, LAMB, "
                  "matmul_available_memory_proportion_per_pipeline_stage [0.15, 0.19, 0.25, 0.25] (the first "
                  "7-layer stage's 0.19: JAX_IPU_AVAILABLE_MEMORY_PROPORTION), the matmuls' partialsType 'half' "
                  "(matmul_partials_type's default in utilities/options.py @09b7c67: JAX_IPU_PARTIALS_TYPE); "
                  "recomputation per layer as Graphcore's BERT pipelines run (PopART's configuration of the same "
                  "split: recompute_checkpoint_every_layer)",
        "differs": "the busiest stage (7 encoder layers) is run for one micro-batch, and the replica's throughput "
                   "is its micro-batch over that stage's time (a pipeline's steady state), divided by the 4 IPUs; "
                   "the LAMB update (once per 2,040 micro-batches) and the activations' transfers between "
                   "stages are not run",
    },
}
MODELS["model.bert_large_128_packed"] = MODELS["model.bert_large_128"]


def _emulator() -> Any:
    from jax_ipu import emulator

    return emulator


def _info(chip: str) -> Dict[str, Any]:
    return _emulator().device_info(chip)


def _run(program: Any, chip: str, tiles: int, *args: Any) -> Dict[str, Any]:
    executable = _emulator().compile(program, chip, tiles)
    executable.run(*args)
    profile = executable.last_profile
    executable.close()
    return profile


def _dot(m: int, k: int, n: int, dtype: str, rhs_transposed: bool = False) -> Any:
    program = _emulator().Program("dot")
    f = program.main
    a = f.param(dtype, [m, k])
    b = f.param(dtype, [n, k] if rhs_transposed else [k, n])
    f.ret(f.op("dot_general", [a, b], dtype, [m, n], {
        "lhs_batching_dimensions": [], "rhs_batching_dimensions": [], "lhs_contracting_dimensions": [1],
        "rhs_contracting_dimensions": [1 if rhs_transposed else 0]}))
    return program


def _ones_for_dot(m: int, k: int, n: int, dtype: Any = np.float16) -> Tuple[Any, Any]:
    return np.ones((m, k), dtype), np.ones((k, n), dtype)


def _per_tile_tflops(chip: str, flops: float, cycles: int) -> float:
    """A figure measured on one tile, as the chip's: every tile doing the same."""
    info = _info(chip)
    return flops / (cycles / info["tile_clock_frequency"]) * info["tiles_per_chip"] / 1e12


def chip_tiles(chip: str) -> float:
    return _info(chip)["tiles_per_chip"]


def chip_memory(chip: str) -> float:
    info = _info(chip)
    return info["tiles_per_chip"] * info["bytes_per_tile"] / 2 ** 20


def chip_clock(chip: str) -> float:
    return _info(chip)["tile_clock_frequency"] / 1e9


def peak(dtype: str) -> Callable[[str], float]:
    def measure(chip: str) -> float:
        depth = _info(chip)["bytes_per_tile"] // 256 // 64 * 64  # both operands of f32 in half a tile
        np_type = np.float16 if dtype == "f16" else np.float32
        profile = _run(_dot(16, depth, 16, dtype), chip, 1, *_ones_for_dot(16, depth, 16, np_type))
        return _per_tile_tflops(chip, 2.0 * 16 * depth * 16, profile["compute_cycles"])
    return measure


def _tile_bytes_per_cycle(chip: str, build: Callable[[Any, int], None], n: int,
                          bytes_per_element: float) -> float:
    """Bytes a cycle of a one-tile program of f32[n] built by build(f, n), between n and 2n elements (so that the
    vertices' fixed cycles do not count)."""
    def cycles(elements: int) -> int:
        program = _emulator().Program("stream")
        build(program.main, elements)
        args = [np.ones(p["shape"], np.float32) for p in program.main.params]
        return _run(program, chip, 1, *args)["compute_cycles"]
    return bytes_per_element * n / (cycles(2 * n) - cycles(n))


def _sum(f: Any, n: int) -> None:
    body = f.region()
    body.ret(body.op("add", [body.param("f32", []), body.param("f32", [])], "f32", []))
    f.ret(f.op("reduce", [f.param("f32", [n]), f.constant(np.float32(0))], "f32", [], {"dimensions": [0]},
               regions=[body]))


def _fill(f: Any, n: int) -> None:
    f.ret(f.op("broadcast_in_dim", [f.param("f32", [])], "f32", [n], {"broadcast_dimensions": []}))


def _as_chip(chip: str, bytes_per_cycle: float) -> float:
    info = _info(chip)
    return bytes_per_cycle * info["tile_clock_frequency"] * info["tiles_per_chip"] / 1e12


def memory_read_bandwidth(chip: str) -> float:
    """The fastest reading vertex, a sum of f32 on one tile (its accumulators take a 128-bit load a cycle), as the
    chip's aggregate."""
    return _as_chip(chip, _tile_bytes_per_cycle(chip, _sum, 4096, 4.0))


def memory_write_bandwidth(chip: str) -> float:
    """The fastest writing vertex, a fill of f32 on one tile (a 64-bit store a cycle), as the chip's aggregate."""
    return _as_chip(chip, _tile_bytes_per_cycle(chip, _fill, 4096, 4.0))


def memory_bandwidth(chip: str) -> float:
    """The nominal figure counts each tile's load and store ports at once: the read rate plus the write rate."""
    return memory_read_bandwidth(chip) + memory_write_bandwidth(chip)


def memory_latency(chip: str) -> float:
    """The tile cycles one more dependent 64-bit load costs a worker: a fill with one more vector on one worker
    (each worker issues every 6th cycle, so a load's value is there for its next instruction)."""
    workers = _info(chip)["num_worker_contexts"]

    def cycles(vectors: int) -> int:
        program = _emulator().Program("fill")
        _fill(program.main, 2 * vectors)
        return _run(program, chip, 1, np.ones((), np.float32))["compute_cycles"]
    return float(cycles(64 * workers + 1) - cycles(64 * workers))


def _tile_programs(chip: str) -> Dict[str, float]:
    """tile_programs.py's figures on `chip`, from a process of its own (the chip is chosen as the backend starts)."""
    key = "tile_programs:" + chip
    if key not in _CACHE:
        # the chip as published: none of the user's IPU Model flags (tiles, memory, clock...)
        env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_IPU_MODEL_") and k != "TF_POPLAR_FLAGS"}
        done = subprocess.run([sys.executable, str(HERE / "tile_programs.py"), chip], capture_output=True, text=True,
                              env=dict(env, JAX_PLATFORMS="ipu"), timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"tile_programs.py {chip} failed:\n{done.stderr[-4000:]}")
        _CACHE[key] = json.loads(done.stdout.strip().splitlines()[-1])
    return _CACHE[key]


def tile_program(name: str) -> Callable[[str], float]:
    return lambda chip: _tile_programs(chip)[name]


def _estimated_cycles(program: Any, chip: str) -> int:
    """The static estimate of a program compiled (not run) for `chip`."""
    executable = _emulator().compile(program, chip)
    try:
        return executable.info["estimated_cycles"]
    finally:
        executable.close()


def _bytes_per_second(chip: str, cycles_of: Callable[[int], int], step: int) -> float:
    """Bytes per second of a transfer whose estimated cycles for n bytes are cycles_of(n): the rate between two
    sizes, so that a fixed start-up does not count."""
    rate = step / (cycles_of(2 * step) - cycles_of(step))
    return rate * _info(chip)["tile_clock_frequency"]


def ipu_link_bandwidth(chip: str) -> float:
    """Two IPUs swapping an f32 array (collective_permute [[0, 1], [1, 0]]): each sends and receives its bytes, both
    directions at once; the chip's figure counts both."""
    def cycles(nbytes: int) -> int:
        program = _emulator().Program("swap")
        f = program.main
        n = nbytes // 4
        f.ret(f.op("collective_permute", [f.param("f32", [n])], "f32", [n], {"source_target_pairs": [[0, 1], [1, 0]]}))
        doc = program.to_dict()
        doc["replicas"] = 2
        return _estimated_cycles(doc, chip)
    return 2 * _bytes_per_second(chip, cycles, 1 << 24) / 1e9


def host_link_bandwidth(chip: str) -> float:
    """An infeed of u8 bytes from the host (a StreamCopy), one direction; the link's figure counts both."""
    def cycles(nbytes: int) -> int:
        program = _emulator().Program("feed")
        f = program.main
        token = f.op("create_token", [], "token")
        data, _ = f.op_multi("infeed", [token], [("u8", (nbytes,)), ("token", ())], {"infeed_config": ""})
        f.ret(data)
        return _estimated_cycles(program, chip)
    return 2 * _bytes_per_second(chip, cycles, 1 << 24) / 1e9


def exchange_bandwidth(chip: str) -> float:
    """A transpose of an f32 matrix mapped by rows over every tile: each tile receives from every other; the bytes
    moved over the exchange cycles."""
    info = _info(chip)
    side = 2 * info["tiles_per_chip"]
    program = _emulator().Program("transpose")
    f = program.main
    a = f.param("f32", [side, side])
    f.ret(f.op("transpose", [a], "f32", [side, side], {"permutation": [1, 0]}))
    profile = _run(program, chip, 0, np.ones((side, side), np.float32))
    return 4.0 * side * side / (profile["exchange_cycles"] / info["tile_clock_frequency"]) / 1e12


def whole_chip_matmul(m: int, k: int, n: int, dtype: str) -> Callable[[str], float]:
    """[m,k] x [k,n] over every tile as the emulator plans it (its static estimate), in TFLOPS."""
    def measure(chip: str) -> float:
        executable = _emulator().compile(_dot(m, k, n, dtype), chip)
        try:
            cycles = executable.info["estimated_cycles"]
        finally:
            executable.close()
        return 2.0 * m * k * n / (cycles / _info(chip)["tile_clock_frequency"]) / 1e12
    return measure


def amp_tile(n: int) -> Callable[[str], float]:
    def measure(chip: str) -> float:
        profile = _run(_dot(n, 16, 16, "f16", rhs_transposed=True), chip, 1, *_ones_for_dot(n, 16, 16))
        return _per_tile_tflops(chip, 2.0 * n * 16 * 16, profile["compute_cycles"])
    return measure


def _use_chip(chip: str) -> None:
    """The whole models run on `chip` (read when the ipu backend is created: one chip per process); each compiles
    under _resnet50.graphcore_options (its configuration's availableMemoryProportion and partialsType, and past a
    tile's memory)."""
    os.environ["JAX_IPU_MODEL_VERSION"] = chip
    os.environ.setdefault("JAX_PLATFORMS", "cpu,ipu")


def resnet50(chip: str, detail: Dict[str, Any]) -> float:
    _use_chip(chip)
    detail.update(_resnet50.estimate())
    return detail.pop("images_per_s_per_ipu")


def bert_large(chip: str, detail: Dict[str, Any]) -> float:
    _use_chip(chip)
    import models

    config = MODELS["model.bert_large_128"]
    if "bert" not in _CACHE:
        step, args = models.bert_stage(config["layers"], config["micro_batch"], recompute=config["recompute"])
        with _resnet50.graphcore_options(config):
            _CACHE["bert"] = _resnet50.step_estimate(step, args)
    detail.update(_CACHE["bert"])
    stage_s = detail["cycles"] / _info(chip)["tile_clock_frequency"]
    return config["micro_batch"] / stage_s / config["ipus_per_replica"]


_CACHE: Dict[str, Any] = {}

MEASURES: Dict[str, Callable[..., float]] = {
    "chip.tiles": chip_tiles,
    "chip.memory": chip_memory,
    "chip.clock": chip_clock,
    "chip.peak_fp16": peak("f16"),
    "chip.peak_fp32": peak("f32"),
    "chip.memory_bandwidth": memory_bandwidth,
    "chip.memory_read_bandwidth": memory_read_bandwidth,
    "chip.memory_write_bandwidth": memory_write_bandwidth,
    "tile.memory_latency": memory_latency,
    "tile.exchange_congestion": tile_program("exchange_congestion"),
    "chip.matmul_f16_4096x4096x1024": whole_chip_matmul(4096, 4096, 1024, "f16"),
    "chip.matmul_f16_4096x4096x2048": whole_chip_matmul(4096, 4096, 2048, "f16"),
    "chip.matmul_f32_4096x4096x512": whole_chip_matmul(4096, 4096, 512, "f32"),
    "tile.add_f32_10": tile_program("add_f32_10"),
    "tile.add_f32_1024": tile_program("add_f32_1024"),
    "chip.exchange_bandwidth": exchange_bandwidth,
    "chip.ipu_link_bandwidth": ipu_link_bandwidth,
    "chip.host_link_bandwidth": host_link_bandwidth,
    "tile.amp_fp16_n16": amp_tile(16),
    "tile.amp_fp16_n128": amp_tile(128),
    "tile.amp_fp16_n512": amp_tile(512),
    "tile.amp_fp16_n2048": amp_tile(2048),
    "model.resnet50": resnet50,
    "model.bert_large_128": bert_large,
    "model.bert_large_128_packed": bert_large,
}


def measure(figure: published.Figure) -> Dict[str, Any]:
    detail: Dict[str, Any] = {}
    fn = MEASURES[figure.id]
    estimate = fn(figure.chip, detail) if figure.id.startswith("model.") else fn(figure.chip)
    ratio = estimate / figure.value
    band = figure.band
    row = {"id": figure.id, "chip": figure.chip, "what": figure.what, "unit": figure.unit, "kind": figure.kind,
           "published": figure.value, "estimate": round(estimate, 4), "ratio": round(ratio, 3),
           "band": band, "within": None if band is None else abs(ratio - 1.0) <= band + 1e-9,
           "source": figure.source}
    if figure.note:
        row["note"] = figure.note
    if figure.id in MODELS:
        row["configuration"] = MODELS[figure.id]
    if detail:
        row["detail"] = detail
    return row


def _number(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 or float(x).is_integer() else f"{x:,.4g}"


def table(rows: List[Dict[str, Any]]) -> str:
    lines = ["| figure | chip | published | estimate | ratio | band | |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        band = "none" if r["band"] is None else f"±{r['band']:.0%}"
        verdict = "" if r["within"] is None else ("ok" if r["within"] else "**outside**")
        lines.append(f"| {r['what']} (`{r['id']}`) | {r['chip']} | {_number(r['published'])} {r['unit']} | "
                     f"{_number(r['estimate'])} | {r['ratio']:.3f} | {band} | {verdict} |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="row ids, comma-separated")
    parser.add_argument("--skip-models", action="store_true", help="only the chip and microbenchmark rows")
    parser.add_argument("--json", default="", help="where to write the table as JSON")
    args = parser.parse_args(argv)
    only = {s for s in args.only.split(",") if s}
    figures = [f for f in published.FIGURES if (not only or f.id in only) and
               not (args.skip_models and f.id.startswith("model."))]
    rows = []
    for figure in figures:
        started = time.perf_counter()
        rows.append(measure(figure))
        print(f"[fidelity] {figure.id} {figure.chip}: ratio {rows[-1]['ratio']:.3f} "
              f"({time.perf_counter() - started:.1f} s)", flush=True)
    print()
    print(table(rows))
    for r in rows:
        if "detail" in r:
            d = r["detail"]
            print(f"\n{r['id']}: step {d['cycles']:,} cycles (compute {d['compute']:,}, exchange {d['exchange']:,}, "
                  f"sync {d['sync']:,}); worst tile {d['worst_tile_bytes']:,} of {d['tile_bytes']:,} bytes; "
                  f"host wall time {d['wall_s']} s")
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
        print(f"\nwrote {path}")
    outside = [r for r in rows if r["within"] is False]
    if outside:
        print(f"\n{len(outside)} row(s) outside their band: " + ", ".join(f"{r['id']} ({r['chip']})" for r in outside))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
