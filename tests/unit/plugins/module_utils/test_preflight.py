"""Preflight checks (M2, H1, H6, N3, N5, S4, V3, V4): each bad input of docs/bad-input.md gets a
message naming the host, the variable and the fix; a good setup gets none."""
import copy

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import preflight as PF

from profile_helpers import real, sim

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("N3", "M2")


def node(host, ip, **extra):
    base = {
        'host': host, 'ansible_host': host, 'cluster_ip': ip, 'cluster_iface': 'enP7s7',
        'interfaces': ['lo', 'enP7s7', 'enP2p1s0'],
        'iface': {'present': True, 'active': True, 'type': 'ether', 'speed': 200000, 'ipv4': [ip]},
        'driver_version': '580.142', 'driver_error': '', 'nvidia_smi': 'nvidia-smi',
        'memory': {'budget_gib': 119.7, 'free_gib': 114.0}, 'model_present': True,
        'transport': 'roce', 'rdma_dir': '/dev/infiniband', 'uverbs': ['/dev/infiniband/uverbs0'],
    }
    base.update(extra)
    return base


def pair():
    return [node('spark1', '10.0.0.1'), node('spark2', '10.0.0.2', model_present=False)]


def problems(profile=None, nodes=None, **kw):
    return PF.preflight_problems(profile or real('minimax-m27-nvfp4'), pair() if nodes is None else nodes, **kw)


def one(found, *fragments):
    assert len(found) == 1, found
    for fragment in fragments:
        assert fragment in found[0], (fragment, found[0])


def test_good_two_spark_setup_passes():
    assert problems() == []


def test_sim_overlay_on_the_fixture_kits_sparks_passes():
    # The fixture kit's Spark: 119.7 GiB, ~110 GiB available on a clean node.
    nodes = [node('s1', '172.30.210.11', memory={'budget_gib': 119.7, 'free_gib': 110.0}),
             node('s2', '172.30.210.12', memory={'budget_gib': 119.7, 'free_gib': 110.0})]
    assert problems(sim('minimax-m27-nvfp4'), nodes) == []


def test_host_count_differs_from_profile_nodes():
    one(problems(real('minimax-m3-nvfp4')), 'group gb10_cluster has 2 host(s) (spark1, spark2)',
        'profile minimax-m3-nvfp4 needs 3', 'Fix: list exactly 3 hosts')


def test_same_host_twice():
    nodes = pair()
    nodes[1]['ansible_host'] = 'spark1'
    one(problems(nodes=nodes), 'hosts spark1 and spark2: both have ansible_host spark1', 'listed twice')


def test_missing_cluster_ip():
    nodes = pair()
    nodes[1]['cluster_ip'] = ''
    found = problems(nodes=nodes)
    assert any('host spark2: gb10_cluster_ip is not set' in p for p in found)


@pytest.mark.rule("H6")
def test_utilization_above_ceiling():
    prof = copy.deepcopy(real('minimax-m27-nvfp4'))
    prof['gpu_memory_utilization'] = 0.95
    found = problems(prof)
    # 0.95 x 119.7 GiB is also more than the 114 GiB free: both are reported.
    assert found[0].startswith('host spark1: gpu_memory_utilization 0.95')
    assert 'above the 0.90 ceiling (H6)' in found[0] and 'Fix: 0.85-0.87' in found[0]


def test_sglang_mem_fraction_above_ceiling():
    prof = copy.deepcopy(real('minimax-m27-nvfp4'))
    prof['sglang']['mem_fraction_static'] = 0.92
    one(problems(prof, engine='sglang'), 'sglang.mem_fraction_static 0.92', '(H6)')


@pytest.mark.rule("S4")
def test_sglang_refused_for_deepseek_v4_flash():
    found = problems(real('deepseek-v4-flash'), engine='sglang')
    one(found, 'host spark1: gb10_engine sglang cannot serve profile deepseek-v4-flash', 'FlashMLA',
        'Fix: use engine vllm')


