"""The published IPU figures `nox -s fidelity` checks the emulator against: the one place they are written down.

Each row names the figure, the chip it is for, its value, where it was published, and its kind, which sets its band:
- ``derived``: follows from the chip's published parameters (tiles, clock, AMP rate, exchange width); within ±10%;
- ``measured``: measured on real IPUs by someone else; within ±25%;
- ``model``: a whole model's training throughput, configured as Graphcore ran it (models.py); within ±25%;
- ``reference``: shown for comparison but not like for like (the row's note says why); no band.

The cost model's constants name the row they are derived from or calibrated against by its ``id``
(tests/toolchain/test_fidelity_table.py checks that every id they name is here)."""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

BANDS = {"derived": 0.10, "measured": 0.25, "model": 0.25, "reference": None}


class Figure(NamedTuple):
    """One published figure: ``id`` names what is measured (fidelity.MEASURES), ``chip`` the emulator version it
    is for, ``value`` is in ``unit``, ``kind`` sets the band, ``source`` says where it was published and ``note``
    what a reader must know to compare it."""

    @property
    def band(self) -> Optional[float]:
        return BANDS[self.kind]

    id: str
    chip: str  # the emulator's version: ipu1 (Mk1 GC2), ipu2 (Mk2 GC200), ipu21 (Bow)
    what: str
    value: float
    unit: str
    kind: str
    source: str
    note: str = ""


_HOT_CHIPS_MK2 = ("Graphcore, 'Designing the Colossus Mk2 IPU' (Hot Chips 2021), graphcore.ai/posts/"
                  "designing-the-colossus-mk2-ipu-simon-knowles-at-hot-chips-2021")
_MK2_SPEC = ("Graphcore's GC200 figures as its partners' documentation quotes them (PaddlePaddle's IPU guide: 900MB, "
             "250 TFLOPS, 47.5TB/s on-chip memory bandwidth, 8TB/s all-to-all IPU-Exchange); docs/ipu-model.md")
_MK1 = ("Jia, Tillman, Maggioni, Scarpazza, 'Dissecting the Graphcore IPU architecture via microbenchmarking' "
        "(Citadel, 2019, arXiv:1912.03413), as summarised at apaperaday.com/12/17/2019/4dtgcipu-second")
_MK1_MEMORY = _MK1 + ", chapter 3 (local memory) as summarised at apaperaday.com/12/20/2019/4dtgcipu-5localmemory"
_MK1_EXCHANGE = _MK1 + ", chapter 4 (interconnect) as summarised at apaperaday.com/12/21/2019/4dtcipu-6interconnect"
_TESSELLATE_BASICS = ("graphcore-research/tessellate-ipu @3ab241f, notebooks/01-tessellate-ipu-tile-api-basics.ipynb, "
                      "its saved outputs from a Bow IPU (tile_clock_frequency 1.85 GHz): broadcast_add, an "
                      "ipu_cycle_count read before and after tile_map(lax.add_p, lhs, rhs) of f32 rows sharded one "
                      "per tile and a replicated f32 row")
_SPMM = ("graphcore-research/notebooks @24a76f7, sparsity_benchmarks/SpMM.ipynb (the PopSparse paper's notebook; its "
         "outputs match the paper's Bow figures): torch.matmul of a dense m x k weight and a k x n input in a "
         "poptorch.for_loop of 2,000 iterations, timed on the host; it prints TFLOP/s of the non-zero FLOPs at "
         "density 1/64, so the dense figure is 64 x the printed one")
_TESSELLATE = ("graphcore-research/tessellate-ipu @3ab241f, notebooks/IPU Peak Flops.ipynb: a ConvPartial1x1 "
               "[N,16]x[16,16] f16 matmul on every tile of a Bow IPU (1,472 tiles, 1.85 GHz), cycle counters read "
               "around it")
_PERFORMANCE = "Graphcore performance results, graphcore.cn/performance-results/ (training table)"

