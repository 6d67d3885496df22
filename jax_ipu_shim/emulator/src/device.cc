// The hardware parameters of each IPU version: the one place they are written down (see docs/ipu-model.md).
#include <cstdio>
#include <string>

#include "ipu/emulator.h"
#include "ipu/json.h"

namespace ipu {

namespace {

struct ChipSpec {
  const char* version;
  int tiles;
  int64_t bytes_per_tile;
  int64_t clock_hz;
  int amp_f16_macs, amp_f32_macs;  // per tile per cycle
  int amp_f8_macs;                 // per tile per cycle with fp8 operands; 0: the chip has no fp8
};

// Mk1 GC2: 1216 tiles x 256 KiB, ~1.6 GHz (derived from its 124.5 TFLOPS fp16 peak).
// Mk2 GC200: 1472 tiles x 638,976 bytes (the figure in Poplar's out-of-memory message), ~1.33 GHz (derived from its
// peak: 250 TFLOPS fp16 = 1472 tiles x 64 MAC x 2 flops x f, f = 250e12 / (1472 x 128) = 1.327 GHz; ipu-model.md).
// Graphcore's JAX client reported 1,850,000,000 for it, but that is the Bow's clock: with it a GC200 and a Bow would
// be the same chip, which they are not (the Bow is the GC200 die, clocked higher).
// Bow (ipu21): the GC200 die at 1.85 GHz (ipu-model.md).
// AMP rates, derived from each chip's published peaks (fidelity rows chip.peak_fp16 and chip.peak_fp32, ipu-model.md):
// Mk1 124.5 / 31.1 TFLOPS = 1216 tiles x 2 flops x 1.6 GHz x 32 / 8 MACs; Mk2 250 / 62.5 TFLOPS = 1472 x 2 x
// 1.33 GHz x 64 / 16; the Bow is the Mk2 tile at 1.85 GHz (350 TFLOPS fp16).
// fp8: Poplar's quarter type (F143 / F152 with a scale, Poplar's Quarter.hpp) exists from IPU architecture 21 on, the
// "Mk2 IPU with FP8 support" of the C600 card, which Graphcore rates at 560 TFLOPS fp8 against 280 fp16: twice the
// f16 MACs per tile per cycle (ipu-model.md). Mk1 and the GC200 (ipu2) have none.
const ChipSpec kChips[] = {
    {"ipu1", 1216, 256 * 1024, 1600000000, 32, 8, 0},
    {"ipu2", 1472, 638976, 1330000000, 64, 16, 0},
    {"ipu21", 1472, 638976, 1850000000, 64, 16, 128},
};
// Input channels per AMP pass: 16 in f16 and 8 in f32 (poplibs' ConvPartial1x1 vertices: a 16x16 f16 or 8x8 f32
// block of weights in the AMP's registers, ipu-model.md); a shorter contraction still streams a whole pass.
constexpr int kAmpF16Depth = 16;
constexpr int kAmpF32Depth = 8;

// IPU-Links: 10 links, 320 GB/s per chip (ipu-model.md; fidelity row chip.ipu_link_bandwidth); one direction of a
// chip-to-chip transfer gets half.
constexpr double kIpuLinkBytesPerSecond = 320e9 / 2;
// Host link: PCIe Gen4 x16, 64 GB/s (ipu-model.md; fidelity row chip.host_link_bandwidth), taken as 32 GB/s each way.
constexpr double kHostLinkBytesPerSecond = 64e9 / 2;
// GW-Links between IPU-Machines (hosts of an IPU-POD): each IPU-M2000 / Bow-2000 has two 100 Gb/s (100 GbE) GW-Link
// ports, east and west, so a ring over machines sends 100 Gb/s = 12.5 GB/s each way per hop (ipu-model.md).
constexpr double kGatewayLinkBytesPerSecond = 100e9 / 8;
// Calibrated (unpublished): the fixed cost of starting a transfer over a link (a sync plus the first packet).
constexpr uint64_t kLinkLatencyCycles = 1000;
// Unpublished: a GW-Link transfer starts through the IPU-Gateway (RoCE); taken as 2 us, ten times an IPU-Link's.
constexpr double kGatewayLatencySeconds = 2e-6;
// Calibrated (unpublished): the fixed cost of starting a transfer over the host link (a sync plus a PCIe round trip).
constexpr uint64_t kHostLatencyCycles = 2000;
// poplibs models a sync between IPUs as 15 ns per hop, x2 (there and back).
constexpr double kInterIpuSyncSecondsPerHop = 15e-9 * 2;

constexpr int kWorkerContexts = 6;  // hardware worker threads per tile, plus one supervisor (ipu-model.md)
// Calibrated: one on-chip sync of every tile. Not published on its own; poplibs models only the inter-IPU sync (15 ns
// per hop, x2, interIpuSyncCycles). Checked, with an add's vertex, by fidelity rows tile.add_f32_10 and
// tile.add_f32_1024 (cycle counts around a compute set on a Bow: the emulator's span is within 4% of both).
constexpr uint64_t kSyncCycles = 100;
// Per tile, derived from the GC200's 8 TB/s all-to-all exchange over 1472 tiles at ~1.33 GHz (fidelity row
// chip.exchange_bandwidth).
constexpr double kExchangeBytesPerCycle = 4.0;

// The model parameters that replace a chip's value: their field, Poplar's name, and the range a user may set.
struct ModelField {
  const char* name;
  const char* poplar;
  int64_t ModelParameters::* field;
  int64_t min, max;
};
const ModelField kModelFields[] = {
    {"num_tiles", "tilesPerIPU", &ModelParameters::num_tiles, 1, 0},  // up to the chip's tiles (forModel)
    {"memory_bytes_per_tile", "memoryBytesPerTile", &ModelParameters::memory_bytes_per_tile, 1024, int64_t{1} << 30},
    {"num_worker_contexts", "numWorkerContexts", &ModelParameters::num_worker_contexts, 1, 64},
    {"tile_clock_frequency", "tileClockFrequency", &ModelParameters::tile_clock_frequency, 1000000, 1000000000000},
    {"exchange_bytes_per_cycle", "exchangeBytesPerCycle", &ModelParameters::exchange_bytes_per_cycle, 1, 1000000},
    {"global_sync_cycles", "globalSyncCycles", &ModelParameters::global_sync_cycles, 1, 1000000000},
};

}  // namespace

bool ModelParameters::set(const std::string& name, int64_t value) {
  for (const ModelField& f : kModelFields) {
    if (name != f.name) continue;
    this->*f.field = value;
    return true;
  }
  return false;
}

std::string ModelParameters::settings() const {
  std::string s;
  for (const ModelField& f : kModelFields)
    if (this->*f.field != 0 && f.field != &ModelParameters::num_tiles)
      s += (s.empty() ? "" : ", ") + std::string(f.poplar) + "=" + std::to_string(this->*f.field);
  return s;
}

const char* ModelParameters::names() {
  static const std::string joined = [] {
    std::string s = "version";
    for (const ModelField& f : kModelFields) s += std::string(", ") + f.name;
    return s;
  }();
  return joined.c_str();
}

ModelParameters ModelParameters::parseJson(const std::string& text) {
  ModelParameters model;
  if (text.empty()) return model;
  const json::Value doc = json::parse(text);
  if (!doc.isObject()) throw Error(ErrorCode::InvalidArgument, "IPU Model parameters must be a JSON object: " + text);
  for (const auto& field : doc.object) {
    if (field.first == "version" && field.second.kind == json::Value::Kind::String) {
      model.version = field.second.string;
      continue;
    }
    const bool number = field.second.kind == json::Value::Kind::Number;
    const double v = number ? field.second.number : 0.5;
    if (!(v >= -9e18 && v <= 9e18) || v != static_cast<double>(static_cast<int64_t>(v)) ||
        !model.set(field.first, static_cast<int64_t>(v)))
      throw Error(ErrorCode::InvalidArgument, "IPU Model parameter '" + field.first + "': expected one of " + names() +
                                                  ", with an integer value (version: a string)");
  }
  return model;
}

DeviceDescription DeviceDescription::forVersion(const std::string& version, int num_tiles) {
  ModelParameters model;
  model.version = version;
  model.num_tiles = num_tiles;
  return forModel(model);
}

DeviceDescription DeviceDescription::forModel(const ModelParameters& model) {
  const std::string& version = model.version;
  const int64_t num_tiles = model.num_tiles;
  std::string known;
  for (const ChipSpec& chip : kChips) {
    known += known.empty() ? "" : ", ";
    known += chip.version;
    if (version != chip.version) continue;
    if (num_tiles < 0 || num_tiles > chip.tiles) {
      throw Error(ErrorCode::InvalidArgument, "Invalid number of IPU Model tiles " + std::to_string(num_tiles) +
                                                  " for " + version + ": must be between 1 and " +
                                                  std::to_string(chip.tiles) + " (or 0 for all " +
                                                  std::to_string(chip.tiles) + " tiles of the chip)");
    }
    DeviceDescription d;
    d.version = chip.version;
    d.tiles_per_chip = chip.tiles;
    d.num_tiles = num_tiles == 0 ? chip.tiles : static_cast<int>(num_tiles);
    d.bytes_per_tile = chip.bytes_per_tile;
    d.num_worker_contexts = kWorkerContexts;
    d.tile_clock_frequency = chip.clock_hz;
    d.exchange_bytes_per_cycle = kExchangeBytesPerCycle;
    d.amp_f16_macs_per_cycle = chip.amp_f16_macs;
    d.amp_f32_macs_per_cycle = chip.amp_f32_macs;
    d.amp_f8_macs_per_cycle = chip.amp_f8_macs;
    d.amp_f16_depth = kAmpF16Depth;
    d.amp_f32_depth = kAmpF32Depth;
    d.sync_cycles = kSyncCycles;
    // The user's IPU Model parameters, each in its range (0 keeps the chip's value, set above).
    for (const ModelField& f : kModelFields) {
      const int64_t v = model.*f.field;
      if (v == 0 || f.field == &ModelParameters::num_tiles) continue;
      if (v < f.min || v > f.max)
        throw Error(ErrorCode::InvalidArgument, std::string("Invalid IPU Model parameter ") + f.poplar + " = " +
                                                    std::to_string(v) + ": must be between " + std::to_string(f.min) +
                                                    " and " + std::to_string(f.max) + " (or 0 for the " + version +
                                                    "'s own)");
    }
    if (model.memory_bytes_per_tile) d.bytes_per_tile = model.memory_bytes_per_tile;
    if (model.num_worker_contexts) d.num_worker_contexts = static_cast<int>(model.num_worker_contexts);
    if (model.tile_clock_frequency) d.tile_clock_frequency = model.tile_clock_frequency;
    if (model.exchange_bytes_per_cycle)
      d.exchange_bytes_per_cycle = static_cast<double>(model.exchange_bytes_per_cycle);
    if (model.global_sync_cycles) d.sync_cycles = static_cast<uint64_t>(model.global_sync_cycles);
    // The links' rates are per second: per cycle they follow the clock.
    const double hz = static_cast<double>(d.tile_clock_frequency);
    d.link_bytes_per_cycle = kIpuLinkBytesPerSecond / hz;
    d.host_bytes_per_cycle = kHostLinkBytesPerSecond / hz;
    d.gateway_bytes_per_cycle = kGatewayLinkBytesPerSecond / hz;
    return d;
  }
  throw Error(ErrorCode::InvalidArgument, "Unknown IPU version '" + version + "': expected one of " + known);
}

uint64_t DeviceDescription::linkCycles(int64_t bytes) const {
  if (bytes <= 0) return 0;
  return kLinkLatencyCycles + static_cast<uint64_t>(static_cast<double>(bytes) / link_bytes_per_cycle + 0.999999);
}

uint64_t DeviceDescription::gatewayCycles(int64_t bytes) const {
  if (bytes <= 0) return 0;
  const double latency = kGatewayLatencySeconds * static_cast<double>(tile_clock_frequency);
  return static_cast<uint64_t>(latency + static_cast<double>(bytes) / gateway_bytes_per_cycle + 0.999999);
}

uint64_t DeviceDescription::hostTransferCycles(int64_t bytes) const {
  if (bytes <= 0) return 0;
  return kHostLatencyCycles + static_cast<uint64_t>(static_cast<double>(bytes) / host_bytes_per_cycle + 0.999999);
}

uint64_t DeviceDescription::interIpuSyncCycles(int ipus) const {
  if (ipus <= 1) return 0;
  // Chips in a ring: the farthest is ipus / 2 hops away.
  const double seconds = kInterIpuSyncSecondsPerHop * static_cast<double>(ipus / 2);
  return static_cast<uint64_t>(seconds * static_cast<double>(tile_clock_frequency) + 0.999999);
}

std::string DeviceDescription::toJson() const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", exchange_bytes_per_cycle);
  return std::string("{") + "\"version\": " + json::quote(version) + ", \"num_tiles\": " + std::to_string(num_tiles) +
         ", \"tiles_per_chip\": " + std::to_string(tiles_per_chip) +
         ", \"bytes_per_tile\": " + std::to_string(bytes_per_tile) +
         ", \"num_worker_contexts\": " + std::to_string(num_worker_contexts) +
         ", \"tile_clock_frequency\": " + std::to_string(tile_clock_frequency) +
         ", \"exchange_bytes_per_cycle\": " + buf + ", \"global_sync_cycles\": " + std::to_string(sync_cycles) +
         ", \"total_memory_bytes\": " + std::to_string(bytes_per_tile * num_tiles) + "}";
}