def test_sglang_accepted_for_m27_nvfp4():
    assert problems(engine='sglang') == []


def test_unknown_engine():
    one(problems(engine='trtllm'), "gb10_engine is 'trtllm'", 'vllm or sglang')


@pytest.mark.rule("V4")
def test_mxfp4_loader_for_minimax_checkpoint():
    prof = copy.deepcopy(real('minimax-m27-nvfp4'))
    prof['device_args']['quantization'] = 'mxfp4'
    found = problems(prof)
    assert any('--quantization mxfp4 but the checkpoint saricles/MiniMax-M2.7-NVFP4-GB10-AC is nvfp4' in p
               and 'modelopt_fp4' in p for p in found)
    assert any('takes gpt-oss checkpoints only' in p for p in found)


@pytest.mark.rule("V3")
def test_ngc_image_with_mxfp4_checkpoint_and_fastsafetensors():
    prof = copy.deepcopy(real('minimax-m27-mxfp4'))
    prof['image'] = 'nvcr.io/nvidia/vllm:26.04-py3'
    prof['device_args']['load-format'] = 'fastsafetensors'
    found = problems(prof)
    assert any('mxfp4 loader' in p and '(V4' in p for p in found)
    assert any('fastsafetensors with NGC image' in p and '(V3)' in p for p in found)
    assert len(found) == 2


@pytest.mark.rule("V4")
def test_gptq_loader_needs_gptq_checkpoint():
    prof = copy.deepcopy(real('minimax-m27-nvfp4'))
    prof['device_args']['quantization'] = 'gptq_marlin'
    one(problems(prof), '--quantization gptq_marlin', 'takes gptq-int4', 'Fix: set device_args.quantization to modelopt_fp4')


@pytest.mark.parametrize('version,fragment', [
    ('590.44.01', 'CUDA-graph deadlock on GB10 (H1)'),
    ('575.57.08', 'only 580.x is known good'),
])
@pytest.mark.rule("H1")
def test_driver_branch(version, fragment):
    nodes = pair()
    nodes[1]['driver_version'] = version
    one(problems(nodes=nodes), 'host spark2: NVIDIA driver %s' % version, fragment, 'roles/nvidia_driver')


def test_driver_unreadable():
    nodes = pair()
    nodes[0].update(driver_version='', driver_error='No such file or directory')
    one(problems(nodes=nodes), 'host spark1: no driver version from gb10_nvidia_smi', 'No such file')


def test_interface_unset_absent_loopback_down():
    cases = [
        ({'cluster_iface': ''}, 'gb10_cluster_iface is not set'),
        ({'iface': {'present': False}}, 'gb10_cluster_iface enP7s7 does not exist on this host (it has lo, enP7s7'),
    ]
    for change, fragment in cases:
        nodes = pair()
        nodes[1].update(change)
        one(problems(nodes=nodes), 'host spark2: ' + fragment)
    nodes = pair()
    nodes[1].update(cluster_iface='lo', iface={'present': True, 'active': True, 'type': 'loopback', 'ipv4': ['127.0.0.1']})
    one(problems(nodes=nodes), 'host spark2: gb10_cluster_iface lo is loopback', '(N3)',
        'Fix: set gb10_cluster_iface to the ConnectX-7 port')
    nodes = pair()
    nodes[0]['iface']['active'] = False
    one(problems(nodes=nodes), 'host spark1: gb10_cluster_iface enP7s7 is down')


