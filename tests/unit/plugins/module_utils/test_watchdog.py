# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving watchdog's decisions (plugins/module_utils/watchdog.py, rule O4): what a probe says,
the restart budget, the next step, and the metrics it writes. The loop that acts on them runs on
the simulated cluster (tests/e2e/test_4b_watchdog.py)."""

import math

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import node_metrics as nm
from ansible_collections.gb10.serving.plugins.module_utils import watchdog as w

from test_node_metrics import gb10_reading

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("O4")

OK = {"error": None, "tokens": 5, "content": "The answer is 42."}


@pytest.mark.parametrize("probe, expect, verdict", [
    (OK, None, "ok"),
    (OK, "42", "ok"),
    (OK, "41", "wrong"),
    # A stalled rank: /health answers, no token comes within the deadline, before or mid-answer.
    ({"error": "timeout", "tokens": 0, "content": ""}, None, "hang"),
    ({"error": "timeout", "tokens": 3, "content": "The"}, "42", "hang"),
    # A stream that ends without a token is no answer either.
    ({"error": None, "tokens": 0, "content": ""}, None, "hang"),
    ({"error": "down: [Errno 111] Connection refused", "tokens": 0, "content": ""}, None, "down"),
])
def test_a_probe_is_ok_hung_down_or_wrong(probe, expect, verdict):
    assert w.probe_verdict(probe, expect) == verdict


def test_the_budget_counts_only_recoveries_within_its_window():
    now = 10000.0
    assert w.budget_left([], now, 3, 3600) == 3
    assert w.budget_left([now - 10, now - 100], now, 3, 3600) == 1
    # One an hour and a second ago no longer counts.
    assert w.budget_left([now - 3601, now - 100], now, 3, 3600) == 2
    assert w.budget_left([now - 1, now - 2, now - 3, now - 4], now, 3, 3600) == 0
    assert w.budget_left([now - 1], now, 0, 3600) == 0


def test_another_launch_starts_with_the_whole_budget_and_the_same_launch_keeps_its_own():
    spent = {"launch_id": "a", "status": w.OUT_OF_BUDGET, "recoveries": [1.0, 2.0], "failures": 3,
             "recoveries_total": 5}
    assert w.state_for_launch(spent, "a") == spent  # the same launch: spent stays spent
    fresh = w.state_for_launch(spent, "b")  # e.g. the executor switched
    assert (fresh["status"], fresh["recoveries"], fresh["failures"]) == (w.SERVING, [], 0)
    assert fresh["recoveries_total"] == 5 and spent["recoveries"] == [1.0, 2.0]
    assert w.state_for_launch({}, "a") == {"status": w.SERVING, "recoveries": [], "failures": 0}


def test_the_day_bounds_the_budget_whatever_each_recovery_lasts():
    now = 100000.0
    # Four recoveries two hours apart: the hourly window has room, the day's bound of 4 has none.
    starts = [now - 7200 * k for k in range(1, 5)]
    assert w.budget_left(starts, now, 3, 3600) == 3
    assert w.budget_left(starts, now, 3, 3600, 4) == 0
    assert w.budget_left(starts, now, 3, 3600, 6) == 2
    # One a day and a second ago no longer counts.
    assert w.budget_left(starts + [now - w.DAY_S - 1], now, 3, 3600, 5) == 1


def test_the_pause_before_a_recovery_doubles_with_each_of_the_day_from_the_last_end():
    now = 100000.0
    assert w.pause_left([], None, now, 300) == 0
    assert w.pause_left([now - 400], now - 100, now, 300) == 200
    assert w.pause_left([now - 4000, now - 400], now - 100, now, 300) == 500
    assert w.pause_left([now - 8000, now - 4000, now - 400], now - 100, now, 300) == 1100
    # Without its end (a recovery cut by a reboot of the head) it counts from the start.
    assert w.pause_left([now - 400], None, now, 300) == 0
    assert w.pause_left([now - 100], None, now, 300) == 200
    assert w.pause_left([now - w.DAY_S - 1], now - w.DAY_S + 100, now, 300) == 0
    assert w.pause_left([now - 10], now - 5, now, 0) == 0


def simulated_day(max_per_day, pause_s, recovery_s=1500, interval_s=60):
    """The watchdog's own decisions over a day on an engine that never comes back, each recovery
    lasting recovery_s (its relaunch waits for a readiness that never comes): the recoveries it
    starts. failures_to_recover 2 as the defaults."""
    now, state, failures, recoveries, ended = 0.0, w.SERVING, 0, [], None
    while now < w.DAY_S:
        failures += 1
        budget = w.budget_left(recoveries, now, 3, 3600, max_per_day)
        pause = w.pause_left(recoveries, ended, now, pause_s) if max_per_day is not None else 0
        action, state = w.next_action(state, "down", failures, 2, budget, pause)
        if action == "recover":
            recoveries.append(now)
            now += recovery_s
            ended = now
            state = w.FAILING
        else:
            now += interval_s
    return recoveries, state


@pytest.mark.rule("O4")
def test_a_day_of_recoveries_that_never_serve_again_is_bounded():
    # The hourly window alone: a 25-minute recovery never spends it, the engine is hard-restarted
    # all day (43-69 a day, as its own logic has it).
    unbounded, state = simulated_day(None, 0)
    assert len(unbounded) > 40 and state != w.OUT_OF_BUDGET
    recoveries, state = simulated_day(6, 300)
    assert len(recoveries) == 6 and state == w.OUT_OF_BUDGET
    gaps = [b - a for a, b in zip(recoveries, recoveries[1:])]
    assert gaps == sorted(gaps) and gaps[-1] - 1500 >= 300 * 2 ** 4


def test_incidents_beyond_the_newest_are_pruned():
    names = ["20261201T100000Z", "20261203T090000Z", "20261202T080000Z"]
    assert w.incidents_to_prune(names, 2) == ["20261201T100000Z"]
    assert w.incidents_to_prune(names, 5) == []


def test_the_state_keeps_only_the_recoveries_the_budget_counts():
    now = 200000.0
    assert w.recent_recoveries([now - w.DAY_S - 5, now - 10], now, 3600) == [now - 10]


@pytest.mark.parametrize("state, verdict, failures, budget, expected", [
    (w.SERVING, "ok", 0, 3, ("none", w.SERVING)),
    # One slow probe is not a hang until `failures` in a row.
    (w.SERVING, "hang", 1, 3, ("none", w.FAILING)),
    (w.FAILING, "hang", 2, 3, ("recover", w.RECOVERING)),
    (w.FAILING, "down", 2, 1, ("recover", w.RECOVERING)),
    # The budget spent: it gives up once, and stays given up, whatever the probes say next.
    (w.FAILING, "hang", 2, 0, ("give_up", w.OUT_OF_BUDGET)),
    (w.OUT_OF_BUDGET, "hang", 9, 0, ("none", w.OUT_OF_BUDGET)),
    (w.OUT_OF_BUDGET, "ok", 0, 3, ("none", w.OUT_OF_BUDGET)),
    # A wrong answer is not restarted: the same launch answers the same.
    (w.SERVING, "wrong", 5, 3, ("none", w.WRONG_ANSWER)),
    # And stays reported wrong: the probe that follows asks for tokens only.
    (w.WRONG_ANSWER, "ok", 0, 3, ("none", w.WRONG_ANSWER)),
    (w.WRONG_ANSWER, "down", 4, 3, ("none", w.WRONG_ANSWER)),
    # A leaked node handed over to recover.yml: no relaunch until an operator's run serves again.
    (w.LEAKED, "down", 9, 3, ("none", w.LEAKED)),
    (w.LEAKED, "ok", 0, 3, ("none", w.LEAKED)),
])
def test_the_next_step_after_a_probe(state, verdict, failures, budget, expected):
    assert w.next_action(state, verdict, failures, 2, budget) == expected


def test_within_a_pause_the_engine_is_reported_failing_and_left_as_it_is():
    assert w.next_action(w.FAILING, "down", 5, 2, 2, pause=30) == ("none", w.FAILING)
    # A spent budget still gives up at once.
    assert w.next_action(w.FAILING, "down", 5, 2, 0, pause=30) == ("give_up", w.OUT_OF_BUDGET)


def _parse(text):
    values, helped, typed = {}, set(), set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helped.add(line.split()[2])
        elif line.startswith("# TYPE "):
            typed.add(line.split()[2])
        else:
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values, helped, typed


def test_the_metrics_are_prometheus_text_with_the_budget_and_the_state():
    now = 5000.0
    state = {"status": w.SERVING, "recoveries": [now - 30], "failures": 0, "answer_correct": True,
             "last_probe": {"verdict": "ok", "ttft_s": 0.25, "at": now - 1}}
    values, helped, typed = _parse(w.metrics_text(state, now, 3, 3600))
    assert values["gb10_watchdog_restart_budget_left"] == 2
    assert values["gb10_watchdog_recoveries_total"] == 1
    assert values['gb10_watchdog_status{status="serving"}'] == 1
    assert sum(v for k, v in values.items() if k.startswith("gb10_watchdog_status{")) == 1
    assert values["gb10_probe_time_to_first_token_seconds"] == 0.25
    assert values["gb10_engine_answering"] == 1 and values["gb10_engine_answer_correct"] == 1
    names = {k.split("{")[0] for k in values}
    assert names == helped == typed


def test_out_of_budget_reports_no_budget_and_no_answer_yet_is_nan():
    state = {"status": w.OUT_OF_BUDGET, "recoveries": [1.0], "failures": 7,
             "last_probe": {"verdict": "hang", "ttft_s": None, "at": 10.0}}
    values = _parse(w.metrics_text(state, 20.0, 3, 3600))[0]
    assert values["gb10_watchdog_restart_budget_left"] == 0
    assert values['gb10_watchdog_status{status="out_of_budget"}'] == 1
    assert values["gb10_engine_answering"] == 0 and values["gb10_watchdog_failed_probes"] == 7
    assert math.isnan(values["gb10_probe_time_to_first_token_seconds"])
    assert math.isnan(values["gb10_engine_answer_correct"])


NODES = {"spark-1": "192.168.100.10", "spark-2": "192.168.100.11", "spark-3": "192.168.100.12"}


@pytest.mark.parametrize("alive, missing", [
    (["192.168.100.10", "192.168.100.11", "192.168.100.12"], []),
    # After a power cut: the head's Ray is up, a worker has not joined yet.
    (["192.168.100.10", "192.168.100.12"], ["spark-2 (192.168.100.11)"]),
    ([], ["spark-1 (192.168.100.10)", "spark-2 (192.168.100.11)", "spark-3 (192.168.100.12)"]),
    # A node Ray shows at another address (the management NIC) is not the node on the link.
    (["192.168.100.10", "192.168.100.11", "10.0.0.12"], ["spark-3 (192.168.100.12)"]),
])
@pytest.mark.rule("O5")
def test_a_relaunch_waits_for_the_nodes_ray_does_not_show_alive_by_name(alive, missing):
    assert w.missing_nodes(NODES, alive) == missing


def exporter_page(tmp_path, fixture_path, read_at, **change):
    """A node's exporter page (rule O6) as role node_metrics serves it, from the unified_memory
    module's reading of a GB10 with 33 GiB held by the driver and no GPU process."""
    reading = dict(gb10_reading(tmp_path, fixture_path), **change)
    return nm.metrics_text(reading, None, read_at, 0.3)


