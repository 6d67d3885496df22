"""This suite's known failures of the installed series, as strict xfails (tests/_series_expectations.py)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _series_expectations import pytest_collection_modifyitems  # noqa: E402, F401
