"""The reviewed list of JAX tests that are skipped or expected to fail on the ipu backend:
tests/upstream/expectations.txt.

Format: a section starts with ``[skip] <reason>`` or ``[xfail] <reason>``; the lines under it are glob patterns
(fnmatch, case-sensitive) over pytest node ids relative to JAX's ``tests/`` directory, e.g.
``lax_test.py::LaxTest::testOp_op=nextafter*``. ``#`` starts a comment. Every pattern belongs to exactly one section
and every section has a reason. No pattern may be repeated. Pure Python, no jax import: the pytest plugin and the
toolchain tests use it.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import List, NamedTuple, Optional, Tuple

KINDS = ("skip", "xfail")
DEFAULT_PATH = Path(__file__).with_name("expectations.txt")  # jax 0.4.13


def series_path(jax_version: str) -> Path:
    """The list of a series: expectations.txt for jax 0.4.13, expectations-<version>.txt for any other."""
    public = jax_version.split("+")[0]
    return DEFAULT_PATH if public == "0.4.13" else DEFAULT_PATH.with_name(f"expectations-{public}.txt")
_HEADER = re.compile(r"^\[(?P<kind>[a-z]+)\]\s*(?P<reason>.*)$")


class Rule(NamedTuple):
    kind: str  # "skip" or "xfail"
    pattern: str
    reason: str
    line: int


class ExpectationsError(ValueError):
    pass


def parse(text: str, source: str = "expectations.txt") -> List[Rule]:
    rules: List[Rule] = []
    section: Optional[Tuple[str, str]] = None
    seen = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("[") else raw.strip()
        if not line:
            continue
        header = _HEADER.match(line)
        if header:
            kind, reason = header.group("kind"), header.group("reason").strip()
            if kind not in KINDS:
                raise ExpectationsError(f"{source}:{number}: unknown kind [{kind}]; use one of {', '.join(KINDS)}")
            if not reason:
                raise ExpectationsError(f"{source}:{number}: [{kind}] needs a reason after it")
            section = (kind, reason)
            continue
        if section is None:
            raise ExpectationsError(f"{source}:{number}: pattern {line!r} comes before any [skip] or [xfail] section")
        if "::" not in line or not line.split("::", 1)[0].endswith(".py"):
            raise ExpectationsError(
                f"{source}:{number}: {line!r} is not a node id pattern like file_test.py::Class::test*")
        if line in seen:
            raise ExpectationsError(f"{source}:{number}: pattern {line!r} repeats line {seen[line]}")
        seen[line] = number
        rules.append(Rule(section[0], line, section[1], number))
    return rules


def load(path: Path = DEFAULT_PATH) -> List[Rule]:
    return parse(Path(path).read_text(encoding="utf-8"), str(path))


def match(rules: List[Rule], nodeid: str) -> Optional[Rule]:
    """The first rule whose pattern matches ``nodeid`` (relative to JAX's tests/ directory), skips first."""
    found = [r for r in rules if fnmatch.fnmatchcase(nodeid, r.pattern)]
    found.sort(key=lambda r: (KINDS.index(r.kind), r.line))
    return found[0] if found else None
