# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The conformance report's verdicts and redaction (plugins/module_utils/report.py)."""
import json

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import report

pytestmark = pytest.mark.rule("H3", "H4")

# What image_probe.py prints of an image (its keys), here NCCL 2.30.7 as the system library.
PROBE = {'ray': {'version': '2.52.1'}, 'nccl': {'version': 23007, 'name': 'libnccl.so.2', 'asked': 'vllm',
                                                'path': '/usr/lib/aarch64-linux-gnu/libnccl.so.2.30.7', 'kind': 'system'},
         'nccl_other': [], 'nccl_conf': []}
TRITON = {'arch': 121, 'version': '3.6.0', 'path': '/usr/local/lib/python3.12/dist-packages/triton/backends/nvidia/bin/ptxas-blackwell',
          'realpath': '/usr/local/cuda-13.0/bin/ptxas', 'release': '13.0', 'is_source': True}


def serving(probe=None, triton=None, executor='ray'):
    return {'container': 'gb10-%s-head' % executor, 'executor': executor, 'image': 'vllm-node:local',
            'probe_output': 'INFO engine import\nGB10_IMAGE_PROBE %s\n' % json.dumps(probe or PROBE),
            'triton': TRITON if triton is None else triton, 'transport': 'roce'}


def node(**memory):
    figures = {'total_gib': 119.7, 'available_gib': 115.85, 'free_gib': 103.25, 'cuda_free_gib': 103.25,
               'cuda_total_gib': 119.7, 'reclaimable_gib': 12.6, 'unaccounted_gib': 0.9, 'leak_threshold_gib': 10.0,
               'leaked': False, 'gpu_workload': False}
    figures.update(memory)
    return {'memory': figures, 'driver_version': '580.173.02', 'override_present': True, 'earlyoom': True,
            'link': {'speed_mbps': 200000, 'mtu': 9000, 'hcas': ['rocep1s0f1', 'roceP2p1s0f1']}}


def by_rule(found):
    return dict((v['rule'], v) for v in found)


def test_a_gb10_as_measured_holds_every_rule_it_reads():
    # The clean GB10 of unslothai/unsloth PR 10704: CUDA free = MemFree = 103.25 GiB.
    found = by_rule(report.verdicts({'spark1': node(), 'spark2': node(available_gib=114.0)}))
    for rule in ('H1', 'H2', 'H3', 'H4', 'H5', 'H10', 'N1', 'N5'):
        assert found[rule]['verdict'] == 'holds', found[rule]
    assert 'CUDA free 103.25 MemFree 103.25' in found['H3']['figure']
    # No serving container runs: what the engine runs is not measured, and said.
    for rule in ('R1', 'N7', 'H7'):
        assert found[rule] == {'rule': rule, 'verdict': 'not measured', 'figure': 'no serving container runs on the head'}


def test_each_fault_fails_its_rule_with_the_figure():
    found = by_rule(report.verdicts({
        'spark1': dict(node(cuda_total_gib=62.0), driver_version='590.44.01', earlyoom=False),
        'spark2': dict(node(leaked=True, unaccounted_gib=33.4, cuda_free_gib=90.0, available_gib=80.0),
                       link={'speed_mbps': 1000, 'mtu': 1500, 'hcas': []})}))
    assert found['H1']['verdict'] == 'fails' and 'spark1 590.44.01' in found['H1']['figure']
    assert found['H2']['verdict'] == 'fails' and 'CUDA 62.0 of 119.7 GiB (override file present)' in found['H2']['figure']
    assert found['H3']['verdict'] == 'fails'  # CUDA free away from MemFree: not what a GB10 shows
    assert found['H4']['verdict'] == 'fails' and 'spark2 unaccounted 33.40 GiB' in found['H4']['figure']
    assert found['H5']['verdict'] == 'fails'
    assert found['H10']['verdict'] == 'fails' and found['N5']['verdict'] == 'fails' and found['N1']['verdict'] == 'fails'


def test_a_serving_cluster_is_not_judged_for_balance_and_its_engine_is_no_leak():
    serving = node(available_gib=17.0, free_gib=5.0, cuda_free_gib=5.0, gpu_workload=True, unaccounted_gib=98.2)
    found = by_rule(report.verdicts({'spark1': serving, 'spark2': serving}))
    assert found['H4']['verdict'] == 'holds' and 'engine running' in found['H4']['figure']
    assert found['H5']['verdict'] == 'not measured'


def test_serials_macs_uuids_and_addresses_are_redacted():
    text = ('GPU 0: NVIDIA GB10 (UUID: GPU-0123abcd-1111-2222-3333-444455556666)\nSerial Number : 1324021012345\n'
            'link/ether 4c:bb:47:2e:01:02 inet 192.168.100.10/24')
    out = report.redact({'x': [text]})['x'][0]
    assert 'GPU-0123' not in out and '1324021012345' not in out and '4c:bb:47' not in out and '192.168' not in out
    assert '192.168.100.10/24' in report.redact(text, addresses=True)


