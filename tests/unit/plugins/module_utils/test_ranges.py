# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one range check every role's first task runs (module_utils/ranges.py, filter out_of_range)."""

import glob
import os

import pytest

from ansible_collections.gb10.serving.plugins.module_utils.ranges import RangeError, describe, out_of_range, within

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def test_a_value_at_either_bound_is_in_and_one_past_it_is_out():
    port = {'var': 'p', 'min': 1, 'max': 65535}
    assert within(dict(port, value=1)) and within(dict(port, value='65535'))
    assert not within(dict(port, value=0)) and not within(dict(port, value=65536))


def test_exclusive_bounds_refuse_the_bound_itself():
    fraction = {'var': 'f', 'above': 0, 'below': 1, 'number': 'float'}
    assert within(dict(fraction, value='0.05'))
    assert not within(dict(fraction, value=0)) and not within(dict(fraction, value=1.0))


def test_a_whole_number_is_required_unless_a_fraction_is_allowed():
    assert not within({'var': 's', 'value': '2.5', 'min': 1})
    assert within({'var': 'g', 'value': '2.5', 'above': 0, 'number': 'float'})


@pytest.mark.parametrize('value', ['abc', '', None, True, '1e400x'])
def test_what_is_no_number_is_out(value):
    assert not within({'var': 'x', 'value': value, 'min': 0})


def test_a_bound_from_another_setting_may_come_as_text():
    assert within({'var': 'poll', 'value': '10', 'min': 1, 'max': '1800'})
    assert not within({'var': 'poll', 'value': '1801', 'min': 1, 'max': '1800'})


def test_choices_are_compared_as_lower_case_text():
    gpus = {'var': 'g', 'choices': ['auto', 'true', 'false']}
    assert within(dict(gpus, value='AUTO')) and within(dict(gpus, value=True))
    assert not within(dict(gpus, value='sometimes'))


def test_a_condition_no_bound_expresses():
    assert within({'var': 'image', 'value': '"x"', 'ok': True, 'range': 'an image'})
    assert not within({'var': 'image', 'value': '""', 'ok': 'False', 'range': 'an image'})


@pytest.mark.parametrize('setting,text', [
    ({'min': 1, 'max': 65535}, '1..65535'),
    ({'min': 1, 'note': 'seconds'}, '1 or more (seconds)'),
    ({'above': 0}, 'above 0'),
    ({'above': 0, 'below': 1}, 'above 0 and below 1'),
    ({'above': 0, 'max': 0.9}, 'above 0 and at most 0.9'),
    ({'max': 5}, 'at most 5'),
    ({'choices': ['auto', 'true', 'false']}, 'auto, true or false'),
    ({'min': 1, 'max': 9, 'range': '1..vllm_serve_readiness_timeout_s'}, '1..vllm_serve_readiness_timeout_s'),
])
def test_the_range_is_said_as_a_reader_writes_it(setting, text):
    assert describe(dict(setting, var='x')) == text


def test_each_setting_out_of_range_gets_its_own_message_with_host_variable_and_fix():
    problems = out_of_range([{'var': 'model_sync_port', 'value': 0, 'min': 1, 'max': 65535},
                             {'var': 'model_sync_streams', 'value': 4, 'min': 1, 'max': 32},
                             {'var': 'model_sync_other', 'value': -1, 'min': 0}], 'spark1')
    assert problems == [
        "host spark1: model_sync_port=0 is out of range, it must be 1..65535. "
        "Fix: set it within that range, or leave it out to get the role's default.",
        "host spark1: model_sync_other=-1 is out of range, it must be 0 or more. "
        "Fix: set it within that range, or leave it out to get the role's default."]
    assert out_of_range([{'var': 'a', 'value': 3, 'min': 1}], 'spark1') == []


def test_a_setting_without_a_name_or_a_bound_is_the_roles_mistake():
    with pytest.raises(RangeError, match='without its variable name'):
        out_of_range([{'value': 1, 'min': 0}], 'spark1')
    with pytest.raises(RangeError, match='x: no bound given'):
        out_of_range([{'var': 'x', 'value': 1}], 'spark1')
    # A range's text without a bound or a condition would let every value through.
    with pytest.raises(RangeError, match='y: no bound given'):
        out_of_range([{'var': 'y', 'value': 1, 'range': '1..10'}], 'spark1')


def test_every_role_checks_its_numbers_with_the_one_filter():
    # The message and its comparisons live once (module_utils/ranges.py): no role writes its own.
    copies = []
    users = set()
    for path in glob.glob(os.path.join(TOP, 'roles', '*', 'tasks', '*.yml')):
        with open(path) as f:
            text = f.read()
        if 'is out of range' in text:
            copies.append(os.path.relpath(path, TOP))
        if 'gb10.serving.out_of_range' in text:
            users.add(path.split(os.sep)[-3])
    assert copies == []
    assert users >= {'vllm_serve', 'serving_containers', 'model_sync', 'leak_recovery', 'serving_image', 'node_metrics',
                     'cluster_link', 'oom_guard', 'watchdog'}, users
