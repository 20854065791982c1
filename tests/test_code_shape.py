"""Code shape (issue 30): no function over ``MAX_FUNCTION`` lines and no module over ``MAX_MODULE`` lines in
the product packages, read with ``ast``. Triton kernels (``@triton.jit`` functions) are exempt: a kernel is one
compiled unit. Anything else over a limit must be on ``ALLOWED`` with its reason."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("settings", "mla_kernels", "db", "regressions", "dashboard", "mlaperf", "benchmarks")
SKIPPED_DIRS = {"tests", "experiments", "__pycache__", ".venv"}
MAX_FUNCTION = 80
MAX_MODULE = 500

# path (module) or path::function -> why it may stay over the limit. Keep this short.
ALLOWED: dict[str, str] = {
    "db/migrations/versions/0001_initial.py::upgrade": "a migration is frozen history: the initial schema, "
    "one create_table per table, never edited",
}


def _is_kernel(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A Triton kernel: decorated with ``triton.jit``/``tl.jit``/``jit`` (bare or called, e.g. with args)."""
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "jit":
            return True
    return False


def product_modules() -> list[Path]:
    """Every Python file of the product packages, tests and experiments left out."""
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
                  if not SKIPPED_DIRS & set(p.relative_to(ROOT).parts))


def over_limits(source: str, rel: str) -> dict[str, int]:
    """``{rel or "rel::function": lines}`` for the module ``source`` and each function over its limit."""
    found: dict[str, int] = {}
    if (n := len(source.splitlines())) > MAX_MODULE:
        found[rel] = n
    for node in ast.walk(ast.parse(source, filename=rel)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not _is_kernel(node):
            assert node.end_lineno is not None
            if (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION:
                found[f"{rel}::{node.name}"] = n
    return found


def all_over_limits() -> dict[str, int]:
    return {k: n for p in product_modules()
            for k, n in over_limits(p.read_text(encoding="utf-8"), p.relative_to(ROOT).as_posix()).items()}


def test_packages_are_found() -> None:
    paths = {p.relative_to(ROOT).parts[0] for p in product_modules()}
    assert paths == set(PACKAGES)


def test_no_long_function_or_module() -> None:
    found = all_over_limits()
    bad = {k: n for k, n in found.items() if k not in ALLOWED}
    listed = ", ".join(f"{k} ({n} lines)" for k, n in sorted(bad.items()))
    assert not bad, f"over the limits (functions > {MAX_FUNCTION} lines, modules > {MAX_MODULE}): {listed}"


def test_allow_list_is_current() -> None:
    """An entry no longer over its limit (or gone) is dropped from ``ALLOWED``, so the list stays short."""
    stale = sorted(set(ALLOWED) - set(all_over_limits()))
    assert not stale, f"no longer over the limits, drop from ALLOWED: {stale}"


def test_kernels_are_recognised() -> None:
    """The checker itself: a long plain function fails, a long jit kernel does not, a long module fails."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION))
    src = (f"import triton\n\n@triton.jit\ndef kern():\n{body}\n\n\ndef plain():\n{body}\n\n\n"
           f"@triton.jit(do_not_specialize=[0])\ndef kern2():\n{body}\n")
    assert {f.name for f in ast.walk(ast.parse(src)) if isinstance(f, ast.FunctionDef) and _is_kernel(f)} \
        == {"kern", "kern2"}
    assert set(over_limits(src + "\n" * MAX_MODULE, "probe.py")) == {"probe.py", "probe.py::plain"}


def test_views_are_thin() -> None:
    """A dashboard page is a ``main()`` over a pure model: at module level only its docstring, imports,
    definitions and the ``if __name__ == "__main__": main()`` that Streamlit's router runs."""
    views = sorted((ROOT / "dashboard" / "views").glob("*.py"))
    assert views
    for path in views:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert "main" in names, f"{path.name}: no main()"
        loose = [n.lineno for n in tree.body[1:] if not isinstance(
            n, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.ClassDef | ast.If | ast.Assign | ast.AnnAssign)]
        guards = [n for n in tree.body if isinstance(n, ast.If)]
        assert not loose, f"{path.name}: statements at module level, lines {loose}"
        assert [ast.unparse(g.test) for g in guards] == ["__name__ == '__main__'"], path.name
