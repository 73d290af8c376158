# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An engine start by phase from its log (plugins/module_utils/engine_start.py, rule V7)."""
import pytest

from ansible_collections.gb10.serving.plugins.module_utils import engine_start

pytestmark = pytest.mark.rule("V7")

# Two starts in one log, as the control script appends them (launch.sh.j2's start line), with
# vLLM 0.32's own lines in its logger's format (vllm/logger.py: "(<process> pid=<pid>) <LEVEL>
# <mm-dd HH:MM:SS> [<file>:<line>] <message>"), each message as the file named logs it. Under Ray
# each worker logs its own weights; the slower one gates the start.
LOG = """gb10-engine: starting 2026-12-06T23:58:00Z
(APIServer pid=70) INFO 12-06 23:58:09 [api_server.py:1000] vLLM API server version 0.32.0
(EngineCore pid=90) INFO 12-06 23:58:40 [core.py:400] init engine (profile, create kv cache, warmup model) took 30.00 s
(APIServer pid=70) INFO 12-06 23:58:44 [entry.py:140] Starting vLLM server on http://127.0.0.1:8000
gb10-engine: starting 2026-12-31T23:59:30Z
(APIServer pid=80) INFO 12-31 23:59:39 [api_server.py:1000] vLLM API server version 0.32.0
(RayWorkerWrapper pid=301) INFO 12-31 23:59:50 [default_loader.py:502] Loading weights took 41.20 seconds
(RayWorkerWrapper pid=301, ip=192.168.100.11) INFO 12-31 23:59:51 [default_loader.py:502] Loading weights took 55.75 seconds
(RayWorkerWrapper pid=301) INFO 12-31 23:59:52 [gpu_model_runner.py:5150] Model loading took 56.1 GiB memory and 57.123456 seconds
(RayWorkerWrapper pid=301) INFO 01-01 00:01:10 [monitor.py:20] torch.compile took 62.04 s in total
(RayWorkerWrapper pid=301) INFO 01-01 00:01:30 [gpu_worker.py:760] Available KV cache memory: 31.45 GiB
(RayWorkerWrapper pid=301) INFO 01-01 00:02:20 [gpu_model_runner.py:6582] Graph capturing finished in 48 secs, took 1.25 GiB
(EngineCore pid=100) INFO 01-01 00:02:21 [core.py:386] init engine (profile, create kv cache, warmup model) took 150.50 s (compilation: 62.04 s)
(APIServer pid=80) INFO 01-01 00:02:25 [entry.py:140] Starting vLLM server on http://127.0.0.1:8000
(APIServer pid=80) INFO 01-01 00:03:00 [loggers.py:200] Engine 000: Avg prompt throughput: 10.0 tokens/s
"""


def test_the_last_start_is_read_by_phase_with_its_slowest_rank_and_the_year_it_crossed():
    found = engine_start.phases(LOG)
    assert found == {'started_at': '2026-12-31T23:59:30Z', 'ready_after_s': 175.0,
                     'weights_s': 55.75, 'model_load_s': 57.123456, 'model_gib': 56.1, 'compile_s': 62.04,
                     'kv_cache_gib': 31.45, 'graphs_s': 48.0, 'graphs_gib': 1.25, 'engine_init_s': 150.5}
    text = engine_start.summary(found)
    assert text.startswith('ready 175 s after the start of 2026-12-31T23:59:30Z (weights 55.8 s'), text
    assert 'engine init 150.5 s' in text


def test_a_start_still_under_way_is_not_ready_and_a_log_without_a_start_says_none():
    under_way = LOG.split('(APIServer pid=80) INFO 01-01 00:02:25', maxsplit=1)[0]
    found = engine_start.phases(under_way)
    assert found['ready_after_s'] is None and found['weights_s'] == 55.75 and 'engine_init_s' in found
    assert engine_start.summary(found).startswith('not ready yet, started 2026-12-31T23:59:30Z')
    assert engine_start.phases('(APIServer pid=1) INFO 12-06 10:00:00 [x.py:1] Starting vLLM server on x\n') is None
    assert engine_start.phases('') is None and engine_start.summary(None) == ''


def test_colour_codes_do_not_hide_a_line():
    coloured = ('gb10-engine: starting 2026-12-06T10:00:00Z\n'
                '\x1b[1;36m(APIServer pid=7)\x1b[0;0m INFO 12-06 10:01:05 [entry.py:140] Starting vLLM server on x\n')
    assert engine_start.phases(coloured)['ready_after_s'] == 65.0
