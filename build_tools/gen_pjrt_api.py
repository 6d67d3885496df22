"""Generates pjrt_api.h, the PJRT_Api table of one jaxlib series, from that series' pinned PJRT C API header.

The shared PJRT layer (jax_ipu_shim/pjrt/*.cc) includes "pjrt_api.h" from the series' generated-headers dir, and the
series' table source (jax_ipu_shim/pjrt/tables/api_<table>.cc) fills ``JaxIpu_PjrtApi``. Either way it defines
``JAX_IPU_PJRT_MINOR``: the API minor version the table is (0.4.13's table predates version numbers: 0).

``--table 0.90`` (jaxlib 0.12, header of tensorflow-cpu 2.21.0): the header's own PJRT_Api, checked to be 0.90.

``--table 0.4.13``:

jaxlib 0.4.13 was built from an XLA of mid-June 2023, whose header no published wheel carries. Its table is the
TF 2.13 table (552 bytes) with four differences: jaxlib 0.4.13 needs a 592-byte PJRT_Api (the offsets it calls,
checked below, say where the fields moved). This script reads the TF 2.13 field list, applies exactly those
differences, and checks the offsets jaxlib is known to call. Argument types still come from the TF header; the
three functions it lacks are declared here.

Usage: python build_tools/gen_pjrt_api.py --table 0.4.13 --header .../pjrt/c/pjrt_c_api.h --out gen/pjrt_api.h
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys

API_SIZE = 592
POINTER = 8
# struct_size + priv + the 24-byte PJRT_Api_Version struct that precedes the first function slot.
HEADER_BYTES = 8 + 8 + 24

# (function, inserted after) — functions 0.4.13's table has that TF 2.13's lacks.
INSERTIONS = [
    ("PJRT_Device_MemoryStats", "PJRT_Device_LocalHardwareId"),
    ("PJRT_Executable_GetCostAnalysis", "PJRT_Executable_SizeOfGeneratedCodeInBytes"),
]
# (function, inserted before)
INSERTIONS_BEFORE = [("PJRT_TopologyDescription_GetDeviceDescriptions", "PJRT_Compile")]
REMOVED = ["PJRT_LoadedExecutable_GetCostAnalysis"]
# Offsets observed in jaxlib 0.4.13's calls: the generated table must put these functions exactly there.
KNOWN_OFFSETS = {
    "PJRT_Error_Destroy": 0x28,
    "PJRT_Device_MemoryStats": 272,
    "PJRT_Executable_GetCostAnalysis": 328,
    "PJRT_TopologyDescription_GetDeviceDescriptions": 576,
}

# Declarations for the functions TF 2.13's header has no argument struct for.
EXTRA_DECLARATIONS = """\
// Argument layout used by jaxlib 0.4.13 for compiled.cost_analysis(): 40 bytes.
typedef struct PJRT_Executable_GetCostAnalysis_Args {
  size_t struct_size;
  void* priv;
  PJRT_Executable* executable;
  size_t num_properties;         // out
  PJRT_NamedValue* properties;   // out, owned by the executable
} PJRT_Executable_GetCostAnalysis_Args;
typedef PJRT_Error* PJRT_Executable_GetCostAnalysis(PJRT_Executable_GetCostAnalysis_Args* args);

// Argument layout used by jaxlib 0.4.13 for device.memory_stats() (PjRtCApiDevice::GetAllocatorStats passes 185
// bytes, and reads the fields at these offsets): the later headers' layout, which only appends.
typedef struct PJRT_Device_MemoryStats_Args {
  size_t struct_size;
  void* priv;
  PJRT_Device* device;
  int64_t bytes_in_use;                 // out
  int64_t peak_bytes_in_use;            // out
  bool peak_bytes_in_use_is_set;        // out
  int64_t num_allocs;                   // out
  bool num_allocs_is_set;               // out
  int64_t largest_alloc_size;           // out
  bool largest_alloc_size_is_set;       // out
  int64_t bytes_limit;                  // out
  bool bytes_limit_is_set;              // out
  int64_t bytes_reserved;               // out
  bool bytes_reserved_is_set;           // out
  int64_t peak_bytes_reserved;          // out
  bool peak_bytes_reserved_is_set;      // out
  int64_t bytes_reservable_limit;       // out
  bool bytes_reservable_limit_is_set;   // out
  int64_t largest_free_block_bytes;     // out
  bool largest_free_block_bytes_is_set; // out
  int64_t pool_bytes;                   // out
  bool pool_bytes_is_set;               // out
  int64_t peak_pool_bytes;              // out
  bool peak_pool_bytes_is_set;          // out
} PJRT_Device_MemoryStats_Args;
typedef PJRT_Error* PJRT_Device_MemoryStats(PJRT_Device_MemoryStats_Args* args);

// Not called by jaxlib 0.4.13 on any path we support; the plugin answers it with a clean error.
typedef struct PJRT_TopologyDescription PJRT_TopologyDescription;
typedef struct PJRT_TopologyDescription_GetDeviceDescriptions_Args {
  size_t struct_size;
  void* priv;
  PJRT_TopologyDescription* topology;
} PJRT_TopologyDescription_GetDeviceDescriptions_Args;
typedef PJRT_Error* PJRT_TopologyDescription_GetDeviceDescriptions(
    PJRT_TopologyDescription_GetDeviceDescriptions_Args* args);
