# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every decision of the watchdog's recovery (roles/watchdog/files/gb10_watchdog.py `recover`, rule
O4), with the program laid out as the role lays it out and its I/O (Docker's API, the nodes' pages,
the cluster SSH gate) replaced by a node table the test sets: what each step would find. Each case
checks the outcome an operator reads (the watchdog's state and the incident's record) and whether the
engine was started again. The whole loop runs on the simulated cluster (tests/e2e/test_4b_watchdog.py)."""

import json
import os

import pytest

pytestmark = pytest.mark.rule("O4", "H4")

LAUNCH_ID = 'launch-7'


@pytest.fixture
def program(watchdog_program):
    return watchdog_program


class Cluster:
    """What each step of a recovery finds; every call the recovery makes is recorded."""

    def __init__(self):
        self.leaks = {'spark1': 'healthy', 'spark2': 'healthy'}
        self.after_reboot = {}
        self.reboot_answers = {}
        self.launch_script_is_ours = True
        self.model_copy_cut = []
        self.answer = ' the cluster answers.'
        self.calls = []
        self.control_args = []
        self.detached = []
        # What the gate prints before the program's own last line (ssh's warnings, a banner).
        self.gate_preamble = "Warning: Permanently added '10.0.0.2' (ED25519) to the list of known hosts.\n"


@pytest.fixture
def watchdog(program, tmp_path, monkeypatch):
    cluster = Cluster()
    config = {'data_dir': str(tmp_path / 'data'), 'launch_id': LAUNCH_ID, 'container': 'gb10-ray-head',
              'stop_timeout_s': 30, 'state_dir': '/var/lib/gb10-engine', 'incidents_keep': 5, 'head': 'spark1',
              'leak_reboot': True, 'ranks': {}, 'probe': {'messages': []},
              'known_answer': {'messages': [], 'expect': ' the cluster answers.'}, 'max_restarts': 3,
              'window_s': 3600, 'max_per_day': 6, 'cluster_ssh': '/usr/local/sbin/gb10-cluster-ssh',
              'key_addresses': {'spark1': '10.0.0.1', 'spark2': '10.0.0.2'}}
    os.makedirs(config['data_dir'])
    # As the role writes it and the program reads it: from JSON (no string shared with the test's literals).
    config = json.loads(json.dumps(config))

    def exec_in(container, argv, detach=False, timeout=60):
        cluster.calls.append(('exec', argv))
        cluster.detached.append((argv[0], detach))
        if argv[0] == 'grep':
            # grep -qx: the launch script's own id line, exactly.
            ours = argv[1:3] == ['-qx', '# gb10-engine-id: %s' % LAUNCH_ID] and cluster.launch_script_is_ours
            return (0 if ours else 1), b''
        return 0, b''

    def probe(config_, question):
        cluster.calls.append(('probe',))
        return {'content': cluster.answer, 'tokens': 4, 'error': '', 'ttft_s': 0.1}

    monkeypatch.setattr(program, 'exec_in', exec_in)
    monkeypatch.setattr(program, 'probe', probe)
    monkeypatch.setattr(program, 'container_running', lambda name: True)
    monkeypatch.setattr(program.Watchdog, 'keep_logs', lambda self, incident: None)

    def control(self, command, *args, **kw):
        cluster.calls.append(('control', command))
        cluster.control_args.append((command, args, kw))
        return 0, b'stopped'

    monkeypatch.setattr(program.Watchdog, 'control', control)
    monkeypatch.setattr(program.Watchdog, 'wait_for_nodes', lambda self: cluster.calls.append(('nodes',)))
    monkeypatch.setattr(program.Watchdog, 'wait_ready', lambda self: cluster.calls.append(('ready',)))
    monkeypatch.setattr(program.Watchdog, 'wait_down', lambda self, name: cluster.calls.append(('down', name)))

    def check_leaks(self, since, booted=()):
        seen = cluster.after_reboot if booted else cluster.leaks
        # Read from each exporter's page: strings of their own, as a real reading's are.
        return json.loads(json.dumps(dict((name, {'state': state, 'why': ''}) for name, state in seen.items())))

    def check_model_copies(self):
        if cluster.model_copy_cut:
            raise RuntimeError('the model copy on %s is not verified' % ', '.join(cluster.model_copy_cut))

    def on_head_node(self, argv, timeout=120):
        address = argv[1]
        name = [n for n, a in config['key_addresses'].items() if a == address][0]
        cluster.calls.append(('reboot-if-leaked', name))
        answer = cluster.reboot_answers.get(name, {'leaked': True, 'rebooting': True})
        return 0, cluster.gate_preamble + json.dumps(answer) + '\n'

    monkeypatch.setattr(program.Watchdog, 'check_leaks', check_leaks)
    monkeypatch.setattr(program.Watchdog, 'check_model_copies', check_model_copies)
    monkeypatch.setattr(program.Watchdog, 'on_head_node', on_head_node)
    dog = program.Watchdog(config)
    dog.cluster = cluster
    return dog


def relaunched(cluster):
    return any(kind == 'exec' and argv[0] == 'bash' for kind, *rest in cluster.calls for argv in rest)


def recovery(dog):
    with open(os.path.join(dog.state['last_recovery']['incident'], 'recovery.json')) as handle:
        return json.load(handle)


def test_a_relaunch_that_answers_right_serves_again(watchdog, program):
    watchdog.recover('hang', {'verdict': 'hang'})
    assert watchdog.state['status'] == program.logic.SERVING and relaunched(watchdog.cluster)
    assert recovery(watchdog)['result'] == 'serving'
    # The engine was stopped (SIGTERM first) before anything else was decided (H4).
    assert watchdog.cluster.calls[0] == ('control', 'stop')


def test_a_wrong_answer_after_the_relaunch_is_final(watchdog, program):
    watchdog.cluster.answer = ' something fluent and wrong.'
    watchdog.recover('hang', {'verdict': 'hang'})
    assert watchdog.state['status'] == program.logic.WRONG_ANSWER and watchdog.state['answer_correct'] is False
    assert recovery(watchdog)['result'].startswith('wrong answer: the relaunched engine answered')
    # Final: the next probe's verdict cannot make it serving again, nor start another recovery.
    assert program.logic.next_action(watchdog.state['status'], 'ok', 0, 2, 3)[0] == 'none'


def test_a_launch_changed_behind_its_back_is_not_relaunched(watchdog, program):
    watchdog.cluster.launch_script_is_ours = False
    watchdog.recover('hang', {'verdict': 'hang'})
    assert not relaunched(watchdog.cluster)
    assert watchdog.state['status'] == program.logic.FAILING
    assert 'is not launch %s' % LAUNCH_ID in recovery(watchdog)['result']


def test_a_leak_with_the_leak_reboot_off_is_left_for_the_operator(watchdog, program):
    watchdog.cluster.leaks['spark2'] = 'leaked'
    watchdog.config['leak_reboot'] = False
    watchdog.recover('hang', {'verdict': 'hang'})
    assert watchdog.state['status'] == program.logic.LEAKED and not relaunched(watchdog.cluster)
    assert ('reboot-if-leaked', 'spark2') not in watchdog.cluster.calls
    assert 'leak_reboot off' in recovery(watchdog)['result']


def test_a_leaked_node_reboots_and_the_cluster_is_relaunched(watchdog, program):
    watchdog.cluster.leaks['spark2'] = 'leaked'
    watchdog.cluster.after_reboot = {'spark2': 'healthy'}
    watchdog.recover('hang', {'verdict': 'hang'})
    assert ('reboot-if-leaked', 'spark2') in watchdog.cluster.calls and ('down', 'spark2') in watchdog.cluster.calls
    assert ('reboot-if-leaked', 'spark1') not in watchdog.cluster.calls  # a healthy node is never rebooted
    assert watchdog.state['status'] == program.logic.SERVING and relaunched(watchdog.cluster)


def test_a_node_still_leaked_after_its_reboot_is_not_relaunched_onto(watchdog, program):
    watchdog.cluster.leaks['spark2'] = 'leaked'
    watchdog.cluster.after_reboot = {'spark2': 'leaked'}
    watchdog.recover('hang', {'verdict': 'hang'})
    assert watchdog.state['status'] == program.logic.LEAKED and not relaunched(watchdog.cluster)
    assert 'still leaked after a reboot' in recovery(watchdog)['result']


def test_a_leaked_head_reboots_last(watchdog, program):
    # Its reboot ends the watchdog itself: every worker is asked first.
    watchdog.cluster.leaks = {'spark1': 'leaked', 'spark2': 'leaked'}
    watchdog.cluster.after_reboot = {'spark1': 'healthy', 'spark2': 'healthy'}
    watchdog.recover('hang', {'verdict': 'hang'})
    asked = [name for kind, *rest in watchdog.cluster.calls if kind == 'reboot-if-leaked' for name in rest]
    assert asked == ['spark2', 'spark1'], watchdog.cluster.calls


def test_a_node_that_refuses_its_reboot_is_reported_leaked(watchdog, program):
    watchdog.cluster.leaks['spark2'] = 'leaked'
    watchdog.cluster.reboot_answers['spark2'] = {'leaked': True, 'rebooting': False,
                                                 'refused': 'not rebooted: the next boot has no NVIDIA modules'}
    watchdog.recover('hang', {'verdict': 'hang'})
    assert watchdog.state['status'] == program.logic.LEAKED and not relaunched(watchdog.cluster)
    assert 'no NVIDIA modules' in recovery(watchdog)['result']


def test_an_unverified_model_copy_stops_the_relaunch(watchdog, program):
    watchdog.cluster.model_copy_cut = ['spark2']
    watchdog.recover('hang', {'verdict': 'hang'})
    assert not relaunched(watchdog.cluster) and watchdog.state['status'] == program.logic.FAILING
    assert 'not verified' in recovery(watchdog)['result']


def test_each_recovery_spends_one_of_the_budget(watchdog, program):
    before = len(watchdog.state['recoveries'])
    watchdog.recover('hang', {'verdict': 'hang'})
    assert len(watchdog.state['recoveries']) == before + 1


def test_each_recovery_adds_one_to_the_lifetime_total_the_metrics_show(watchdog, program):
    watchdog.state['recoveries_total'] = 7
    watchdog.recover('hang', {'verdict': 'hang'})
    assert watchdog.state['recoveries_total'] == 8
    # A state written before the total was kept counts its kept recoveries as the total so far.
    del watchdog.state['recoveries_total']
    watchdog.state['recoveries'] = [1.0, 2.0, 3.0, 4.0, 5.0]
    kept = len(watchdog.state['recoveries'])
    watchdog.recover('hang', {'verdict': 'hang'})
    assert watchdog.state['recoveries_total'] == kept + 1
    with open(os.path.join(watchdog.data, 'state.json')) as handle:
        assert json.load(handle)['recoveries_total'] == kept + 1


def test_the_incident_record_says_what_stopped_and_where_the_time_went(watchdog, program, monkeypatch):
    clock = iter(range(1000, 2000, 5))
    monkeypatch.setattr(program.time, 'time', lambda: float(next(clock)))
    watchdog.recover('hang', {'verdict': 'hang', 'ttft_s': None})
    record = recovery(watchdog)
    assert record['started'] == 1000.0 and record['reason'] == 'hang' and record['probe'] == {'verdict': 'hang', 'ttft_s': None}
    assert record['stopped'] == 'stopped'  # the control script's own words
    # SIGTERM and the profile's grace (stop_timeout_s) before anything harder (H4); a minute more to answer.
    assert watchdog.cluster.control_args == [('stop', ('30',), {'timeout': 90})]
    # Each phase's seconds from the start, in the order they happen, and the end after them.
    assert 0 < record['stopped_s'] < record['nodes_back_s'] < record['back_s']
    assert record['ended'] > record['started'] + record['back_s']
    assert record['answer'] == ' the cluster answers.' and record['memory'] == {
        'spark1': {'state': 'healthy', 'why': ''}, 'spark2': {'state': 'healthy', 'why': ''}}
    assert os.path.dirname(record['incident']) == os.path.join(watchdog.data, 'incidents')
    assert watchdog.state['last_recovery']['incident'] == record['incident']


def test_no_engine_container_means_nothing_to_stop(watchdog, program, monkeypatch):
    monkeypatch.setattr(program, 'container_running', lambda name: False)
    watchdog.recover('no engine', {'verdict': 'down'})
    assert ('control', 'stop') not in watchdog.cluster.calls
    assert recovery(watchdog)['stopped'] == 'no engine: gb10-ray-head is not running'


@pytest.fixture
def mp(watchdog, program, monkeypatch):
    """vLLM's own executor: a headless rank on spark2, reached through the cluster SSH gate."""
    watchdog.config['ranks'] = {'spark2': '10.0.0.2'}
    watchdog.cluster.rank_timeouts = []
    watchdog.cluster.rank_answers = {'stop': (0, 'rank stopping\nrank stopped\nengine-rank: stopped after 3 s\n'),
                                     'start': (0, 'engine-rank: started\n')}

    def rank(self, name, command, timeout=120):
        self.cluster.calls.append(('rank', name, command))
        self.cluster.rank_timeouts.append((command, timeout))
        return self.cluster.rank_answers[command]

    monkeypatch.setattr(program.Watchdog, 'rank', rank)
    return watchdog


