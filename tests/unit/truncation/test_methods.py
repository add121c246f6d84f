"""The truncation study's measure and method names (rankstudy.truncation.methods): written in one module, which
the experiment, the plan, the claims and the reports read."""

import ast

from helpers import REPO
from rankstudy.truncation import methods

NAMES = {methods.F1, methods.DCG, methods.ORACLE, methods.GREEDY, methods.BICUT, methods.CHOPPY}


def test_the_names_are_written_in_one_module():
    """No other module spells a measure or method name as a string of its own."""
    spelled = []
    for path in sorted((REPO / "src" / "rankstudy").rglob("*.py")):
        if path.name == "methods.py" and path.parent.name == "truncation":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in NAMES:
                spelled.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value!r}")
    assert spelled == []


def test_a_studys_method_names_and_table_1s():
    assert methods.fixed(5) == "Fixed-5" and methods.greedy(55) == "Greedy-k (k=55)"
    assert methods.method_name(methods.greedy(55)) == methods.GREEDY and methods.method_name("Fixed-5") == "Fixed-5"
    assert methods.methods([5, 10]) == ["Oracle", "Greedy-k", "BiCut", "Choppy", "Fixed-5", "Fixed-10"]
    assert all(any(name.startswith(start) for start in methods.ORDER) for name in methods.methods([5]))
