# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drift checks belong to their roles: each role that a drift check reads offers the
entry point roles/<role>/tasks/drift.yml with a `drift` entry in its argument spec, and
playbooks/drift.yml only composes them (tasks_from: drift), so no playbook copies a role default.

The structure is read from the YAML and the text; the checks themselves run on the simulated
cluster (tests/e2e/test_2b_drift.py)."""
import pytest
import glob
import os
import re

import yaml

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("O3")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = os.path.join(TOP, 'roles')
PLAYBOOKS = os.path.join(TOP, 'playbooks')
CONTEXT = {'name': 'gb10.serving.cluster', 'tasks_from': 'context'}
# Roles drift.yml includes for what they provide, not for a check: the API key the engine's
# launch id includes (R1's probe compares it).
PROVIDERS = {'gb10.serving.api_key'}
CHECK = 'gb10.serving.drift_check'
with open(os.path.join(TOP, 'docs', 'rules.md'), encoding='utf-8') as _f:
    RULES = set(re.findall(r'(?m)^- \*\*([A-Z]\d+) ', _f.read()))


def load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def drift_roles():
    return sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
                  for p in glob.glob(os.path.join(ROLES, '*', 'tasks', 'drift.yml')))


def tasks_of(play):
    return (play.get('pre_tasks') or []) + (play.get('tasks') or []) + (play.get('post_tasks') or [])


def test_every_role_with_a_drift_entry_point_documents_it():
    roles = drift_roles()
    assert {'nvidia_driver', 'modprobe_override', 'leak_recovery', 'cluster_link', 'nccl_env', 'serving_image',
            'model_sync', 'serving_containers', 'vllm_serve'} <= set(roles), roles
    for role in roles:
        spec = load(os.path.join(ROLES, role, 'meta', 'argument_specs.yml'))['argument_specs']
        assert 'drift' in spec, role
        entry = spec['drift']
        assert entry.get('short_description') and entry.get('description'), role
        defaults = load(os.path.join(ROLES, role, 'defaults', 'main.yml')) or {}
        for option in entry.get('options') or {}:
            assert option in defaults or entry['options'][option].get('required'), (role, option)


def test_drift_reaches_roles_only_through_their_drift_entry_points():
    reached = set()
    for play in load(os.path.join(PLAYBOOKS, 'drift.yml')):
        for task in tasks_of(play):
            for key in ('ansible.builtin.import_role', 'ansible.builtin.include_role', 'import_role', 'include_role'):
                if key in task:
                    name = task[key]['name']
                    # The cluster's facts and the run's context, not a check.
                    if name in PROVIDERS or (name == CONTEXT['name'] and task[key].get('tasks_from', 'context') == 'context'):
                        continue
                    assert task[key].get('tasks_from') == 'drift', (task.get('name'), task[key])
                    reached.add(name.split('.')[-1])
            assert 'ansible.builtin.include_tasks' not in task and 'ansible.builtin.import_tasks' not in task, task['name']
            # Every check is a role's: the playbook only resets the run's findings.
            if CHECK in task:
                assert task[CHECK] == {'reset': True}, task['name']
        assert not play.get('roles'), play['name']
    assert reached == set(drift_roles()), reached


def drift_tasks(path):
    """Every task of a drift file, blocks and rescues opened."""
    out = []
    for task in load(path) or []:
        out.append(task)
        for key in ('block', 'rescue', 'always'):
            out.extend(task.get(key) or [])
    return out


def test_every_check_is_a_drift_check_under_a_rule():
    # The one drift contract: a check answers with gb10.serving.drift_check under a rule
    # of docs/rules.md (its argument, not its name), changed when drifted, never failed, so the
    # host's other checks run without ignore_errors; no assert stands in for a check, and no check
    # runs in a loop (one answer per result).
    for role in drift_roles():
        checks = []
        for path in glob.glob(os.path.join(ROLES, role, 'tasks', 'drift*.yml')):
            for task in drift_tasks(path):
                assert 'ansible.builtin.assert' not in task, (path, task['name'])
                if CHECK not in task:
                    continue
                checks.append(task)
                rule = task[CHECK].get('rule', '')
                assert rule in RULES or '{{' in rule, (path, task['name'], rule)
                assert 'ignore_errors' not in task and 'loop' not in task, (path, task['name'])
        # link_check's one check is its rescue's: the measurement refuses, the check answers.
        assert checks, role


def copied_role_defaults(text, defaults):
    """The `<role default> | default(` uses in a playbook's text: a copy of a role default."""
    return sorted(set(name for name in re.findall(r'\b([a-z][a-z0-9_]*)\s*\)?\s*\|\s*default\(', text)
                      if name in defaults))


def test_no_playbook_copies_a_role_default():
    defaults = set()
    for path in glob.glob(os.path.join(ROLES, '*', 'defaults', 'main.yml')):
        defaults |= set(load(path) or {})
    found = {}
    for path in glob.glob(os.path.join(PLAYBOOKS, '**', '*.yml'), recursive=True):
        with open(path) as f:
            names = copied_role_defaults(f.read(), defaults)
        if names:
            found[os.path.relpath(path, TOP)] = names
    assert found == {}


def test_a_copied_role_default_is_found():
    assert copied_role_defaults("path: \"{{ nccl_env_path | default('/etc/gb10/nccl.env') }}\"",
                                {'nccl_env_path'}) == ['nccl_env_path']
    assert copied_role_defaults("x: \"{{ (nvidia_driver_branch | default('580')) ~ '.' }}\"",
                                {'nvidia_driver_branch'}) == ['nvidia_driver_branch']
    assert copied_role_defaults("x: \"{{ gb10_nvidia_smi | default('nvidia-smi') }}\"", {'nccl_env_path'}) == []


def test_the_env_file_checks_answer_one_per_rule():
    # One check included once per rule (N1-N4, N6): each answers under its rule, with the name the
    # five copies had.
    tasks = load(os.path.join(ROLES, 'nccl_env', 'tasks', 'drift.yml'))
    # The file's checks sit in a block that a refused RoCE port (N5, the check before it) skips.
    tasks = [inner for t in tasks for inner in t.get('block', [t])]
    include = next(t for t in tasks if t.get('ansible.builtin.include_tasks') == 'drift_rule.yml')
    rule_task = load(os.path.join(ROLES, 'nccl_env', 'tasks', 'drift_rule.yml'))[0]
    assert rule_task['name'] == ("NCCL environment file - {{ nccl_env_drift_check.value ~ ' (' ~ "
                                 "nccl_env_drift_check.key ~ ')' }}")
    assert rule_task[CHECK]['rule'] == '{{ nccl_env_drift_check.key }}'
    assert [item['key'] for item in include['loop']] == ['N1', 'N2', 'N3', 'N4', 'N6']
    assert {item['key'] for item in include['loop']} <= RULES
    assert include['loop_control']['loop_var'] == 'nccl_env_drift_check'
