# gb10.serving: the serving watchdog (rule O4), installed by vllm_serve's `watchdog`
# entry point. It runs on the head node in a container of the serving image, restarted by Docker
# (restart policy unless-stopped) when it or the node stops, and talks only to the head's Docker
# socket and the engine's API on 127.0.0.1. Its decisions are gb10_watchdog_logic.py
# (plugins/module_utils/watchdog.py, unit-tested); this file is the loop and its I/O.
"""Usage: gb10_watchdog.py CONFIG.json"""

import datetime
import http.client
import json
import os
import shutil
import signal
import socket
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gb10_watchdog_logic as logic  # noqa: E402  (copied beside this file)

DOCKER_SOCKET = "/var/run/docker.sock"
# Run in the Ray head container: the cluster-link addresses of the nodes Ray shows alive.
ALIVE_NODES = ("import json, ray; ray.init(address='auto', logging_level='ERROR', log_to_driver=False); "
               "print(json.dumps(sorted(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive'])))")
stopping = False


def log(message):
    print("%s gb10-watchdog: %s" % (datetime.datetime.now(datetime.timezone.utc).strftime("%FT%TZ"), message),
          flush=True)


class DockerConnection(http.client.HTTPConnection):
    """The Docker Engine API over the node's socket (the serving image has no Docker SDK)."""

    def __init__(self, timeout):
        super().__init__("localhost", timeout=timeout)

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(DOCKER_SOCKET)


def docker(method, path, body=None, timeout=60):
    conn = DockerConnection(timeout)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def demux(raw):
    """The output of a non-TTY exec or of container logs: 8-byte frame headers, then payload."""
    out, i = [], 0
    while i + 8 <= len(raw):
        size = int.from_bytes(raw[i + 4:i + 8], "big")
        out.append(raw[i + 8:i + 8 + size])
        i += 8 + size
    return b"".join(out)


def container_running(name):
    status, body = docker("GET", "/containers/%s/json" % name)
    return status == 200 and json.loads(body)["State"]["Running"]


def exec_in(container, argv, detach=False, timeout=60):
    """(exit status, output) of argv in the container; detached: (None, b'')."""
    status, body = docker("POST", "/containers/%s/exec" % container,
                          {"Cmd": argv, "AttachStdout": not detach, "AttachStderr": not detach})
    if status != 201:
        raise RuntimeError("docker exec in %s: %s %s" % (container, status, body[:200]))
    exec_id = json.loads(body)["Id"]
    status, raw = docker("POST", "/exec/%s/start" % exec_id, {"Detach": detach, "Tty": False}, timeout=timeout)
    if detach:
        return None, b""
    info = docker("GET", "/exec/%s/json" % exec_id)[1]
    return json.loads(info)["ExitCode"], demux(raw)


