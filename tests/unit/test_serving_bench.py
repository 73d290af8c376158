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


def _level(concurrency, rate):
    return {'concurrency': concurrency, 'output_tok_per_s': rate, 'ttft_s': {'p50': 0.1, 'p90': 0.2, 'p99': 0.3},
            'tpot_ms': {'p50': 20.0, 'p90': 25.0, 'p99': 30.0}}


@pytest.mark.rule("O8")
def test_the_upgrade_gate_names_each_level_that_decodes_slower_than_allowed():
    # Decode speed from the median time per output token: 40 ms -> 25 tok/s, 50 ms -> 20 tok/s.
    earlier = {'levels': [{'concurrency': 1, 'tpot_ms': {'p50': 40.0}}, {'concurrency': 4, 'tpot_ms': {'p50': 50.0}}]}
    now = [{'concurrency': 1, 'tpot_ms': {'p50': 47.0}}, {'concurrency': 4, 'tpot_ms': {'p50': 58.0}},
           {'concurrency': 8, 'tpot_ms': {'p50': 900.0}}]
    # 25 -> 21.28 is 14.9 % slower; 20 -> 17.24 is 13.8 %: both within 15 %, not within 14 %.
    assert bench.decode_gate(earlier, now, 15) == []
    assert bench.decode_gate(earlier, now, 14) == [(1, 25.0, 21.28)]
    assert bench.decode_gate(earlier, now, 10) == [(1, 25.0, 21.28), (4, 20.0, 17.24)]
    # Faster is never refused; a level the earlier run did not measure is not judged.
    assert bench.decode_gate(earlier, [{'concurrency': 1, 'tpot_ms': {'p50': 20.0}}], 0) == []
    assert bench.decode_gate(None, now, 0) == []


def test_the_run_is_drawn_beside_the_earlier_one_as_a_png(tmp_path):
    pytest.importorskip('matplotlib')
    report = {'model': 'm', 'prefill_tokens': 64, 'generate_tokens': 8, 'levels': [_level(1, 20.0), _level(4, 60.0)]}
    # An earlier run of a release before the percentiles: its rate alone is drawn.
    for earlier in ({'levels': [_level(1, 25.0), _level(4, 70.0)]},
                    {'levels': [{'concurrency': 1, 'output_tok_per_s': 1.5, 'mean_ttft_s': 9.0}]}, None):
        path = tmp_path / 'run.png'
        assert bench.draw(report, earlier, str(path)) == 'png: %s' % path
        data = path.read_bytes()
        assert data[:8] == b'\x89PNG\r\n\x1a\n'
        width, height = int.from_bytes(data[16:20], 'big'), int.from_bytes(data[20:24], 'big')
        assert (width, height) == (1300, 400)
        path.unlink()


def test_without_matplotlib_the_png_is_skipped_with_the_command_that_installs_it(tmp_path, monkeypatch):
    import subprocess
    import sys
    monkeypatch.setitem(sys.modules, 'matplotlib', None)  # import matplotlib raises ImportError
    said = bench.draw({'levels': []}, None, str(tmp_path / 'run.png'))
    assert not (tmp_path / 'run.png').exists()
    command = said.split('(', 1)[1].rstrip(')')
    assert said.startswith('png: not drawn') and command == '%s -m pip install matplotlib' % sys.executable
    # The command as printed is one a shell runs: pip answers for the same Python.
    assert subprocess.run(command.replace('install matplotlib', '--version').split(), capture_output=True,
                          check=False).returncode == 0
