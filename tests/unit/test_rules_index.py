# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/rules.md is kept true: every path it names exists, every test it names is
defined under tests/, and every rule ID of "The rules" has a row that says where it is enforced
and which test shows it. The last test renames a referenced test in a copy and shows the check
going red."""
import os
import re

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RULES = os.path.join(TOP, "docs", "rules.md")
# The long form of each rule's enforcement and tests (docs/rules.md's details).
ENFORCED = os.path.join(TOP, "docs", "rules-enforced.md")
PATH_ROOTS = ("roles/", "plugins/", "playbooks/", "tests/", "molecule/", "docs/", "profiles/", "scripts/",
              "bench/", "inventory/")


def _test_sources(top):
    """{file basename: text} of every Python file under tests/ and bench/."""
    out = {}
    for base in ("tests", "bench"):
        for folder, dirs, files in os.walk(os.path.join(top, base)):
            dirs[:] = [d for d in dirs if d not in ("output", "__pycache__")]
            for name in files:
                if name.endswith(".py"):
                    with open(os.path.join(folder, name), encoding="utf-8") as f:
                        out[os.path.relpath(os.path.join(folder, name), top)] = f.read()
    return out


def _defined(sources, name):
    return any(re.search(r"(?m)^\s*def %s\(" % re.escape(name), text) for text in sources.values())


def rule_index_problems(text, top):
    """What in the rules index (text of docs/rules.md) does not hold in the tree at top."""
    problems = []
    sources = _test_sources(top)
    table_rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("|---")]
    for token in re.findall(r"`([^`]+)`", text):
        token = token.strip()
        if any(c in token for c in "<*{ ") or not token:
            continue
        path, _sep, test = token.partition("::")
        path = re.sub(r":\d+$", "", path)
        if path.startswith(PATH_ROOTS):
            if not os.path.exists(os.path.join(top, path)):
                problems.append("path %s does not exist" % path)
            elif test and not re.search(r"(?m)^\s*def %s\(" % re.escape(test), sources.get(path, "")):
                problems.append("%s defines no %s" % (path, test))
        elif token.startswith("::test_") or re.fullmatch(r"test_\w+", token):
            name = token.lstrip(":")
            if re.fullmatch(r"test_\d+[a-z]?", name):  # a module named by its number (`test_2b`)
                if not any(re.match(r"tests/e2e/%s_\w+\.py$" % name, p) for p in sources):
                    problems.append("no e2e module %s" % name)
            elif not _defined(sources, name):
                problems.append("no test %s under tests/" % name)
        elif re.fullmatch(r"test_\w+\.py", token):
            if not any(os.path.basename(p) == token for p in sources):
                problems.append("no test file %s under tests/" % token)
    rules = re.findall(r"(?m)^- \*\*([A-Z]\d+) ", text)
    for rule in rules:
        rows = [row for row in table_rows if row.startswith("| %s |" % rule)]
        cells = [c.strip() for c in rows[0].strip("|").split("|")] if rows else []
        if len(rows) != 1 or len(cells) < 4 or not cells[2] or not cells[3]:
            problems.append("rule %s: no single row with where it is enforced and which test shows it" % rule)
    if not rules:
        problems.append("no rule IDs found under 'The rules'")
    return problems


def test_the_rules_index_names_only_what_exists_and_covers_every_rule():
    with open(RULES, encoding="utf-8") as f:
        assert rule_index_problems(f.read(), TOP) == []


def test_the_long_form_names_only_what_exists_and_details_every_rule():
    with open(ENFORCED, encoding="utf-8") as f:
        text = f.read()
    problems = rule_index_problems(text, TOP)
    assert [p for p in problems if not p.startswith(("rule ", "no rule IDs"))] == []
    with open(RULES, encoding="utf-8") as f:
        rules = re.findall(r"(?m)^- \*\*([A-Z]\d+) ", f.read())
    assert [rule for rule in rules if not re.search(r"(?m)^### %s " % rule, text)] == []


def test_a_renamed_test_turns_the_index_red():
    # As if test_ray_sees_three_nodes were renamed and docs/rules.md not updated: the index now
    # names a test that no file defines.
    with open(RULES, encoding="utf-8") as f:
        text = f.read()
    assert "test_ray_sees_three_nodes" in text
    renamed = text.replace("test_ray_sees_three_nodes", "test_ray_sees_three_nodes_renamed")
    assert rule_index_problems(renamed, TOP) == ["no test test_ray_sees_three_nodes_renamed under tests/"]
    # The long form names it with its file: that turns red too.
    with open(ENFORCED, encoding="utf-8") as f:
        long_form = f.read().replace("test_ray_sees_three_nodes", "test_ray_sees_three_nodes_renamed")
    assert "tests/e2e/test_5_deploy_tp3.py defines no test_ray_sees_three_nodes_renamed" in rule_index_problems(
        long_form, TOP)


def test_a_rule_without_a_row_turns_the_index_red():
    with open(RULES, encoding="utf-8") as f:
        text = f.read()
    dropped = "\n".join(line for line in text.splitlines() if not line.startswith("| R3 |"))
    assert rule_index_problems(dropped, TOP) == [
        "rule R3: no single row with where it is enforced and which test shows it"]


def _rules_index():
    import importlib.util
    spec = importlib.util.spec_from_file_location("rules_index", os.path.join(TOP, "scripts", "rules_index.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tests_column_is_what_the_tests_marks_say():
    # Each rule's tests are found from the `rule` mark on them (and a molecule scenario's
    # "Rules shown" line), not from a hand-kept list: the committed column is the built one.
    index = _rules_index()
    with open(RULES, encoding="utf-8") as f:
        text = f.read()
    assert index.rebuilt(text, index.marks(TOP)) == text, "run: python3 scripts/rules_index.py --write"


def test_every_mark_names_a_rule_and_every_rule_has_a_marked_test():
    index = _rules_index()
    with open(RULES, encoding="utf-8") as f:
        text = f.read()
    rules = set(re.findall(r"(?m)^- \*\*([A-Z]\d+) ", text))
    found = index.marks(TOP)
    assert sorted(set(found) - rules) == []
    assert sorted(rule for rule in rules if not found.get(rule)) == []


def test_a_mark_taken_off_a_test_turns_the_index_red():
    index = _rules_index()
    with open(RULES, encoding="utf-8") as f:
        text = f.read()
    found = index.marks(TOP)
    assert "test_ray_sees_three_nodes" in found["R5"]
    found["R5"] = found["R5"] - {"test_ray_sees_three_nodes"}
    assert index.rebuilt(text, found) != text
