# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving watchdog's decisions (rule O4), kept pure so unit tests cover them.

The watchdog program (roles/watchdog/files/gb10_watchdog.py) runs on the head node and imports
this file from the folder the role copies both into; nothing here touches the network or Docker.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

# The states the watchdog reports (metrics, the state file that drift.yml reads).
SERVING = "serving"
FAILING = "failing"
RECOVERING = "recovering"
OUT_OF_BUDGET = "out_of_budget"
WRONG_ANSWER = "wrong_answer"
LEAKED = "leaked"
STATES = (SERVING, FAILING, RECOVERING, OUT_OF_BUDGET, WRONG_ANSWER, LEAKED)
# States only an operator's run ends (the watchdog entry point, when it finds the engine serving).
# A relaunch whose known answer was wrong stays reported wrong: the next probe asks
# for tokens only, and must not flip it back to serving.
FINAL = (OUT_OF_BUDGET, LEAKED, WRONG_ANSWER)


def probe_verdict(probe, expect=None):
    """What one probe says about the engine: 'ok', 'hang', 'down' or 'wrong'.

    probe: {'error': None or 'timeout' or 'refused' or text, 'tokens': int, 'content': str}.
    A hang is no token within the deadline, whatever /health says (an engine whose rank is stalled
    keeps answering /health). expect: when given, the content must contain it ('wrong' if not).
    """
    error = probe.get("error")
    if error == "timeout":
        return "hang"
    if error:
        return "down"
    if int(probe.get("tokens") or 0) < 1:
        return "hang"
    if expect is not None and expect not in (probe.get("content") or ""):
        return "wrong"
    return "ok"


# The longest a recovery counts against the budget: a day. The hourly window alone let recoveries
# longer than window_s / max_restarts (20 minutes at 3 an hour; a relaunch may wait 30 for
# readiness) restart the engine 40-70 times a day, forever.
DAY_S = 86400


def _started_within(recoveries, now, span_s):
    """The recoveries (start times) that started less than span_s before now."""
    return [float(t) for t in recoveries if now - float(t) < float(span_s)]


def budget_left(recoveries, now, max_restarts, window_s, max_per_day=None):
    """Recoveries the budget still allows: max_restarts minus those started within window_s, and
    at most max_per_day (None: no daily bound) minus those started within a day, whatever each
    recovery lasted."""
    left = int(max_restarts) - len(_started_within(recoveries, now, window_s))
    if max_per_day is not None:
        left = min(left, int(max_per_day) - len(_started_within(recoveries, now, DAY_S)))
    return max(0, left)


def pause_left(recoveries, last_ended, now, pause_s):
    """Seconds before the next recovery may start: pause_s after the first of the day, doubling
    with each further one within a day, counted from the end of the last (its start where its end
    is unknown). 0 when pause_s is 0 or no recovery started within a day."""
    recent = sorted(_started_within(recoveries, now, DAY_S))
    if not recent or float(pause_s) <= 0:
        return 0.0
    wait = min(float(pause_s) * 2 ** (len(recent) - 1), DAY_S)
    since = float(last_ended) if last_ended is not None else recent[-1]
    return max(0.0, since + wait - now)


def recent_recoveries(recoveries, now, window_s):
    """The recoveries the budget still counts (within window_s or a day, the longer): the state
    file keeps these, not every recovery ever."""
    return _started_within(recoveries, now, max(float(window_s), DAY_S))


def state_for_launch(state, launch_id):
    """The saved state as the watchdog of launch_id starts from. The budget bounds the restarts of one
    launch: a state saved for another launch (the deploy changed the engine, its flags or its
    executor: the operator's) starts serving with the whole budget; its history stays."""
    state = dict(state)
    if state.get("launch_id") not in (None, launch_id):
        state.update(status=SERVING, recoveries=[], failures=0, pausing=False)
    state.setdefault("status", SERVING)
    state.setdefault("recoveries", [])
    state.setdefault("failures", 0)
    return state


def incidents_to_prune(names, keep):
    """The incident folders (named by their UTC start, so they sort by time) beyond the newest keep."""
    names = sorted(names)
    return names[:max(0, len(names) - int(keep))]


def next_action(state, verdict, failures, failures_to_recover, budget, pause=0):
    """The watchdog's next step after a probe.

    state: the state file's 'status'; failures: consecutive failed probes, this one included;
    budget: budget_left(); pause: pause_left(). Returns (action, status): action is 'none',
    'recover' or 'give_up'. An exhausted budget, or a node whose memory leaked, is final: the
    watchdog leaves everything to the operator until a deploy run that served gives the budget back
    (no restart loops). Within a pause the engine is reported failing and left as it is.
    """
    if state in FINAL:
        return "none", state
    if verdict == "ok":
        return "none", SERVING
    if verdict == "wrong":
        # A relaunch of the same launch gives the same wrong answer: the operator's case.
        return "none", WRONG_ANSWER
    if failures < int(failures_to_recover):
        return "none", FAILING
    if budget < 1:
        return "give_up", OUT_OF_BUDGET
    if pause > 0:
        return "none", FAILING
    return "recover", RECOVERING