"""


def read_tf_fields(header_text: str) -> list[str]:
    match = re.search(r"typedef struct \{(.*?)\} PJRT_Api;", header_text, re.S)
    if not match:
        raise SystemExit("gen_pjrt_api: no `typedef struct {...} PJRT_Api;` in the header: is it TF 2.13's?")
    return re.findall(r"_PJRT_API_STRUCT_FIELD\((\w+)\)", match.group(1))


def table_0_4_13(tf_fields: list[str]) -> list[str]:
    fields = [f for f in tf_fields if f not in REMOVED]
    for name, after in INSERTIONS:
        fields.insert(fields.index(after) + 1, name)
    for name, before in INSERTIONS_BEFORE:
        fields.insert(fields.index(before), name)
    return fields


def check(fields: list[str]) -> None:
    size = HEADER_BYTES + POINTER * len(fields)
    if size != API_SIZE:
        raise SystemExit(f"gen_pjrt_api: table is {size} bytes, jaxlib 0.4.13 expects {API_SIZE}")
    for name, offset in KNOWN_OFFSETS.items():
        actual = HEADER_BYTES + POINTER * fields.index(name)
        if actual != offset:
            raise SystemExit(f"gen_pjrt_api: {name} lands at +{actual}, jaxlib 0.4.13 calls it at +{offset}")


def render(fields: list[str], header_path: str) -> str:
    slots = "\n".join(f"  {f}* {f};" for f in fields)
    asserts = "\n".join(
        f"static_assert(offsetof(PJRT_Api_0_4_13, {name}) == {offset}, \"{name} offset\");"
        for name, offset in KNOWN_OFFSETS.items()
    )
    return f"""\
// Generated by build_tools/gen_pjrt_api.py from {pathlib.Path(header_path).name} (TF 2.13). Do not edit.
// The PJRT_Api table of jaxlib 0.4.13: {len(fields)} function slots, {API_SIZE} bytes.
#pragma once

#include <cstddef>

#include "tensorflow/compiler/xla/pjrt/c/pjrt_c_api.h"

extern "C" {{

{EXTRA_DECLARATIONS}
typedef struct PJRT_Api_Version_0_4_13 {{
  size_t struct_size;
  void* priv;
  int major_version;
  int minor_version;
}} PJRT_Api_Version_0_4_13;

typedef struct PJRT_Api_0_4_13 {{
  size_t struct_size;
  void* priv;
  PJRT_Api_Version_0_4_13 pjrt_api_version;
{slots}
}} PJRT_Api_0_4_13;

}}  // extern "C"

typedef PJRT_Api_0_4_13 JaxIpu_PjrtApi;
#define JAX_IPU_PJRT_MINOR 0

static_assert(sizeof(PJRT_Api_Version_0_4_13) == 24, "PJRT_Api_Version size");
static_assert(sizeof(PJRT_Api_0_4_13) == {API_SIZE}, "jaxlib 0.4.13 checks PJRT_Api.struct_size == {API_SIZE}");
{asserts}
"""


# The newer tables: the header's PJRT_Api as it is, for (minor version, sizeof(PJRT_Api)).
CURRENT_TABLES = {"0.90": (90, 1064)}


def render_current(table: str, header_text: str, header_path: str) -> str:
    minor, size = CURRENT_TABLES[table]
    found = re.search(r"#define PJRT_API_MINOR (\d+)", header_text)
    if not found or int(found.group(1)) != minor:
        raise SystemExit(f"gen_pjrt_api: {header_path} is PJRT API 0.{found.group(1) if found else '?'}, "
                         f"the {table} table needs 0.{minor}: is the pinned header the right one?")
    return f"""\
// Generated by build_tools/gen_pjrt_api.py from {pathlib.Path(header_path).name} (PJRT C API 0.{minor}). Do not edit.
#pragma once

#include <cstddef>

#include "xla/pjrt/c/pjrt_c_api.h"

typedef PJRT_Api JaxIpu_PjrtApi;
#define JAX_IPU_PJRT_MINOR {minor}

static_assert(sizeof(PJRT_Api) == {size}, "PJRT_Api of API 0.{minor} is {size} bytes");
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default="0.4.13", choices=["0.4.13", *CURRENT_TABLES],
                        help="which jaxlib series' table (build_tools/pins.toml: series.*.pjrt_header.table)")
    parser.add_argument("--header", required=True, help="TF 2.13's tensorflow/compiler/xla/pjrt/c/pjrt_c_api.h")
    parser.add_argument("--out", required=True, help="the header to write")
    args = parser.parse_args(argv)
    header_text = pathlib.Path(args.header).read_text()
    if args.table in CURRENT_TABLES:
        text = render_current(args.table, header_text, args.header)
    else:
        fields = table_0_4_13(read_tf_fields(header_text))
        check(fields)
        text = render(fields, args.header)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
