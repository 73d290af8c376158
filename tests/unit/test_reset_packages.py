"""playbooks/reset.yml purges the packages the roles install (and apt's dependencies of them),
by name: every package an apt task of a role installs is on its list, so that a role that starts
installing another package cannot leave it behind a reset. The NVIDIA driver is the exception on
purpose (H1: a reset never takes a Spark's driver off)."""
import glob
import os
import re

import pytest
import yaml

pytestmark = pytest.mark.rule("O7")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NEVER = {'nvidia_driver'}


def _tasks(node):
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ('block', 'rescue', 'always'):
            yield from _tasks(node.get(key))


def installed_by_roles():
    names = {}
    for path in glob.glob(os.path.join(TOP, 'roles', '*', 'tasks', '*.yml')):
        role = path.split(os.sep)[-3]
        if role in NEVER:
            continue
        with open(os.path.join(TOP, 'roles', role, 'defaults', 'main.yml')) as handle:
            defaults = yaml.safe_load(handle) or {}
        with open(path) as handle:
            for task in _tasks(yaml.safe_load(handle)):
                apt = task.get('ansible.builtin.apt')
                if not apt or apt.get('state', 'present') != 'present' or 'name' not in apt:
                    continue
                value = apt['name']
                match = re.fullmatch(r'\{\{ *(\w+) *\}\}', value) if isinstance(value, str) else None
                value = defaults[match.group(1)] if match else value
                for name in value if isinstance(value, list) else [value]:
                    names.setdefault(name, []).append(os.path.relpath(path, TOP))
    return names


def test_every_package_a_role_installs_is_one_the_reset_takes_off():
    with open(os.path.join(TOP, 'playbooks', 'reset.yml')) as handle:
        plays = yaml.safe_load(handle)
    (listed,) = [play['vars']['gb10_reset_packages'] for play in plays if 'gb10_reset_packages' in play.get('vars', {})]
    installed = installed_by_roles()
    assert {'nginx', 'earlyoom', 'docker.io'} <= set(installed), installed  # the reading found the roles' tasks
    missing = dict((name, where) for name, where in installed.items() if name not in listed)
    assert missing == {}
    assert set(listed) <= set(installed), set(listed) - set(installed)
