"""The package layout: imports flow one way, from the face (`bpe`, `cli`, `report`) down through the
packages by job, with no circle. Read from the source with `ast`, so an import inside a function
counts as much as one at the top."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "cs336_basics"

# What each package may import of ours (README's Layout section says the same).
# `errors` (one module, importing nothing of ours) holds the errors every package raises.
ALLOWED = {
    "errors": set(),
    "text": {"errors"},
    "corpora": {"errors", "text"},
    "formats": {"errors", "text"},
    "train": {"errors", "text", "corpora"},
    "encode": {"errors", "text", "corpora", "formats"},
    "datasets": {"errors", "text", "corpora", "formats", "encode"},
}
# The top-level modules, each of which may import the packages and the ones before it in this list.
TOP = ["bpe", "report", "serve", "cli"]


def _unit(module: str) -> str | None:
    """The package or top-level module that `cs336_basics.X.Y` belongs to (`X`), else None."""
    parts = module.split(".")
    return parts[1] if parts[0] == "cs336_basics" and len(parts) > 1 else None


def _imports(path: Path) -> set[str]:
    """The units of ours that the module at `path` imports, wherever the import stands."""
    relative_to = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {_unit(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # a relative import: resolve it against the module's own name
                base = relative_to.split(".")[: -node.level]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module == "cs336_basics":  # from cs336_basics import X: X is the unit
                found |= {a.name for a in node.names}
            else:
                found.add(_unit(module))
    return found - {None}


def import_graph() -> dict[str, set[str]]:
    """Each unit (package or top-level module) and the other units it imports."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("").parts
        if rel == ("__init__",):
            continue
        unit = rel[0]
        graph.setdefault(unit, set()).update(_imports(path) - {unit})
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports in `graph`, as the units along it, or None."""
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [node, nxt] if nxt in path else [node, nxt]
            if nxt not in state and (cycle := visit(nxt, path + [node])):
                return cycle
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node, [])):
            return cycle
    return None


def test_every_module_lives_in_a_package_by_job_or_is_the_face():
    units = set(import_graph())
    assert units == set(ALLOWED) | set(TOP), f"modules outside the layout: {sorted(units - set(ALLOWED) - set(TOP))}"
    for package in set(ALLOWED) - {"errors"}:
        doc = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text()))
        assert doc, f"cs336_basics/{package}/__init__.py should say what the package is for"


def test_packages_import_only_what_the_layout_allows_and_never_the_face():
    graph = import_graph()
    wrong = {
        package: sorted(graph[package] - ALLOWED[package]) for package in ALLOWED if graph[package] - ALLOWED[package]
    }
    assert wrong == {}, "imports against the layout (a package may import only those in ALLOWED)"
    for i, top in enumerate(TOP):
        later = set(TOP[i + 1:]) & graph[top]
        assert not later, f"{top} imports {sorted(later)}, which sit above it"


def test_no_circle_of_imports_between_packages():
    assert find_cycle(import_graph()) is None


def test_the_checks_see_what_they_claim():
    """The reader and the circle finder catch what they are for, on made-up input."""
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) is not None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"a"}}) is not None
    graph = import_graph()
    # Real edges the layout rests on: if the reader lost function-level or `from X import Y` imports,
    # these would vanish.
    assert {"formats", "encode", "train", "corpora", "text"} <= graph["bpe"]  # formats.pretrained: in a function
    assert "bpe" in graph["report"] and "bpe" in graph["cli"]
    assert {"text", "corpora"} <= graph["train"]