def api(config, path, body=None, timeout=10):
    request = urllib.request.Request(config["base_url"] + path, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(request, timeout=timeout)


def probe(config, question):
    """One streamed, greedy chat request: tokens seen, content, time to first token, error.

    Each read waits at most deadline_s: no token for that long is a hang, whatever /health says.
    """
    started = time.monotonic()
    result = {"error": None, "tokens": 0, "content": "", "ttft_s": None}
    try:
        with api(config, "/v1/models", timeout=config["deadline_s"]) as response:
            model = json.load(response)["data"][0]["id"]
        body = {"model": model, "stream": True, "temperature": 0, "max_tokens": int(question["max_tokens"]),
                "messages": [{"role": "user", "content": question["prompt"]}]}
        with api(config, "/v1/chat/completions", body, timeout=config["deadline_s"]) as response:
            for line in response:
                line = line.strip()
                if not line.startswith(b"data:") or line == b"data: [DONE]":
                    continue
                for choice in json.loads(line[5:]).get("choices", []):
                    delta = choice.get("delta") or {}
                    text = delta.get("content") or ""
                    if text or delta.get("reasoning_content") or delta.get("reasoning") or delta.get("tool_calls"):
                        result["tokens"] += 1
                        if result["ttft_s"] is None:
                            result["ttft_s"] = round(time.monotonic() - started, 3)
                    result["content"] += text
                if time.monotonic() - started > 10 * config["deadline_s"]:
                    result["error"] = "timeout"
                    break
    except (socket.timeout, TimeoutError):
        result["error"] = "timeout"
    except urllib.error.URLError as exc:
        reason = getattr(exc, "reason", exc)
        result["error"] = "timeout" if isinstance(reason, (socket.timeout, TimeoutError)) else "down: %s" % reason
    except (OSError, ValueError, KeyError, IndexError, http.client.HTTPException) as exc:
        result["error"] = "down: %s" % exc
    result["at"] = round(time.time(), 3)
    return result


# How long one wait-ready exec lasts before the watchdog looks at its own stop flag again.
READY_SLICE_S = 30


class WrongAnswer(Exception):
    """The relaunched engine answered the known question wrongly: the operator's."""


class Leaked(Exception):
    """Leaked nodes the watchdog did not free: the operator's, through recover.yml."""

    def __init__(self, names, memory, why):
        super().__init__(
            "%s (rule H4; the unified_memory module's verdict, read from each node's metrics exporter): %s. "
            "playbooks/recover.yml reboots only the leaked nodes, then the deploy (or playbooks/steps/10_launch.yml) "
            "serves again; drift.yml's report gives both commands for this inventory. Until then the "
            "watchdog only watches."
            % ("; ".join("%s has %s GiB of unified memory unaccounted (threshold %s GiB)"
                         % (name, memory[name].get("unaccounted_gib"), memory[name].get("threshold_gib"))
                         for name in names), why))


class Watchdog:
    def __init__(self, config):
        self.config = config
        self.data = config["data_dir"]
        self.state_file = os.path.join(self.data, "state.json")
        self.state = self.load()

    def load(self):
        try:
            with open(self.state_file) as handle:
                state = json.load(handle)
        except (OSError, ValueError):
            state = {}
        return logic.state_for_launch(state, self.config.get("launch_id"))

    def save(self):
        state = dict(self.state, updated=round(time.time(), 3), launch_id=self.config.get("launch_id"))
        for name, text in (("state.json", json.dumps(state, indent=1, sort_keys=True) + "\n"),
                           ("metrics.prom", logic.metrics_text(state, time.time(), self.config["max_restarts"],
                                                               self.config["window_s"], self.config["max_per_day"]))):
            tmp = os.path.join(self.data, "." + name)
            with open(tmp, "w") as handle:
                handle.write(text)
            os.replace(tmp, os.path.join(self.data, name))

    def tick(self):
        config = self.config
        result = probe(config, config["probe"])
        verdict = logic.probe_verdict(result)
        result["verdict"] = verdict
        previous = (self.state.get("last_probe") or {}).get("verdict")
        self.state["last_probe"] = result
        self.state["failures"] = 0 if verdict == "ok" else self.state["failures"] + 1
        now = time.time()
        self.state["recoveries"] = logic.recent_recoveries(self.state["recoveries"], now, config["window_s"])
        budget = logic.budget_left(self.state["recoveries"], now, config["max_restarts"], config["window_s"],
                                   config["max_per_day"])
        pause = logic.pause_left(self.state["recoveries"], (self.state.get("last_recovery") or {}).get("ended"),
                                 now, config["pause_s"])
        action, status = logic.next_action(self.state["status"], verdict, self.state["failures"],
                                           config["failures_to_recover"], budget, pause)
        # A line when something changes, not one per probe of a lasting state.
        if status != self.state["status"] or verdict != previous:
            seen = result["error"] or "%d tokens" % result["tokens"]
            log("probe %s (%s, first token %s s): %s" % (verdict, seen, result["ttft_s"], status))
        if pause > 0 and action == "none" and status == logic.FAILING and not self.state.get("pausing"):
            log("the next recovery waits %d s more (pause_s %s, doubling with each recovery of the day)"
                % (pause, config["pause_s"]))
        self.state["pausing"] = pause > 0 and status == logic.FAILING
        self.state["status"] = status
        if action == "give_up":
            log("OUT OF BUDGET: %d recoveries within %d s (max_restarts %d; at most %d a day). No further restarts: "
                "the engine and Ray are left as they are for the operator. Logs of each try: %s/incidents. After "
                "fixing, run the deploy again: a run that serves gives the budget back."
                % (len(self.state["recoveries"]), config["window_s"], config["max_restarts"], config["max_per_day"],
                   self.data))
        self.save()
        if action == "recover":
            self.recover(verdict, result)

    def recover(self, verdict, result):
        """Keep the logs, stop the engine gracefully, have the nodes whose memory leaked reboot
        themselves (H4), wait for every node, relaunch the same launch, check the answer."""
        config = self.config
        started = time.time()
        self.state["recoveries"].append(round(started, 3))
        self.state["recoveries_total"] = self.state.get("recoveries_total", len(self.state["recoveries"]) - 1) + 1
        incidents = os.path.join(self.data, "incidents")
        incident = os.path.join(incidents,
                                datetime.datetime.fromtimestamp(started, datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
        os.makedirs(incident, exist_ok=True)
        # The oldest incidents go: a watchdog that runs for months keeps the last incidents_keep.
        for name in logic.incidents_to_prune(os.listdir(incidents), config["incidents_keep"]):
            shutil.rmtree(os.path.join(incidents, name), ignore_errors=True)
        record = {"started": round(started, 3), "reason": verdict, "probe": result, "incident": incident}
        self.state["last_recovery"] = record
        self.save()
        log("RECOVERING from %s: logs kept in %s" % (verdict, incident))
        container = config["container"]
        try:
            self.keep_logs(incident)
            # No Ray head container (after a power cut it may start after this one): no engine to stop.
            if container_running(container):
                rc, out = self.control("stop", str(config["stop_timeout_s"]), timeout=config["stop_timeout_s"] + 60)
                record["stopped"] = out.decode(errors="replace").strip()
            else:
                record["stopped"] = "no engine: %s is not running" % container
            # vLLM's multi-node executor (mp): after rank 0, the headless rank on every other node,
            # each with the same SIGTERM and bounded wait (H4, X3), through the cluster SSH gate.
            for name in sorted(config.get("ranks") or {}):
                code, out = self.rank(name, "stop", timeout=config["stop_timeout_s"] + 60)
                record["stopped"] += "; %s: %s" % (name, out.strip().splitlines()[-1] if out.strip() else "exit %s" % code)
            record["stopped_s"] = round(time.time() - started, 1)  # where the recovery's time went
            log("engine stop (SIGTERM first, H4): %s" % record["stopped"])
            # A relaunch onto a node whose unified memory leaked (an engine killed with its
            # container) cannot get the memory it is sized for (H4): only a reboot frees it.
            record["memory"] = self.check_leaks(time.time())
            leaked = sorted(name for name, seen in record["memory"].items() if seen["state"] == "leaked")
            if leaked and not config.get("leak_reboot"):
                raise Leaked(leaked, record["memory"], "the watchdog does not reboot nodes here (leak_reboot off)")
            if leaked:
                record["rebooted"] = self.reboot_leaked(leaked, record)
            self.wait_for_nodes()
            record["nodes_back_s"] = round(time.time() - started, 1)
            if leaked:
                # The reboot freed it (H4), on readings taken once the nodes were back.
                after = self.check_leaks(time.time(), booted=leaked)
                record["memory_after_reboot"] = after
                still = sorted(name for name in leaked if after.get(name, {}).get("state") == "leaked")
                if still:
                    raise Leaked(still, after, "still leaked after a reboot: something else holds it")
            # Never onto a model copy that is not whole (M3): a pull cut by the power cut this
            # recovery follows, or one still under way, leaves a node's copy unverified.
            self.check_model_copies()
            # The launch script the deploy rendered and started, if it is still the launch this
            # watchdog was installed for: a launch changed behind its back is the operator's.
            launch = config["state_dir"] + "/launch.sh"
            rc, out = exec_in(container, ["grep", "-qx", "# gb10-engine-id: %s" % config["launch_id"], launch])
            if rc != 0:
                raise RuntimeError("%s in %s is not launch %s, the one this watchdog keeps: run the deploy "
                                   "again" % (launch, container, config["launch_id"]))
            exec_in(container, ["rm", "-f", config["state_dir"] + "/pid"])
            exec_in(container, ["bash", launch], detach=True)
            # mp: every other node starts its own rank of the same launch (its program refuses
            # another launch's script, as the check above does here).
            for name in sorted(config.get("ranks") or {}):
                code, out = self.rank(name, "start")
                if code != 0:
                    raise RuntimeError("the rank on %s did not start (exit %s): %s" % (name, code, out.strip()[-300:]))
            ranks = " with the ranks on %s" % ", ".join(sorted(config["ranks"])) if config.get("ranks") else ""
            log("relaunched %s (launch %s)%s" % (launch, config["launch_id"], ranks))
            self.wait_ready()
            # The profile's known answer, greedy (V8); without one, tokens are the proof.
            question = config.get("known_answer") or config["probe"]
            answer = probe(config, question)
            record["answer"] = answer["content"]
            checked = logic.probe_verdict(answer, question.get("expect"))
            if checked in ("ok", "wrong"):
                self.state["answer_correct"] = checked == "ok"
            if checked == "wrong":
                raise WrongAnswer("the relaunched engine answered %r where the profile expects %r"
                                  % (answer["content"][:200], question.get("expect")))
            if checked != "ok":
                raise RuntimeError("the relaunched engine answered %r (%s) where the profile expects %r"
                                   % (answer["content"][:200], answer["error"] or "no error", question.get("expect")))
            record["back_s"] = round(time.time() - started, 1)
            record["result"] = "serving"
            self.state.update(status=logic.SERVING, failures=0, answer_correct=True)
            log("back to serving after %s s: the known answer checked" % record["back_s"])
        except Leaked as exc:
            record["result"] = "leaked, not relaunched: %s" % exc
            self.state["status"] = logic.LEAKED
            log("LEAKED, not relaunched: %s" % exc)
        except WrongAnswer as exc:
            # Final: it answers, but wrongly (a broken split answers fluently); a restart of the
            # same launch answers the same, and the next probe (tokens only) must not call it serving.
            record["result"] = "wrong answer: %s" % exc
            self.state["status"] = logic.WRONG_ANSWER
            log("WRONG ANSWER after the relaunch, left for the operator: %s" % exc)
        except Exception as exc:  # noqa: BLE001 - any failure ends this try; the budget bounds the next
            record["result"] = "failed: %s" % exc
            self.state["status"] = logic.FAILING
            log("recovery failed: %s" % exc)
        record["ended"] = round(time.time(), 3)  # the next recovery's pause counts from here
        with open(os.path.join(incident, "recovery.json"), "w") as handle:
            json.dump(record, handle, indent=1, sort_keys=True)
        self.save()

    def keep_logs(self, incident):
        container = self.config["container"]
        status, raw = docker("GET", "/containers/%s/logs?stdout=1&stderr=1&timestamps=1&tail=20000" % container)
        if status == 200:
            with open(os.path.join(incident, container + ".log"), "wb") as handle:
                handle.write(demux(raw))
        if container_running(container):
            rc, out = exec_in(container, ["tail", "-c", "20000000", self.config["state_dir"] + "/engine.log"])
            with open(os.path.join(incident, "engine.log"), "wb") as handle:
                handle.write(out)

    def read_exporters(self, judge, failed, settled):
        """{node: verdict} from each node's metrics exporter (rule O6): judge(name, page) on its page,
        failed(name, why) where the page cannot be read. A node whose verdict is not settled(verdict)
        is read again every 2 s, at most leak_read_timeout_s; then its last verdict stands."""
        exporters = self.config.get("exporters") or {}
        seen = {}
        deadline = time.monotonic() + self.config.get("leak_read_timeout_s", 60)
        while exporters and not stopping:
            for name, url in sorted(exporters.items()):
                if name in seen and settled(seen[name]):
                    continue
                try:
                    with urllib.request.urlopen(url, timeout=10) as response:
                        seen[name] = judge(name, response.read().decode(errors="replace"))
                except (OSError, ValueError, http.client.HTTPException) as exc:
                    seen[name] = failed(name, "its exporter %s does not answer: %s" % (url, exc))
            if all(settled(verdict) for verdict in seen.values()) or time.monotonic() >= deadline:
                break
            time.sleep(2)
        return seen

    def check_leaks(self, since, booted=()):
        """Each node's leak verdict from its metrics exporter, on a reading taken after `since` with
        no GPU process left. An exporter that does not answer (node down, exporter off) is not
        waited for, its node reported unread, except on the nodes in `booted`: just back from a
        reboot, their exporters start after Ray's container. One that answers without a reading
        since the stop (the collection's reader stopped or not yet back) is waited for."""
        seen = self.read_exporters(
            lambda name, page: logic.leak_reading(page, since),
            lambda name, why: {"state": "wait" if name in booted else "unread", "why": why},
            lambda reading: reading["state"] != "wait")
        for name, reading in sorted(seen.items()):
            if reading["state"] not in ("leaked", "healthy"):
                log("memory of %s not checked for a leak: %s" % (name, reading["why"]))
        return seen

    def check_model_copies(self):
        """Each node's word on its copy of the model (role model_sync's textfile, on its exporter's
        page): a copy that says it is not verified stops the relaunch, naming the node. An exporter
        that does not answer (waited for: the node may be just back), or a page without the word (a
        model that model_sync does not manage there), is logged as not checked."""
        path = self.config.get("model_path")
        if not path:
            return
        verdicts = self.read_exporters(
            lambda name, page: logic.model_copy_verified(page, path),
            lambda name, why: why,
            lambda verdict: not isinstance(verdict, str))
        for name, verdict in sorted(verdicts.items()):
            if verdict is None or isinstance(verdict, str):
                log("model copy of %s not checked: %s" % (name, verdict or "no word of %s on its page" % path))
        cut = sorted(name for name, verdict in verdicts.items() if verdict is False)
        if cut:
            raise RuntimeError("the model copy at %s on %s is not verified (a copy cut or under way): not relaunched "
                               "onto it; the deploy copies and verifies it, then launches" % (path, ", ".join(cut)))

    def on_head_node(self, argv, timeout=120):
        """(exit status, output) of argv run on the head node itself, with its own programs (ssh and
        the cluster key of role cluster_link): a short-lived container of this image with the node's
        root read-only at /host, chrooted into it. The Docker socket this watchdog holds already
        gives it that much on the head; nothing more is given to it on the other nodes."""
        status, body = docker("POST", "/containers/create",
                              {"Image": self.config["image"], "Entrypoint": ["chroot", "/host"], "Cmd": argv,
                               "Labels": {"gb10.serving/role": "watchdog"},
                               "HostConfig": {"NetworkMode": "host", "Binds": ["/:/host:ro"]}})
        if status != 201:
            raise RuntimeError("docker create for %s: %s %s" % (argv[0], status, body[:200]))
        helper = json.loads(body)["Id"]
        try:
            docker("POST", "/containers/%s/start" % helper)
            status, body = docker("POST", "/containers/%s/wait" % helper, timeout=timeout)
            code = json.loads(body)["StatusCode"] if status == 200 else None
            raw = docker("GET", "/containers/%s/logs?stdout=1&stderr=1" % helper)[1]
            return code, demux(raw).decode(errors="replace")
        finally:
            docker("DELETE", "/containers/%s?force=1" % helper)

    def reboot_leaked(self, leaked, record):
        """Ask each leaked node, through the cluster SSH gate, to reboot itself (`reboot-if-leaked`:
        the node decides on its own reading, H4, and refuses a kernel without the NVIDIA modules,
        H1), then wait until it went down. The head comes last: its reboot ends this program, which
        Docker starts again with the node; its next probe begins the next recovery."""
        head = self.config["head"]
        asked = {}
        for name in sorted(leaked, key=lambda n: (n == head, n)):
            # Where the head's cluster key reaches it: in a mesh its link address, not the
            # coordination address of "nodes" that the SSH trust does not cover. The
            # role writes both for every node with each launch.
            address = self.config["key_addresses"][name]
            if name == head:
                record["result"] = "rebooting the head (%s), leaked; the next recovery goes on after its boot" % name
                record["rebooted"] = asked
                with open(os.path.join(record["incident"], "recovery.json"), "w") as handle:
                    json.dump(record, handle, indent=1, sort_keys=True)
                self.save()
            log("asking %s (%s) to reboot itself, leaked (H4)" % (name, address))
            code, out = self.on_head_node([self.config["cluster_ssh"], address, "reboot-if-leaked"])
            try:
                answer = json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                answer = {"rebooting": False, "refused": "no answer from reboot-if-leaked (exit %s): %s"
                          % (code, out.strip()[-500:])}
            asked[name] = answer
            if answer.get("leaked") is False and not answer.get("refused"):
                log("%s's own reading finds no leak (%s GiB unaccounted): not rebooted"
                    % (name, answer.get("unaccounted_gib")))
                continue
            if not answer.get("rebooting"):
                raise Leaked([name], {name: answer}, answer.get("refused") or "it did not reboot")
            self.wait_down(name)
        rebooted = sorted(name for name, answer in asked.items() if answer.get("rebooting"))
        log("rebooted %s; waiting for them to be back" % (", ".join(rebooted) or "none"))
        return asked

    def wait_down(self, name):
        """Until the node's exporter stops answering (the node went down), at most nodes_timeout_s."""
        url = self.config["exporters"][name]
        deadline = time.monotonic() + self.config["nodes_timeout_s"]
        while time.monotonic() < deadline and not stopping:
            try:
                with urllib.request.urlopen(url, timeout=3):
                    pass
            except (OSError, http.client.HTTPException):
                return
            time.sleep(1)
        raise RuntimeError("%s said it reboots but still answered after %s s (nodes_timeout_s)"
                           % (name, self.config["nodes_timeout_s"]))

    def alive_node_addresses(self):
        """The cluster-link addresses of the nodes Ray shows alive; None while the head's Ray is not up."""
        if not container_running(self.config["container"]):
            return None
        rc, out = exec_in(self.config["container"], ["python3", "-c", ALIVE_NODES], timeout=60)
        if rc != 0:
            return None
        try:
            return json.loads(out.decode(errors="replace").strip().splitlines()[-1])
        except (ValueError, IndexError):
            return None

    def rank(self, name, command, timeout=120):
        """(exit status, output) of `engine-rank COMMAND` (status, stop or start) on another node,
        through the cluster SSH gate: vllm_serve's program there for its rank of vLLM's multi-node
        executor (mp), the only way this watchdog reaches a rank off the head."""
        return self.on_head_node([self.config["cluster_ssh"], self.config["ranks"][name], "engine-rank " + command],
                                 timeout=timeout)

    def ranks_answering(self):
        """mp: the cluster addresses (as "nodes" has them) of the nodes whose serving container
        answers (the head's when its container runs, the others' through their engine-rank status);
        None while the head's container is not up."""
        if not container_running(self.config["container"]):
            return None
        head = self.config["head"]
        return [self.config["nodes"][head]] + [self.config["nodes"][name] for name in sorted(self.config["ranks"])
                                               if self.rank(name, "status", timeout=60)[0] == 0]

    def ranks_gone(self):
        """mp: the other nodes whose rank is not alive (X3: rank 0 would wait for it without end)."""
        gone = []
        for name in sorted(self.config.get("ranks") or {}):
            code, out = self.rank(name, "status", timeout=60)
            if code != 0 or '"alive": true' not in out:
                gone.append(name)
        return gone

    def wait_for_nodes(self):
        """Every node of the launch alive in Ray, or with the mp executor its serving container
        answering (O5: after a power cut the nodes come back in any order), at most nodes_timeout_s;
        a node that does not come back is named, not waited on."""
        expected = self.config["nodes"]
        deadline = time.monotonic() + self.config["nodes_timeout_s"]
        alive, missing, said = None, [], None
        mp = self.config.get("executor") == "mp"
        while not stopping:
            alive = self.ranks_answering() if mp else self.alive_node_addresses()
            missing = logic.missing_nodes(expected, alive or [])
            if alive is not None and not missing:
                return
            seen = ("the head's serving container is not up" if mp else "Ray's head is not up") if alive is None \
                else "waiting for " + ", ".join(missing)
            if seen != said:
                log("before the relaunch: %s" % seen)
                said = seen
            if time.monotonic() >= deadline:
                break
            time.sleep(3)
        raise RuntimeError(
            "after %s s (nodes_timeout_s) %s: each node must be up, its %s container running (`docker ps -a` "
            "there) and the cluster link between it and the head up; the deploy (playbooks/steps/10_launch.yml) starts "
            "what is down" % (self.config["nodes_timeout_s"],
                              "the head container %s is not running" % self.config["container"] if alive is None
                              else ("no serving container answers on " if mp else "Ray does not show ") + ", ".join(missing),
                              "serving" if mp else "Ray"))

    def control(self, command, *args, timeout=60):
        """(rc, output) of vllm_serve's engine control script in the head container: the same
        status, wait-ready and stop that the role's tasks run (one definition)."""
        config = self.config
        return exec_in(config["container"], ["sh", "-c", config["control_script"], "engine-control", command,
                                             config["state_dir"], *args], timeout=timeout)

    def wait_ready(self):
        """The new engine's /health within readiness_timeout_s, its death, or Ray keeping its GPUs
        from it (R5), whichever first: the control script's wait-ready, a slice at a time so a stop
        of the watchdog is seen between slices."""
        deadline = time.monotonic() + self.config["readiness_timeout_s"]
        seen = "no answer"
        while time.monotonic() < deadline and not stopping:
            slice_s = max(1, min(READY_SLICE_S, int(deadline - time.monotonic())))
            rc, out = self.control("wait-ready", self.config["base_url"], str(slice_s), str(self.config["placement_wait_s"]),
                                   timeout=slice_s + 60)
            seen = out.decode(errors="replace").strip() or seen
            # mp: a headless rank that died leaves rank 0 waiting without end (X3).
            gone = self.ranks_gone()
            if gone:
                raise RuntimeError("the relaunched engine's rank on %s is gone (rank 0: %s)" % (", ".join(gone), seen))
            if rc == 0:
                return
            if rc == 3:
                raise RuntimeError("the relaunched engine exited during start-up: %s" % seen)
            if rc == 4:
                raise RuntimeError("the relaunched engine is stuck: %s" % seen)
            if rc != 1:
                time.sleep(2)  # the exec itself failed (the head container restarting): try again
        raise RuntimeError("the relaunched engine was not ready after %s s (readiness_timeout_s): %s"
                           % (self.config["readiness_timeout_s"], seen))


def main():
    with open(sys.argv[1]) as handle:
        config = json.load(handle)
    os.makedirs(config["data_dir"], exist_ok=True)

    def stop(*_):
        global stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    watchdog = Watchdog(config)
    log("watching %s every %s s (deadline %s s, recovery after %s failed probes, at most %s recoveries in %s s and "
        "%s a day, %s s apart doubling); state %s"
        % (config["base_url"], config["interval_s"], config["deadline_s"], config["failures_to_recover"],
           config["max_restarts"], config["window_s"], config["max_per_day"], config["pause_s"],
           watchdog.state["status"]))
    while not stopping:
        watchdog.tick()
        wake = time.monotonic() + config["interval_s"]
        while not stopping and time.monotonic() < wake:
            time.sleep(0.1)
    log("stopped")


if __name__ == "__main__":
    main()
