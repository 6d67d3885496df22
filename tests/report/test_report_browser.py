"""The profile report page in a real headless browser: Debian's Chromium driven by Playwright
(build_tools/report-test-requirements.txt). A report is made by a real run on the ipu; the page must render its
charts with the JSON's numbers, fetch nothing from the network, raise no script error, and leave a screenshot in
tests/artifacts/ (or $JAX_IPU_TEST_ARTIFACTS).

Skipped only when Chromium is not installed (apt-get install chromium)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("JAX_IPU_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("JAX_IPU_TEST_ARTIFACTS") or Path(__file__).resolve().parents[1] / "artifacts")

PROGRAM = """
import jax, jax.numpy as jnp, numpy as np
import jax_ipu

def layer(x, w, b):
    def body(i, h):
        return jax.nn.relu(h @ w + b)
    return jax.lax.fori_loop(0, 4, body, x)

x = np.linspace(-1, 1, 256 * 128, dtype=np.float32).reshape(256, 128)
w = np.linspace(-0.05, 0.05, 128 * 128, dtype=np.float32).reshape(128, 128)
b = np.full(128, 0.01, np.float32)
jax.jit(layer, backend="ipu")(x, w, b).block_until_ready()
"""


def _tree_nodes(node):
    return 1 + sum(_tree_nodes(c) for c in node.get("children", []))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    directory = tmp_path_factory.mktemp("reports")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "TF_POPLAR", "XLA_IPU"))}
    env.update(POPLAR_ENGINE_OPTIONS=json.dumps({"autoReport.all": "true", "autoReport.directory": str(directory)}),
               JAX_IPU_MODEL_NUM_TILES="64")
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(PROGRAM)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True, timeout=600)
    assert result.returncode == 0, result.stderr
    folder = sorted(p for p in directory.iterdir() if p.name.startswith("jit_layer"))[-1]
    return folder, json.loads((folder / "profile.json").read_text())


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"Chromium is not installed ({CHROMIUM} missing): apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright is missing: pip install --require-hashes -r build_tools/report-test-requirements.txt")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions"])
        yield browser
        browser.close()


def _ints(page, selector, attribute):
    return page.eval_on_selector_all(selector, f"els => els.map(e => Number(e.getAttribute('{attribute}')))")


def test_report_page_renders_the_reports_numbers(browser, report):
    folder, profile = report
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    requests, errors = [], []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    def route(r):
        requests.append(r.request.url)
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            r.abort()
    page.route("**/*", route)
    page.goto((folder / "profile.html").as_uri())
    page.wait_for_selector("body[data-rendered=true]", timeout=30000)
    assert errors == []
    assert [u for u in requests if not u.startswith("file://")] == []  # self-contained: nothing fetched

    memory, run = profile["memory"], profile["execution"]["runs"][0]
    assert page.inner_text("#program-name") == profile["program"]
    worst = page.query_selector("#summary-worst-tile")
    assert int(worst.get_attribute("data-tile")) == memory["worst_tile"]
    assert int(worst.get_attribute("data-bytes")) == memory["worst_bytes"]
    assert f"tile {memory['worst_tile']}" in worst.inner_text()
    total = page.query_selector("#summary-total-cycles")
    assert int(total.get_attribute("data-value")) == run["total_cycles"]
    assert f"{run['total_cycles']:,}" in total.inner_text()
    percent = float(page.get_attribute("#summary-memory-percent", "data-value"))
    assert percent == pytest.approx(memory["percent_of_chip"])
    seconds = float(page.get_attribute("#summary-time", "data-seconds"))
    assert seconds == pytest.approx(run["total_cycles"] / profile["target"]["clock_hz"])

    # Per-tile chart: one bar per tile with the tile's bytes, drawn taller for fuller tiles.
    assert _ints(page, "#tile-memory-chart g.tile-bar", "data-tile") == list(range(profile["target"]["tiles"]))
    assert _ints(page, "#tile-memory-chart g.tile-bar", "data-bytes") == memory["per_tile"]["bytes"]
    heights = page.eval_on_selector_all("#tile-memory-chart g.tile-bar",
                                        "els => els.map(e => e.getBoundingClientRect().height)")
    assert heights[memory["worst_tile"]] == pytest.approx(max(heights), abs=0.5) and max(heights) > 10
    emptiest = min(range(len(heights)), key=lambda t: memory["per_tile"]["bytes"][t])
    assert heights[emptiest] <= heights[memory["worst_tile"]]

    categories = dict(zip(page.eval_on_selector_all(".category-row", "els => els.map(e => e.dataset.category)"),
                          _ints(page, ".category-row", "data-bytes")))
    assert categories == memory["by_category"]

    assert _ints(page, "#liveness-chart rect.live-bar", "data-bytes") == profile["liveness"]["bytes"]
    assert _ints(page, "#step-table tbody tr", "data-cycles") == [s["cycles"] for s in run["steps"]]
    assert _ints(page, "#op-table tbody tr", "data-cycles") == [o["cycles"] for o in run["ops"]]
    locs = page.eval_on_selector_all("#op-table tbody tr", "els => els.map(e => e.dataset.loc)")
    assert any(loc.startswith("<string>:") or ".py:" in loc for loc in locs)  # linked to source lines
    assert len(page.query_selector_all("#program-tree li")) == _tree_nodes(profile["program_tree"])
    assert page.query_selector("#program-tree li[data-type=RepeatWhileTrue]") is not None

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    if not (ARTIFACTS / ".gitignore").exists():
        (ARTIFACTS / ".gitignore").write_text("*\n")
    shot = ARTIFACTS / "report-page.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10000
    page.close()
