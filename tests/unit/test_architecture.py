"""docs/architecture.md against the code: the package's layers (every import, type-level ones included, runs
down the table of layers and no modules import each other in a cycle), the package map (every module named)
and the command table (every ``python -m rankstudy`` command, the module that declares it, the rules that call
it). The rule graph is checked in tests/workflow (it needs Snakemake)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from helpers import REPO
import rankstudy.cli  # noqa: F401 (importing the CLI registers every command)
from rankstudy.subcommands import SUBCOMMANDS

PACKAGE = REPO / "src" / "rankstudy"
DOC = (REPO / "docs" / "architecture.md").read_text()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str) -> set[str]:
    """The package's modules that module ``name`` imports anywhere: at the top, in functions, under
    TYPE_CHECKING. ``from P import N`` is an import of module P.N where there is one, else of P."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        found.update(target for target in targets if target in MODULES and target != name)
    return found


GRAPH = {name: imports(name) for name in MODULES}


def entry(name: str) -> str:
    """The top-level entry of a module as the layer table names it: ``text/``, ``errors.py``, ``__init__.py``."""
    parts = name.split(".")
    if len(parts) == 1:
        return "__init__.py"
    return f"{parts[1]}/" if MODULES[name].parent != PACKAGE else f"{parts[1]}.py"


def documented_layers() -> dict[str, int]:
    """{entry: layer number} from the table between the layers markers (layer 1 at the bottom)."""
    block = DOC.split("<!-- layers: start -->")[1].split("<!-- layers: end -->")[0]
    layers = {}
    for line in block.splitlines():
        cells = line.split("|")
        if len(cells) > 3 and cells[1].strip().isdigit():
            for name in re.findall(r"`([^`]+)`", cells[2]):
                assert name not in layers, f"{name} is in two layers of docs/architecture.md"
                layers[name] = int(cells[1])
    return layers


LAYERS = documented_layers()


def test_every_package_entry_has_one_layer():
    entries = {entry(name) for name in MODULES}
    assert sorted(entries - set(LAYERS)) == [], "add them to the layer table of docs/architecture.md"
    assert sorted(set(LAYERS) - entries) == [], "the layer table names entries the package does not have"


def test_every_import_runs_down_the_layers():
    """An entry imports only entries of lower layers (a folder's modules import each other freely)."""
    upward = [f"{name} ({LAYERS[entry(name)]}) imports {target} ({LAYERS[entry(target)]})"
              for name, targets in GRAPH.items() for target in sorted(targets)
              if entry(target) != entry(name) and LAYERS[entry(target)] >= LAYERS[entry(name)]]
    assert upward == []


def test_truncation_imports_nothing_of_training():
    assert not [target for name in MODULES if entry(name) == "truncation/" for target in GRAPH[name]
                if entry(target) == "train/"]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), or with a self-import."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_modules_import_each_other_in_a_cycle():
    assert cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_type_level_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# ---- the package map ---------------------------------------------------------------------------------------
def package_map() -> set[str]:
    """The modules the package map names: a row's first cell names its folder or module(s) (``text/``,
    ``models/tk.py``, ``tkl.py``: the folder of the first); a ``.py`` name without a folder in the row is in the
    row's folder; ``X/`` in a first cell documents the folder's ``__init__.py``."""
    block = DOC.split("## Package map")[1].split("\n## ")[0]
    named = set()
    for line in block.splitlines():
        cells = line.split("|")
        if len(cells) < 3 or not cells[1].strip().startswith("`"):
            continue
        first = re.findall(r"`([^`]+)`", cells[1])
        folder = first[0].rpartition("/")[0] if "/" in first[0] else ""
        for name in first + re.findall(r"`([^`/]+\.py)`", cells[2]):
            path = name if "/" in name else (f"{folder}/{name}" if folder else name)
            named.add(f"{path}__init__.py" if path.endswith("/") else path)
    return named


def test_the_package_map_names_every_module():
    modules = {str(path.relative_to(PACKAGE)) for path in MODULES.values()} - {"__init__.py"}
    assert sorted(modules - package_map()) == [], "add them to the package map of docs/architecture.md"
    assert sorted(package_map() - modules) == [], "the package map names modules the package does not have"


# ---- the commands ------------------------------------------------------------------------------------------
def rule_commands() -> dict[str, set[str]]:
    """{command: the rules whose shell runs it}, read from the rule files (a rule made in a loop, one per
    dataset, is named by its f-string: ``dataset_NAME``)."""
    called: dict[str, set[str]] = {}
    for path in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        for block in re.split(r"^(?=[ \t]*rule\b)", path.read_text(), flags=re.M)[1:]:
            named = re.match(r"\s*rule (\w+):", block) or re.search(r'name:\s*f"(\w*)\{', block)
            rule = named.group(1) if block.lstrip().startswith("rule ") else f"{named.group(1)}NAME"
            for command in re.findall(r"python -m rankstudy ([a-z0-9-]+)", block):
                called.setdefault(command, set()).add(rule)
        for source, rule in re.findall(r"^use rule (\w+) as (\w+)", path.read_text(), flags=re.M):
            for rules in called.values():  # a rule made from another runs its command
                if source in rules:
                    rules.add(rule)
    return called


def documented_commands() -> dict[str, tuple[str, set[str]]]:
    """{command: (module, rules)} of the command table."""
    block = DOC.split("<!-- commands: start -->")[1].split("<!-- commands: end -->")[0]
    commands = {}
    for line in block.splitlines():
        cells = line.split("|")
        if len(cells) > 4 and cells[1].strip().startswith("`"):
            command = cells[1].strip().strip("`")
            assert command not in commands, f"{command} is in the command table twice"
            commands[command] = (cells[2].strip().strip("`"), set(re.findall(r"`(\w+)`", cells[3])))
    return commands


def test_the_command_table_is_the_cli():
    documented = documented_commands()
    declared = {name: str(Path(*add.__module__.split(".")[1:])) + ".py" for name, (_, add) in SUBCOMMANDS.items()}
    assert sorted(set(declared) - set(documented)) == [], "add them to the command table of docs/architecture.md"
    assert sorted(set(documented) - set(declared)) == [], "the command table names commands the CLI does not have"
    assert {name: module for name, (module, _) in documented.items()} == declared


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_the_command_table_names_the_rules_that_call_a_command(command):
    assert documented_commands()[command][1] == rule_commands().get(command, set())


# ---- the rules ---------------------------------------------------------------------------------------------
def test_the_rules_read_the_config_through_the_plan_only():
    """Only common.smk reads ``config`` (to build PLAN); the Snakefile only to choose the default config. A local
    rule says so itself (``localrule: True``), not in a list far from it."""
    for path in [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]:
        text = path.read_text()
        if path.name == "Snakefile":
            text = text.replace('config.get("standalone", False)', "")
        if path.name != "common.smk":
            assert not re.search(r"\bconfig(\s*\[|\.get\()", text), f"{path.name} reads config: read PLAN"
        assert not re.search(r"^\s*localrules\s*:", text, flags=re.M), f"{path.name}: a localrules list"


def test_the_readme_names_every_config():
    """README's layout and its papers' data name every config file (the paper configs by their stem)."""
    readme = (REPO / "README.md").read_text()
    missing = [path.name for path in sorted((REPO / "config").glob("*.yaml")) if path.name not in readme]
    missing += [f"paper/{path.name}" for path in sorted((REPO / "config" / "paper").glob("*.yaml"))
                if not re.search(rf"paper/\{{[a-z,]*\b{path.stem}\b[a-z,]*\}}\.yaml", readme)]
    assert missing == []