std::string RunProfile::toJson() const {
  std::string s = "{\"total_cycles\": " + std::to_string(total_cycles) +
                  ", \"compute_cycles\": " + std::to_string(compute_cycles) +
                  ", \"exchange_cycles\": " + std::to_string(exchange_cycles) +
                  ", \"sync_cycles\": " + std::to_string(sync_cycles) +
                  ", \"supersteps\": " + std::to_string(supersteps) + ", \"steps\": [";
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepProfile& p = steps[i];
    s += (i ? ", " : "") + std::string("{\"id\": ") + std::to_string(p.id) + ", \"type\": " + json::quote(p.type) +
         ", \"name\": " + json::quote(p.name) + ", \"loc\": " + json::quote(p.loc) +
         ", \"executions\": " + std::to_string(p.executions) +
         ", \"cycles\": " + std::to_string(p.compute_cycles + p.exchange_cycles + p.sync_cycles) +
         ", \"compute_cycles\": " + std::to_string(p.compute_cycles) +
         ", \"exchange_cycles\": " + std::to_string(p.exchange_cycles) +
         ", \"sync_cycles\": " + std::to_string(p.sync_cycles) + ", \"supersteps\": " + std::to_string(p.supersteps) +
         "}";
  }
  return s + "]}";
}

}  // namespace ipu