def test_a_leak_is_read_from_the_exporter_page_after_the_engine_stopped(tmp_path, fixture_path):
    stopped = 1700000000.0
    found = w.leak_reading(exporter_page(tmp_path, fixture_path, stopped + 4), stopped)
    assert found["state"] == "leaked", found
    assert found["unaccounted_gib"] > found["threshold_gib"] == 10.0
    healthy = w.leak_reading(exporter_page(tmp_path, fixture_path, stopped + 4, leaked=False), stopped)
    assert healthy["state"] == "healthy", healthy


@pytest.mark.parametrize("read_at, change, why", [
    # Read before the stop: the engine's memory may still have been in use.
    (1699999990.0, {}, "no reading since the engine stopped"),
    # The engine's processes not yet gone from the GPU: no verdict can be made (H4).
    (1700000004.0, {"gpu_workload": True, "leaked": False}, "processes still on the GPU"),
])
def test_a_reading_that_cannot_tell_a_leak_is_waited_for(tmp_path, fixture_path, read_at, change, why):
    found = w.leak_reading(exporter_page(tmp_path, fixture_path, read_at, **change), 1700000000.0)
    assert (found["state"], found["why"]) == ("wait", why)


def test_a_failed_read_is_waited_for():
    page = nm.metrics_text(None, "nvidia-smi failed", 1700000004.0, 0.1)
    assert w.leak_reading(page, 1700000000.0)["state"] == "wait"


