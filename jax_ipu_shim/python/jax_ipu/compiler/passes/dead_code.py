"""XLA's dead-code elimination on a function or region of the program document.

Drops, last op first, each pure op whose results nothing reads: neither a later op, a region, the block's results
nor one of jax's dce_sinks (the anchors). XLA does this before XLA:CPU compiles, so an op that only computes is not
run at all; that includes the ops the front end's own rewrites leave unread (a divide's sqrt, the multiply a moved
product replaced). Nothing it removes is read, so no value changes: the program only does less (fewer steps, cycles
and bytes in the profile, as on cpu where XLA removed them)."""

from __future__ import annotations

from typing import Any, Dict, Set

from .. import ops as O


def pure(entry: Dict[str, Any]) -> bool:
    """An op with results that only computes them (the registry's "pure": ipu/registry.h isPure)."""
    return bool(entry["results"]) and O.is_pure(entry["op"])


def run(block: Dict[str, Any], anchors: Set[int]) -> Set[int]:
    """Drops the dead ops of ``block`` and its regions in place; returns the ids the block reads, its regions'
    included."""
    live = set(block["results"]) | anchors
    kept = []
    for entry in reversed(block["body"]):
        if pure(entry) and not any(r["id"] in live for r in entry["results"]):
            continue
        for region in entry.get("regions", ()):
            live |= run(region, anchors)
        live.update(entry["operands"])
        kept.append(entry)
    block["body"] = kept[::-1]
    return live
