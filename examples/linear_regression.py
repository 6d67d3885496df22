"""Linear regression on the IPU: fit y = w x + b to noisy samples of a known line with SGD, then plot the data,
the fitted line and the loss curve to a PNG file.

Each step is one jitted ipu call with the parameters donated (they stay on the device); the data is drawn with a
fixed numpy seed. The fit is checked against the true line and against numpy's least-squares solution.

    python linear_regression.py [--short] [--plot linear_regression.png]

Prints ``RESULT w W true TW lstsq LW``, ``RESULT b ...``, ``RESULT final_loss L`` and ``RESULT plot PATH``.
Stated accuracy: w and b within 0.05 of numpy's least-squares fit (and so near the truth: the noise is small).
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial

os.environ.setdefault("JAX_PLATFORMS", "cpu,ipu")
os.environ.setdefault("JAX_PLATFORM_NAME", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

TRUE_W, TRUE_B, NOISE = 3.0, -1.5, 0.5
TOLERANCE = 0.05


def loss(params, x, y):
    w, b = params
    return jnp.mean((w * x + b - y) ** 2)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="a quick run for the examples suite")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--step-size", type=float, default=0.1)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--plot", default="linear_regression.png", help="where to write the figure (PNG)")
    args = parser.parse_args(argv)
    steps = args.steps or (150 if args.short else 1000)

    rng = np.random.RandomState(0)
    x = rng.uniform(-2.0, 2.0, args.samples).astype(np.float32)
    y = (TRUE_W * x + TRUE_B + NOISE * rng.standard_normal(args.samples)).astype(np.float32)

    @partial(jax.jit, backend="ipu", donate_argnums=(0,))
    def sgd_step(params, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - args.step_size * g, params, grads), value

    ipu = jax.devices("ipu")[0]
    params = jax.device_put((jnp.float32(0.0), jnp.float32(0.0)), ipu)
    x_ipu, y_ipu = jax.device_put(x, ipu), jax.device_put(y, ipu)  # the data too is sent once
    losses = []
    for _ in range(steps):
        params, value = sgd_step(params, x_ipu, y_ipu)
        losses.append(value)
    w, b = (float(p) for p in params)
    losses = [float(v) for v in losses]
    (lstsq_w, lstsq_b), *_ = np.linalg.lstsq(np.stack([x, np.ones_like(x)], 1).astype(np.float64), y, rcond=None)

    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, (ax_fit, ax_loss) = plt.subplots(1, 2, figsize=(10, 4))
    ax_fit.scatter(x, y, s=4, alpha=0.4, label="samples")
    grid = np.linspace(-2.0, 2.0, 2)
    ax_fit.plot(grid, TRUE_W * grid + TRUE_B, "k--", label=f"true: {TRUE_W:g}x{TRUE_B:+g}")
    ax_fit.plot(grid, w * grid + b, "r", label=f"ipu SGD: {w:.3f}x{b:+.3f}")
    ax_fit.set_xlabel("x"), ax_fit.set_ylabel("y"), ax_fit.legend()
    ax_loss.semilogy(losses)
    ax_loss.set_xlabel("step"), ax_loss.set_ylabel("mean squared error"), ax_loss.set_title(f"{steps} SGD steps on ipu")
    fig.tight_layout()
    fig.savefig(args.plot)

    print(f"RESULT w {w:.4f} true {TRUE_W:.4f} lstsq {lstsq_w:.4f}")
    print(f"RESULT b {b:.4f} true {TRUE_B:.4f} lstsq {lstsq_b:.4f}")
    print(f"RESULT final_loss {losses[-1]:.4f} first_loss {losses[0]:.4f} noise_variance {NOISE ** 2:.4f}")
    print(f"RESULT plot {os.path.abspath(args.plot)}")
    ok = abs(w - lstsq_w) <= TOLERANCE and abs(b - lstsq_b) <= TOLERANCE
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