def test_a_link_the_deploy_configures_is_a_note_until_it_has_its_address():
    # A fresh Spark: the CX7 port up without an address, or a bond not made yet (N3).
    nodes = pair()
    nodes[0]['iface']['ipv4'] = []
    nodes[1].update(cluster_iface='bond0', iface={'present': False})
    assert len(problems(nodes=copy.deepcopy(nodes))) == 2
    for n in nodes:
        n['link_host_prep'] = True
    assert problems(nodes=nodes) == []
    assert PF.preflight_notes(nodes) == [
        'host spark1: gb10_cluster_ip 10.0.0.1 is not on gb10_cluster_iface enP7s7 yet; role cluster_link '
        'configures the link in host prep and verifies it from every node (N3, N5).',
        'host spark2: gb10_cluster_ip 10.0.0.2 is not on gb10_cluster_iface bond0 yet; role cluster_link '
        'configures the link in host prep and verifies it from every node (N3, N5).']
    # Once the address is there, the port is checked as it is: a slow one is still refused.
    nodes = pair()
    nodes[0].update(link_host_prep=True)
    nodes[0]['iface']['speed'] = 1000
    one(problems(nodes=nodes), 'host spark1: gb10_cluster_iface enP7s7 runs at 1000 Mb/s')
    assert PF.preflight_notes(nodes) == []


def test_management_nic_speed():
    nodes = pair()
    nodes[0]['iface']['speed'] = 1000
    one(problems(nodes=nodes), 'host spark1: gb10_cluster_iface enP7s7 runs at 1000 Mb/s', '~6 tok/s', '(N5)')


def test_a_slow_coordination_port_is_fine_where_nccl_takes_the_cx7_mesh():
    # The field's M3 cluster coordinated over enP7s7 while the ring carried the data; with
    # sockets the same port would carry NCCL and is refused as above.
    nodes = [node('spark%d' % i, '10.0.0.%d' % i, transport='roce_ring') for i in (1, 2, 3)]
    nodes[0]['iface']['speed'] = 1000
    assert [p for p in problems(real('minimax-m3-nvfp4'), nodes) if 'Mb/s' in p] == []
    assert [n for n in PF.preflight_notes(nodes) if 'runs at 1000 Mb/s' in n] == [
        'host spark1: gb10_cluster_iface enP7s7 runs at 1000 Mb/s: on the 3-node ring it carries only coordination '
        '(Gloo, Ray, MASTER_ADDR); NCCL\'s data takes the ConnectX-7 mesh (roce_ring, N6), which the link check and '
        'NCCL\'s own log check after host prep (N5).']
    for n in nodes:
        n['transport'] = 'socket'
    one([p for p in problems(real('minimax-m3-nvfp4'), nodes) if 'Mb/s' in p], 'runs at 1000 Mb/s', '~6 tok/s')


def test_model_absent_everywhere():
    nodes = pair()
    nodes[0]['model_present'] = False
    one(problems(nodes=nodes), 'model.path /models/MiniMax-M2.7-NVFP4-GB10-AC', 'absent on every host',
        'saricles/MiniMax-M2.7-NVFP4-GB10-AC', 'first host (spark1)')


def test_model_absent_everywhere_is_a_note_when_it_will_be_downloaded():
    nodes = pair()
    for n in nodes:
        n['model_present'] = False
    nodes[0]['model_download'] = True
    nodes[0]['model_revision'] = COMMIT
    assert problems(nodes=nodes) == []
    assert PF.preflight_notes(nodes) == [
        'host spark1: the model is on no host yet; model_sync downloads it here from the Hub '
        '(gb10_model_download is true), at commit %s, checks every file against the Hub\'s record of that '
        'commit, then copies it to the others (M3).' % COMMIT]
    nodes[0]['model_download'] = False
    one(problems(nodes=nodes), 'absent on every host', 'gb10_model_download: true')


COMMIT = '0123456789abcdef0123456789abcdef01234567'


@pytest.mark.rule("M3")
@pytest.mark.parametrize('revision', ['', 'main', 'v1.0', COMMIT[:12], COMMIT.upper()])
def test_a_download_of_a_moving_or_short_revision_is_refused_with_the_lookup(revision):
    # A download takes one commit; a branch or tag moves, and the model's own code with it.
    nodes = pair()
    for n in nodes:
        n['model_present'] = False
    nodes[0]['model_download'] = True
    nodes[0]['model_revision'] = revision
    one(problems(nodes=nodes), 'host spark1: gb10_model_download would fetch saricles/MiniMax-M2.7-NVFP4-GB10-AC',
        'never a branch or tag',
        'curl -s https://huggingface.co/api/models/saricles/MiniMax-M2.7-NVFP4-GB10-AC/revision/main',
        'set gb10_model_revision to it, or model.revision in profile minimax-m27-nvfp4')


