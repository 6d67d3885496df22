"""Writes a hash-locked requirements file for one target Python, the way the locks under build_tools/ are made.

    python build_tools/lock.py --python 3.12 --out build_tools/test-requirements-3.12.txt \\
        --drop jax,jaxlib jax==0.12.0.1 jaxlib==0.12.0.1 pytest==8.3.4

pip resolves the requirements for the target Python and platform (``pip download --only-binary=:all:
--python-version ... --platform ...``, the build host's pip and index settings), every downloaded wheel is hashed,
and the file lists ``name==version --hash=sha256:...`` sorted by name. ``--drop`` leaves out packages the sessions
install otherwise (our own wheels). The file starts with the command that wrote it.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

PLATFORMS = ("manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64",
             "manylinux_2_26_x86_64", "manylinux1_x86_64", "manylinux2010_x86_64", "any")


def lock(python: str, requirements: List[str], drop: List[str], header: str) -> str:
    with tempfile.TemporaryDirectory(prefix="jax-ipu-lock-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--only-binary=:all:",
               "--python-version", python, "--implementation", "cp", "-d", tmp]
        for platform in PLATFORMS:
            cmd += ["--platform", platform]
        proc = subprocess.run(cmd + requirements, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"lock: pip download failed:\n{proc.stdout[-4000:]}")
        lines = []
        for wheel in sorted(Path(tmp).glob("*.whl"), key=lambda p: p.name.lower()):
            name, version = wheel.name.split("-")[:2]
            canonical = re.sub(r"[-_.]+", "-", name).lower()
            if canonical in drop:
                continue
            digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
            lines.append(f"{canonical}=={version} \\\n    --hash=sha256:{digest}")
    return header + "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--drop", default="", help="comma-separated packages to leave out")
    parser.add_argument("--comment", default="", help="a line saying what the lock is for")
    parser.add_argument("requirements", nargs="+")
    args = parser.parse_args(argv)
    drop = [re.sub(r"[-_.]+", "-", d).lower() for d in args.drop.split(",") if d]
    command = " ".join(["python build_tools/lock.py", "--python", args.python, "--out", str(args.out)] +
                       (["--drop", args.drop] if args.drop else []) + args.requirements)
    header = (f"# {args.comment}\n" if args.comment else "") + f"# Written by: {command}\n"
    args.out.write_text(lock(args.python, args.requirements, drop, header))
    print(f"[lock] wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