def test_the_page_lists_every_verdict_and_node():
    built = report.build({'spark1': node()}, 'spark1', '2026-12-06T10:00:00Z')
    page = report.markdown(built)
    assert page.startswith('# GB10 conformance report: spark1')
    assert all('| %s | %s |' % (v['rule'], v['verdict']) in page for v in built['verdicts'])
    assert '## spark1' in page and 'memory cuda_free_gib: 103.25' in page


@pytest.mark.rule("R1", "N7", "H7")
def test_the_head_serving_container_answers_for_ray_nccl_and_triton():
    found = by_rule(report.verdicts({'spark1': dict(node(), serving=serving()), 'spark2': node()}))
    assert found['R1']['verdict'] == 'holds' and 'Ray 2.52.1' in found['R1']['figure'], found['R1']
    assert found['N7']['verdict'] == 'holds', found['N7']
    assert 'the engine loads NCCL 2.30.7 (/usr/lib/aarch64-linux-gnu/libnccl.so.2.30.7, system)' in found['N7']['figure']
    assert found['H7'] == {'rule': 'H7', 'verdict': 'holds', 'figure': 'spark1 gb10-ray-head (ray executor): Triton 3.6.0 '
                           'runs /usr/local/cuda-13.0/bin/ptxas (release 13.0) for sm_121'}


@pytest.mark.rule("R1", "N7", "H7")
def test_an_image_below_the_ring_floor_without_ray_and_with_the_bundled_assembler_fails_each_rule():
    old = dict(PROBE, ray={'error': "No module named 'ray'"}, nccl=dict(PROBE['nccl'], version=22703))
    bundled = dict(TRITON, realpath=TRITON['path'], release='12.8', is_source=False)
    found = by_rule(report.verdicts({'spark1': dict(node(), serving=dict(serving(old, bundled), transport='roce_ring'))}))
    assert found['R1']['verdict'] == 'fails' and "no Ray (No module named 'ray')" in found['R1']['figure']
    # The image check's own floor for the ring (N6, N7), with its sentence.
    assert found['N7']['verdict'] == 'fails' and 'gb10_nccl_transport=roce_ring needs NCCL 2.30.7' in found['N7']['figure'], found['N7']
    assert found['H7']['verdict'] == 'fails' and 'ptxas-blackwell (release 12.8)' in found['H7']['figure']


def test_vllms_own_executor_needs_no_ray_and_an_image_without_triton_is_not_judged_for_ptxas():
    found = by_rule(report.verdicts({'spark1': dict(node(), serving=serving(
        dict(PROBE, ray={'error': "No module named 'ray'"}), {'arch': 121, 'error': "ModuleNotFoundError: No module named 'triton'"},
        executor='mp'))}))
    assert found['R1']['verdict'] == 'not measured' and "vLLM's own executor runs no Ray" in found['R1']['figure']
    assert found['N7']['verdict'] == 'holds'
    assert found['H7']['verdict'] == 'not measured' and "No module named 'triton'" in found['H7']['figure']


def test_the_report_keeps_the_probes_answer_not_the_containers_other_output():
    built = report.build({'spark1': dict(node(), serving=serving())}, 'spark1', '2026-12-06T00:00:00Z')
    kept = built['nodes']['spark1']['serving']
    assert 'probe_output' not in kept and kept['probe']['nccl']['version'] == 23007, kept


# The collection's page as the node exporter serves it: the reader's read, then role link_check's
# link.prom.j2 as rendered.
LINK_PAGE = '''# TYPE gb10_node_metrics_read_ok gauge
gb10_node_metrics_read_ok 1
# HELP gb10_link_allreduce_busbw_gbit All-reduce bus bandwidth this node measured over the cluster link (NaN: no result).
# TYPE gb10_link_allreduce_busbw_gbit gauge
gb10_link_allreduce_busbw_gbit{transport="roce",backend="nccl"} %s
gb10_link_floor_gbit{transport="roce"} 150.0
gb10_link_tcp_gbit NaN
gb10_link_check_ok %d
gb10_link_check_timestamp_seconds 1796000000
'''


@pytest.mark.rule("N5")
def test_the_link_checks_last_all_reduce_is_the_links_figure_and_one_under_its_floor_fails_n5():
    built = report.build({'spark1': dict(node(), exporter=LINK_PAGE % ('187.2', 1)),
                          'spark2': dict(node(), exporter=LINK_PAGE % ('23.5', 0))}, 'spark1', '2026-12-06T00:00:00Z')
    found = by_rule(built['verdicts'])
    assert found['N5']['verdict'] == 'fails', found['N5']
    assert 'spark1 200000 Mb/s MTU 9000, all-reduce 187.2 Gb/s (floor 150.0, passed)' in found['N5']['figure']
    assert 'spark2 200000 Mb/s MTU 9000, all-reduce 23.5 Gb/s (floor 150.0, failed)' in found['N5']['figure']
    assert 'exporter' not in built['nodes']['spark1'] and built['nodes']['spark1']['link']['allreduce']['ok'] is True
    # A node whose exporter did not answer is judged on its port alone.
    assert by_rule(report.build({'spark1': dict(node(), exporter='')}, 'spark1', 'now')['verdicts'])['N5']['verdict'] == 'holds'


