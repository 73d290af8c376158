"""The NCCL/Gloo env file, defined once: role nccl_env's template renders the variables
of module_utils/roce.py's nccl_env (filter nccl_env_vars), roce_facts returns the same variables,
and drift has a rule for each. Rendered here from the template the role deploys."""
import pytest
import os

import jinja2

from ansible_collections.gb10.serving.plugins.filter.nccl_env_vars import FilterModule
from ansible_collections.gb10.serving.plugins.module_utils.roce import ENV_RULES, env_rule, plan

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("N2")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
TEMPLATE = os.path.join(TOP, 'roles', 'nccl_env', 'templates', 'nccl.env.j2')
HEADER = ('# Managed by gb10.serving.nccl_env; transport=%s on spark2.\n'
          '# N1 RoCE pinning, N2 GDR off, N3 socket names on the cluster link, N4 socket fallback, N6 ring;\n'
          '# N5: NCCL prints the transport and devices it took at init (INIT, NET only), read after the launch.\n')
COMMON = ('GLOO_SOCKET_IFNAME={iface}\nMASTER_ADDR=10.0.0.1\nNCCL_DEBUG=INFO\nNCCL_DEBUG_SUBSYS=INIT,NET\n')


def render(transport, iface='enp1s0f1np1', hcas=(), gid=-1, addr_range='', extra=None):
    env = jinja2.Environment(trim_blocks=True, keep_trailing_newline=True)
    env.filters['gb10.serving.nccl_env_vars'] = FilterModule().filters()['nccl_env_vars']
    with open(TEMPLATE) as handle:
        template = env.from_string(handle.read())
    return template.render(nccl_env_transport=transport, nccl_env_iface=iface, nccl_env_ip='10.0.0.2',
                           nccl_env_head_ip='10.0.0.1', nccl_env_ib_hca=list(hcas), nccl_env_ib_gid_index=gid,
                           nccl_env_ib_addr_range=addr_range, nccl_env_extra=extra or {},
                           inventory_hostname='spark2')


def variables(text):
    return dict(line.split('=', 1) for line in text.splitlines() if line and not line.startswith('#'))


def test_the_deployed_roce_file():
    assert render('roce', hcas=['roceP2p1s0f1', 'rocep1s0f1'], gid=3) == HEADER % 'roce' + (
        COMMON.format(iface='enp1s0f1np1')
        + 'NCCL_IB_DISABLE=0\nNCCL_IB_GID_INDEX=3\nNCCL_IB_HCA=roceP2p1s0f1,rocep1s0f1\n'
        'NCCL_IB_ROCE_VERSION_NUM=2\nNCCL_IB_TIMEOUT=22\nNCCL_IGNORE_CPU_AFFINITY=1\nNCCL_NET=IB\nNCCL_NET_GDR_LEVEL=0\n'
        'NCCL_NET_PLUGIN=none\n'
        'NCCL_SOCKET_IFNAME=enp1s0f1np1\nOMPI_MCA_btl_tcp_if_include=enp1s0f1np1\nTP_SOCKET_IFNAME=enp1s0f1np1\n'
        'UCX_NET_DEVICES=enp1s0f1np1\nVLLM_HOST_IP=10.0.0.2\n')


@pytest.mark.rule("N1")
def test_the_deployed_ring_and_socket_files():
    ring = variables(render('roce_ring', iface='enP7s7', hcas=['rocep1s0f0', 'roceP2p1s0f0'],
                            addr_range='192.168.96.0/20'))
    assert ring['NCCL_IB_ADDR_RANGE'] == '192.168.96.0/20' and ring['NCCL_IB_SUBNET_AWARE_ROUTING'] == '1'
    assert ring['NCCL_IB_ADDR_FAMILY'] == 'AF_INET' and ring['NCCL_IB_MERGE_NICS'] == '0'
    assert 'NCCL_IB_GID_INDEX' not in ring  # N6: per-connection GIDs, no global index
    sockets = variables(render('socket', extra={'NCCL_SOCKET_NTHREADS': '4'}))
    assert {k: sockets[k] for k in ('NCCL_IB_DISABLE', 'NCCL_P2P_DISABLE', 'NCCL_NET')} == {
        'NCCL_IB_DISABLE': '1', 'NCCL_P2P_DISABLE': '1', 'NCCL_NET': 'Socket'}
    assert env_rule('NCCL_NET', sockets) == 'N4' and env_rule('NCCL_NET', ring) == 'N1'
    # N1: over RoCE NCCL takes the IB network or fails at init, never sockets in silence; every
    # transport leaves NCCL's CPU pinning off, as the field's launchers do.
    assert ring['NCCL_NET'] == 'IB' and ring['NCCL_IGNORE_CPU_AFFINITY'] == sockets['NCCL_IGNORE_CPU_AFFINITY'] == '1'
    assert sockets['NCCL_SOCKET_NTHREADS'] == '4' and 'NCCL_IB_HCA' not in sockets


def test_every_variable_the_file_writes_has_its_rule():
    for text in (render('roce', hcas=['rocep1s0f1'], gid=3), render('socket'),
                 render('roce_ring', hcas=['rocep1s0f0'], addr_range='192.168.96.0/20')):
        wanted = variables(text)
        for key in wanted:
            assert key in ENV_RULES or key in ('NCCL_IB_DISABLE', 'NCCL_IB_GID_INDEX', 'NCCL_NET'), key
            assert env_rule(key, wanted) in ('N1', 'N2', 'N3', 'N4', 'N6')


def test_roce_facts_returns_the_variables_the_file_holds(fixture_path):
    from ansible_collections.gb10.serving.plugins.module_utils.roce import parse_ip_addr, read_netdevs, read_rdma
    root = fixture_path('sysfs', 'direct-pair', 'spark1')
    with open(os.path.join(root, 'ip-addr.json')) as handle:
        addresses = parse_ip_addr(handle.read())
    facts = plan(read_rdma(root), addresses, read_netdevs(root, sorted(addresses)), '192.168.100.10', 'roce')
    file_vars = variables(render('roce', hcas=facts['hcas'], gid=facts['gid_index']).replace('10.0.0.2', '192.168.100.10'))
    del file_vars['MASTER_ADDR']  # the coordinator is the role's to add, not the node's facts
    assert facts['env'] == file_vars
