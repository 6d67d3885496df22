"""The minimal example of Graphcore's JAX-on-IPU README, run as a user would."""

from __future__ import annotations

from _series import only_jax_0_4_13

pytestmark = only_jax_0_4_13(
    "the seed is a jax 0.4.13 program (its Array.device() is a property in the current series)")

SEED_EXAMPLE = """
from functools import partial
import jax
import numpy as np

@partial(jax.jit, backend="ipu")
def ipu_function(data):
    return data**2 + 1

data = np.array([1, -2, 3], np.float32)
output = ipu_function(data)
print(output, output.device())
"""


def test_seed_minimal_example_prints_on_an_ipu(python):
    result = python(SEED_EXAMPLE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[ 2.  5. 10.] IpuDevice(id=0, num_tiles=1472, version=ipu2)"


def test_seed_example_with_the_ipu_model_flags(python):
    result = python(SEED_EXAMPLE, {"TF_POPLAR_FLAGS": "--use_ipu_model --ipu_model_tiles=8"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[ 2.  5. 10.] IpuDevice(id=0, num_tiles=8, version=ipu2)"
