"""A PEP 517 backend whose wheel is the jaxlib wheel of `python -m build_tools build` (run in the repository).

cibuildwheel (pip wheel, no build isolation) calls build_wheel inside its manylinux2014 container with the
container's Python 3.8; the build tools come from build_tools/requirements.txt (before-build). The wheel is the one
the build writes, byte for byte; the jax wheel (pure Python) stays in the repository's dist/.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO = Path(__file__).resolve().parents[2]


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    # The variables pip and its hook runner set for this backend (its path, the build tracker) would make the pip
    # the build runs for the jax wheel load this backend instead of setuptools.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("_PYPROJECT_HOOKS", "PEP517", "PIP_BUILD_TRACKER", "PIP_REQ_TRACKER"))}
    subprocess.run([sys.executable, "-m", "build_tools", "build", "--if-stale"], cwd=REPO, env=env, check=True)
    found = sorted((REPO / "dist").glob("jaxlib-*.whl"))
    if len(found) != 1:
        raise RuntimeError(f"expected one jaxlib wheel in {REPO / 'dist'}, found {[p.name for p in found]}")
    shutil.copy2(found[0], Path(wheel_directory) / found[0].name)
    return found[0].name
