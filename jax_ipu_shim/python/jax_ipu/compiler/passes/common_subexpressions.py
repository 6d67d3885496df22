"""XLA's common-subexpression elimination (HloCSE), for integer and boolean values, on a function or region of the
program document.

Two pure ops of one block with the same name, operands, attributes and integer or boolean result types compute the
same values: the later one is dropped and what read it reads the earlier one's results. jax writes such repeats in
index arithmetic (``lax.scan`` clamps its loop index twice each step, once for the dynamic_slice of its input and once
for the dynamic_update_slice of its output, with equal constants written where each is used), which XLA computes
once. The ops merged are deterministic functions of the same operands, so no value changes: the program only does
less (fewer steps, cycles and bytes in the profile). Float values are left as jax wrote them: where a float op is
read decides how XLA:CPU fuses and contracts it (duplicate_products), which the front end reproduces from jax's own
program (merging repeated float products changed cpu-exact results in test_fusion.py). A reduction, windowed reduction
or sort is merged where its region computes the same (the same ops on its parameters, in order: HloCSE compares
their computations), as jnp.mean(x) written twice is one value on cpu, and their difference 0 (fuzz seed 20287211
#1404). Other ops with regions, ops that are not pure (the registry's isPure: host transfers, callbacks) and
random-number ops (XLA's kRng has side effects) are never merged; each region is a block of its own, as each
computation is for XLA."""

from __future__ import annotations

from typing import Any, Dict, Hashable, List, Optional, Set, Tuple

from .. import ops as O

_KEYED_FIELDS = ("op", "mlir", "operands", "results", "attrs", "regions", "loc")
_INDEX_TYPES = ("bool", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")  # the values merged


def hashable(value: Any) -> Optional[Hashable]:
    """A key that is equal exactly where the attribute values are (bytes whole, lists in order, dicts by key); None
    for a value of another kind (such an op is not merged)."""
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return (type(value).__name__, value)
    if isinstance(value, (list, tuple)):
        elements = [hashable(v) for v in value]
        return None if any(e is None for e in elements) else ("list", tuple(elements))
    if isinstance(value, dict):
        pairs = [(k, hashable(v)) for k, v in sorted(value.items())]
        return None if any(h is None for _, h in pairs) else ("dict", tuple(pairs))
    return None


_MERGED_WITH_REGIONS = ("reduce", "reduce_window", "sort")  # ops whose regions are scalar computations


def _key(entry: Dict[str, Any], dtypes: Tuple[str, ...] = _INDEX_TYPES,
         local: Optional[Dict[int, int]] = None) -> Optional[Hashable]:
    """What makes two ops with results of ``dtypes`` compute the same values; None for an op that is never
    merged. ``local``: inside a region, the positions of its own values (its parameters, then each op's results),
    which stand for them."""
    op = entry["op"]
    regions = entry.get("regions") or ()
    if (regions and op not in _MERGED_WITH_REGIONS and local is None) or not entry["results"] or \
            not O.is_pure(op) or "rng" in op:
        return None
    if local is None and any(r["dtype"] not in dtypes for r in entry["results"]):
        return None
    extra = {k: v for k, v in entry.items() if k not in _KEYED_FIELDS}
    parts = [hashable(entry.get("attrs", {})), hashable(extra),
             hashable([[r["dtype"], r["shape"]] for r in entry["results"]])]
    region_keys = tuple(_region_key(region) for region in regions)
    if any(p is None for p in parts) or any(k is None for k in region_keys):
        return None
    operands = tuple(("local", local[i]) if local is not None and i in local else i for i in entry["operands"])
    return (op, entry.get("mlir"), operands, *parts, region_keys)


def _region_key(region: Dict[str, Any]) -> Optional[Hashable]:
    """A region's computation with its own values numbered by position: equal for two regions that compute the same
    from their parameters and the same outer values; None where an op in it is never merged."""
    local: Dict[int, int] = {}
    shapes = []
    for param in region["params"]:
        local[param["id"]] = len(local)
        shapes.append([param.get("dtype"), param.get("shape")])
    ops = []
    for entry in region["body"]:
        key = _key(entry, local=local)
        if key is None:
            return None
        ops.append(key)
        for result in entry["results"]:
            local[result["id"]] = len(local)
    results = tuple(("local", local[i]) if i in local else i for i in region["results"])
    return ("region", hashable(shapes), tuple(ops), results)


def rename(block: Dict[str, Any], same: Dict[int, int]) -> None:
    """Reads of dropped values read their first copy, in this block and the regions in it."""
    for entry in block["body"]:
        entry["operands"] = [same.get(i, i) for i in entry["operands"]]
        for region in entry.get("regions", ()):
            rename(region, same)
    block["results"] = [same.get(i, i) for i in block["results"]]


def run(block: Dict[str, Any], anchors: Set[int]) -> bool:
    """Merges the repeated ops of ``block`` and of each region in it, in place (``anchors``, the values jax's
    dce_sinks read, are renamed too); returns whether anything changed."""
    changed = merge(block, anchors, _INDEX_TYPES)
    for entry in block["body"]:
        for region in entry.get("regions", ()):
            changed = run(region, anchors) or changed
    return changed


def merge(block: Dict[str, Any], anchors: Set[int], dtypes: Tuple[str, ...],
          skip: Tuple[str, ...] = ()) -> bool:
    """Merges the repeated ops of ``block`` (not of the regions in it) whose results are of ``dtypes``, but the ops
    named in ``skip``, in one pass (a repeat's readers read the first copy before their own key is made, so a chain
    of repeats merges whole); returns whether anything changed."""
    same: Dict[int, int] = {}
    first: Dict[Hashable, List[int]] = {}
    kept = []
    for entry in block["body"]:
        entry["operands"] = [same.get(i, i) for i in entry["operands"]]
        key = None if entry["op"] in skip else _key(entry, dtypes)
        ids = [r["id"] for r in entry["results"]]
        if key is not None and key in first:
            same.update(zip(ids, first[key]))
            continue
        if key is not None:
            first[key] = ids
        kept.append(entry)
    changed = len(kept) != len(block["body"])
    block["body"] = kept
    rename(block, same)
    for dropped, copy in same.items():
        if dropped in anchors:
            anchors.discard(dropped)
            anchors.add(copy)
    return changed
