"""Executes a notebook of this directory with nbclient (the kernel is this interpreter's ipykernel) and prints what
its cells printed; ``--output`` saves the executed notebook.

    python run_notebook.py quickstart.ipynb [--output executed.ipynb] [--short]

``--short`` is accepted for the examples suite's uniform command line (the quickstart is short already).
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", nargs="?", default="quickstart.ipynb")
    parser.add_argument("--output", default=None)
    parser.add_argument("--short", action="store_true")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = parser.parse_args(argv)

    import nbclient
    import nbformat

    path = args.notebook if os.path.isabs(args.notebook) else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                            args.notebook)
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=args.timeout, kernel_name="python3",
                                     resources={"metadata": {"path": os.path.dirname(path)}})
    try:
        client.execute()
    finally:
        for cell in notebook.cells:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "stream" and output.get("name") == "stdout":
                    sys.stdout.write(output["text"])
        if args.output:
            nbformat.write(notebook, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