def test_m27_fp8_does_not_fit():
    one(problems(real('minimax-m27-fp8')), 'host spark1 (poorest node', 'weights do not fit (M2)', '106.6 GiB per node')


def test_poorest_node_short_of_free_memory():
    nodes = pair()
    nodes[1]['memory'] = {'budget_gib': 119.7, 'free_gib': 55.0}
    one(problems(nodes=nodes), 'host spark2 (poorest node', '55.0 GiB available', 'page cache (H3)')


@pytest.mark.rule("M2", "O1")
def test_without_ray_the_start_does_not_need_the_object_store():
    # Room for the engine's share and not for Ray's object store: enough under vLLM's own executor.
    profile = real('minimax-m27-nvfp4')
    share = round(119.7 * profile['gpu_memory_utilization'], 1) + 0.2
    nodes = pair()
    for n in nodes:
        n['memory'] = {'budget_gib': 119.7, 'free_gib': share, 'pool_gib': 119.7}
    assert problems(nodes=nodes, executor='mp') == []
    one(problems(nodes=nodes), 'host spark1 (poorest node', 'Ray object store')


@pytest.mark.rule("H4")
def test_a_leaked_node_is_named_with_the_command_that_frees_it():
    # A Ray worker whose container ended under its rank left 33 GiB held by the driver
    # (H4); the deploy must say that node leaked and what reboots it, not three guesses.
    nodes = pair()
    nodes[1]['memory'] = {'budget_gib': 119.7, 'free_gib': 82.78, 'leaked': True, 'unaccounted_gib': 33.0}
    command = "ansible-playbook /srv/gb10/playbooks/recover.yml -i /srv/sparks.ini"
    found = problems(nodes=nodes, recover_command=command)
    one(found, 'host spark2: unified memory leaked (H4: spark2 33.0 GiB', 'does not fit now: 82.8 GiB available',
        'after the reboot it fits', 'Fix: %s reboots only the leaked nodes' % command)
    assert 'page cache (H3)' not in found[0]


def test_a_leak_too_small_to_matter_gives_the_fit_reason():
    # Leaked, but even with the memory back the node is too short: the leak is not the reason.
    nodes = pair()
    nodes[1]['memory'] = {'budget_gib': 119.7, 'free_gib': 40.0, 'leaked': True, 'unaccounted_gib': 12.0}
    one(problems(nodes=nodes), 'host spark2 (poorest node', '40.0 GiB available', 'page cache (H3)')


def test_no_memory_figures():
    nodes = pair()
    for n in nodes:
        n['memory'] = {'budget_gib': None, 'free_gib': None}
    one(problems(nodes=nodes), 'no memory figures', 'gb10_proc_root')


def test_shape_from_config_json_is_used():
    shape = {'attention': 'gqa', 'num_layers': 620, 'num_kv_heads': 8, 'head_dim': 128}
    one(problems(shape=shape), 'KV cache too small for the asked context (M2)')


# A run over part of the group: --limit, or a host that dropped out before preflight read it.

def test_host_left_out_by_limit():
    nodes = pair()
    nodes[0]['in_play'] = False
    # The head's stale facts (another play left them in hostvars) are not judged: one message only.
    nodes[0]['driver_version'] = '590.44.01'
    one(problems(nodes=nodes), "host spark1 (the head) of gb10_cluster: not in this run",
        "the head is groups['gb10_cluster'][0] (spark1)", 'Fix: run without --limit')


