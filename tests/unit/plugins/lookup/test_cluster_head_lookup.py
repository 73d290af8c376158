# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""lookup('gb10.serving.cluster_head', <group>), the one definition of the cluster's head (the first
host of the group as the inventory lists it, whatever --limit leaves), as a play calls it."""
import os
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
INVENTORY = """[gb10_cluster]
spark2 ansible_connection=local
spark1 ansible_connection=local
spark3 ansible_connection=local
[empty]
"""


def head(tmp_path, expr, limit=None):
    inventory = tmp_path / 'hosts.ini'
    inventory.write_text(INVENTORY)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(TOP, '.collections'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_CONFIG=os.path.join(TOP, 'ansible.cfg'))
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), 'ansible'), limit or 'spark3', '-i', str(inventory),
         '-m', 'ansible.builtin.debug', '-a', 'msg=' + expr],
        cwd=TOP, env=env, capture_output=True, text=True, timeout=120, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def test_the_first_host_the_inventory_lists_even_when_the_run_leaves_it_out(tmp_path):
    rc, out = head(tmp_path, "{{ lookup('gb10.serving.cluster_head', 'gb10_cluster') }}", limit='spark3')
    assert rc == 0, out
    assert 'msg: spark2\n' in out, out


def test_a_group_without_hosts_is_an_error_naming_it_unless_a_default_is_given(tmp_path):
    rc, out = head(tmp_path, "{{ lookup('gb10.serving.cluster_head', 'empty') }}")
    assert rc != 0 and 'inventory group empty has no hosts' in out and 'list the cluster' in out, out
    rc, out = head(tmp_path, "{{ lookup('gb10.serving.cluster_head', 'nowhere', default=inventory_hostname) }}")
    assert rc == 0 and 'msg: spark3\n' in out, out


def test_one_group_name_only(tmp_path):
    rc, out = head(tmp_path, "{{ lookup('gb10.serving.cluster_head', 'gb10_cluster', 'empty') }}")
    assert rc != 0 and 'takes one group name' in out, out
