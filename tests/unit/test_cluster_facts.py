"""One home for the cluster's facts: role gb10.serving.cluster defines every cluster-wide
input and every derived fact once; the other roles and the playbooks only read them.

The checks are the issue's own counts, run over the checkout: no `gb10_x | default(...)` chain, no
`<role>_group`, the head looked up in one place, the env file's path and the H6 ceiling written
once, every role depending on the cluster role, every play importing it where it reads a gb10_*
name.
"""
import glob
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gb10.serving.plugins.module_utils.profile import UTILIZATION_CEILING

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER = os.path.join(TOP, 'roles', 'cluster')


def _files(*patterns):
    found = []
    for pattern in patterns:
        found += glob.glob(os.path.join(TOP, pattern), recursive=True)
    return sorted(f for f in found if os.path.isfile(f) and not f.startswith(CLUSTER + os.sep))


def _code_lines(path):
    """(line number, text) of a YAML or Jinja file's lines, comments left out."""
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.lstrip().startswith('#'):
                yield number, line


def _hits(pattern, *globs):
    rx = re.compile(pattern)
    return ['%s:%d: %s' % (os.path.relpath(f, TOP), n, line.strip())
            for f in _files(*globs) for n, line in _code_lines(f) if rx.search(line)]


ROLE_AND_PLAYBOOK_YAML = ('roles/**/*.yml', 'roles/**/*.j2', 'playbooks/**/*.yml')


def _cluster_defaults():
    with open(os.path.join(CLUSTER, 'defaults', 'main.yml')) as f:
        return yaml.safe_load(f)


def test_no_cluster_wide_setting_gets_its_default_at_a_use_site():
    assert _hits(r'gb10_[a-z0-9_]+ \| default\(', *ROLE_AND_PLAYBOOK_YAML) == []


def test_no_role_keeps_a_group_of_its_own():
    assert _hits(r'^[a-z_]+_group: ', 'roles/*/defaults/main.yml') == []


def test_the_head_and_its_address_are_derived_in_one_place():
    assert _hits(r"cluster_head'|groups\[", *ROLE_AND_PLAYBOOK_YAML) == []
    assert _hits(r'hostvars\[[^]]+\]\.gb10_cluster_ip', *ROLE_AND_PLAYBOOK_YAML) == []


def test_the_env_file_and_the_h6_ceiling_are_written_once():
    assert _hits(r'/etc/gb10/nccl\.env', 'roles/*/defaults/main.yml', 'roles/*/tasks/*.yml', 'roles/*/vars/*.yml',
                 'playbooks/**/*.yml') == []
    assert _hits(r'\b0\.90?\b', 'roles/*/defaults/main.yml', 'roles/*/tasks/*.yml') == []
    # In Python, one constant (module_utils/profile.py) that preflight, the fit and the balance import.
    assert _hits(r'^[^#]*[=<>(,]\s*0\.90?\b', 'plugins/module_utils/preflight.py', 'plugins/module_utils/fit.py',
                 'plugins/module_utils/memory_balance.py') == []
    facts = _cluster_defaults()
    assert facts['gb10_nccl_env_file'] == '/etc/gb10/nccl.env' and facts['gb10_utilization_ceiling'] == UTILIZATION_CEILING


def test_every_role_depends_on_the_cluster_role():
    missing = []
    for meta in _files('roles/*/meta/main.yml'):
        with open(meta) as f:
            deps = [d['role'] if isinstance(d, dict) else d for d in yaml.safe_load(f).get('dependencies') or []]
        if 'gb10.serving.cluster' not in deps:
            missing.append(os.path.relpath(meta, TOP))
    assert missing == []


def _cluster_set_facts():
    # The facts the base role's tasks resolve once per run (the launch's profile: tasks/launch.yml).
    names = set()
    for path in glob.glob(os.path.join(CLUSTER, 'tasks', '*.yml')):
        with open(path) as f:
            for task in _walk(yaml.safe_load(f)):
                names.update((task.get('ansible.builtin.set_fact') or {}).keys())
    return names


def test_every_cluster_wide_name_a_role_reads_is_defined_in_the_cluster_role():
    facts = set(_cluster_defaults()) | _cluster_set_facts()
    assert 'gb10_deploy_profile' in facts
    read = set()
    for path in _files('roles/*/defaults/main.yml'):
        for unused_number, line in _code_lines(path):
            # Names in quotes or paths are values (a group name, a key file), not variables.
            read.update(re.findall(r'(?<![\'/])\b(gb10_[a-z0-9_]+)\b', line))
    assert sorted(read - set(facts)) == []


def _walk(tasks):
    for task in tasks or []:
        yield task
        for key in ('block', 'rescue', 'always'):
            yield from _walk(task.get(key))


