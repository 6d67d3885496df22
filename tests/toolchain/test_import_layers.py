"""jax_ipu's modules import each other without circles (function-level imports included), and only downwards through
the package's layers (LAYERS, which the README's layout draws): each module can be read, tested and replaced knowing
only the modules below it."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

PACKAGE = Path(__file__).resolve().parents[2] / "jax_ipu_shim" / "python" / "jax_ipu"

# The layers, bottom first: (what it is, its modules; a name covers the modules inside it). A module imports its own
# layer's modules and those below; a new module must be placed here.
LAYERS = (
    ("foundations: the jax series adapter, the C boundary, the flags",
     ("jax_ipu._jax", "jax_ipu._native", "jax_ipu.engine_options", "jax_ipu.config")),
    ("the compiler: a StableHLO module in, the IPU program out", ("jax_ipu.compiler",)),
    ("the emulator from Python, custom vertices", ("jax_ipu.emulator", "jax_ipu.codelets")),
    ("profile reports and what the runs report", ("jax_ipu.report", "jax_ipu.runtime")),
    ("the executable cache", ("jax_ipu.executable_cache",)),
    ("the backend inside jax: plugin, callbacks, feeds, lowerings", ("jax_ipu.backend",)),
    ("the public APIs over jax: tiles, streams, the package", ("jax_ipu.tile", "jax_ipu.streams", "jax_ipu")),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> Dict[str, Set[str]]:
    """module -> the jax_ipu modules it imports anywhere in its text."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: Dict[str, Set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parent + ([base] if base else []))
                # `from package import module` imports the module (the package's __init__ runs first either way,
                # which is not an edge: it is how Python finds a submodule); `from module import name` the module
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    out: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read():
    graph = import_graph()
    assert "jax_ipu.compiler.program_format" in graph["jax_ipu.compiler.translate"]
    assert "jax_ipu._native" in graph["jax_ipu.runtime"]


def test_no_module_imports_itself_back():
    assert cycles(import_graph()) == []


def layer_of(module: str) -> int:
    """The index in LAYERS of the most specific name that covers ``module``."""
    best, length = -1, -1
    for index, (_, names) in enumerate(LAYERS):
        for name in names:
            covers = module == name or (name != "jax_ipu" and module.startswith(name + "."))
            if covers and len(name) > length:
                best, length = index, len(name)
    assert best >= 0, f"{module} is in no layer of LAYERS: place it"
    return best


def upward_imports(graph: Dict[str, Set[str]]) -> List[str]:
    return sorted(f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
                  for module, targets in graph.items() for target in targets if layer_of(target) > layer_of(module))


def test_modules_import_only_their_layer_and_below():
    assert upward_imports(import_graph()) == []


def test_an_upward_import_is_found():
    graph = {"jax_ipu.compiler.translate": {"jax_ipu.backend.interrupts"}, "jax_ipu.backend.plugin": {"jax_ipu._jax"}}
    assert upward_imports(graph) == [
        "jax_ipu.compiler.translate (the compiler: a StableHLO module in, the IPU program out) imports "
        "jax_ipu.backend.interrupts (the backend inside jax: plugin, callbacks, feeds, lowerings)"]


def test_a_circle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