def test_mp_stops_every_rank_after_rank_0_and_starts_them_after_it(mp, program):
    mp.recover('hang', {'verdict': 'hang'})
    order = [call[0] if call[0] != 'rank' else 'rank ' + call[2] for call in mp.cluster.calls
             if call[0] in ('control', 'rank') or (call[0] == 'exec' and call[1][0] == 'bash')]
    assert order == ['control', 'rank stop', 'exec', 'rank start'], mp.cluster.calls
    assert recovery(mp)['stopped'] == 'stopped; spark2: engine-rank: stopped after 3 s'
    assert mp.state['status'] == program.logic.SERVING
    # Each rank gets the same grace as rank 0, and a minute more to answer through the gate.
    assert mp.cluster.rank_timeouts == [('stop', 90), ('start', 120)]


def test_mp_a_rank_that_says_nothing_is_recorded_by_its_exit_status(mp, program):
    mp.cluster.rank_answers['stop'] = (255, '  ')
    mp.recover('hang', {'verdict': 'hang'})
    assert recovery(mp)['stopped'] == 'stopped; spark2: exit 255'


def test_mp_a_rank_that_does_not_start_fails_the_recovery_before_any_probe(mp, program):
    mp.cluster.rank_answers['start'] = (3, 'x' * 400 + 'refused: not launch launch-7')
    mp.recover('hang', {'verdict': 'hang'})
    assert mp.state['status'] == program.logic.FAILING and ('probe',) not in mp.cluster.calls
    result = recovery(mp)['result']
    assert result.startswith('failed: the rank on spark2 did not start (exit 3): x')
    assert result.endswith('refused: not launch launch-7') and len(result) == len(
        'failed: the rank on spark2 did not start (exit 3): ') + 300


