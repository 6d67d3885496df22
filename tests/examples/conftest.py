"""This suite's known failures of the installed series as strict xfails (tests/_series_expectations.py)."""

from __future__ import annotations


def pytest_collection_modifyitems(config, items):
    import os
    import sys

    suite = os.path.dirname(os.path.abspath(__file__))
    tests = os.path.dirname(suite)
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import _series_expectations

    _series_expectations.mark([item for item in items if str(item.fspath).startswith(suite + os.sep)])