def test_host_unreachable_at_preflight():
    nodes = pair()
    nodes[1]['active'] = False
    nodes[1]['memory'] = {'budget_gib': None, 'free_gib': None}
    one(problems(nodes=nodes, group='sparks'), 'host spark2 of sparks: dropped out of this run',
        "the head is groups['sparks'][0] (spark1)", 'Fix: restore SSH to spark2',
        'ansible spark2 -m ansible.builtin.ping')


def test_run_hosts_check_alone():
    nodes = [node('s1', '10.0.0.1'), node('s2', '10.0.0.2', in_play=False), node('s3', '10.0.0.3', in_play=False)]
    found = PF.check_run_hosts(nodes)
    one(found, 'hosts s2, s3 of gb10_cluster: not in this run', "groups['gb10_cluster'][0] (s1)")
    assert PF.check_run_hosts(pair()) == []


# H1 and the deploy's host prep: a wrong branch that host prep replaces is a note.

@pytest.mark.rule("H1")
def test_driver_590_replaced_by_host_prep_is_a_note():
    nodes = pair()
    nodes[1].update(driver_version='590.44.01', driver_host_prep='580')
    assert problems(nodes=nodes) == []
    notes = PF.preflight_notes(nodes)
    one(notes, 'host spark2: driver 590.44.01 will be replaced by 580.x in host prep (H1)',
        'CUDA-graph deadlock', 'preflight_host_prep_follows')


@pytest.mark.rule("H1")
@pytest.mark.parametrize('host_prep', ['', '575'])
def test_driver_590_without_host_prep_is_refused(host_prep):
    # '' - preflight on its own, or nvidia_driver_install false on that host; '575' - host prep
    # would install another wrong branch.
    nodes = pair()
    nodes[1].update(driver_version='590.44.01', driver_host_prep=host_prep)
    one(problems(nodes=nodes), 'host spark2: NVIDIA driver 590.44.01', 'CUDA-graph deadlock on GB10 (H1)')
    assert PF.preflight_notes(nodes) == []


def test_missing_driver_is_refused_even_when_host_prep_follows():
    nodes = pair()
    nodes[0].update(driver_version='', driver_error='No such file or directory', driver_host_prep='580')
    one(problems(nodes=nodes), 'host spark1: no driver version from gb10_nvidia_smi', 'No such file')
    assert PF.preflight_notes(nodes) == []


def test_good_driver_needs_no_note():
    nodes = pair()
    for n in nodes:
        n['driver_host_prep'] = '580'
    assert problems(nodes=nodes) == [] and PF.preflight_notes(nodes) == []


@pytest.mark.rule("N1")
@pytest.mark.parametrize('transport', ['roce', 'roce_ring'])
def test_roce_on_a_host_without_verbs_devices_is_refused_naming_host_and_fix(transport):
    nodes = [node('spark1', '10.0.0.1', transport=transport),
             node('spark2', '10.0.0.2', model_present=False, transport=transport, uverbs=[])]
    one(problems(nodes=nodes), 'host spark2:', 'gb10_nccl_transport %s' % transport, '/dev/infiniband/uverbs*',
        'sudo modprobe ib_uverbs mlx5_ib', 'gb10_nccl_transport: socket', '(N1)')


def test_sockets_need_no_verbs_devices():
    nodes = [node('spark1', '10.0.0.1', transport='socket', uverbs=[]),
             node('spark2', '10.0.0.2', model_present=False, transport='socket', uverbs=[])]
    assert problems(nodes=nodes) == []


