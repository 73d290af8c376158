# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the roles write on a node, as each role declares it (lookup gb10.serving.managed_paths): the
list the converged check, the deploy's record of a node and reset.yml read (the base role's
gb10_managed_paths)."""
import glob
import os
import re

import pytest
import yaml

from ansible.errors import AnsibleError
from ansible_collections.gb10.serving.plugins.lookup.managed_paths import declared_paths

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
# Roles whose tasks write files but declare no path on a node, and why.
UNDECLARED = {
    'api_key': 'writes the client keys on the controller only',
    'link_check': "writes its probe and figures under the collection's state folder (gb10_state_paths)",
    'model_sync': "writes the model folder (never reset) and its state under gb10_state_paths",
}
WRITES = re.compile(r'ansible\.builtin\.(copy|template|file|lineinfile|blockinfile|get_url|unarchive):|'
                    r'community\.docker\.docker_container:')


def test_the_lookup_is_every_roles_declaration_once_and_sorted(lookup_msg):
    rc, out = lookup_msg({}, "{{ lookup('gb10.serving.managed_paths', wantlist=true) | join(',') }}")
    assert rc == 0, out
    got = re.search(r'msg: (\S+)', out).group(1).split(',')
    union = set()
    for path in glob.glob(os.path.join(TOP, 'roles', '*', 'vars', 'main.yml')):
        role = path.split(os.sep)[-3]
        with open(path) as handle:
            union |= set((yaml.safe_load(handle) or {}).get(role + '_managed_paths', []))
    assert got == sorted(union) and len(got) == len(set(got)), got
    # Each role's own folder is in it, under the role that writes it.
    assert '/etc/netplan' in declared_paths()['cluster_link'] and '/etc/netplan' in got
    assert '/opt/gb10-node-metrics' in declared_paths()['node_metrics']


def test_every_role_that_writes_on_a_node_declares_where():
    declared = declared_paths()
    for tasks in sorted(glob.glob(os.path.join(TOP, 'roles', '*', 'tasks'))):
        role = tasks.split(os.sep)[-2]
        writes = any(WRITES.search(open(path).read()) for path in glob.glob(os.path.join(tasks, '*.yml')))
        if writes and role not in UNDECLARED:
            assert declared.get(role), '%s writes files: declare where in roles/%s/vars/main.yml' % (role, role)
    assert not set(UNDECLARED) & set(declared), 'declared now: drop it from UNDECLARED'


@pytest.mark.parametrize('value', [['/etc/{{ x }}'], ['etc/relative'], '/etc/one-string', [3]])
def test_a_declaration_that_is_not_a_list_of_literal_absolute_paths_is_refused(tmp_path, value):
    (tmp_path / 'example' / 'vars').mkdir(parents=True)
    (tmp_path / 'example' / 'vars' / 'main.yml').write_text(yaml.safe_dump({'example_managed_paths': value}))
    with pytest.raises(AnsibleError) as refused:
        declared_paths(str(tmp_path))
    assert 'example_managed_paths must be a list of absolute paths' in str(refused.value)
    assert str(tmp_path / 'example' / 'vars' / 'main.yml') in str(refused.value)
