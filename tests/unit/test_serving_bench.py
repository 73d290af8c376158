# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark client's figures (playbooks/files/serving_bench.py): percentiles as numpy and
vLLM's `vllm bench serve` compute them, and each level's change against an earlier run."""
import importlib.util
import os

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
spec = importlib.util.spec_from_file_location('serving_bench', os.path.join(TOP, 'playbooks', 'files', 'serving_bench.py'))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_percentiles_interpolate_between_the_closest_ranks():
    # numpy.percentile([1, 2, 3, 4, 10], [50, 90, 99]) == [3.0, 7.6, 9.76]
    assert bench.percentiles([10, 1, 4, 2, 3]) == pytest.approx({'p50': 3.0, 'p90': 7.6, 'p99': 9.76})
    assert bench.percentiles([0.7]) == {'p50': 0.7, 'p90': 0.7, 'p99': 0.7}


def test_each_level_is_compared_with_the_same_concurrency_of_the_last_run():
    earlier = {'levels': [{'concurrency': 1, 'output_tok_per_s': 25.0, 'mean_ttft_s': 0.8},
                          {'concurrency': 8, 'output_tok_per_s': 100.0, 'mean_ttft_s': 2.0}]}
    now = [{'concurrency': 1, 'output_tok_per_s': 21.25, 'mean_ttft_s': 0.9},
           {'concurrency': 4, 'output_tok_per_s': 60.0, 'mean_ttft_s': 1.2}]
    assert bench.change(earlier, now) == [(1, 25.0, 21.25, -15.0, 0.8, 0.9)]
    assert bench.change(None, now) == []
