"""Layering. probes/ imports nothing of ours; db/ nothing of survey/ or api/; survey/ never
imports api/ (only the CLI's `serve` and `publish` load the app, inside the command).

survey/ is layered: a package imports only from the packages below it (and from itself),
never from one beside or above it, and no two modules import each other in a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# survey's packages, lowest first. A package may import the ones before it.
LAYERS = [
    ["core"],                   # errors, exit codes, text files, names, paths: no survey import
    ["evidence"],               # the report contract, ingest, store queries, identities
    ["verdicts", "environments"],  # answers from evidence | where candidates come from and run
    ["render"],                 # every output format
    ["flows"],                  # run, fleet, check: evidence + environments + verdicts
    ["aorta"],                  # aorta's recipes and environments, checked through flows
    ["cli"],                    # the command line
]
RANK = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}


def imported_modules(path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def imports(path: Path, top_level_only: bool) -> set[str]:
    return {m.split(".")[0] for m in imported_modules(path, top_level_only)}


def survey_files() -> list[Path]:
    return sorted(p for p in (ROOT / "survey").rglob("*.py"))


def package_of(path: Path) -> str | None:
    rel = path.relative_to(ROOT / "survey").parts
    return rel[0] if len(rel) > 1 else None


def test_probes_import_nothing_of_ours() -> None:
    for path in (ROOT / "probes").rglob("*.py"):
        assert not imports(path, top_level_only=False) & {"survey", "db", "api"}, path


def test_db_imports_neither_survey_nor_api() -> None:
    for path in (ROOT / "db").rglob("*.py"):
        assert not imports(path, top_level_only=False) & {"survey", "api"}, path


def test_survey_never_imports_api() -> None:
    for path in survey_files():
        if path.parent.name == "cli" and path.name == "serve.py":
            assert "api" not in imports(path, top_level_only=True), path
            continue
        assert "api" not in imports(path, top_level_only=False), path


def test_survey_is_packages_only() -> None:
    """Every module of survey/ is in one of the layer packages (a newcomer finds a concern
    by its folder), except the entry point."""
    loose = [p.name for p in (ROOT / "survey").glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert loose == []
    packages = {p.name for p in (ROOT / "survey").iterdir() if (p / "__init__.py").exists()}
    assert packages == set(RANK)


def test_no_upward_or_sideways_import() -> None:
    bad = []
    for path in survey_files():
        own = package_of(path)
        if own is None:
            continue
        for mod in imported_modules(path, top_level_only=False):
            parts = mod.split(".")
            if parts[0] != "survey" or len(parts) < 2 or parts[1] not in RANK:
                continue
            other = parts[1]
            if other != own and RANK[other] >= RANK[own]:
                bad.append(f"{path.relative_to(ROOT)} imports {mod} ({other} is not below {own})")
    assert bad == []


def test_no_import_cycle_between_modules() -> None:
    """Module-level imports inside survey/ form no cycle (a function-level import may
    break one, but none is needed)."""
    assert_no_cycle(survey_files(), top_level_only=True)


def test_no_import_cycle_in_api() -> None:
    """No two modules of api/ import each other, not even inside a function."""
    assert_no_cycle(sorted((ROOT / "api").rglob("*.py")), top_level_only=False)


def assert_no_cycle(files: list[Path], top_level_only: bool) -> None:
    names = {}
    for path in files:
        rel = path.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        names[name] = path
    graph = {}
    for name, path in names.items():
        deps = set()
        for mod in imported_modules(path, top_level_only=top_level_only):
            while mod and mod not in names:
                mod = mod.rpartition(".")[0]
            if mod and mod != name and not name.startswith(mod + "."):
                deps.add(mod)
        graph[name] = deps
    seen: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        seen[n] = 1
        stack.append(n)
        for d in graph[n]:
            if seen.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(d):] + [d]))
            if d not in seen:
                visit(d)
        stack.pop()
        seen[n] = 2

    for n in graph:
        if n not in seen:
            visit(n)


# --------------------------------------------------------------------------- the CLI only asks and shows
CLI_BODY_LIMIT = 60  # lines of a function's body in survey/cli/, its docstring and signature aside


def long_functions(path: Path, limit: int) -> list[str]:
    """The functions of ``path`` whose body (after the docstring) spans more than ``limit`` lines."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]
        if body and (lines := (body[-1].end_lineno or body[-1].lineno) - body[0].lineno + 1) > limit:
            out.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}::{node.name} "
                       f"({lines} lines)")
    return out


def test_no_cli_function_does_a_flows_work() -> None:
    """A command parses its arguments, calls a flow (or verdicts, render) and shows the
    answer: no function of survey/cli/ has a body over CLI_BODY_LIMIT lines."""
    assert [f for p in sorted((ROOT / "survey" / "cli").glob("*.py")) for f in long_functions(p, CLI_BODY_LIMIT)] == []