def test_a_node_exporter_page_without_the_readers_page_is_waited_for_and_says_so():
    # The distribution's node exporter answers with the node's own figures alone: the collection's
    # reader is not running there (stopped, or not yet back after a reboot).
    page = ('# TYPE node_memory_MemTotal_bytes gauge\nnode_memory_MemTotal_bytes 1.28526217216e+11\n'
            'node_textfile_scrape_error 0\n')
    found = w.leak_reading(page, 1700000000.0)
    assert (found["state"], found["why"]) == ("wait", "its exporter serves no reading of the collection's reader")


def test_a_relaunch_reads_each_nodes_word_on_its_model_copy():
    # Role model_sync's textfile as the exporter serves it (gb10-model-sync.sh, copy_verified).
    page = ('gb10_unified_memory_leaked 0\n'
            '# from /var/lib/gb10/model_sync/_models_a.prom\n'
            'gb10_model_copy_verified{path="/models/a"} 0\n'
            '# from /var/lib/gb10/model_sync/_models_b.prom\n'
            'gb10_model_copy_verified{path="/models/b"} 1\n'
            'gb10_model_copy_verified{path="/models/q\\"x"} 1\n')
    assert w.model_copy_verified(page, '/models/a') is False  # a pull cut or under way: no relaunch
    assert w.model_copy_verified(page, '/models/b') is True
    assert w.model_copy_verified(page, '/models/q"x') is True
    # No word: a folder model_sync does not manage there, or an older exporter; not a refusal.
    assert w.model_copy_verified(page, '/models/c') is None
    assert w.model_copy_verified(page, '/models') is None
    assert w.model_copy_verified('', '/models/a') is None