FIGURES: Tuple[Figure, ...] = (
    # ---- chips: parameters and the peaks that follow from them
    Figure("chip.tiles", "ipu1", "tiles", 1216, "tiles", "derived", _MK1),
    Figure("chip.tiles", "ipu2", "tiles", 1472, "tiles", "derived", _HOT_CHIPS_MK2),
    Figure("chip.tiles", "ipu21", "tiles", 1472, "tiles", "derived", _HOT_CHIPS_MK2,
           "the Bow is the GC200 die (docs/ipu-model.md)"),
    Figure("chip.memory", "ipu1", "In-Processor-Memory", 304, "MiB", "derived", _MK1),
    Figure("chip.memory", "ipu2", "In-Processor-Memory", 900, "MiB", "derived", _HOT_CHIPS_MK2),
    Figure("chip.memory", "ipu21", "In-Processor-Memory", 900, "MiB", "derived",
           "Graphcore, Bow-2000 datasheet, docs.graphcore.ai/projects/bow-2000-datasheet"),
    Figure("chip.clock", "ipu21", "tile clock", 1.85, "GHz", "derived", _TESSELLATE.split(":")[0] +
           ": d.tile_clock_frequency = 1850000000.0 on a Bow"),
    Figure("chip.peak_fp16", "ipu1", "peak AMP throughput, f16", 124.5, "TFLOPS", "derived", _MK1),
    Figure("chip.peak_fp16", "ipu2", "peak AMP throughput, f16", 250, "TFLOPS", "derived", _MK2_SPEC),
    Figure("chip.peak_fp16", "ipu21", "peak AMP throughput, f16", 350, "TFLOPS", "derived",
           "Graphcore, Bow-2000 datasheet: 1.4 petaFLOPS FP16.16 for 4 IPUs"),
    Figure("chip.peak_fp32", "ipu1", "peak AMP throughput, f32", 31.1, "TFLOPS", "derived", _MK1),
    Figure("chip.peak_fp32", "ipu2", "peak AMP throughput, f32", 62.5, "TFLOPS", "derived",
           "docs/ipu-model.md (a quarter of the f16 peak: 16 f32 MACs per tile and cycle against 64)"),
    Figure("chip.memory_bandwidth", "ipu1", "aggregate on-chip memory bandwidth (nominal)", 45, "TB/s", "derived",
           _MK1, "the nominal figure counts every tile's load port (16 bytes a cycle) and store port (8) at once"),
    Figure("chip.memory_bandwidth", "ipu2", "aggregate on-chip memory bandwidth", 47.5, "TB/s", "derived",
           _MK2_SPEC, "as ipu1's: a tile's 16 bytes loaded and 8 stored a cycle, over 1,472 tiles at 1.33 GHz"),
    Figure("chip.memory_read_bandwidth", "ipu1", "aggregate local-memory read bandwidth", 31.1, "TB/s", "derived",
           _MK1_MEMORY + ": 'each tile reads 16 bytes per clock' at 1.6 GHz over 1,216 tiles"),
    Figure("chip.memory_write_bandwidth", "ipu1", "aggregate local-memory write bandwidth", 15.5, "TB/s",
           "derived", _MK1_MEMORY + ": 8 bytes per clock per tile, reached in full"),
    Figure("tile.memory_latency", "ipu1", "local-memory load latency", 6, "cycles", "measured",
           _MK1_MEMORY + ": 6 cycles for every tile, whatever the load"),
    Figure("chip.exchange_bandwidth", "ipu2", "all-to-all IPU-Exchange bandwidth", 8, "TB/s", "derived",
           _MK2_SPEC),
    Figure("chip.ipu_link_bandwidth", "ipu2", "IPU-Link bandwidth per chip (10 links, both directions)", 320, "GB/s",
           "derived", _HOT_CHIPS_MK2 + "; docs/ipu-model.md"),
    Figure("chip.host_link_bandwidth", "ipu2", "host link, PCIe Gen4 x16 (both directions)", 64, "GB/s", "derived",
           "docs/ipu-model.md (PCIe Gen4 x16: 64 GB/s)"),
    # ---- measured on hardware
    Figure("chip.matmul_f16_4096x4096x1024", "ipu21", "matmul f16 [4096,4096] x [4096,1024], whole chip", 197.7,
           "TFLOPS", "measured", _SPMM + ": 'Dense matmul 3.08973 TFLOP/s' (m = k = 4096, n = 1024, float16)"),
    Figure("chip.matmul_f16_4096x4096x2048", "ipu21", "matmul f16 [4096,4096] x [4096,2048], whole chip", 211.0,
           "TFLOPS", "measured", _SPMM + ": 'Dense matmul 3.29656 TFLOP/s' (m = k = 4096, n = 2048, float16)",
           "no grid of the whole fits poplin's share of a tile for temporaries: the emulator computes it in row "
           "chunks one after another, as poplin's serial split does"),
    Figure("chip.matmul_f32_4096x4096x512", "ipu21", "matmul f32 [4096,4096] x [4096,512], whole chip", 52.4,
           "TFLOPS", "measured", _SPMM + ": 'Dense matmul 0.81948 TFLOP/s' (m = k = 4096, n = 512, float)"),
    Figure("tile.exchange_congestion", "ipu1", "on-chip exchange latency under full load, relative to no load",
           1.24, "x", "measured", _MK1_EXCHANGE + ": 'congestion increases on-chip latency only marginally (+24%)'",
           "the emulator costs a tile's exchange by the bytes that tile sends and receives, so a message takes as "
           "long with every tile sending as alone"),
    Figure("tile.add_f32_10", "ipu21", "tile_map(add) of f32[5, 2] per tile, between two cycle counts", 330,
           "cycles", "measured", _TESSELLATE_BASICS + " of 5 x 2 on 3 tiles: 329, 329 and 330 cycles",
           "the emulator's span is the add's vertex and one sync; another run of the notebook (@02557a3) recorded "
           "355 cycles"),
    Figure("tile.add_f32_1024", "ipu21", "tile_map(add) of f32[1024] per tile, between two cycle counts", 1860,
           "cycles", "measured", _TESSELLATE_BASICS + " of 1,024 on 4, 16, 128 and 1,024 tiles: 1.0054 us each "
                                                     "(1,860 cycles at 1.85 GHz)",
           "another run of the notebook (@02557a3) recorded 1,858 to 1,938 cycles over the same tile counts"),
    Figure("tile.amp_fp16_n16", "ipu21", "AMP f16 [16,16]x[16,16] on every tile", 55.49, "TFLOPS", "measured",
           _TESSELLATE),
    Figure("tile.amp_fp16_n128", "ipu21", "AMP f16 [128,16]x[16,16] on every tile", 211.12, "TFLOPS",
           "measured", _TESSELLATE),
    Figure("tile.amp_fp16_n512", "ipu21", "AMP f16 [512,16]x[16,16] on every tile", 299.78, "TFLOPS",
           "measured", _TESSELLATE),
    Figure("tile.amp_fp16_n2048", "ipu21", "AMP f16 [2048,16]x[16,16] on every tile", 334.9, "TFLOPS",
           "measured", _TESSELLATE),
    # ---- whole models (models.py; configurations in fidelity.MODELS)
    Figure("model.resnet50", "ipu21", "ResNet-50 v1.5 training, 224x224, f16", 42029 / 16, "images/s per IPU",
           "model", _PERFORMANCE + ": 'ResNet-50 v1.5 | Bow Pod16 | Pre-SDK2.5 | TensorFlow1 | ImageNet2012 | "
           "1,920 | 16.16 | 42029'"),
    Figure("model.bert_large_128", "ipu21", "BERT-Large pre-training phase 1, SL128", 4527 / 16,
           "sequences/s per IPU", "model", _PERFORMANCE + ": 'BERT Large Ph1 Pre-Training (SL128)', Bow Pod16, "
           "TensorFlow2, unpacked, global batch 65,280: 4,527 seq/s"),
    Figure("model.bert_large_128_packed", "ipu21", "BERT-Large phase 1, SL128, packed", 6044 / 16,
           "sequences/s per IPU", "reference", _PERFORMANCE + ": 'BERT Large Ph1 Pre-Training (SL128) - Packed | "
           "Bow Pod16 | SDK 3.1 | PopART | Wikipedia | 54,784 | 16.16 | 6044'",
           "packed: each 128-token row holds up to 3 sequences (packed_pretrain_large_128.json), and the average "
           "packing factor is not in what we could read, so rows/s cannot be turned into sequences/s; the "
           "estimate shown counts one sequence per row"),
)


def rows(chips: Optional[Tuple[str, ...]] = None) -> Tuple[Figure, ...]:
    return tuple(f for f in FIGURES if chips is None or f.chip in chips)


def ids() -> Tuple[str, ...]:
    return tuple(sorted({f.id for f in FIGURES}))