def test_an_engine_that_answers_with_an_error_fails_the_recovery_without_a_verdict_on_the_answer(
        watchdog, program, monkeypatch):
    monkeypatch.setattr(program, 'probe', lambda config, question: {
        'content': '', 'tokens': 0, 'error': 'HTTP 500', 'ttft_s': None})
    watchdog.state['answer_correct'] = True
    watchdog.recover('hang', {'verdict': 'hang'})
    assert watchdog.state['status'] == program.logic.FAILING and watchdog.state['answer_correct'] is True
    assert recovery(watchdog)['result'] == (
        "failed: the relaunched engine answered '' (HTTP 500) where the profile expects ' the cluster answers.'")
    # A long answer cut short by the error is quoted to 200 characters.
    monkeypatch.setattr(program, 'probe', lambda config, question: {
        'content': 'a' * 150 + 'b' * 150, 'tokens': 0, 'error': 'stream cut', 'ttft_s': None})
    watchdog.recover('hang', {'verdict': 'hang'})
    assert "answered %r (stream cut)" % ('a' * 150 + 'b' * 50) in recovery(watchdog)['result']


def test_a_leaked_head_writes_its_record_before_its_own_reboot_ends_the_watchdog(watchdog, program, monkeypatch):
    watchdog.cluster.leaks = {'spark1': 'leaked', 'spark2': 'leaked'}
    seen = {}

    def on_head_node(self, argv, timeout=120):
        name = [n for n, a in self.config['key_addresses'].items() if a == argv[1]][0]
        if name == 'spark1':  # the head: what is on disk when its reboot would end this program
            seen['record'] = recovery(self)
        self.cluster.calls.append(('reboot-if-leaked', name))
        return 0, json.dumps({'leaked': True, 'rebooting': True}) + '\n'

    monkeypatch.setattr(program.Watchdog, 'on_head_node', on_head_node)
    watchdog.cluster.after_reboot = {'spark1': 'healthy', 'spark2': 'healthy'}
    watchdog.recover('hang', {'verdict': 'hang'})
    assert seen['record']['result'] == (
        'rebooting the head (spark1), leaked; the next recovery goes on after its boot')
    assert seen['record']['rebooted'] == {'spark2': {'leaked': True, 'rebooting': True}}
    # Only the nodes that went down are waited for, the worker before the head.
    assert [call for call in watchdog.cluster.calls if call[0] == 'down'] == [('down', 'spark2'), ('down', 'spark1')]