def missing_nodes(expected, alive):
    """The nodes a relaunch waits for: each expected node ({host name: cluster address}) whose
    address is not among the alive Ray nodes' addresses, as 'name (address)', sorted by name.

    A Ray node's address is its cluster-link address (ray start --node-ip-address), so a node that
    Ray shows alive is up, its Ray container runs and the link between it and the head carries
    Ray's traffic.
    """
    alive = set(alive)
    return ["%s (%s)" % (name, address) for name, address in sorted(expected.items()) if address not in alive]


def page_values(text):
    """{name: float} of the samples without labels on a Prometheus text page."""
    values = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and not line.startswith("#") and "{" not in parts[0]:
            try:
                values[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return values


def model_copy_verified(text, path):
    """What a node's exporter page says of its copy of the model folder `path` (role model_sync's
    textfile, rule M3): True verified against the manifest, False a pull under way or cut (never
    relaunch onto it), None no word of it (model_sync does not manage this folder there)."""
    wanted = 'gb10_model_copy_verified{path="%s"}' % path.replace("\\", "\\\\").replace('"', '\\"')
    for line in (text or "").splitlines():
        name, _sep, value = line.rpartition(" ")
        if name == wanted:
            try:
                return float(value) == 1
            except ValueError:
                return False
    return None


def leak_reading(text, since):
    """What a node's exporter page (role node_metrics, rule O6) says of a leak after the engine
    stopped at `since` (Unix time): {'state', 'unaccounted_gib', 'threshold_gib', 'why'}.

    state 'leaked' or 'healthy' is the unified_memory module's verdict (H4) on a reading taken after
    the stop with no GPU process left; 'wait' is a reading too old, a failed read, or one with the
    engine's processes still on the GPU, which a later reading settles.
    """
    values = page_values(text)
    figures = {"unaccounted_gib": values.get("gb10_unified_memory_unaccounted_gib"),
               "threshold_gib": values.get("gb10_unified_memory_leak_threshold_gib")}
    read_at = values.get("gb10_node_metrics_read_timestamp_seconds")
    if "gb10_node_metrics_read_ok" not in values:
        # The node exporter answers, but without the collection's page: its reader is not running
        # (stopped, or not yet started after a reboot).
        return dict(figures, state="wait", why="its exporter serves no reading of the collection's reader")
    if values.get("gb10_node_metrics_read_ok") != 1:
        return dict(figures, state="wait", why="its last read of memory failed")
    if read_at is None or read_at < float(since):
        return dict(figures, state="wait", why="no reading since the engine stopped")
    if values.get("gb10_gpu_workload") != 0:
        return dict(figures, state="wait", why="processes still on the GPU")
    if "gb10_unified_memory_leaked" not in values:
        return dict(figures, state="wait", why="no leak verdict on its page")
    return dict(figures, state="leaked" if values["gb10_unified_memory_leaked"] == 1 else "healthy", why="")


def metrics_text(state, now, max_restarts, window_s, max_per_day=None):
    """The state as Prometheus text exposition (a node-exporter textfile)."""
    recoveries = state.get("recoveries", [])
    last = state.get("last_probe") or {}
    lines = []

    def metric(name, kind, help_text, value, labels=""):
        lines.append("# HELP %s %s" % (name, help_text))
        lines.append("# TYPE %s %s" % (name, kind))
        lines.append("%s%s %s" % (name, labels, _number(value)))

    status = state.get("status", SERVING)
    metric("gb10_watchdog_up", "gauge", "1 while the watchdog runs its loop.", 1)
    lines.append("# HELP gb10_watchdog_status The watchdog's state (1 for the current one).")
    lines.append("# TYPE gb10_watchdog_status gauge")
    for name in STATES:
        lines.append('gb10_watchdog_status{status="%s"} %d' % (name, 1 if name == status else 0))
    metric("gb10_engine_answering", "gauge", "1 when the last probe got tokens in time.",
           1 if last.get("verdict") in ("ok", "wrong") else 0)
    metric("gb10_engine_answer_correct", "gauge",
           "1 when the known answer checked after the last recovery was right, 0 wrong (NaN: none checked yet).",
           state.get("answer_correct"))
    metric("gb10_probe_time_to_first_token_seconds", "gauge", "Time to the probe's first token (NaN: none).",
           last.get("ttft_s"))
    metric("gb10_probe_timestamp_seconds", "gauge", "When the last probe ended (Unix time).", last.get("at"))
    metric("gb10_watchdog_failed_probes", "gauge", "Consecutive probes without an answer.", state.get("failures", 0))
    metric("gb10_watchdog_recoveries_total", "counter", "Recoveries started since the budget was last given back.",
           state.get("recoveries_total", len(recoveries)))
    metric("gb10_watchdog_restart_budget_left", "gauge", "Recoveries the budget still allows (its window and its day).",
           budget_left(recoveries, now, max_restarts, window_s, max_per_day) if status != OUT_OF_BUDGET else 0)
    return "\n".join(lines) + "\n"


def _number(value):
    if value is None:
        return "NaN"
    if isinstance(value, bool):
        return "1" if value else "0"
    return json.dumps(value) if isinstance(value, (int, float)) else str(value)
