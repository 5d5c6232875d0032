"""The package layout: imports flow one way, from the face (`bpe`, `cli`, `report`) down through the
packages by job, with no circle. Read from the source with `ast`, so an import inside a function
counts as much as one at the top."""

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "cs336_basics"

# What each package may import of ours (docs/architecture.md, Layout, says the same).
# `errors` (one module, importing nothing of ours) holds the errors every package raises.
ALLOWED = {
    "errors": set(),
    "text": {"errors"},
    "corpora": {"errors", "text"},
    "formats": {"errors", "text"},
    "train": {"errors", "text", "corpora"},
    "encode": {"errors", "text", "corpora", "formats"},
    "datasets": {"errors", "text", "corpora", "formats", "encode"},
    "counts": {"errors", "text", "corpora", "formats", "train", "datasets"},
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


# --- single modules -------------------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by the name of its `__init__`)."""
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imported_modules(path: Path, modules: dict[str, Path]) -> dict[str, set[str]]:
    """The modules of ours that the module at `path` imports (wherever the import stands), each with
    the names it takes from it (`from X import a, b`) or uses on it (`X.a`)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: dict[str, set[str]] = {}
    aliases: dict[str, str] = {}  # local name -> module of ours
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    found.setdefault(alias.name, set())
                    if alias.asname:
                        aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source not in modules:
                continue
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in modules:  # from package import module
                    found.setdefault(submodule, set())
                    aliases[alias.asname or alias.name] = submodule
                else:
                    found.setdefault(source, set()).add(alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            found.setdefault(aliases[node.value.id], set()).add(node.attr)
    found.pop(name, None)
    return found


def module_graph() -> dict[str, set[str]]:
    """Each module of ours and the modules of ours it imports (a package's `__init__` left out as a
    target when the import goes on to one of its modules)."""
    modules = _modules()
    return {name: set(_imported_modules(path, modules)) for name, path in modules.items()}


def private_uses() -> list[str]:
    """Every `module._private` name that one module of ours takes from another."""
    modules = _modules()
    wrong = []
    for name, path in modules.items():
        for source, names in _imported_modules(path, modules).items():
            wrong += [f"{name} uses {source}.{n}" for n in sorted(names) if n.startswith("_") and not n.startswith("__")]
    return wrong


def test_no_circle_of_imports_between_modules():
    assert find_cycle(module_graph()) is None


def test_no_module_uses_another_modules_private_names():
    assert private_uses() == []


def test_the_module_checks_see_what_they_claim(tmp_path, monkeypatch):
    """On a made-up package: a circle through a function-level import, and private names taken by
    `from X import _y` and by `X._y`, are found."""
    fake = tmp_path / "cs336_basics"
    (fake / "text").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "text" / "__init__.py").write_text('"""Text."""\n')
    (fake / "text" / "a.py").write_text("def f():\n    from cs336_basics.text import b\n    return b._hidden\n")
    (fake / "text" / "b.py").write_text("from cs336_basics.text.a import f, _g\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert find_cycle(module_graph()) is not None
    assert private_uses() == ["cs336_basics.text.a uses cs336_basics.text.b._hidden",
                              "cs336_basics.text.b uses cs336_basics.text.a._g"]


# --- sizes ------------------------------------------------------------------------------------------

# The sizes docs/architecture.md's Layout section gives: a module a newcomer can read through, a face that stays small.
MAX_MODULE_LINES, MAX_FACE_MODULE_LINES, MAX_FUNCTION_LINES, MAX_TOKENIZER_LINES = 650, 400, 100, 250


def oversized() -> list[str]:
    """Every module, function and class of the package that is longer than the sizes above allow."""
    found = []
    for name, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        face = name == "cs336_basics.bpe" or name.split(".")[1:2] in (["cli"], ["report"])
        if lines > (MAX_FACE_MODULE_LINES if face else MAX_MODULE_LINES):
            found.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            length = node.end_lineno - node.lineno + 1
            if not isinstance(node, ast.ClassDef) and length > MAX_FUNCTION_LINES:
                found.append(f"{name}.{node.name}: {length} lines")
            if isinstance(node, ast.ClassDef) and node.name == "Tokenizer" and length > MAX_TOKENIZER_LINES:
                found.append(f"{name}.Tokenizer: {length} lines")
    return found


def test_modules_functions_and_the_tokenizer_stay_within_their_sizes():
    assert oversized() == []


def test_the_size_check_sees_what_it_claims(tmp_path, monkeypatch):
    fake = tmp_path / "cs336_basics"
    (fake / "cli").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "cli" / "__init__.py").write_text("x = 1\n" * 401)
    (fake / "long.py").write_text("def f():\n" + "    x = 1\n" * 100 + "\n\nclass Tokenizer:\n" + "    y = 2\n" * 250)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert oversized() == ["cs336_basics.cli: 401 lines", "cs336_basics.long.f: 101 lines",
                           "cs336_basics.long.Tokenizer: 251 lines"]


def test_training_loads_no_numpy(tmp_path):
    """Training needs no NumPy, and loading it costs each process some 15 MiB (the counting workers
    are forks, and hold what the parent held): the face, the command line and a whole training run
    must not import it. Encoding and datasets import it where they use it."""
    import subprocess

    corpus = tmp_path / "c.txt"
    # Prose of many words, and long pre-tokens (a rule of 300 dashes, 1,000 spaces): rare, and still strings.
    letters = "abcdefghij"
    words = " ".join(a + b + c for a in letters for b in letters for c in letters)
    corpus.write_text((words + "<|endoftext|>") * 3 + "-" * 300 + " " * 1000 + "x", encoding="utf-8")
    code = (
        "import sys\n"
        "import cs336_basics.bpe, cs336_basics.cli\n"
        "from cs336_basics.bpe import train_bpe\n"
        f"train_bpe({str(corpus)!r}, 300, ['<|endoftext|>'], num_workers=1)\n"
        "print('numpy' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_the_train_command_loads_no_numpy_before_merging_ends(tmp_path):
    """`bpe train` itself, not only `train_bpe`: nothing it does before or while the merge loop runs
    (its summary's statistics included) imports NumPy, which each process would carry through the
    loop. Its summary may use NumPy once merging is over. Run as a user runs it, in a fresh
    interpreter, with the merge loop wrapped to note what is loaded when it returns."""
    import subprocess

    corpus = tmp_path / "c.txt"
    letters = "abcdefgh"  # 32,768 distinct words: enough for the merge loop to use a second process
    words = [a + b + c + d + e for a in letters for b in letters for c in letters for d in letters for e in letters]
    corpus.write_text(" ".join(words) + "<|endoftext|>" + " ".join(words[:5000]), encoding="utf-8")
    code = (
        "import sys\n"
        "import cs336_basics.train.trainer as trainer\n"
        "from cs336_basics.cli import main\n"
        "learn = trainer.train_merges\n"
        "def noting(*args, **kwargs):\n"
        "    merges = learn(*args, **kwargs)\n"
        "    print('numpy when merging ends:', 'numpy' in sys.modules, file=sys.stderr)\n"
        "    return merges\n"
        "trainer.train_merges = noting\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, "train", str(corpus), "--vocab-size", "300", "--workers", "2", "--quiet",
         "--out", str(tmp_path / "tok")], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "numpy when merging ends: False" in result.stderr
    assert "trained on" in result.stdout  # the summary was printed, after merging
