"""The published-figures table of `nox -s fidelity` (tests/fidelity/published.py) is well formed, every row has a
measurement, and the fidelity rows the cost model's constants name exist (an estimate's constant says which row it
is derived from or calibrated against)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "fidelity"))

import published  # noqa: E402

EMULATOR = REPO / "jax_ipu_shim" / "emulator"
ROW_ID = re.compile(r"(?<![\w-])((?:chip|tile|model)\.[a-z0-9_]+)")
NAMING = re.compile(r"fidelity rows?\s+([^;)]*)")  # "(fidelity row chip.exchange_bandwidth)"


def _measured_ids():
    tree = ast.parse((REPO / "tests" / "fidelity" / "fidelity.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "MEASURES":
            return {k.value for k in node.value.keys}
    raise AssertionError("fidelity.py has no MEASURES table")


def test_rows_are_unique_sourced_and_banded_by_kind():
    seen = set()
    for f in published.FIGURES:
        assert (f.id, f.chip) not in seen, f"{f.id} on {f.chip} twice"
        seen.add((f.id, f.chip))
        assert f.kind in published.BANDS, f"{f.id}: unknown kind {f.kind}"
        assert f.chip in ("ipu1", "ipu2", "ipu21"), f"{f.id}: unknown chip {f.chip}"
        assert len(f.source) > 20, f"{f.id} on {f.chip}: say where the figure was published"
        assert f.value > 0
        if f.kind == "reference":
            assert f.note, f"{f.id}: a reference row says why it is not like for like"
    assert published.BANDS == {"derived": 0.10, "measured": 0.25, "model": 0.25, "reference": None}


def test_every_row_is_measured():
    assert set(published.ids()) <= _measured_ids()


def test_the_rows_the_cost_model_names_exist():
    named = {}
    for path in list((EMULATOR / "src").rglob("*.cc")) + list((EMULATOR / "include").rglob("*.h")):
        for naming in NAMING.findall(path.read_text()):
            for row in ROW_ID.findall(naming):
                named.setdefault(row, path.name)
    rows = set(published.ids())
    # (a family of rows is named by its prefix: "tile.amp_fp16_*")
    unknown = {r: where for r, where in named.items()
               if r not in rows and not (r.endswith("_") and any(x.startswith(r) for x in rows))}
    assert not unknown, f"the cost model names fidelity rows that tests/fidelity/published.py lacks: {unknown}"
    # The AMP's rates and the exchange's width are derived from these rows.
    assert {"chip.peak_fp16", "chip.peak_fp32", "chip.exchange_bandwidth"} <= set(named)
