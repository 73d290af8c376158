"""What a container that runs NCCL gets for each transport (N1), and what a failed
transport check names when a container lacks it. One definition (module_utils/roce.py) behind the
filters, used by every container that runs NCCL: the Ray containers, the link probe, SGLang."""
import os
import re

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.filter.rdma_container import FilterModule as RdmaContainer
from ansible_collections.gb10.serving.plugins.filter.rdma_container_missing import FilterModule as RdmaMissing

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("N1")

rdma_container = RdmaContainer().filters()['rdma_container']
rdma_missing = RdmaMissing().filters()['rdma_container_missing']
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

# docker inspect's HostConfig of a container started with NVIDIA's two-Spark flags
# (--device /dev/infiniband --cap-add IPC_LOCK --ulimit memlock=-1).
WITH_RDMA = {
    'Devices': [{'PathOnHost': '/dev/infiniband', 'PathInContainer': '/dev/infiniband', 'CgroupPermissions': 'rwm'}],
    'CapAdd': ['CAP_IPC_LOCK'],
    'Ulimits': [{'Name': 'memlock', 'Soft': -1, 'Hard': -1}, {'Name': 'nofile', 'Soft': 1048576, 'Hard': 1048576}],
    'Privileged': False,
}
# A container started as the roles once did: host network, shm, GPU, nothing for RDMA.
WITHOUT_RDMA = {'Devices': [], 'CapAdd': None, 'Ulimits': None, 'Privileged': False}


@pytest.mark.parametrize('transport', ['roce', 'roce_ring'])
def test_roce_transports_get_the_devices_ipc_lock_and_unlimited_memlock(transport):
    options = rdma_container(transport)
    assert options['devices'] == ['/dev/infiniband:/dev/infiniband:rwm']
    assert options['capabilities'] == ['IPC_LOCK']
    assert 'memlock:-1:-1' in options['ulimits'] and [u for u in options['ulimits'] if u.startswith('nofile:')]
    assert 'privileged' not in options  # not by default


def test_privileged_only_when_asked_and_never_for_socket():
    assert rdma_container('roce', privileged=True)['privileged'] is True
    assert rdma_container('socket') == {} and rdma_container('socket', privileged=True) == {}


def test_an_unknown_transport_is_refused_by_name():
    with pytest.raises(AnsibleFilterError, match="transport must be one of roce, roce_ring, socket, got 'rdma'"):
        rdma_container('rdma')


def test_a_container_without_rdma_settings_is_named_for_each_missing_one():
    assert rdma_missing(WITHOUT_RDMA, 'roce') == ['no /dev/infiniband device', 'no IPC_LOCK capability',
                                                  'memlock not unlimited']
    assert rdma_missing(dict(WITH_RDMA, Ulimits=[{'Name': 'memlock', 'Soft': 65536, 'Hard': 65536}]), 'roce') == [
        'memlock not unlimited']


def test_a_container_with_them_privileged_or_on_sockets_lacks_nothing():
    assert rdma_missing(WITH_RDMA, 'roce') == []
    assert rdma_missing(dict(WITHOUT_RDMA, Privileged=True), 'roce_ring') == []
    assert rdma_missing(WITHOUT_RDMA, 'socket') == []


def test_the_settings_the_filter_gives_are_the_ones_the_check_looks_for():
    # What rdma_container puts on a container, as docker reports it back, lacks nothing.
    options = rdma_container('roce')
    host_config = {
        'Devices': [dict(zip(('PathOnHost', 'PathInContainer', 'CgroupPermissions'), d.split(':')))
                    for d in options['devices']],
        'CapAdd': options['capabilities'],
        'Ulimits': [dict(zip(('Name', 'Soft', 'Hard'), (u.split(':')[0], int(u.split(':')[1]), int(u.split(':')[2]))))
                    for u in options['ulimits']],
    }
    assert rdma_missing(host_config, 'roce') == []