def test_a_node_that_gives_no_answer_to_its_reboot_is_reported_leaked_with_what_it_said(watchdog, program):
    watchdog.cluster.leaks['spark2'] = 'leaked'
    watchdog.on_head_node = lambda argv, timeout=120: (255, 'ssh: connect to host 10.0.0.2 port 22: No route\n')
    watchdog.recover('hang', {'verdict': 'hang'})
    assert watchdog.state['status'] == program.logic.LEAKED and not relaunched(watchdog.cluster)
    assert ('no answer from reboot-if-leaked (exit 255): ssh: connect to host 10.0.0.2 port 22: No route'
            in recovery(watchdog)['result'])


def test_a_node_whose_own_reading_finds_no_leak_is_not_rebooted_and_the_cluster_relaunches(watchdog, program):
    watchdog.cluster.leaks['spark2'] = 'leaked'
    watchdog.cluster.reboot_answers['spark2'] = {'leaked': False, 'rebooting': False, 'unaccounted_gib': 0.4}
    watchdog.cluster.after_reboot = {'spark2': 'healthy'}
    watchdog.recover('hang', {'verdict': 'hang'})
    assert ('down', 'spark2') not in watchdog.cluster.calls
    assert watchdog.state['status'] == program.logic.SERVING and relaunched(watchdog.cluster)
    assert recovery(watchdog)['rebooted'] == {'spark2': {'leaked': False, 'rebooting': False, 'unaccounted_gib': 0.4}}


