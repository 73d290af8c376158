# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: llama_benchy_line
short_description: One line of a llama-benchy JSON report's run, as the field's tables state it
version_added: "0.9.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - C(playbooks/benchmark.yml) with C(benchmark_tool=llama-benchy) shows each run of llama-benchy's JSON report
    (its C(benchmarks) list) in the terms owners post - prefill (pp) and generation (tg) tokens per second, mean and
    standard deviation over the runs, at the run's concurrency - and the time to the first response.
options:
  _input:
    description: One entry of the report's C(benchmarks) (llama-benchy's C(BenchmarkRun)).
    type: dict
    required: true
'''

EXAMPLES = r'''
- name: Show llama-benchy's figures
  ansible.builtin.debug:
    msg: "{{ (lookup('ansible.builtin.file', 'report.json') | from_json).benchmarks | map('gb10.serving.llama_benchy_line') | list }}"
'''

RETURN = r'''
_value:
  description: For example C(c4 pp2048 1510.2 ± 12.3 t/s, tg32 51.4 ± 0.8 t/s, first response 1350 ± 40 ms).
  type: str
'''

from ansible.errors import AnsibleFilterError


def _metric(metric, unit, digits):
    if not metric:
        return 'n/a'
    return '%.*f ± %.*f %s' % (digits, metric['mean'], digits, metric['std'], unit)


def llama_benchy_line(run):
    if not isinstance(run, dict) or 'concurrency' not in run:
        raise AnsibleFilterError('llama_benchy_line: not a run of a llama-benchy JSON report: %r' % (run,))
    depth = ' @ d%d' % run['context_size'] if run.get('context_size') else ''
    return 'c%d pp%d%s %s, tg%d %s, first response %s' % (
        run['concurrency'], run['prompt_size'], depth, _metric(run.get('pp_throughput'), 't/s', 1),
        run['response_size'], _metric(run.get('tg_throughput'), 't/s', 1), _metric(run.get('ttfr'), 'ms', 0))


class FilterModule(object):
    def filters(self):
        return {'llama_benchy_line': llama_benchy_line}