@pytest.mark.parametrize('link_host_prep', [False, True])
def test_loopback_or_the_management_nic_is_refused_by_name_even_when_host_prep_configures_the_link(link_host_prep):
    # -e gb10_cluster_iface=lo passed preflight as "host prep configures the link", and
    # cluster_link then sent the user to remove the address from the right port.
    nodes = pair()
    for n in nodes:
        n['link_host_prep'] = link_host_prep
    nodes[1].update(cluster_iface='lo', iface={'present': True, 'active': True, 'type': 'loopback', 'ipv4': ['127.0.0.1']})
    one(problems(nodes=copy.deepcopy(nodes)), 'host spark2: gb10_cluster_iface lo is loopback', 'ConnectX-7 port')
    assert not [n for n in PF.preflight_notes(nodes) if 'spark2' in n and 'cluster_link configures' in n]

    nodes = pair()
    for n in nodes:
        n['link_host_prep'] = link_host_prep
    nodes[0].update(ansible_host='192.168.1.11', cluster_iface='enP7s7',
                    iface={'present': True, 'active': True, 'type': 'ether', 'speed': 10000, 'ipv4': ['192.168.1.11']})
    one(problems(nodes=copy.deepcopy(nodes)), 'host spark1: gb10_cluster_iface enP7s7 carries the management address '
        '192.168.1.11 (ansible_host)', 'ConnectX-7 port')


def test_a_node_whose_override_still_caps_cuda_is_judged_for_the_oom_guard_on_its_whole_pool():
    # H10 after H2: before host prep removes the override CUDA sees 62 GiB; the engine will take its
    # utilization of the whole 119.7 GiB once it is gone, and the warm node's headroom follows that.
    capped = {'budget_gib': 62.0, 'free_gib': 62.0, 'pool_gib': 119.7}
    nodes = [node('s1', '172.30.210.11', memory=dict(capped)), node('s2', '172.30.210.12', memory=dict(capped))]
    assert problems(sim('minimax-m27-nvfp4'), nodes) == []
    greedy = dict(sim('minimax-m27-nvfp4'), gpu_memory_utilization=0.86)
    found = problems(greedy, nodes)
    assert len(found) == 1 and 'its 119.7 GiB pool - 102.9 GiB for the engine' in found[0], found
    assert 'Lower gpu_memory_utilization to <= 0.84' in found[0], found


@pytest.mark.rule("M1", "A5")
def test_an_image_the_head_lacks_and_cannot_get_is_refused_before_anything_changes():
    nodes = pair()
    nodes[0].update(image_state='absent', image_pull='auto', image_build_recipe='')
    profile = real('minimax-m27-nvfp4')
    found = [p for p in problems(nodes=nodes) if 'is not there' in p]
    assert len(found) == 1 and found[0].startswith('host spark1 (the head): image %s of profile' % profile['image'])
    name = profile['image'].rsplit(':', 1)[0]
    assert 'docker tag %s %s' % (name, profile['image']) in found[0] and '(A5)' in found[0]
    # A recipe to build, a pull the user allows, an image that is there, or no Docker yet: no refusal.
    for change in ({'image_build_recipe': '/srv/recipe'}, {'image_pull': 'always'}, {'image_state': 'present'},
                   {'image_state': 'unknown'}):
        again = pair()
        again[0].update(dict(nodes[0], **change))
        assert not [p for p in problems(nodes=again) if 'is not there' in p], change


@pytest.mark.rule("H11")
def test_kernel_scratch_cma_that_nccl_cannot_pin_is_refused_with_the_fix():
    # NVIDIA/NV-Kernels PR 591: kernel 7.0.0-1019-nvidia with Kexec HandOver on, CmaTotal 0 and ~9.7 GiB
    # CmaFree; NCCL's ibv_reg_mr fails with ENOMEM.
    nodes = pair()
    nodes[1]['memory'] = dict(nodes[1]['memory'], kho_cma_gib=9.7)
    found = [p for p in problems(nodes=nodes) if '(H11)' in p]
    assert len(found) == 1 and found[0].startswith('host spark2: 9.7 GiB of CMA beyond any CMA area'), found
    assert 'kho=off' in found[0] and 'update-grub' in found[0] and '6.17.0-1032' in found[0]
    nodes[1]['memory']['kho_cma_gib'] = 0.0
    assert not [p for p in problems(nodes=nodes) if '(H11)' in p]