def test_only_the_newest_incidents_are_kept(watchdog, program):
    incidents = os.path.join(watchdog.data, 'incidents')
    old = ['20261101T00000%dZ' % i for i in range(6)]
    for name in old:
        os.makedirs(os.path.join(incidents, name))
    watchdog.recover('hang', {'verdict': 'hang'})
    kept = sorted(os.listdir(incidents))
    assert len(kept) == watchdog.config['incidents_keep'] and kept[:-1] == old[-4:]


def test_the_launch_runs_detached_and_the_watchdog_goes_on_to_wait_for_it(watchdog, program):
    watchdog.recover('hang', {'verdict': 'hang'})
    assert ('bash', True) in watchdog.cluster.detached and ('grep', False) in watchdog.cluster.detached


def test_a_relaunch_that_serves_clears_the_failures_and_marks_the_answer_right(watchdog, program):
    watchdog.state.update(failures=2, answer_correct=False)
    watchdog.recover('hang', {'verdict': 'hang'})
    assert watchdog.state['failures'] == 0 and watchdog.state['answer_correct'] is True


def test_a_wrong_answer_is_quoted_to_200_characters(watchdog, program):
    watchdog.cluster.answer = 'w' * 150 + 'x' * 150
    watchdog.recover('hang', {'verdict': 'hang'})
    result = recovery(watchdog)['result']
    assert repr('w' * 150 + 'x' * 50) + ' where' in result


def test_the_recovery_record_s_clock(watchdog, program, monkeypatch):
    """Each phase at a time the test sets: the record's seconds are the differences, to 0.1 s."""
    now = [10.12345]
    monkeypatch.setattr(program.time, 'time', lambda: now[0])
    phases = {'control': 35.26, 'nodes': 47.51, 'ready': 60.0, 'probe': 62.34567}
    original = watchdog.cluster.calls

    class Calls(list):
        def append(self, call):
            super().append(call)
            now[0] = phases.get(call[0], now[0])

    watchdog.cluster.calls = Calls(original)
    watchdog.recover('hang', {'verdict': 'hang'})
    record = recovery(watchdog)
    assert record['started'] == 10.123 and watchdog.state['recoveries'][-1] == 10.123
    assert (record['stopped_s'], record['nodes_back_s'], record['back_s']) == (25.1, 37.4, 52.2)
    assert record['ended'] == 62.346


