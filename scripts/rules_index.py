"""The tests column of docs/rules.md's index, built from the tests themselves.

A test says which rules it shows with a mark: `@pytest.mark.rule("H4", "O1")` on the function, or
`pytestmark = pytest.mark.rule(...)` for a whole module; a molecule scenario with a line
`# Rules shown (docs/rules.md, ...): H1, H4` at the top of its molecule.yml. This script reads
those marks (statically: nothing is imported or run) and writes, for every row of the index, the
tests that carry the row's rule.

    python3 scripts/rules_index.py           # print what differs from docs/rules.md (exit 1 if any)
    python3 scripts/rules_index.py --write   # rewrite the tests column in docs/rules.md
"""
import ast
import os
import re
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RULES = os.path.join(TOP, 'docs', 'rules.md')
ROW = re.compile(r'^\| ([A-Z]\d+) \|')
SCENARIO_MARK = re.compile(r'(?m)^# Rules shown \(docs/rules\.md[^)]*\): (.+)$')


def _rule_ids(call):
    """The rule IDs of a pytest.mark.rule(...) call node, or None for any other node."""
    if not isinstance(call, ast.Call):
        return None
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == 'rule'):
        return None
    return [arg.value for arg in call.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]


def _module_marks(value):
    nodes = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
    ids = []
    for node in nodes:
        ids += _rule_ids(node) or []
    return ids


def python_marks(top=TOP):
    """{rule: set of test names}; a module-wide mark names the module's file."""
    found = {}
    for base in ('tests', 'bench'):
        for folder, dirs, files in os.walk(os.path.join(top, base)):
            dirs[:] = sorted(d for d in dirs if d not in ('output', '__pycache__'))
            for name in sorted(files):
                if not name.endswith('.py'):
                    continue
                path = os.path.join(folder, name)
                with open(path, encoding='utf-8') as f:
                    tree = ast.parse(f.read(), path)
                for node in ast.walk(tree):
                    if isinstance(node, ast.Assign) and any(getattr(t, 'id', '') == 'pytestmark' for t in node.targets):
                        for rule in _module_marks(node.value):
                            found.setdefault(rule, set()).add(os.path.relpath(path, top))
                    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith('test_'):
                        for decorator in node.decorator_list:
                            for rule in _rule_ids(decorator) or []:
                                found.setdefault(rule, set()).add(node.name)
    return found


def scenario_marks(top=TOP):
    """{rule: set of 'molecule/<scenario>'}."""
    found = {}
    root = os.path.join(top, 'molecule')
    for scenario in sorted(os.listdir(root)):
        path = os.path.join(root, scenario, 'molecule.yml')
        if not os.path.isfile(path):
            continue
        with open(path, encoding='utf-8') as f:
            match = SCENARIO_MARK.search(f.read())
        for rule in re.split(r'[,\s]+', match.group(1).strip()) if match else []:
            found.setdefault(rule, set()).add('molecule/' + scenario)
    return found


def marks(top=TOP):
    found = python_marks(top)
    for rule, names in scenario_marks(top).items():
        found.setdefault(rule, set()).update(names)
    return found


def tests_cell(names):
    """The cell: molecule scenarios first, then modules, then test functions, each sorted."""
    def key(name):
        return (0 if name.startswith('molecule/') else 1 if name.endswith('.py') else 2, name)
    return ', '.join('`%s`' % name for name in sorted(names, key=key))


def rebuilt(text, found):
    """text of docs/rules.md with every index row's last cell built from the marks."""
    lines = text.split('\n')
    for i, line in enumerate(lines):
        match = ROW.match(line)
        if match:
            cells = split_row(line)
            cells[-1] = tests_cell(found.get(match.group(1), ())) or '(none)'
            lines[i] = '| %s |' % ' | '.join(cells)
    return '\n'.join(lines)


def split_row(line):
    """The cells of a Markdown table row; a | inside backticks is text."""
    cells, cell, code = [], '', False
    for char in line.strip()[1:-1]:
        if char == '`':
            code = not code
        if char == '|' and not code:
            cells.append(cell.strip())
            cell = ''
        else:
            cell += char
    return cells + [cell.strip()]


def main(argv):
    with open(RULES, encoding='utf-8') as f:
        text = f.read()
    new = rebuilt(text, marks())
    if '--write' in argv:
        with open(RULES, 'w', encoding='utf-8') as f:
            f.write(new)
        return 0
    differing = [(a, b) for a, b in zip(text.split('\n'), new.split('\n')) if a != b]
    for old, wanted in differing:
        print('docs/rules.md has:  %s\nthe marks give:     %s' % (old[:160], wanted[:160]))
    if differing:
        print('run: python3 scripts/rules_index.py --write')
    return 1 if differing else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
