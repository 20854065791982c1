"""The package graph drawn in docs/architecture.md, derived from the imports: no circle, nothing upward.

Every ``import`` of every module counts, those inside functions too (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What each package may import, bottom to top (docs/architecture.md). benchmarks/ is asv's benchmark
# directory, loaded from the checkout that runs asv: it uses the kernels and the shared bottom layer only.
ALLOWED: dict[str, set[str]] = {
    "settings": set(),
    "mla_kernels": {"settings"},
    "db": {"settings"},
    "regressions": {"settings", "db"},
    "dashboard": {"settings", "db", "regressions"},
    "mlaperf": {"settings", "db", "regressions", "dashboard", "mla_kernels"},
    "benchmarks": {"settings", "mla_kernels"},
}
PACKAGES = tuple(ALLOWED)


def _modules(package: str) -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if "scripts" in parts or "migrations" in parts and package != "db":
            continue
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path) -> set[str]:
    """Modules of the project that ``name`` imports (absolute names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            out.add(module)
            out |= {f"{module}.{a.name}" for a in node.names}
    return {m for m in out if m.split(".")[0] in ALLOWED}


def graph() -> dict[str, set[str]]:
    modules = {n: p for pkg in PACKAGES for n, p in _modules(pkg).items()}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges[name] = {m for m in _imports(name, path) if m in modules and m != name}
    return edges


def package_edges() -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for src, targets in graph().items():
        for dst in targets:
            a, b = src.split(".")[0], dst.split(".")[0]
            if a != b:
                found.setdefault((a, b), []).append(f"{src} -> {dst}")
    return found


def test_no_package_imports_upward() -> None:
    wrong = {edge: why for edge, why in package_edges().items() if edge[1] not in ALLOWED[edge[0]]}
    assert not wrong, f"imports that point up or across (docs/architecture.md): {wrong}"


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _without_package_inits(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's ``__init__`` re-exporting its modules is no circle: ``pkg.mod -> pkg`` edges made by
    ``from pkg import sibling`` name the sibling, which is kept."""
    return {src: {d for d in dsts if not src.startswith(d + ".")} for src, dsts in edges.items()}


def test_no_import_circle() -> None:
    cycles = _cycles(_without_package_inits(graph()))
    assert not cycles, f"modules that import each other (directly or around a circle): {cycles}"


def test_the_bottom_layer_imports_the_standard_library_only_at_top_level() -> None:
    import sys

    for name, path in _modules("settings").items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0):
                top = (node.module if isinstance(node, ast.ImportFrom) else node.names[0].name) or ""
                top = top.split(".")[0]
                assert top in sys.stdlib_module_names or top in ("__future__", "settings"), (name, top)


_READ = re.compile(r"os\.(?:environ(?:\.get)?|getenv)\s*[\[(]\s*[\"'](MLAPERF_\w+)")


def test_product_modules_read_mlaperf_variables_through_settings_env() -> None:
    """``settings.env`` is the one reader of every ``MLAPERF_*`` variable (mla_kernels' disk caches take their
    ``settings.env.Var`` and ask ``settings.env.cache_file`` where it points)."""
    from settings import env

    readers = []
    for pkg in ("mla_kernels", "db", "regressions", "dashboard", "mlaperf", "benchmarks"):
        for name, path in _modules(pkg).items():
            readers += [f"{name}: {m}" for m in _READ.findall(path.read_text(encoding="utf-8"))]
    assert not readers, f"read os.environ directly instead of settings.env: {readers}"
    documented = {v.name for v in env.VARIABLES}
    used = set()
    for pkg in PACKAGES:
        for path in _modules(pkg).values():
            used |= set(re.findall(r"\bMLAPERF_[A-Z_]*[A-Z]\b", path.read_text(encoding="utf-8")))
    assert used <= documented, f"MLAPERF_* names missing from settings.env.VARIABLES: {sorted(used - documented)}"
    scripts = set()  # the service's own scripts (the test harness's MLAPERF_REQUIRE_* and PG ones are not)
    for name in ("nightly.sh", "pr.sh", "pr-stage.sh", "demo.sh", "setup.sh"):
        path = ROOT / "scripts" / name
        if path.exists():
            scripts |= set(re.findall(r"\bMLAPERF_[A-Z_]*[A-Z]\b", path.read_text(encoding="utf-8")))
    assert scripts <= documented, f"scripts' MLAPERF_* names missing from settings.env: {sorted(scripts - documented)}"


def test_architecture_doc_lists_the_allowed_edges() -> None:
    """docs/architecture.md carries this table, so the drawing cannot drift from the rule."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for pkg, allowed in ALLOWED.items():
        line = f"| `{pkg}/` | {', '.join(f'`{a}/`' for a in sorted(allowed)) or 'the standard library only'} |"
        assert line in text, f"docs/architecture.md lacks the row {line!r}"


def test_architecture_doc_names_every_module() -> None:
    """docs/architecture.md says what each module is for: a module it does not name is a concern nobody wrote
    down (the measurement scripts, the dashboard's pages and the migrations are named by their folder)."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = []
    for pkg in PACKAGES:
        for name, path in _modules(pkg).items():
            parts = path.relative_to(ROOT).parts
            if path.name == "__init__.py" or "migrations" in parts or "views" in parts:
                continue
            if not any(f"`{text}`" in doc for text in (path.name, "/".join(parts[1:]), "/".join(parts))):
                missing.append(name)
    assert not missing, f"modules docs/architecture.md does not name: {missing}"