def pcie(p2_width=4):
    # Each ConnectX-7 function's PCIe link as roce_facts reads it: Gen5 x4 on a DGX Spark; an ASUS
    # GX10's P2 endpoint x2 of x4 (forums.developer.nvidia.com/t/367853).
    return dict((dev, {'speed': '32.0 GT/s PCIe', 'width': p2_width if dev.startswith('roceP2') else 4,
                       'max_speed': '32.0 GT/s PCIe', 'max_width': 4})
                for dev in ('rocep1s0f0', 'rocep1s0f1', 'roceP2p1s0f0', 'roceP2p1s0f1'))


@pytest.mark.rule("N5")
def test_each_functions_pcie_width_is_in_the_links_figure_and_a_narrowed_one_is_named():
    spark = node()
    gx10 = node()
    gx10['link'] = dict(gx10['link'], pcie=pcie(p2_width=2))
    spark['link'] = dict(spark['link'], pcie=pcie())
    found = by_rule(report.verdicts({'spark1': spark, 'gx10': gx10}))
    assert 'spark1 200000 Mb/s MTU 9000, PCIe x4 on 4 functions' in found['N5']['figure'], found['N5']
    assert ('gx10 200000 Mb/s MTU 9000, PCIe x2/x4 on 4 functions (roceP2p1s0f0, roceP2p1s0f1 narrower than the '
            'card: x2 of x4, x2 of x4)') in found['N5']['figure'], found['N5']
    # The board's wiring halves a twin, which the link check's all-reduce judges; the width alone fails nothing.
    assert found['N5']['verdict'] == 'holds'


# The engine's log as engine_start reads it (the lines its start_log entry point keeps).
START_LOG = '''gb10-engine: starting 2026-12-06T10:00:00Z
(EngineCore pid=90) INFO 12-06 10:03:10 [core.py:386] init engine (profile, create kv cache, warmup model) took 180.00 s (compilation: 95.00 s)
(APIServer pid=70) INFO 12-06 10:03:14 [entry.py:140] Starting vLLM server on http://127.0.0.1:8000
'''


@pytest.mark.rule("V7")
def test_the_engines_start_is_judged_against_the_deploys_readiness_wait():
    def v7(**fields):
        built = report.build({'spark1': dict(node(), serving=dict(serving(), **fields))}, 'spark1', 'now')
        return by_rule(built['verdicts'])['V7'], built['nodes']['spark1']['serving']
    found, kept = v7(start_log=START_LOG, readiness_timeout_s=1800)
    assert found['verdict'] == 'holds', found
    assert 'ready 194 s after the start of 2026-12-06T10:00:00Z (engine init 180.0 s), within the deploy\'s wait of 1800 s' in found['figure']
    assert 'start_log' not in kept and kept['start']['engine_init_s'] == 180.0
    # A wait shorter than the start: the deploy would give up on an engine that comes up.
    slow, unused = v7(start_log=START_LOG, readiness_timeout_s=120)
    assert slow['verdict'] == 'fails' and "over the deploy's wait of 120 s: raise the profile's readiness_timeout_s" in slow['figure']
    # Still starting, no start in the log, no launch record: said, not judged.
    assert v7(start_log=START_LOG.splitlines()[0], readiness_timeout_s=1800)[0]['verdict'] == 'not measured'
    assert 'holds no engine start' in v7(start_log='', readiness_timeout_s=1800)[0]['figure']
    assert v7(start_log=START_LOG)[0]['verdict'] == 'not measured'
    # No serving container: V7 with the others.
    assert by_rule(report.verdicts({'spark1': node()}))['V7']['verdict'] == 'not measured'


def test_the_page_shows_the_short_benchmark_and_the_node_without_its_engine():
    bench = {'model': 'minimax-m27', 'prefill_tokens': 512, 'generate_tokens': 64,
             'levels': [{'concurrency': 1, 'requests': 3, 'output_tok_per_s': 26.4, 'mean_ttft_s': 0.71,
                         'mean_tpot_ms': 37.2, 'per_request_tok_per_s': 25.1}]}
    clean = {'total_gib': 119.7, 'available_gib': 115.85, 'free_gib': 103.25, 'cuda_free_gib': 103.25}
    serving_node = node(gpu_workload=True, free_gib=12.0, cuda_free_gib=12.0,
                        baseline={'cuda_offset_gib': 0.0, 'recorded_at': '2026-12-05T08:00:00Z', 'reading': clean})
    page = report.markdown(report.build({'spark1': dict(serving_node, serving=dict(serving(), benchmark=bench))},
                                        'spark1', 'now'))
    assert '| 1 | 3 | 26.4 | 0.71 | 37.2 | 25.1 |' in page and 'minimax-m27, prompts of 512 tokens, 64 generated' in page
    assert ('memory without the engine (the clean reading of 2026-12-05T08:00:00Z): total_gib 119.7, available_gib '
            '115.85, free_gib 103.25, cuda_free_gib 103.25') in page
    assert 'memory free_gib: 12.0' in page