def test_every_play_that_reads_the_cluster_imports_it():
    facts = _cluster_defaults()
    without = []
    for path in _files('playbooks/*.yml'):
        with open(path) as f:
            plays = yaml.safe_load(f) or []
        for play in plays:
            if 'hosts' not in play:
                continue
            tasks = list(_walk((play.get('pre_tasks') or []) + (play.get('tasks') or [])))
            imports = [t for t in tasks if (t.get('ansible.builtin.import_role') or {}).get('name') == 'gb10.serving.cluster']
            text = yaml.safe_dump(play)
            if any(re.search(r'\b%s\b' % name, text) for name in facts) and not imports:
                without.append('%s: %s' % (os.path.relpath(path, TOP), play['name']))
    assert without == []


# What the roles write at run time rather than configure (the converged_state count): each
# changes while the cluster serves, so the converged read (playbooks/steps/tasks/converged_state.yml)
# must not fingerprint it, or no re-run would ever be converged.
RUNTIME_STATE = {
    'firewall_listing_file': 'the kernel listing recorded after each load',
    'leak_recovery_memory_baseline': "the node's clean reading, replaced after a reboot",
    'link_check_dir': "the link probe's last figures",
    'modprobe_override_kept_record': "CUDA's view recorded beside a kept override",
    'node_metrics_textfile_root': 'the metrics every role writes for the exporter',
    'leak_recovery_reboot_on_ask_log': "the gate's leak reboot requests",
    'serving_containers_cache_dir': "the engine's compile cache",
    'serving_image_build_dir': 'a build context, only where an image is built',
    'triton_ptxas_source': "a path inside the serving container, not on the node",
    'watchdog_dir': "the watchdog's state and incidents",
}


def test_every_path_a_role_configures_on_a_node_is_read_by_the_converged_check():
    with open(os.path.join(TOP, 'playbooks', 'steps', 'tasks', 'converged_state.yml')) as f:
        read = yaml.safe_load(f)[0]['gb10.serving.converged_state']['files']
    unread = []
    for path in _files('roles/*/defaults/main.yml'):
        with open(path) as f:
            defaults = yaml.safe_load(f) or {}
        for name, value in defaults.items():
            if not (isinstance(value, str) and re.match(r'^/(etc|usr/local|opt|var/lib)/', value)):
                continue
            if name in RUNTIME_STATE or any(value == r or value.startswith(r.rstrip('/') + '/') for r in read):
                continue
            unread.append('%s=%s' % (name, value))
    assert unread == [], 'add the path to the converged read, or to RUNTIME_STATE with why it changes at run time'


@pytest.mark.rule("N6")
def test_the_head_reaches_a_mesh_node_with_its_cluster_key_at_the_nodes_link_address(tmp_path):
    # The watchdog's reboot-if-leaked and engine-rank go from the head through the cluster key; on a
    # mesh, gb10_cluster_ip is the coordination port, which the SSH trust does not cover:
    # the shipped example inventories, rendered by ansible itself with the cluster role's defaults.
    play = tmp_path / 'play.yml'
    play.write_text(yaml.safe_dump([{
        'hosts': 'gb10_cluster', 'gather_facts': False, 'connection': 'local',
        'vars_files': [os.path.join(CLUSTER, 'defaults', 'main.yml')],
        'tasks': [{'ansible.builtin.debug': {'msg': 'KEY {{ gb10_cluster_key_addresses | to_json }}'},
                   'run_once': True}]}]))
    found = {}
    for inventory in ('sparks3.ini', 'sparks.ini'):
        proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'),
                               '-i', os.path.join(TOP, 'inventory', inventory), str(play)],
                              cwd=TOP, capture_output=True, text=True, timeout=120, check=False,
                              env=dict(os.environ, ANSIBLE_NOCOLOR='1', ANSIBLE_STDOUT_CALLBACK='default',
                                       ANSIBLE_COLLECTIONS_PATH=os.path.join(TOP, '.collections')))
        line = next((line for line in proc.stdout.splitlines() if 'KEY {' in line), None)
        assert line, proc.stdout + proc.stderr
        found[inventory] = json.loads(line.split('KEY ', 1)[1].rstrip("'\""))
    # sparks3.yml cables port 0 of each node to port 1 of the next: spark2 reaches spark1 on
    # 192.168.101.0/24, spark3 on 192.168.103.0/24; the head itself stays at its own address.
    assert found['sparks3.ini'] == {'spark1': '10.10.0.1', 'spark2': '192.168.101.2', 'spark3': '192.168.103.3'}
    # a pair: every node at its gb10_cluster_ip
    with open(os.path.join(TOP, 'inventory', 'sparks.ini')) as handle:
        ips = dict(re.findall(r'^(\S+) .*gb10_cluster_ip=(\S+)', handle.read(), re.M))
    assert found['sparks.ini'] == ips, (found, ips)