def test_the_length_check_counts_the_body(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text('def f(\n    a: int,\n) -> None:\n    """doc\n\n    more."""\n'
                                   + "    x = 1\n" * 3 + "\n\ndef g() -> None:\n    pass\n")
    assert long_functions(tmp_path / "m.py", 3) == [] and long_functions(tmp_path / "m.py", 2) == ["m.py::f (3 lines)"]


# --------------------------------------------------------------------------- api/ is layered too
# api's modules, lowest first. A module imports only the api modules of the layers before
# it; none imports another of its own layer.
API_LAYERS = [
    ["clip", "httpguard", "middleware", "pages", "render", "schemas"],  # no api import: limits, HTML, models
    ["formats"],                        # one resource in every format (uses render, clip, middleware)
    ["errors"],                         # the one error format (in every format)
    ["names", "pool"],                  # names, the store's threads
    ["cache"],                          # the matrix cache (its work runs in the pool)
    ["replay", "storewatch", "upload", "shared"],  # what the views share, and the app's services
    ["openapi"],                        # the OpenAPI document (its limits from upload)
    ["badges", "candidates", "changes", "check", "diff", "docs", "history", "matrix", "meta", "runs"],  # a view
    ["app"],                            # the app: middleware, error handling, every view's routes
    ["serve", "publish"],               # entry points: serve the app, or publish its pages
]
API_RANK = {mod: i for i, layer in enumerate(API_LAYERS) for mod in layer}


def api_files() -> list[Path]:
    return sorted(p for p in (ROOT / "api").glob("*.py") if p.name != "__init__.py")


def api_module_of(mod: str) -> str | None:
    """The api module an import names (``api.x``, ``api.x.y`` or ``from api import x``), or None."""
    parts = mod.split(".")
    return parts[1] if parts[0] == "api" and len(parts) > 1 and parts[1] in API_RANK else None


def upward_api_imports(files: list[Path]) -> list[str]:
    bad = []
    for path in files:
        own = path.stem
        others = {o for mod in imported_modules(path, top_level_only=False)
                  if (o := api_module_of(mod)) is not None and o != own}
        bad += [f"{path.name} imports api.{o} ({o} is not below {own})" for o in sorted(others)
                if API_RANK[o] >= API_RANK[own]]
    return bad


def test_api_modules_are_each_in_a_layer() -> None:
    """Every module of api/ is declared in API_LAYERS (a new one is placed there), and api/ has no package."""
    assert sorted(p.stem for p in api_files()) == sorted(API_RANK)
    assert [p.name for p in (ROOT / "api").iterdir() if (p / "__init__.py").exists()] == []


def test_no_upward_or_sideways_import_in_api() -> None:
    """A view never imports another view (what two share is in api/shared.py), the app's
    services never import a view, and nothing below the app imports it."""
    assert upward_api_imports(api_files()) == []


def test_the_api_layer_check_sees_a_view_import(tmp_path: Path) -> None:
    view = tmp_path / "badges.py"
    view.write_text("from api import cache\nfrom api.matrix import one_of\n\n\ndef f() -> None:\n"
                    "    from api import app\n")
    assert upward_api_imports([view]) == ["badges.py imports api.app (app is not below badges)",
                                          "badges.py imports api.matrix (matrix is not below badges)"]


def cross_test_imports(files: list[Path]) -> list[str]:
    """Each import of a test file by another test file (what two share is a helper:
    tests/conftest.py, tests/helpers/, tests/envs.py)."""
    return [f"{path.name} imports {mod}" for path in files for mod in sorted(imported_modules(path, False))
            if mod.startswith("tests.test_") and mod.split(".")[1] != path.stem]


def test_no_test_file_imports_another() -> None:
    assert cross_test_imports(sorted((ROOT / "tests").glob("test_*.py"))) == []


def test_the_test_import_check_sees_both_forms(tmp_path: Path) -> None:
    one = tmp_path / "test_one.py"
    one.write_text("from tests.test_api import gpu_store\n\n\ndef f() -> None:\n    from tests import test_db\n")
    assert cross_test_imports([one]) == ["test_one.py imports tests.test_api",
                                        "test_one.py imports tests.test_api.gpu_store",
                                        "test_one.py imports tests.test_db"]


def test_no_test_file_loads_a_script_by_hand() -> None:
    """A bench script loaded by hand left its ``sys.path`` insertion behind for every later
    test (the flake hunt's leak report); tests.helpers.scripts.load_script does not."""
    def loads_by_hand(path: Path) -> bool:
        return any(isinstance(node, ast.Attribute) and node.attr == "spec_from_file_location"
                   for node in ast.walk(ast.parse(path.read_text())))

    assert [p.name for p in sorted((ROOT / "tests").glob("test_*.py")) if loads_by_hand(p)] == []


def test_a_loaded_script_leaves_sys_path_as_it_was(tmp_path: Path) -> None:
    import sys

    from tests.helpers.scripts import load_script

    script = tmp_path / "script.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(tmp_path / 'elsewhere')!r})\nANSWER = 42\n")
    before = list(sys.path)
    assert load_script(script, "a_script").ANSWER == 42
    assert sys.path == before