def test_lower_limits_where_docker_cannot_grant_them_are_checked_as_given():
    # gb10_rdma_limits: the simulation's Docker cannot raise its limits (no CAP_SYS_RESOURCE);
    # the check then compares against what the containers were given, not unlimited.
    limits = {'memlock': 8388608, 'nofile': 20000}
    options = rdma_container('roce', limits=limits)
    assert options['ulimits'] == ['memlock:8388608:8388608', 'nofile:20000:20000']
    assert options['devices'] and options['capabilities']
    given = dict(WITH_RDMA, Ulimits=[{'Name': 'memlock', 'Soft': 8388608, 'Hard': 8388608}])
    assert rdma_missing(given, 'roce', limits=limits) == []
    assert rdma_missing(given, 'roce') == ['memlock not unlimited']
    assert rdma_missing(WITH_RDMA, 'roce', limits=limits) == ['memlock not 8388608']
    for bad, match in (({'memlock': 0}, 'memlock must be -1'), ({'nofile': 'many'}, 'whole number'),
                       ({'stack': 1}, 'unknown limit')):
        with pytest.raises(AnsibleFilterError, match=match):
            rdma_container('roce', limits=bad)


@pytest.mark.parametrize('role, tasks, rdma_var', [
    ('serving_containers', 'containers.yml', 'serving_containers_rdma'),
    ('link_check', 'probe.yml', 'link_check_rdma'),
    ('sglang_serve', 'main.yml', 'sglang_serve_rdma'),
])
def test_every_container_that_runs_nccl_takes_the_settings_from_the_filter(role, tasks, rdma_var):
    with open(os.path.join(TOP, 'roles', role, 'tasks', tasks)) as handle:
        text = handle.read()

    def containers(items):
        for item in items or []:
            if 'block' in item:
                yield from containers(item['block'])
            spec = item.get('community.docker.docker_container')
            if spec and spec.get('state') == 'started':
                yield item

    started = list(containers(yaml.safe_load(text)))
    assert started, (role, tasks)
    for task in started:
        spec = task['community.docker.docker_container']
        for option in ('devices', 'capabilities', 'ulimits', 'privileged'):
            assert spec.get(option) == '{{ %s.%s | default(omit) }}' % (rdma_var, option), (task['name'], option)
    role_vars = os.path.join(TOP, 'roles', role, 'vars', 'main.yml')
    if os.path.exists(role_vars):
        with open(role_vars) as handle:
            text += handle.read()
    assert re.search(r'%s: (?:>-\s+)?"?\{\{ \S+ \| gb10\.serving\.rdma_container\(' % rdma_var, text), (role, rdma_var)


def test_devices_capabilities_and_limits_are_read_as_docker_lists_them():
    # Docker lists every device mapping, the verbs nodes one by one where a launcher mapped them so
    # (--device /dev/infiniband/uverbs0 ...), a mapping without a host path, and every ulimit in the
    # order given: a name before or after memlock, and a device beside /dev/infiniband, are not it.
    apart = {'Devices': [{'PathInContainer': '/dev/null'}, {'PathOnHost': '/dev/fuse'}, {'PathOnHost': '/dev/infinibandX'},
                         {'PathOnHost': '/dev/vfio'}],
             'CapAdd': ['IPC_LOCK'],
             'Ulimits': [{'Name': 'core', 'Soft': 0, 'Hard': 0}, {'Name': 'nofile', 'Soft': 1048576, 'Hard': 1048576},
                         {'Name': 'memlock', 'Soft': -1, 'Hard': -1}]}
    assert rdma_missing(apart, 'roce') == ['no /dev/infiniband device']
    nodes = dict(apart, Devices=[{'PathOnHost': '/dev/infiniband/uverbs0'}, {'PathOnHost': '/dev/infiniband/rdma_cm'}])
    assert rdma_missing(nodes, 'roce') == []
    # A byte limit as Docker reads it back from JSON (another int object than the one asked for).
    limits = {'memlock': str(64 << 30), 'nofile': 20000}
    given = dict(nodes, Ulimits=[{'Name': 'memlock', 'Soft': int('68719476736'), 'Hard': int('68719476736')}])
    assert rdma_missing(given, 'roce', limits=limits) == []
