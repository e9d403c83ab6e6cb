"""The package's import graph: no import cycle, and no module importing one of a higher layer (#57).

The graph is read from the source files with :mod:`ast`, the way
:func:`chunkwise.provenance._imported_modules` reads them (the same reader that decides which
files a chapter's fingerprint covers): every ``import`` / ``from ... import`` statement counts,
at the top of a module, inside a function or under ``if TYPE_CHECKING``. An import of a
package's ``__init__`` is no edge of the cycle check (a package imports its own modules, and
every module of a package runs its ``__init__`` first); the layer check counts one from outside
the package, at the package's layer.

:data:`LAYERS` declares the order. A module may import its own layer and lower ones; to add a
module, give it (or a package above it) a layer here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from chunkwise.provenance import _imported_modules

PACKAGE = "chunkwise"
SRC = Path(__file__).resolve().parents[1] / "src"

#: Module or package prefix -> layer; the longest prefix naming a module decides. Lower layers
#: never import higher ones.
LAYERS: dict[str, int] = {
    # 0: the core every layer reads: chunks, text, tokens, paths and stores
    PACKAGE: 0,  # the package's __init__: imported before any of its modules, so it imports none
    "chunkwise._env": 0,
    "chunkwise._jsonl": 0,
    "chunkwise._sqlite": 0,
    "chunkwise._importpath": 0,
    "chunkwise._validation": 0,
    "chunkwise.chunk": 0,
    "chunkwise.text": 0,
    "chunkwise.tokens": 0,
    # 1: the model clients and the data
    "chunkwise.llm": 1,
    "chunkwise.datasets": 1,
    # 2: embedders
    "chunkwise.embeddings": 2,
    # 3: chunkers and retrievers
    "chunkwise.chunkers": 3,
    "chunkwise.retrieval": 3,
    "chunkwise.datasets.locate": 3,  # finds a hand-written question's passages with BM25
    # 4: the evaluation engine and its statistics
    "chunkwise.evaluation": 4,
    # 5: the book's presentation and bookkeeping: figures and report folders, the analysis plan,
    #    answer boxes, labels, links, advice, provenance and notebook execution
    "chunkwise.figures": 5,
    "chunkwise.plan": 5,
    "chunkwise.answerbox": 5,
    "chunkwise.labels": 5,
    "chunkwise.links": 5,
    "chunkwise.advice": 5,
    "chunkwise.provenance": 5,
    "chunkwise.book": 5,
    # 6: the findings page (reads the plan, the advice, the provenance) and the cross-machine comparison
    #    of two runs (reads the provenance's comparison and the findings' verdict words)
    "chunkwise.findings": 6,
    "chunkwise.crossmachine": 6,
    # 7: the chapters' drivers
    "chunkwise.experiments": 7,
    "chunkwise.crud": 7,
    # 8, 9: the command line
    "chunkwise.cli_own_data": 8,
    "chunkwise.cli": 9,
}


# --------------------------------------------------------------------------------------
# the graph and its checks
# --------------------------------------------------------------------------------------


def package_modules(src_root: Path, package: str = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, whether it is a package's ``__init__``)."""
    out: dict[str, tuple[Path, bool]] = {}
    for path in sorted((src_root / package).rglob("*.py")):
        parts = list(path.relative_to(src_root).with_suffix("").parts)
        is_init = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_init else parts)] = (path, is_init)
    return out


def _resolve(name: str, modules: Mapping[str, object]) -> str | None:
    """The module an imported name lives in (``a.b.C`` -> ``a.b``); None outside the package."""
    parts = name.split(".")
    while parts and ".".join(parts) not in modules:
        parts.pop()
    return ".".join(parts) if parts else None


def import_graph(src_root: Path, package: str = PACKAGE) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """``(edges, package_edges)``: module -> the package's modules it imports, without imports
    of packages' ``__init__`` files; and module -> the packages whose ``__init__`` it imports
    from outside them."""
    modules = package_modules(src_root, package)
    edges: dict[str, set[str]] = {}
    package_edges: dict[str, set[str]] = {}
    for name, (path, is_init) in modules.items():
        dotted = name + (".__init__" if is_init else "")
        found = {_resolve(n, modules) for n in _imported_modules(path.read_text(encoding="utf-8"), dotted)}
        found -= {None, name}
        edges[name] = {t for t in found if not modules[t][1]}
        package_edges[name] = {t for t in found if modules[t][1] and not (name + ".").startswith(t + ".")}
    return edges, package_edges


def find_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One cycle ``[a, b, ..., a]`` per strongly connected component that has one (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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
            components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for component in components:
        members = set(component)
        start = min(component)
        if len(component) == 1 and start not in graph.get(start, ()):
            continue
        # a shortest way back to the start inside the component (breadth first)
        came_from: dict[str, str] = {}
        frontier = [start]
        while frontier and start not in came_from:
            nxt = []
            for v in frontier:
                for w in sorted(graph.get(v, ())):
                    if w in members and w not in came_from:
                        came_from[w] = v
                        nxt.append(w)
            frontier = nxt
        path = [start]
        v = came_from[start]
        while v != start:
            path.append(v)
            v = came_from[v]
        cycles.append([start, *reversed(path[1:]), start])
    return sorted(cycles)


def layer_of(module: str, layers: Mapping[str, int]) -> int | None:
    """The layer of the longest prefix of ``module`` in ``layers`` (the root package's entry
    holds for its ``__init__`` only)."""
    best = None
    for prefix, layer in layers.items():
        if module == prefix or ("." in prefix and module.startswith(prefix + ".")):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, layer)
    return None if best is None else best[1]


