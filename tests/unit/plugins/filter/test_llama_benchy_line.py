# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""benchmark.yml's lines for llama-benchy's report, over a run as llama-benchy's own model writes it."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.filter.llama_benchy_line import llama_benchy_line

llama_benchy_results = pytest.importorskip('llama_benchy.results')


def metric(mean, std):
    return llama_benchy_results.BenchmarkMetric(mean=mean, std=std, values=[mean - std, mean + std])


def test_a_run_reads_as_the_field_posts_it():
    run = llama_benchy_results.BenchmarkRun(
        concurrency=4, context_size=0, prompt_size=2048, response_size=32, is_context_prefill_phase=False,
        pp_throughput=metric(1510.24, 12.3), tg_throughput=metric(51.43, 0.8), ttfr=metric(1350.4, 40.2)).model_dump()
    assert llama_benchy_line(run) == 'c4 pp2048 1510.2 ± 12.3 t/s, tg32 51.4 ± 0.8 t/s, first response 1350 ± 40 ms'


def test_a_missing_figure_and_a_context_depth_are_said():
    run = llama_benchy_results.BenchmarkRun(
        concurrency=1, context_size=4096, prompt_size=512, response_size=32, is_context_prefill_phase=False,
        tg_throughput=metric(20.0, 0.0)).model_dump()
    assert llama_benchy_line(run) == 'c1 pp512 @ d4096 n/a, tg32 20.0 ± 0.0 t/s, first response n/a'


def test_something_else_is_refused():
    with pytest.raises(AnsibleFilterError, match='not a run of a llama-benchy JSON report'):
        llama_benchy_line({'mean': 1})