def test_three_nodes_the_head_between_its_workers_by_name_still_reboots_last(watchdog, program):
    watchdog.config['head'] = 'spark2'
    watchdog.config['key_addresses'] = {'spark1': '10.0.0.1', 'spark2': '10.0.0.2', 'spark3': '10.0.0.3'}
    watchdog.cluster.leaks = {'spark1': 'leaked', 'spark2': 'leaked', 'spark3': 'leaked'}
    watchdog.cluster.after_reboot = {'spark1': 'healthy', 'spark2': 'healthy', 'spark3': 'healthy'}
    record = os.path.join(watchdog.data, 'incidents')
    on_disk = {}
    asked_before = program.Watchdog.on_head_node

    def on_head_node(self, argv, timeout=120):
        # What the incident's record says when each node is asked: only the head's own turn
        # writes "rebooting the head" (its reboot ends this program).
        name = [n for n, a in self.config['key_addresses'].items() if a == argv[1]][0]
        written = [os.path.join(root, 'recovery.json') for root, _dirs, files in os.walk(record) if 'recovery.json' in files]
        with open(written[0]) if written else open(os.devnull) as handle:
            on_disk[name] = handle.read()
        return asked_before(self, argv, timeout)

    watchdog.on_head_node = on_head_node.__get__(watchdog)
    watchdog.recover('hang', {'verdict': 'hang'})
    asked = [name for kind, *rest in watchdog.cluster.calls if kind == 'reboot-if-leaked' for name in rest]
    assert asked == ['spark1', 'spark3', 'spark2']
    assert on_disk['spark1'] == on_disk['spark3'] == '' and 'rebooting the head (spark2)' in on_disk['spark2']
    # The record the head leaves before its own reboot names the head, and the workers asked before it.
    assert recovery(watchdog)['rebooted'].keys() == {'spark1', 'spark2', 'spark3'}


def test_a_node_whose_memory_was_not_read_is_neither_rebooted_nor_in_the_way(watchdog, program):
    watchdog.cluster.leaks['spark2'] = 'unread'
    watchdog.recover('hang', {'verdict': 'hang'})
    assert not [call for call in watchdog.cluster.calls if call[0] == 'reboot-if-leaked']
    assert watchdog.state['status'] == program.logic.SERVING


def test_a_rebooted_node_whose_exporter_is_not_back_yet_is_not_called_still_leaked(watchdog, program):
    watchdog.cluster.leaks['spark2'] = 'leaked'
    watchdog.cluster.after_reboot = {'spark2': 'wait'}
    watchdog.recover('hang', {'verdict': 'hang'})
    assert watchdog.state['status'] == program.logic.SERVING and relaunched(watchdog.cluster)


def test_a_node_found_clean_by_its_own_reading_does_not_stop_the_next_from_rebooting(watchdog, program):
    watchdog.config['key_addresses']['spark3'] = '10.0.0.3'
    watchdog.cluster.leaks = {'spark1': 'healthy', 'spark2': 'leaked', 'spark3': 'leaked'}
    watchdog.cluster.reboot_answers['spark2'] = {'leaked': False, 'rebooting': False, 'unaccounted_gib': 0.2}
    watchdog.cluster.after_reboot = {'spark3': 'healthy'}
    watchdog.recover('hang', {'verdict': 'hang'})
    assert ('down', 'spark3') in watchdog.cluster.calls and ('down', 'spark2') not in watchdog.cluster.calls


def test_a_long_silence_from_the_gate_is_quoted_by_its_last_500_characters(watchdog, program):
    watchdog.cluster.leaks['spark2'] = 'leaked'
    said = 'a' * 100 + 'b' * 500
    watchdog.on_head_node = lambda argv, timeout=120: (1, said + '\n')
    watchdog.recover('hang', {'verdict': 'hang'})
    assert '(exit 1): %s' % ('b' * 500) in recovery(watchdog)['result'] and 'ab' not in recovery(watchdog)['result']