def layer_violations(graph: Mapping[str, set[str]], layers: Mapping[str, int]) -> list[str]:
    """Each edge from a lower layer to a higher one, as a sentence naming it."""
    out = []
    for source in sorted(graph):
        for target in sorted(graph[source]):
            a, b = layer_of(source, layers), layer_of(target, layers)
            if a is not None and b is not None and a < b:
                out.append(f"{source} (layer {a}) imports {target} (layer {b})")
    return out


def unlayered(graph: Mapping[str, set[str]], layers: Mapping[str, int]) -> list[str]:
    """The modules no entry of ``layers`` covers."""
    return sorted(m for m in set(graph).union(*graph.values()) if layer_of(m, layers) is None)


def _describe(cycles: list[list[str]]) -> str:
    return "; ".join(" -> ".join(c) for c in cycles)


# --------------------------------------------------------------------------------------
# the package
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graphs() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    return import_graph(SRC)


def test_the_graph_is_read_from_the_package(graphs):
    edges, package_edges = graphs
    assert len(edges) > 50
    assert "chunkwise.chunkers.registry" in edges["chunkwise.chunkers.specs"]
    assert "chunkwise.figures" in edges["chunkwise.cli_own_data"]  # imported inside a function
    assert "chunkwise.chunkers.kinds" in edges["chunkwise.chunkers"]  # a package's __init__ is a source


def test_the_package_has_no_import_cycle(graphs):
    edges, _ = graphs
    cycles = find_cycles(edges)
    assert not cycles, f"import cycles: {_describe(cycles)}"


def test_every_module_has_a_layer(graphs):
    edges, _ = graphs
    missing = unlayered(edges, LAYERS)
    assert not missing, f"give these modules (or a package above them) a layer in LAYERS: {', '.join(missing)}"


def test_no_module_imports_a_higher_layer(graphs):
    edges, package_edges = graphs
    both = {m: edges[m] | package_edges[m] for m in edges}
    bad = layer_violations(both, LAYERS)
    assert not bad, "a lower layer imports a higher one: " + "; ".join(bad)


def test_the_circles_and_the_back_arrow_of_issue_57_stay_gone(graphs):
    edges, _ = graphs
    assert "chunkwise.chunkers.specs" not in edges["chunkwise.chunkers.registry"]
    assert "chunkwise.findings" not in edges["chunkwise.advice"]
    assert "chunkwise.figures" not in edges["chunkwise.evaluation.grid"]


# --------------------------------------------------------------------------------------
# the checks themselves
# --------------------------------------------------------------------------------------


def test_find_cycles_reports_each_circle_once_and_passes_a_tree():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"d"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"], ["e", "e"]]
    assert find_cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []
    two = find_cycles({"x.registry": {"x.specs"}, "x.specs": {"x.registry"}})
    assert two == [["x.registry", "x.specs", "x.registry"]]
    assert "x.registry -> x.specs -> x.registry" in _describe(two)


def test_layer_violations_name_the_back_edge():
    layers = {"p": 0, "p.core": 0, "p.engine": 1, "p.engine.fast": 1, "p.report": 2}
    graph = {"p.report": {"p.engine.fast", "p.core"}, "p.engine.fast": {"p.core", "p.report"}, "p.core": set()}
    assert layer_violations(graph, layers) == ["p.engine.fast (layer 1) imports p.report (layer 2)"]
    assert layer_violations({"p.report": {"p.engine"}}, layers) == []
    assert layer_of("p.engine.fast.x", layers) == 1
    assert layer_of("q.other", layers) is None
    assert layer_of("p.unlisted", layers) is None  # the root's entry holds for the root only
    assert unlayered({"p.core": {"p.unlisted"}}, layers) == ["p.unlisted"]


def test_the_reader_counts_lazy_and_type_checking_imports_and_skips_package_inits(tmp_path, monkeypatch):
    pkg = tmp_path / "toy"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from toy.sub import leaf\n")
    (pkg / "sub" / "leaf.py").write_text("from toy import sub\n")  # into the package's __init__ only
    (pkg / "low.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from toy.high import Thing\n"
        "def f():\n    from . import high\n    return high\n"
    )
    (pkg / "high.py").write_text("import toy.low\nfrom toy.sub.leaf import x\n")

    import chunkwise.provenance as P

    monkeypatch.setattr(P, "_PACKAGE", "toy")  # the reader keeps the names of one package
    edges, package_edges = import_graph(tmp_path, "toy")
    assert edges == {"toy": set(), "toy.sub": {"toy.sub.leaf"}, "toy.sub.leaf": set(),
                     "toy.low": {"toy.high"}, "toy.high": {"toy.low", "toy.sub.leaf"}}
    assert package_edges["toy.sub.leaf"] == set()  # its own package
    assert find_cycles(edges) == [["toy.high", "toy.low", "toy.high"]]
    bad = layer_violations(edges, {"toy": 0, "toy.low": 0, "toy.high": 1, "toy.sub": 0})
    assert bad == ["toy.low (layer 0) imports toy.high (layer 1)"]
