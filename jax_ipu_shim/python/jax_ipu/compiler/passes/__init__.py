"""Rewrites of the program document, one module each, run by translate on the functions it has written: XLA's
common-subexpression elimination and simplifier's rules first (common_subexpressions, reassociate_constants), then
what XLA's fusion does to the arithmetic (contract_through_moves, duplicate_products), dead-code elimination after
those that bypass ops. Each works on a block of the document (a function or a region: ``{"body": [...],
"results": [...]}``) and says in its header which XLA behaviour it reproduces and why it keeps the program's values
the same, or changes them only as XLA:CPU does."""

from __future__ import annotations

import functools
import itertools
from typing import Any, Callable, Dict, List


def value_ids(block: Dict[str, Any]) -> List[int]:
    """The ids a block defines: its parameters' and its ops' results, its regions' included."""
    ids = [p["id"] for p in block.get("params", ())]
    for entry in block["body"]:
        ids.extend(r["id"] for r in entry["results"])
        for region in entry.get("regions", ()):
            ids.extend(value_ids(region))
    return ids


def id_counter(function: Dict[str, Any]) -> Callable[[], int]:
    """Fresh ids for new values of ``function``: numbered after every id it has."""
    return functools.partial(next, itertools.count(max(value_ids(function), default=-1) + 1))
