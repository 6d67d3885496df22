"""``python -m jax_ipu.report DIR [DIR ...]``: re-renders ``profile.html`` beside every ``profile.json`` under
the given folders (a report folder or a directory of them) and prints the pages written."""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from jax_ipu import report
from jax_ipu.report import html


def _reports(path: str) -> List[str]:
    if os.path.isfile(path):
        return [path]
    found = []
    for root, _dirs, files in os.walk(path):
        if report.JSON_NAME in files:
            found.append(os.path.join(root, report.JSON_NAME))
    return sorted(found)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jax_ipu.report",
                                     description="Re-render the HTML pages of jax-ipu profile reports from their JSON.")
    parser.add_argument("paths", nargs="+", metavar="DIR",
                        help="a report folder, a profile.json, or a directory of them")
    args = parser.parse_args(argv)
    status = 0
    for path in args.paths:
        files = _reports(path)
        if not files:
            print(f"{path}: no {report.JSON_NAME} found", file=sys.stderr)
            status = 1
        for name in files:
            try:
                profile = report.load(name)
            except (OSError, ValueError) as error:
                print(f"{name}: {error}", file=sys.stderr)
                status = 1
                continue
            out = os.path.join(os.path.dirname(name), report.HTML_NAME)
            report._replace(out, html.render(profile))
            print(out)
    return status


if __name__ == "__main__":
    sys.exit(main())
