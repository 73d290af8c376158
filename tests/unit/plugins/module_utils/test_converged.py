from ansible_collections.gb10.serving.plugins.module_utils import converged


def state(**sections):
    base = dict((s, {}) for s in converged.SECTIONS)
    base.update(sections)
    return base


def test_a_node_stamped_with_these_inputs_and_this_state_is_current():
    now = state(boot={'boot_id': 'b1'}, files={'/etc/gb10/nccl.env': 'abc 0:0 644'})
    assert converged.verdict(converged.make_stamp('key', now, {}), 'key', now) == (True, [])


def test_no_stamp_or_another_version_is_a_full_run():
    now = state()
    assert converged.verdict(None, 'key', now) == (False, ['no converged stamp: no full deploy has finished on this node'])
    old = dict(converged.make_stamp('key', now, {}), version=0)
    current, reasons = converged.verdict(old, 'key', now)
    assert not current and 'another version' in reasons[0]


def test_other_inputs_are_named():
    now = state()
    current, reasons = converged.verdict(converged.make_stamp('old', now, {}), 'new', now)
    assert not current and reasons == ['the inputs differ (the collection, the profile or a variable)']


def test_what_differs_is_named_by_section_and_key():
    before = state(files={'/etc/gb10/nccl.env': 'a', '/etc/gb10/firewall.rules': 'b'},
                   containers={'gb10-ray-head': 'id1 img running t1 unless-stopped'})
    after = state(files={'/etc/gb10/nccl.env': 'a2', '/etc/gb10/new': 'c'},
                  containers={'gb10-ray-head': 'id1 img running t1 unless-stopped'})
    current, reasons = converged.verdict(converged.make_stamp('k', before, {}), 'k', after)
    assert not current
    assert reasons == ['files /etc/gb10/firewall.rules: gone', 'files /etc/gb10/nccl.env: changed',
                       'files /etc/gb10/new: new']


def test_many_differences_are_counted_past_the_first_few():
    after = state(files=dict(('/f%d' % i, 'x') for i in range(20)))
    _current, reasons = converged.verdict(converged.make_stamp('k', state(), {}), 'k', after)
    assert len(reasons) == converged.NAMED_DIFFERENCES + 1 and reasons[-1] == 'and 12 more'


def test_a_container_restarted_by_docker_reads_differently():
    inspected = {'Name': '/gb10-ray-worker', 'Id': 'f' * 64, 'Image': 'sha256:1',
                 'State': {'Status': 'running', 'StartedAt': '2026-11-29T08:00:00Z'},
                 'HostConfig': {'RestartPolicy': {'Name': 'unless-stopped'}}}
    restarted = dict(inspected, State={'Status': 'running', 'StartedAt': '2026-11-29T09:00:00Z'})
    first = converged.container_records([inspected])
    assert list(first) == ['gb10-ray-worker'] and 'unless-stopped' in first['gb10-ray-worker']
    assert first != converged.container_records([restarted])


def test_address_lifetimes_do_not_count():
    a = [{'local': '10.0.0.1', 'prefixlen': 24, 'valid_life_time': 100}]
    b = [{'local': '10.0.0.1', 'prefixlen': 24, 'valid_life_time': 90}]
    assert converged.interface_record('9000', 'up', a) == converged.interface_record('9000', 'up', b) == '9000 up 10.0.0.1/24'
    assert converged.interface_record('1500', 'up', a) != converged.interface_record('9000', 'up', a)
