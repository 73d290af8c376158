"""What a newcomer reads about a role is what the role does: its README's variables tables are the
argument spec and the defaults (scripts/role_docs.py), every option has a description of its own,
a template the spec shows is the one the defaults file holds, and the base role only defines.
"""
import collections
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, 'scripts'))
import role_docs  # noqa: E402  pylint: disable=wrong-import-position

ROLES = role_docs.roles()


def _specs(role):
    return role_docs.load(role, 'meta', 'argument_specs.yml')['argument_specs']


@pytest.mark.parametrize('role', ROLES)
def test_the_readme_tables_are_the_spec_and_the_defaults(role):
    path, readme, wanted = role_docs.readme_with_tables(role)
    assert readme == wanted, '%s differs from its spec and defaults: python3 scripts/role_docs.py --write' % path


def test_the_script_reports_a_readme_that_differs(tmp_path):
    # The check the test above relies on, against a copy whose table was edited by hand.
    shutil.copytree(os.path.join(TOP, 'scripts'), str(tmp_path / 'scripts'))
    shutil.copytree(os.path.join(TOP, 'roles', 'page_cache'), str(tmp_path / 'roles' / 'page_cache'))
    readme = tmp_path / 'roles' / 'page_cache' / 'README.md'
    readme.write_text(readme.read_text().replace('| `page_cache_', '| `page_cache_renamed_', 1))
    checked = subprocess.run([sys.executable, str(tmp_path / 'scripts' / 'role_docs.py')], capture_output=True,
                             text=True, check=False)
    assert checked.returncode == 1 and 'differs: roles/page_cache/README.md' in checked.stdout, checked


@pytest.mark.parametrize('role', ROLES)
def test_every_option_has_a_description_of_its_own(role):
    # One comment above a group of defaults once became the description of each of them (the OS
    # paths read as "the controller's known_hosts file"): within an entry point, no two options
    # share one, except the drift entry points that read main's options "as the main entry point's".
    for entry, spec in _specs(role).items():
        by_text = collections.defaultdict(list)
        for name, option in (spec.get('options') or {}).items():
            by_text[role_docs.text(option.get('description'))].append(name)
        shared = {t: names for t, names in by_text.items() if len(names) > 1 and not t.startswith('As ')}
        assert not shared, (role, entry, shared)


@pytest.mark.parametrize('role', ROLES)
def test_a_template_the_spec_shows_is_the_defaults_files(role):
    defaults = role_docs.load(role, 'defaults', 'main.yml')
    for entry, spec in _specs(role).items():
        for name, option in (spec.get('options') or {}).items():
            if role_docs.templated(option.get('default')):
                assert name in defaults and ' '.join(option['default'].split()) == ' '.join(
                    str(defaults[name]).split()), (role, entry, name)


def test_a_derived_fact_is_described_as_derived_and_shows_no_copy_of_its_template():
    defaults = role_docs.load('cluster', 'defaults', 'main.yml')
    facts = _specs('cluster')['facts']['options']
    for name, option in facts.items():
        if role_docs.templated(defaults.get(name)):
            assert 'default' not in option and role_docs.text(option['description']).startswith('Derived'), name


def _role_edges():
    """{role: roles it depends on (meta) or includes/imports (tasks, handlers)} over the collection."""
    edges = {}
    for role in ROLES:
        meta = role_docs.load(role, 'meta', 'main.yml')
        deps = {re.sub(r'^gb10\.serving\.', '', d['role'] if isinstance(d, dict) else d)
                for d in meta.get('dependencies') or []}
        for folder in ('tasks', 'handlers'):
            base = os.path.join(TOP, 'roles', role, folder)
            for name in os.listdir(base) if os.path.isdir(base) else []:
                with open(os.path.join(base, name)) as f:
                    deps |= set(re.findall(r'(?:include|import)_role:\s*\n\s*name:\s*gb10\.serving\.(\w+)', f.read()))
        edges[role] = deps - {role}
    return edges


def test_the_role_graph_has_no_cycle():
    edges = _role_edges()
    state = {}

    def visit(role, path):
        if state.get(role) == 'done':
            return
        assert state.get(role) != 'open', 'a cycle: %s' % ' -> '.join(path + [role])
        state[role] = 'open'
        for dep in sorted(edges[role]):
            visit(dep, path + [role])
        state[role] = 'done'

    for role in ROLES:
        visit(role, [])
    # The base role is every other role's dependency (a role run alone gets the cluster's facts).
    assert all('cluster' in edges[r] for r in ROLES if r != 'cluster'), edges


def test_the_base_role_only_defines():
    # Defaults, derived facts and their spec: no role included, no file written, no command run.
    # Its task files resolve the run's launch (set_fact, reads, assert; context includes the launch
    # entry point, its own file).
    assert _role_edges()['cluster'] == set()
    allowed = {'ansible.builtin.set_fact', 'ansible.builtin.assert', 'ansible.builtin.slurp', 'ansible.builtin.stat',
               'ansible.builtin.include_tasks',
               'ansible.builtin.include_vars', 'ansible.builtin.debug', 'block', 'name', 'when', 'vars', 'register',
               'run_once', 'delegate_to', 'no_log', 'check_mode', 'changed_when', 'failed_when', 'loop', 'loop_control',
               'tags', 'become', 'ignore_errors'}
    base = os.path.join(TOP, 'roles', 'cluster', 'tasks')
    for name in os.listdir(base):
        with open(os.path.join(base, name)) as f:
            tasks = yaml.safe_load(f) or []
        stack = list(tasks)
        while stack:
            task = stack.pop()
            stack.extend(task.get('block', []))
            assert set(task) <= allowed, (name, task.get('name'), set(task) - allowed)
            assert task.get('ansible.builtin.include_tasks', 'launch.yml') in os.listdir(base), (name, task)


def test_every_entry_point_a_play_or_role_uses_has_its_spec():
    # ansible-doc lists a role's entry points from its spec; one used with tasks_from but missing
    # there is an entry point nobody can look up (and whose variables nothing checks).
    used = set()
    for pattern in ('roles/**/*.yml', 'playbooks/**/*.yml', 'molecule/**/*.yml', 'bench/**/*.yml'):
        for path in glob.glob(os.path.join(TOP, pattern), recursive=True):
            with open(path) as f:
                used |= set(re.findall(r'name:\s*gb10\.serving\.(\w+)\s*\n\s*tasks_from:\s*(\w+)', f.read()))
    assert used and [(role, entry) for role, entry in sorted(used) if entry not in _specs(role)] == []
