"""Pure stages never import Spark or Delta: they must stay testable (and usable) without a JVM."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "ingest"
PURE = [
    "model.py",
    "config.py",
    "errors.py",
    "order.py",
    "sample.py",
    "workload.py",
    "ddl_spelling.py",
    "decode",
    "plan",
]
FORBIDDEN = ("pyspark", "delta", "py4j")


def _modules() -> list[Path]:
    files: list[Path] = []
    for entry in PURE:
        path = PACKAGE / entry
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


@pytest.mark.parametrize("module", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_pure_module_does_not_import_spark_or_delta(module: Path) -> None:
    tree = ast.parse(module.read_text())
    imported = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.append(node.module)
    offending = [name for name in imported if name.split(".")[0] in FORBIDDEN]
    assert offending == [], f"{module.name} imports {offending}"
