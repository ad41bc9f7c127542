"""The package's layering, read from its own imports: pure stages never import Spark or Delta, imports point
one way (from the wiring down to the model), there is no import cycle, and the test kit stays out of the
package.

``python tests/unit/test_layering.py`` prints the import structure by layer.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "ingest"

# Layers from the bottom up; a module may import its own layer and the ones below it. A name matches a
# module and everything under it (``ingest.decode`` covers ``ingest.decode.simple``).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("model", ("ingest.model", "ingest.errors", "ingest.lake", "ingest.lake.names", "ingest.lake.mirror")),
    ("MySQL text, decode", ("ingest.parameters", "ingest.secrets", "ingest.mysql", "ingest.decode")),
    ("order, plan, config, rules", ("ingest.order", "ingest.plan", "ingest.config",
                                    "ingest.settings", "ingest.load_config",
                                    "ingest.commands.asof_rules", "ingest.commands.verify_rules")),
    ("Delta I/O", ("ingest.lake.delta_io", "ingest.lake.delta_log")),
    ("I/O: state, sources", ("ingest.state", "ingest.source", "ingest.spark")),
    ("I/O: apply", ("ingest.apply",)),
    ("wiring", ("ingest.pipeline", "ingest.notebook")),
    ("commands", ("ingest.commands",)),
    ("entry points", ("ingest.cli", "ingest.warmup", "ingest")),
]  # fmt: skip
PURE = [
    "ingest.model", "ingest.errors", "ingest.lake.names", "ingest.lake.mirror", "ingest.parameters",
    "ingest.mysql", "ingest.decode", "ingest.order", "ingest.plan", "ingest.config",
    "ingest.settings", "ingest.load_config",
    "ingest.commands.asof_rules", "ingest.commands.verify_rules", "ingest.commands.changes_rules",
    "ingest.commands.changes_sql", "ingest.commands.flags",
    "testkit.sample", "testkit.workload", "testkit.ddl_spelling",
]  # fmt: skip
FORBIDDEN = ("pyspark", "delta", "py4j")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[str]:
    """Absolute names of every module a file imports (``from ingest import x`` counts as ``ingest.x``), but
    for those under ``if TYPE_CHECKING:``, which name types for the type checker and run nothing."""
    names: list[str] = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for block in [n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"]:
        block.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def _modules(root: Path) -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(root.rglob("*.py"))}


def _layer(module: str) -> int:
    """The highest layer whose longest matching prefix names the module."""
    best, best_length = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    return best


def _internal_graph() -> dict[str, set[str]]:
    modules = _modules(PACKAGE)
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for imported in _imports(path):
            # ``from ingest import x`` names the package only as the way to its module x.
            if imported in modules and imported not in (name, "ingest"):
                graph[name].add(imported)
    return graph


@pytest.mark.parametrize("module", sorted(_modules(PACKAGE)))
def test_every_module_has_a_layer(module):
    assert _layer(module) >= 0, f"{module} is in no layer: add it to LAYERS"


@pytest.mark.parametrize(
    "module", [m for m in {**_modules(PACKAGE), **_modules(ROOT / "testkit")} if any(
        m == p or m.startswith(p + ".") for p in PURE)]
)  # fmt: skip
def test_pure_module_does_not_import_spark_or_delta(module):
    path = {**_modules(PACKAGE), **_modules(ROOT / "testkit")}[module]
    offending = [n for n in _imports(path) if n.split(".")[0] in FORBIDDEN]
    assert offending == [], f"{module} imports {offending}"


def test_imports_point_down_the_layers():
    upward = [
        f"{module} ({LAYERS[_layer(module)][0]}) imports {target} ({LAYERS[_layer(target)][0]})"
        for module, targets in _internal_graph().items()
        for target in targets
        if _layer(target) > _layer(module) and module != "ingest"
    ]
    assert upward == []


def test_no_import_cycle():
    graph = _internal_graph()
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        for target in sorted(graph.get(node, ())):
            if target in path:
                cycle = path[path.index(target) :]
                if min(cycle) == cycle[0]:  # report each cycle once, from its smallest name
                    cycles.append([*cycle, target])
            elif len(path) < 12:
                visit(target, [*path, target])

    for module in sorted(graph):
        visit(module, [module])
    assert cycles == []


def test_the_package_never_imports_the_test_kit_and_the_wheel_leaves_it_out():
    offending = [
        f"{name} imports {imported}"
        for name, path in _modules(PACKAGE).items()
        for imported in _imports(path)
        if imported.split(".")[0] in ("testkit", "tests")
    ]
    assert offending == []
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert found["include"] == ["ingest*"]


# What a Spark Connect client lacks: DeltaTable (there is no Delta Connect server plugin for every Spark and
# Delta pair), the JVM gateway, the SparkContext and RDDs. Delta I/O goes through ``ingest.lake.delta_io``
# (SQL and the DataFrame API) instead.
CLASSIC_ONLY_MODULES = ("delta.tables", "py4j")
CLASSIC_ONLY_ATTRIBUTES = ("_jvm", "_jsc", "_jdf", "_jsparkSession", "sparkContext", "rdd")
CLASSIC_ONLY_NAMES = ("SparkContext", "DeltaTable")


def _classic_only_uses(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [
                f"line {node.lineno}: imports {m}" for m in modules if m.startswith(CLASSIC_ONLY_MODULES)
            ]
            found += [
                f"line {node.lineno}: imports {a.name}" for a in node.names if a.name in CLASSIC_ONLY_NAMES
            ]
        elif isinstance(node, ast.Attribute) and node.attr in CLASSIC_ONLY_ATTRIBUTES + CLASSIC_ONLY_NAMES:
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in CLASSIC_ONLY_NAMES:
            found.append(f"line {node.lineno}: {node.id}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in CLASSIC_ONLY_ATTRIBUTES
        ):
            found.append(f"line {node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
    return sorted(found, key=lambda text: int(text.split(":")[0].removeprefix("line ")))


@pytest.mark.parametrize(
    "path",
    [p for root in ("ingest", "jobs", "notebooks") for p in sorted((ROOT / root).rglob("*.py"))],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_only_apis_a_spark_connect_client_has(path):
    assert _classic_only_uses(path) == []


def test_the_classic_only_check_finds_each_kind_of_use(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from delta.tables import DeltaTable\n"
        "import py4j.protocol\n"
        "from pyspark import SparkContext\n"
        "spark.sparkContext.setLogLevel('WARN')\n"
        "spark._jvm.org\n"
        "spark._jsc.hadoopConfiguration()\n"
        "frame.rdd.map(len)\n"
        "getattr(spark, '_jvm')\n"
        "DeltaTable.forPath(spark, path)\n"
    )
    assert [line.split(":")[0] for line in _classic_only_uses(sample)] == [
        "line 1", "line 1", "line 2", "line 3", "line 4", "line 5", "line 6", "line 7", "line 8", "line 9",
    ]  # fmt: skip


def main() -> None:
    """Print each layer's modules and what they import from the package."""
    graph = _internal_graph()
    for index, (title, _) in reversed(list(enumerate(LAYERS))):
        members = sorted(m for m in _modules(PACKAGE) if _layer(m) == index)
        print(f"{index} {title}")
        for module in members:
            targets = ", ".join(sorted(t.removeprefix("ingest.") for t in graph.get(module, ())))
            print(f"    {module.removeprefix('ingest.') or 'ingest'} -> {targets or '-'}")


if __name__ == "__main__":
    sys.exit(main())


# A table's location made from strings: `<root>/<database>/<table>` joined by hand (an f-string or a Path
# join, other than under the mirror's own `_ingest`), or the configuration asked for a location by name.
_HAND_MADE = [
    re.compile(r"\}/\{[^}]*\btable\b[^}]*\}"),
    re.compile(r'\{(lake|root|target|lakehouse)\}/(?!_ingest)[A-Za-z]\w*/[A-Za-z]\w*"'),
    re.compile(r'\b(lake|root|target|lakehouse)\s*/\s*"(?!_ingest)[A-Za-z]\w*"\s*/\s*"[A-Za-z]\w*"'),
    re.compile(r"\.table_location\("),
]
LOCATOR = ROOT / "ingest" / "lake" / "mirror.py"


def test_no_table_location_is_built_from_strings_outside_the_locator():
    """Product, bench and tests ask ``Mirror.address`` where a table is; nothing else joins its parts."""
    found = []
    for folder in ("ingest", "bench", "tests", "testkit", "notebooks", "jobs"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == LOCATOR or path == Path(__file__):
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if any(p.search(line) for p in _HAND_MADE):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []
