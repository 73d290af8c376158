# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One look at the cluster (plugins/module_utils/status.py, playbooks/status.yml): each node's
figures read from the page its exporter serves, made here by the exporter's own code (the
unified_memory module's reading, the watchdog's and the link check's textfiles), the verdict, and
the one command a cluster that does not serve gets. The playbook runs on the simulated cluster in
tests/e2e/test_2_deploy.py (serving) and tests/e2e/test_4_safety.py (stopped)."""

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import node_metrics as nm
from ansible_collections.gb10.serving.plugins.module_utils import status
from ansible_collections.gb10.serving.plugins.module_utils import watchdog as wd
from ansible_collections.gb10.serving.plugins.module_utils.unified_memory import measure

pytestmark = pytest.mark.rule("O6")

# A GB10 with 33 GiB held by the driver and no GPU process (rule H4), as the module reads it.
LEAKED = ('MemTotal: 125510140 kB\nMemFree: 85000000 kB\nMemAvailable: 86000000 kB\n'
          'Cached: 400000 kB\nAnonPages: 3145728 kB\nShmem: 51200 kB\nSUnreclaim: 307200 kB\n')
CLEAN = ('MemTotal: 125510140 kB\nMemFree: 108000000 kB\nMemAvailable: 121000000 kB\n'
         'Cached: 13000000 kB\nAnonPages: 3145728 kB\nShmem: 51200 kB\nSUnreclaim: 307200 kB\n')
# The link check's textfile as role link_check writes it (its template's sample lines).
LINK = ('gb10_link_allreduce_busbw_gbit{transport="roce",backend="nccl"} 161.2\n'
        'gb10_link_floor_gbit{transport="roce"} 60\ngb10_link_tcp_gbit NaN\ngb10_link_check_ok 1\n'
        'gb10_link_check_timestamp_seconds 1796586399\n')
PROFILE = {'name': 'minimax-m27-nvfp4', 'tensor_parallel_size': 2, 'nodes': 2}


def module_reading(tmp_path, fixture_path, meminfo):
    """What module unified_memory reads on an idle GB10 with this meminfo."""
    (tmp_path / 'meminfo').write_text(meminfo)
    answers = {'--query-gpu': fixture_path('nvidia-smi', 'gb10-580.142.query-gpu.csv'),
               '--query-compute-apps': fixture_path('nvidia-smi', 'gb10-580.142.query-compute-apps.idle.csv')}

    def run(argv):
        with open(answers[argv[1].split('=')[0]]) as handle:
            return 0, handle.read(), ''

    return measure(run, proc_root=str(tmp_path), gpu_source='nvidia_smi', cuda_probe='none')[0]


def exporter_page(tmp_path, fixture_path, meminfo, textfiles=()):
    reading = module_reading(tmp_path, fixture_path, meminfo)
    return nm.page(nm.metrics_text(reading, None, 1796586400.0, 0.2), list(textfiles))


def facts(pages, engine):
    return {'profile': PROFILE, 'overlay': '', 'executor': 'ray', 'nodes': ['spark1', 'spark2'], 'engine': engine,
            'exporters': pages, 'containers': {'spark1': 'gb10-ray-head running', 'spark2': 'none'},
            'firewall': {'spark1': 'loaded', 'spark2': 'loaded'},
            'image': {'tag': 'vllm-node:m27', 'id': 'sha256:' + 'ab' * 32}, 'versions': {'vllm': '0.32.0'},
            'endpoint': 'https://192.168.1.101:8443/v1', 'key_file': '/k', 'ca_file': '/ca', 'keys': {'default': '0123456789ab'},
            'before': {},
            'commands': {'recover': 'ansible-playbook /c/playbooks/recover.yml -i inv',
                         'launch': 'ansible-playbook /c/playbooks/steps/10_launch.yml -i inv -e gb10_profile=x',
                         'rollback': 'ansible-playbook /c/playbooks/rollback.yml -i inv'}}


def test_a_serving_cluster_shows_each_nodes_figures_from_its_exporter(tmp_path, fixture_path):
    head_state = {'status': wd.SERVING, 'failures': 0, 'recoveries': [],
                  'last_probe': {'verdict': 'ok', 'tokens': 8, 'ttft_s': 0.4, 'correct': True}}
    watchdog_page = wd.metrics_text(head_state, 1796586400.0, 2, 3600, 6)
    pages = {'spark1': exporter_page(tmp_path, fixture_path, CLEAN, [('/var/lib/gb10/watchdog/metrics.prom', watchdog_page),
                                                                     ('/var/lib/gb10/link_check/link.prom', LINK)]),
             'spark2': exporter_page(tmp_path, fixture_path, CLEAN, [('/var/lib/gb10/link_check/link.prom', LINK)])}
    built = status.build(facts(pages, {'alive': True, 'healthy': True, 'serving': True, 'pid': '42'}))

    assert built['serving'] and built['fix'] is None
    head = built['nodes']['spark1']['figures']
    assert head['memory']['total_gib'] == 119.7 and head['memory']['leaked'] is False
    assert head['link'] == {'busbw_gbit': 161.2, 'floor_gbit': 60.0, 'tcp_gbit': None, 'ok': True,
                            'measured_at': 1796586399.0}
    assert built['watchdog']['status'] == wd.SERVING and built['watchdog']['restart_budget_left'] == 2.0
    assert built['image'] == {'tag': 'vllm-node:m27', 'id': 'sha256:' + 'ab' * 32, 'versions': {'vllm': '0.32.0'}}
    assert built['nodes']['spark2']['figures']['watchdog'] is None
    screen = status.lines(built)
    assert screen[0].startswith('SERVING: ') and 'Fix:' not in ' '.join(screen)
    assert 'Watchdog: serving, restart budget left 2, recoveries 0, last probe answered yes' in screen, screen
    assert built['before'] is None  # O8: rollback.yml has nothing to return to yet
    assert 'Launch before: none recorded (one launch has served since the deploy or a reset)' in screen, screen
    assert any(line.startswith('spark2: memory 119.7 GiB') and '161.2 Gb/s (floor 60.0) ok' in line for line in screen), screen


def test_a_stopped_engine_with_a_leaked_node_gets_the_recover_command(tmp_path, fixture_path):
    pages = {'spark1': exporter_page(tmp_path, fixture_path, CLEAN),
             'spark2': exporter_page(tmp_path, fixture_path, LEAKED)}
    built = status.build(facts(pages, {'alive': False, 'healthy': False, 'serving': False}))

    assert not built['serving'] and 'no engine runs on the head' in built['why'] and 'spark2 (H4)' in built['why']
    assert built['fix'] == 'ansible-playbook /c/playbooks/recover.yml -i inv'
    assert status.lines(built)[-1] == 'Fix: ansible-playbook /c/playbooks/recover.yml -i inv'
    assert 'LEAKED' in [line for line in status.lines(built) if line.startswith('spark2:')][0]


@pytest.mark.parametrize('engine, why', [
    ({'alive': False, 'healthy': False}, 'no engine runs on the head'),
    ({'alive': True, 'healthy': False}, 'does not answer /health'),
    ({'alive': True, 'healthy': True, 'serving': False}, 'another launch than the recorded one'),
])
def test_an_engine_that_does_not_serve_without_a_leak_gets_the_launch_step(tmp_path, fixture_path, engine, why):
    pages = {host: exporter_page(tmp_path, fixture_path, CLEAN) for host in ('spark1', 'spark2')}
    built = status.build(facts(pages, engine))
    assert not built['serving'] and why in built['why']
    assert built['fix'].startswith('ansible-playbook /c/playbooks/steps/10_launch.yml')


def test_a_node_without_its_page_shows_the_modules_reading_and_one_read_of_neither_is_named(tmp_path, fixture_path):
    # After teardown.yml the reader and its page are gone; the node exporter, a distribution
    # package, still answers on spark1 with its own figures only. The memory is the module's
    # reading of the node itself.
    reading = module_reading(tmp_path, fixture_path, LEAKED)
    node_exporter_only = ('# HELP node_memory_MemTotal_bytes Memory information field MemTotal_bytes.\n'
                          '# TYPE node_memory_MemTotal_bytes gauge\nnode_memory_MemTotal_bytes 1.28526217216e+11\n')
    both = facts({'spark1': node_exporter_only, 'spark2': ''}, {'alive': False, 'healthy': False})
    both['memory'] = {'spark2': reading}
    built = status.build(both)
    assert built['nodes']['spark1']['figures'] is None
    worker = built['nodes']['spark2']['figures']
    assert worker['memory']['leaked'] is True and worker['page'] is False and worker['link'] is None
    assert built['fix'].endswith('recover.yml -i inv')
    screen = status.lines(built)
    assert [line for line in screen if line.startswith('spark1:')] == [
        'spark1: neither its memory nor its metrics page could be read; container gb10-ray-head running; firewall loaded']
    assert 'no metrics page' in [line for line in screen if line.startswith('spark2:')][0]


def test_the_page_parser_keeps_labels_and_reads_nan_as_no_result():
    parsed = status.parse_metrics('# HELP x y\nx{a="1",b="q\\"r"} 2.5\ny NaN\nz notanumber\n')
    assert parsed == {'x': [({'a': '1', 'b': 'q\\"r'}, 2.5)], 'y': [({}, None)], 'z': [({}, None)]}


def test_the_screen_says_each_figure_as_read(tmp_path, fixture_path):
    # A watchdog that is failing with its budget spent, a link under its floor, an overlay, no
    # versions and no key on this controller: each shows as it is, line by line.
    failing = {'status': wd.FAILING, 'failures': 3, 'recoveries': [1796586000.0, 1796586100.0],
               'last_probe': {'verdict': 'timeout', 'tokens': 0, 'ttft_s': None}}
    watchdog_page = wd.metrics_text(failing, 1796586400.0, 2, 3600, 6)
    slow_link = LINK.replace('161.2', '48.5').replace('gb10_link_check_ok 1', 'gb10_link_check_ok 0')
    textfiles = [('/w/metrics.prom', watchdog_page), ('/l/link.prom', slow_link)]
    pages = {'spark1': '}{ not a sample\n' + exporter_page(tmp_path, fixture_path, CLEAN, textfiles),
             'spark2': exporter_page(tmp_path, fixture_path, LEAKED)}
    asked = facts(pages, {'alive': True, 'healthy': False, 'serving': False})
    asked.update(overlay='sim-cpu', versions={}, keys={}, image={'tag': 'vllm-node:m27', 'id': ''},
                 before={'profile': 'minimax-m27-nvfp4', 'vars': {}, 'nodes': ['spark1', 'spark2'],
                         'image': 'vllm-node:0.32.0', 'image_id': 'sha256:' + 'cd' * 32})
    built = status.build(asked)

    assert built['launch']['overlay'] == 'sim-cpu' and built['image']['id'] == '' and built['image']['versions'] == {}
    screen = status.lines(built)
    assert screen[:7] == [
        'NOT SERVING: the engine runs but does not answer /health, and unified memory leaked on spark2 (H4)',
        'Endpoint: https://192.168.1.101:8443/v1 (key file /k, CA /ca)',
        'Launch: profile minimax-m27-nvfp4 + overlay sim-cpu, ray executor, TP=2 PP=1 DP=1 on spark1, spark2',
        'Image: vllm-node:m27 absent on the head; versions not read (no serving container)',
        'Launch before: profile minimax-m27-nvfp4, image vllm-node:0.32.0 sha256:cdcdcdcdcdcd; '
        'ansible-playbook /c/playbooks/rollback.yml -i inv returns to it',
        'Watchdog: failing, restart budget left 0, recoveries 2, last probe answered no',
        'Client keys (SHA-256, first 12): none on this controller']
    head = [line for line in screen if line.startswith('spark1:')][0]
    assert '48.5 Gb/s (floor 60.0) UNDER ITS FLOOR' in head and 'no leak' in head, head
    worker = [line for line in screen if line.startswith('spark2:')][0]
    leak = built['nodes']['spark2']['figures']['memory']['leak_gib']
    assert ('LEAKED %.1f GiB' % leak) in worker and leak > 30 and 'link not measured' in worker, worker
    assert screen[-1] == 'Fix: ansible-playbook /c/playbooks/recover.yml -i inv'


@pytest.mark.rule("H12")
def test_a_node_stuck_at_a_low_clock_under_load_is_named_with_the_power_cycle(tmp_path, fixture_path):
    # The exporter's own clock series (module_utils node_metrics.clock_text over gpu_clock's verdict):
    # spark1 healthy under load, spark2 stuck in the GB10 low-power state, as nvidia-smi read them.
    from ansible_collections.gb10.serving.plugins.module_utils import gpu_clock

    def page(readings):
        return (exporter_page(tmp_path, fixture_path, CLEAN)
                + nm.clock_text((890, 0), gpu_clock.verdict(readings, 1500), 1500))

    pages = {'spark1': page([(2398, 97, 1796586300.0)]), 'spark2': page([(702, 96, 1796586310.0), (695, 96, 1796586325.0)])}
    built = status.build(facts(pages, {'alive': True, 'healthy': True, 'serving': True}))
    assert built['serving'] and built['fix'] is None  # it serves, slowly: no relaunch fixes a clock
    assert built['nodes']['spark2']['figures']['gpu_clock'] == {
        'under_load_mhz': 698.5, 'floor_mhz': 1500, 'low': True, 'measured_at': 1796586325.0}
    screen = status.lines(built)
    assert 'GPU clock under load 2398 MHz;' in [line for line in screen if line.startswith('spark1:')][0]
    assert 'GPU clock under load 698 MHz STUCK LOW (H12);' in [line for line in screen if line.startswith('spark2:')][0]
    assert screen[-1] == gpu_clock.describe('spark2', 698.5, 1500) and 'spark1' not in screen[-1]
    # No reading under load since the exporter started: said, not guessed.
    idle = status.lines(status.build(facts({'spark1': page([]), 'spark2': page([])}, {'serving': True})))
    assert all('GPU clock under load no reading yet;' in line for line in idle if line.startswith('spark'))
