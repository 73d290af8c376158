# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Safety on the simulated 2-Spark cluster, checked as an operator would:

- exposure: from a machine on the same network that is not a cluster member, only SSH and the
  API gateway answer, on every node, over IPv4 and IPv6 (A4); the Ray dashboard does not answer
  even a cluster member; every route of the engine's own table, asked through the gateway, is
  refused without a key and with a wrong one (but /health), and only the allowlisted ones answer
  with it; a client key added and revoked by the gateway step alone, the engine
  untouched;
- host keys (rule A2): with the simulated inventory's opt-out turned back, a run is
  refused at an unrecorded key, its next step records the keys (fingerprints as each node reads
  its own), a forged key for the worker is refused with the removal command, pasted;
- a pair link running at one twin's rate (N5): refused by the floor from the link's rating,
  with both figures;
- a wrong wire (N5, `full`): an inventory whose cluster address and interface sit on a 1 Gb/s NIC
  that every inferred check accepts is refused by the link probe before anything stops, with its
  figures (host prep and the link step with that inventory, deploy.yml's steps up to the check);
- faults injected while a run goes on (through ansible-runner's event stream, at a known step):
  a node that stops answering SSH halfway (`full`), an engine that is not ready in time, a Ray worker
  killed while the engine starts. Each run stops naming the host and the next step; model files
  stay; a serving engine is not torn down by a run that fails before it; logs of a failed start
  are collected to the controller (a model copy cut halfway is molecule/model_sync's, a role-only
  case);
- a wrong expected answer: the launch step on the serving cluster fails its known-answer
  check with the question, both answers and the drift command, and leaves the engine running;
- teardown after that failed start: playbooks/teardown.yml stops the engine within its bound
  (H4), leaves no node leaked and no Ray container;
- Ray containers without the RDMA settings: the engine's NCCL, on sockets there, is
  refused naming the cause; the launch that gives them back, with that engine serving in them,
  stops the engine before Docker recreates them (H4), and no node leaks;
- half of the cable down at both ends (`full`): host prep refuses the twin that keeps its
  address without an ACTIVE RoCE port, as half the link, and drift.yml names it under N5;
- the cluster link and the serving image, in `scripts/test.sh full` only (marker
  `full`): a peer that does not answer on the link, an MTU mismatch on it, a registry that refuses
  the credentials. An image copy cut halfway and an image built from its recipe are
  molecule/serving_image's (verify.yml), on two hosts of their own.

Order matters: the tests that need a serving cluster ask for the `serving` fixture (conftest.py),
which deploys only when the engine does not answer; the engine tests after them leave the engine
broken on purpose, and the link and image faults come last.
"""

import contextlib
import glob
import json
import os
import re
import secrets
import shlex
import subprocess
import time

import docker
import openai
import pytest
import yaml

from .conftest import sim
from .helpers import (CONTAINER_STOP_TASK, DRIFT, ENGINE_STOP_TASK, HEAD, NETPLAN_FILE, engine_stops, KNOWN_ANSWER_TASK, LAUNCH, LOGS_TASK, PLAYBOOK,
                      API_PORT, PORT, PROFILE, STATUS_TASK, TINY_ANSWER, TOP, WORKER, api_client, api_key, assert_succeeded, drift,
                      finding_messages, findings, gateway_ca, leaks,
                      engine_process, failure_messages, healthy, link_figures, on_host, paste, printed_playbook_command,
                      ray_container_ids, ray_containers,
                      role_playbook, run_text, user_env, when_task_starts)

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("H4", "H9")

SYNC_PLAY = "Sync the model over the cluster link (M3)"
GATEWAY = "playbooks/steps/09_api_gateway.yml"
LINK_TASK = "Refuse a slow or wrong wire, naming every node (N5)"
WAIT_TASK = "Wait for /health, showing progress (V7)"
CLIENT_IP = sim.CLIENT[1]  # the client machine of tests/sim/cluster.py
HUB_PORT = 8088
SSH_REFUSED = ["-p", "tcp", "--dport", "22", "-j", "REJECT", "--reject-with", "tcp-reset"]


def hold_engine_start(head, name):
    """Make the next engine launched with hold_env(name) wait, before vLLM is even imported, until
    release_engine_start(head, name): a sitecustomize.py in the head container that the engine's
    Python runs first thing (PYTHONPATH). The engine cannot be ready while it waits, on any machine.
    It writes <dir>/held when it starts waiting. Returns the extra vars for the deploy."""
    folder = "/tmp/gb10-e2e-hold-%s" % name
    hook = ("import os, time\n"
            "open(%r, 'w').write(str(os.getpid()))\n"
            "while not os.path.exists(%r):\n"
            "    time.sleep(0.5)\n" % (folder + "/held", folder + "/release"))
    on_host(head, "docker", "exec", HEAD, "sh", "-c",
            'rm -rf "$1" && mkdir -p "$1" && printf "%s" "$2" > "$1/sitecustomize.py"', "sh", folder, hook)
    # The engine's own environment (vllm_serve_env) plus the hook: a new launch, started held.
    return {"vllm_serve_env": "{{ vllm_serve_profile | gb10.serving.engine_env | combine({'PYTHONPATH': '%s'}) }}"
            % folder}


def engine_start_held(head, name):
    out = subprocess.run(["docker", "exec", head, "docker", "exec", HEAD, "cat", "/tmp/gb10-e2e-hold-%s/held" % name],
                         capture_output=True, text=True, timeout=60, check=False)
    return out.returncode == 0 and out.stdout.strip().isdigit()


def release_engine_start(head, name):
    on_host(head, "docker", "exec", HEAD, "touch", "/tmp/gb10-e2e-hold-%s/release" % name)


@pytest.fixture(scope="module")
def client(sim_manager, sim_cluster):
    container = sim_manager.cluster.client(sim_cluster.state["host_image"])
    yield container
    container.remove(force=True)


def probe_ports(client, ip, ports):
    """{port: True if a TCP connection from the client machine succeeds} (IPv4 or IPv6 by the
    address; 3 s each, in parallel)."""
    script = (
        "import json, socket, sys, threading\n"
        "res = {}\n"
        "def try_(p):\n"
        "    try:\n"
        "        socket.create_connection((sys.argv[1], p), timeout=3).close(); res[p] = True\n"
        "    except OSError:\n"
        "        res[p] = False\n"
        "ts = [threading.Thread(target=try_, args=(int(p),)) for p in sys.argv[2:]]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "print(json.dumps(res))\n")
    rc, out = client.exec_run(["python3", "-c", script, ip] + [str(p) for p in sorted(ports)])
    assert rc == 0, out
    return {int(k): v for k, v in json.loads(out.decode().strip().splitlines()[-1]).items()}


def listening_ports(host):
    """{'ipv4': ports, 'ipv6': ports}: the TCP ports the host listens on over each family, any address
    but loopback, from its /proc/net/tcp and tcp6 (a socket on :: takes IPv4 too, unless it is
    IPv6-only: probing it over both families is what tells)."""
    out = on_host(host, "python3", "-c",
                  "import json\n"
                  "ports = {'ipv4': set(), 'ipv6': set()}\n"
                  "for f, family in (('/proc/net/tcp', 'ipv4'), ('/proc/net/tcp6', 'ipv6')):\n"
                  "    for line in open(f).read().splitlines()[1:]:\n"
                  "        local, state = line.split()[1], line.split()[3]\n"
                  "        addr, port = local.split(':')\n"
                  "        if state == '0A' and addr not in ('0100007F', '00000000000000000000000001000000'):\n"
                  "            ports[family].add(int(port, 16))\n"
                  "print(json.dumps({k: sorted(v) for k, v in ports.items()}))\n")
    return {family: set(ports) for family, ports in json.loads(out.strip().splitlines()[-1]).items()}


# ---- exposure -------------------------------------------------------------------------------

@pytest.mark.rule("O6", "A1", "A4")
def test_only_ssh_and_the_gateway_answer_a_machine_outside_the_cluster_over_ipv4_and_ipv6(
        sim_cluster, serving, client):
    # Rule A4: every node, both address families, every port anything on the node listens on,
    # plus a service of the operator's own that nobody opened (default-deny: a filter that closes a
    # list of ports leaves it open). The metrics port answers the controller, not this client.
    own_service = 20000
    ip6 = {h["name"]: h["ip6"] for h in sim_cluster.state["hosts"]}
    # Started in the background, it listens a moment later: each start waits (bounded) until it does,
    # so the ports read below include it.
    wait_listening = ("import socket, sys, time\n"
                      "for _ in range(100):\n"
                      "    try:\n"
                      "        socket.create_connection(('::1', %d), 1).close()\n"
                      "        sys.exit(0)\n"
                      "    except OSError:\n"
                      "        time.sleep(0.1)\n"
                      "sys.exit('nothing listens on %d')\n" % (own_service, own_service))
    for host in sim_cluster.hosts:
        on_host(host, "sh", "-c", "setsid python3 -m http.server --bind :: %d >/dev/null 2>&1 </dev/null & "
                "python3 -c %s" % (own_service, shlex.quote(wait_listening)))
    try:
        reachable, listening = {}, {}
        for host in sim_cluster.hosts:
            listening[host] = listening_ports(host)
            everything = listening[host]["ipv4"] | listening[host]["ipv6"] | {8265, PORT}
            for family, address in (("ipv4", sim_cluster.ips[host]), ("ipv6", ip6[host])):
                reachable[host, family] = {p for p, ok in probe_ports(client, address, everything).items() if ok}
    finally:
        for host in sim_cluster.hosts:
            subprocess.run(["docker", "exec", host, "pkill", "-f", "http.server --bind :: %d" % own_service],
                           check=False, timeout=30)
    head = listening[sim_cluster.head]
    # Ray's GCS, the exporter and the gateway are up: there is something to protect. The engine
    # listens on the head's loopback only (A1), so it is not among the ports that face any network.
    assert {6379, API_PORT, own_service} <= head["ipv4"] | head["ipv6"] and PORT not in head["ipv4"] | head["ipv6"], head
    assert {22, own_service} <= listening[sim_cluster.hosts[1]]["ipv6"], listening
    for (host, family), ports in reachable.items():
        gateway = {API_PORT} if host == sim_cluster.head else set()
        # SSH on both families; the gateway on the head, wherever it listens (IPv4 at least).
        assert 22 in ports and ports <= {22} | gateway, (host, family, sorted(ports), listening[host])
    assert API_PORT in reachable[sim_cluster.head, "ipv4"], reachable


def test_the_ray_dashboard_does_not_answer_even_a_cluster_member(sim_cluster, serving):
    # From the worker's cluster address to the head's, which the firewall lets through: nothing
    # listens there (serving_containers starts Ray without its dashboard).
    worker = sim_cluster.hosts[1]
    out = on_host(worker, "python3", "-c",
                  "import socket\n"
                  "s = socket.socket(); s.settimeout(3)\n"
                  "print('open' if s.connect_ex(('%s', 8265)) == 0 else 'closed')\n"
                  % sim_cluster.cluster_ips[sim_cluster.head])
    assert out.strip() == "closed"


@pytest.mark.rule("A4", "X1")
def test_a_machine_on_the_cluster_segment_that_is_not_a_node_reaches_no_cluster_port(sim_cluster, serving, client):
    # The firewall trusts the cluster link by its interface *and* the nodes' own cluster addresses
    # (plugins/module_utils/firewall.py): a machine on the same segment (a switch, the mesh's
    # coordination LAN) with an address of its own in the cluster subnet reaches none of the ports
    # the nodes open to each other. Ray's GCS here; the mp executor's and data parallelism's
    # rendezvous, which authenticate nothing (vLLM's security guide: "place the nodes on an isolated
    # network"), are opened the same way. The worker, a node, reaches the GCS.
    head_ip, worker = sim_cluster.cluster_ips[sim_cluster.head], sim_cluster.hosts[1]
    probe = ("import socket\ns = socket.socket(); s.settimeout(3)\n"
             "print('open' if s.connect_ex(('%s', 6379)) == 0 else 'closed')\n" % head_ip)
    assert on_host(worker, "python3", "-c", probe).strip() == "open"
    link = docker.from_env().networks.get(sim.LINK_NETWORK)
    stranger = "%s.99" % sim.LINK_SUBNET.split("/", maxsplit=1)[0].rsplit(".", 1)[0]
    link.connect(client, ipv4_address=stranger)
    try:
        rc, out = client.exec_run(["python3", "-c", probe])
        assert rc == 0 and out.decode().strip().splitlines()[-1] == "closed", out
    finally:
        link.disconnect(client, force=True)


# A1: what the gateway forwards with a client's key, and what each route gets from the engine.
GATEWAY_ALLOWS = {("/v1/chat/completions", "post"), ("/v1/completions", "post"), ("/v1/models", "get"),
                  ("/v1/responses", "post"), ("/v1/messages", "post"), ("/v1/messages/count_tokens", "post")}
ROUTE_PROBE = """
import json, ssl, sys, urllib.error, urllib.request
base, keys, routes, ca = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
context = ssl.create_default_context(cadata=ca)
def ask(path, method, key, body):
    data = None if method in ('get', 'head', 'delete') else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method.upper(),
                                     headers={'Content-Type': 'application/json'})
    if key:
        request.add_header('Authorization', 'Bearer ' + key)
    try:
        with urllib.request.urlopen(request, timeout=120, context=context) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code
print(json.dumps([[path, method, {name: ask(path, method, key, body) for name, key in keys.items()}]
                  for path, method, body in routes]))
"""


def engine_routes(head):
    """Every (path, method) of the running engine, from its own OpenAPI document read on the head's
    loopback, plus /metrics: vLLM mounts Prometheus' app there, which no OpenAPI document lists."""
    out = on_host(head, "docker", "exec", HEAD, "python3", "-c",
                  "import urllib.request\n"
                  "print(urllib.request.urlopen('http://127.0.0.1:%d/openapi.json', timeout=30).read().decode())" % PORT)
    paths = json.loads(out)["paths"]
    return sorted({(path, method) for path, operations in paths.items() for method in operations
                   if method in ("get", "post", "put", "patch", "delete")} | {("/metrics", "get")})


def ask_every_route(client, sim_cluster, routes, keys):
    """{(path, method): {key name: HTTP status}} of each route asked through the gateway from the
    client machine, over TLS with the CA the deploy's summary names."""
    head = sim_cluster.head
    model = api_client(sim_cluster).models.list().data[0].id
    bodies = {"/v1/chat/completions": {"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]},
              "/v1/completions": {"model": model, "max_tokens": 4, "prompt": "Hi"},
              "/v1/responses": {"model": model, "max_output_tokens": 4, "input": "Hi"},
              "/v1/messages": {"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]},
              "/v1/messages/count_tokens": {"model": model, "messages": [{"role": "user", "content": "Hi"}]}}
    asked = [[re.sub(r"\{[^}]*\}", "x", path), method, bodies.get(path, {"model": model})] for path, method in routes]
    with open(gateway_ca(head)) as f:
        ca = f.read()
    base = "https://%s:%d" % (sim_cluster.ips[head], API_PORT)
    rc, out = client.exec_run(["python3", "-c", ROUTE_PROBE, base, json.dumps(keys), json.dumps(asked), ca])
    assert rc == 0, out
    found = json.loads(out.decode().strip().splitlines()[-1])
    return {(path, method): codes for path, method, codes in found}


@pytest.mark.rule("A1")
def test_no_engine_route_answers_without_a_key_and_only_the_allowlisted_ones_with_it(sim_cluster, serving, client):
    # VLLM's --api-key left /invocations (the chat handler itself), /tokenize, /load and
    # more open to anyone. Every route of the running engine's own table, asked from a client
    # machine through the gateway: without a key and with a wrong one only /health answers; with the
    # key only the allowlisted routes reach the engine.
    routes = engine_routes(sim_cluster.head)
    assert ("/invocations", "post") in routes and GATEWAY_ALLOWS <= set(routes), routes
    codes = ask_every_route(client, sim_cluster, routes, {
        "none": "", "wrong": "not-the-key-" + secrets.token_hex(16), "right": api_key(sim_cluster.head),
        "metrics": api_key(sim_cluster.head, "prometheus")})
    for (path, method), answer in codes.items():
        if (path, method) == ("/health", "get"):
            assert answer == {"none": 200, "wrong": 200, "right": 200, "metrics": 200}, (path, method, answer)
        elif (path, method) in GATEWAY_ALLOWS:
            # The scraper's key reads /metrics and nothing else: no key to the model (A1).
            assert answer == {"none": 401, "wrong": 401, "right": 200, "metrics": 403}, (path, method, answer)
        else:
            # Refused without a key (401; 403 for another method of an allowlisted path, which
            # nginx's limit_except refuses first); with one, not forwarded (404), or a route the
            # default client may not use (403: /metrics is the prometheus client's).
            assert answer["none"] in (401, 403) and answer["wrong"] in (401, 403) and answer["right"] in (403, 404), \
                (path, method, answer)
            assert answer["metrics"] in (403, 404) or (path, method) == ("/metrics", "get"), (path, method, answer)
    assert codes[("/invocations", "post")] == {"none": 401, "wrong": 401, "right": 404, "metrics": 404}, \
        codes[("/invocations", "post")]
    assert codes[("/metrics", "get")]["right"] == 403 and codes[("/metrics", "get")]["metrics"] == 200, \
        codes[("/metrics", "get")]


@pytest.mark.rule("A1")
def test_a_local_process_on_the_head_other_than_root_or_the_gateway_cannot_reach_the_keyless_engine(
        sim_cluster, serving):
    # The engine listens on the head's loopback with no key: a process of any other user on the
    # head (a browser on the Spark's desktop, a user's script) could call every route, admin ones
    # too. The firewall's output chain resets it; root (the collection's probes, the watchdog) and
    # the gateway's nginx workers (www-data) get through.
    head = sim_cluster.head
    url = "http://127.0.0.1:%d/v1/models" % PORT

    def as_user(*user):
        argv = ["docker", "exec", head] + list(user) + ["curl", "-sS", "-m", "20", "-o", "/dev/null", "-w", "%{http_code}", url]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)

    nobody = as_user("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
    # curl's 7: the connection was refused (the reset answers the SYN); nothing reached the engine.
    assert nobody.returncode == 7 and nobody.stdout == "000", (nobody.returncode, nobody.stdout, nobody.stderr)
    for user in ((), ("setpriv", "--reuid=www-data", "--regid=www-data", "--clear-groups")):
        allowed = as_user(*user)
        assert allowed.returncode == 0 and allowed.stdout == "200", (user, allowed.stdout, allowed.stderr)


# ---- faults mid-run -------------------------------------------------------------------------

# A second NIC per simulated Spark at the speed of a Spark's management NIC (1 GbE), on a network of
# its own: docker network connect adds it to the running host, tc throttles what it sends.
SLOW_NETWORK = "gb10-sim-slow-nic"
SLOW_SUBNET = "172.30.213"


@contextlib.contextmanager
def slow_nics(docker_client, hosts):
    """{host: (interface, address)} of a 1 Gb/s NIC added to each host, removed afterwards."""
    ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(
        subnet=SLOW_SUBNET + ".0/24", gateway=SLOW_SUBNET + ".1")])
    # Jumbo frames pass, as on the cluster link: role cluster_link configures MTU 9000 on whatever
    # port the inventory names and checks it end to end; only the speed is wrong here.
    network = docker_client.networks.create(SLOW_NETWORK, driver="bridge", ipam=ipam,
                                            options={"com.docker.network.driver.mtu": "9000"},
                                            labels={sim.LABEL: sim.LABEL_VALUE})
    try:
        nics = {}
        for number, host in enumerate(hosts, start=11):
            address = "%s.%d" % (SLOW_SUBNET, number)
            network.connect(host, ipv4_address=address)
            iface = on_host(host, "sh", "-c", "ip -o -4 addr show to %s | awk '{print $2}'" % address).strip()
            on_host(host, "tc", "qdisc", "add", "dev", iface, "root", "tbf", "rate", "1gbit", "burst", "256kb",
                    "latency", "50ms")
            nics[host] = (iface, address)
        yield nics
    finally:
        network.reload()
        for container in network.containers:
            network.disconnect(container, force=True)
        network.remove()


def wrong_wire_inventory(tmp_path, nics, twin_ips):
    """sim.ini with each host's cluster address and interface on its slow NIC: what a user writes
    who took the management NIC for the cluster link. Beside it the simulation's group_vars and
    key folder (group_vars finds the key relative to the inventory)."""
    folder = tmp_path / "inventory"
    folder.mkdir()
    os.symlink(os.path.join(TOP, "inventory", "group_vars"), str(folder / "group_vars"))
    os.symlink(os.path.join(TOP, ".sim"), str(tmp_path / ".sim"))
    with open(os.path.join(TOP, "inventory", "sim.ini")) as f:
        text = f.read()
    for host, (iface, address) in nics.items():
        # The twin keeps its address on the cable (pair mode): only the first twin's is moved.
        text = re.sub(r"(?m)^(%s .*)gb10_cluster_ip=\S+" % re.escape(host),
                      r"\1gb10_cluster_ip=%s gb10_cluster_iface=%s gb10_cluster_twin_ip=%s"
                      % (address, iface, twin_ips[host]), text)
    path = folder / "wrong-wire.ini"
    path.write_text(text)
    return str(path)


# `full` (the test budget): the link probe's refusal by its floor, with both figures, is the pair
# case below in the default run; the share of plain TCP it adds here is unit-tested (test_link_probe).
@pytest.mark.rule("N5")
@pytest.mark.full
def test_a_wrong_wire_is_refused_before_the_launch_with_its_figures(sim_manager, sim_cluster, serving,
                                                                    run_playbook, tmp_path):
    # N5: every inferred check passes (the interface is up and holds the address); the
    # measurement alone tells the 1 Gb/s wire from the cluster link, before anything stops. On
    # sockets, chosen on purpose (N4): with RoCE, roce_facts would already refuse a cluster address
    # on a port without an RDMA device, an inferred check.
    head = sim_cluster.head
    engine_before = engine_process(head)
    env_before = {host: on_host(host, "cat", "/etc/gb10/nccl.env") for host in sim_cluster.hosts}
    with slow_nics(sim_manager.cluster.docker, sim_cluster.hosts) as nics:
        inventory = wrong_wire_inventory(tmp_path, nics, sim_cluster.twin_ips)
        with open(inventory) as f:
            written = f.read()
        assert all("gb10_cluster_ip=%s gb10_cluster_iface=%s" % (address, iface) in written
                   for iface, address in nics.values()), written
        # The deploy's steps up to the link check (the step playbooks, deploy.yml's
        # order): host prep writes the env file for the wrong wire, then the link is measured.
        # The steps before (cluster link, image) change nothing the measurement reads.
        wrong = {"gb10_profile": PROFILE, "gb10_nccl_transport": "socket", "nccl_env_use_roce_facts": False}
        assert_succeeded(run_playbook("playbooks/steps/04_host_prep.yml", inventory, timeout=900, extravars=wrong),
                         sim_cluster.hosts)
        result = run_playbook("playbooks/steps/07_link_measure.yml", inventory, timeout=900, extravars=wrong)

    assert result.status == "failed", result
    failed = dict(((h, t), m) for h, t, m in result.failures())
    message = failed[(head, LINK_TASK)]
    assert "before the launch, nothing was stopped or started" in message, message
    # Both figures for every node: its all-reduce busbw under the floor, and plain TCP between the
    # addresses; each node named with why.
    busbw, tcp, report_path = link_figures(message.split("Measured: ")[1])
    with open(report_path) as f:
        nodes = json.load(f)["nodes"]
    floor = nodes[0]["floor_gbit"]
    assert set(busbw) == set(sim_cluster.hosts) and max(busbw.values()) < floor and tcp, message
    assert all(node["problems"] for node in nodes), nodes
    for host in sim_cluster.hosts:
        assert "%s: all-reduce busbw" % host in message and "below the floor of %s Gb/s" % floor in message, message
    # Refused before the launch (deploy.yml runs this step before the model sync and the launch,
    # tests/unit/test_deploy_steps.py): the serving engine is the same process.
    assert engine_process(head)[:2] == engine_before[:2] and healthy(head)

    # What the wrong inventory changed before the link check, host prep's env file and firewall,
    # goes back with the right inventory, and the engine that kept serving is not touched (O2).
    assert_succeeded(run_playbook("playbooks/steps/04_host_prep.yml", sim_cluster.inventory, timeout=900,
                                  extravars={"gb10_profile": PROFILE}), sim_cluster.hosts)
    assert {host: on_host(host, "cat", "/etc/gb10/nccl.env") for host in sim_cluster.hosts} == env_before
    assert engine_process(head)[:2] == engine_before[:2] and healthy(head)


# `full` (the test budget): the rated floor is link_check_eval's unit cases' and molecule/link_check's.
@pytest.mark.rule("N5")
@pytest.mark.full
def test_a_pair_running_at_one_twins_rate_is_refused_with_both_figures(sim_cluster, serving, run_playbook):
    # N5: both twins are up and ACTIVE, every inferred check passes, but the pair moves
    # only what one twin is rated for (a field report: 98 Gb/s on one HCA, 161 on both). The
    # simulated twins are not rated as ConnectX-7 ports (gb10_sim.yml); here each is rated 3 Gb/s,
    # the pair 6, and the wire NCCL's stand-in (Gloo) takes is held at 3 Gb/s: one twin's rate. The
    # absolute floor (1.5 Gb/s) passes that; the floor from the rating (0.6 x 6) refuses it, with
    # both figures. The link step alone, forced to measure beside the serving engine.
    head = sim_cluster.head
    engine_before = engine_process(head)
    veths = [outer_veth(host, sim_cluster.link_port) for host in sim_cluster.hosts]
    for veth in veths:
        subprocess.run(["tc", "qdisc", "add", "dev", veth, "root", "tbf", "rate", "3gbit", "burst", "1mb",
                        "latency", "50ms"], check=True, timeout=30)
    try:
        result = run_playbook("playbooks/steps/07_link_measure.yml", sim_cluster.inventory, timeout=900,
                              extravars={"gb10_profile": PROFILE, "gb10_deploy_measure_link": True,
                                         "link_check_rated_share": {"roce": 0.6, "roce_ring": 0.6, "socket": 0},
                                         "link_check_twin_gbit": 3})
    finally:
        for veth in veths:
            subprocess.run(["tc", "qdisc", "del", "dev", veth, "root"], check=False, timeout=30)

    assert result.status == "failed", result
    message = dict(((h, t), m) for h, t, m in result.failures())[(head, LINK_TASK)]
    busbw, unused_tcp, report_path = link_figures(message.split("Measured: ")[1])
    with open(report_path) as f:
        nodes = json.load(f)["nodes"]
    assert all(abs(node["floor_gbit"] - 3.6) < 1e-6 for node in nodes), nodes
    assert set(busbw) == set(sim_cluster.hosts) and max(busbw.values()) < 3.6, message
    for host in sim_cluster.hosts:
        assert "%s: all-reduce busbw" % host in message, message
    assert "below the floor of 3.6 Gb/s (0.6 x 6 Gb/s rated: 2 RoCE HCA(s) x 3 Gb/s)" in message, message
    assert engine_process(head)[:2] == engine_before[:2] and healthy(head)


# `full` (the test budget): the printed-next-step case below loses the same node during deploy.yml
# and shows the run stopping with its next step and the serving engine kept; a model copy cut
# halfway is molecule/model_sync's.
@pytest.mark.full
def test_a_node_lost_halfway_stops_the_run_and_keeps_the_serving_engine(sim_cluster, serving, run_playbook):
    head, worker = sim_cluster.hosts
    engine_before = engine_process(head)
    model = sim_cluster.model_path
    files_before = on_host(worker, "sh", "-c", "cd %s && find . -type f | sort | xargs sha256sum" % model)

    def lose_worker(event):
        data = event.get("event_data", {})
        if event.get("event") == "playbook_on_play_start" and data.get("name") == SYNC_PLAY:
            # New SSH connections are refused and the open ones (the controller's ControlMaster)
            # end; the node itself, its Ray worker and PID 1 (sshd -D) keep running.
            subprocess.run(["docker", "exec", worker, "iptables", "-I", "INPUT", "1"] + SSH_REFUSED,
                           check=True, timeout=30)
            subprocess.run(["docker", "exec", worker, "pkill", "-f", "^sshd: root@"], check=False, timeout=30)

    try:
        # Every step (gb10_converge=full): a converged cluster would skip the model sync's play.
        result = run_playbook(PLAYBOOK, sim_cluster.inventory, timeout=1800, event_handler=lose_worker,
                              extravars={"gb10_converge": "full"})
    finally:
        subprocess.run(["docker", "exec", worker, "iptables", "-D", "INPUT"] + SSH_REFUSED, check=False, timeout=30)

    assert result.status == "failed", result
    assert result.stats[worker]["unreachable"] >= 1, result
    # The run stopped for every node at that step (any_errors_fatal): the later plays started with
    # no host left, so no task of theirs ran.
    plays_with_tasks = [ev["event_data"].get("play") for ev in result.events if ev.get("event") == "runner_on_start"]
    assert plays_with_tasks[-1] == SYNC_PLAY, plays_with_tasks[-5:]
    text = run_text(result)
    assert "NEXT STEP (gb10.serving): the run stopped on %s" % worker in text
    assert "ansible %s -i %s -m ansible.builtin.ping" % (worker, sim_cluster.inventory) in text
    # The engine that was serving is the same process and still healthy; the model is intact.
    assert engine_process(head)[:2] == engine_before[:2]
    assert healthy(head)
    assert on_host(worker, "sh", "-c", "cd %s && find . -type f | sort | xargs sha256sum" % model) == files_before


def next_steps(stdout, host):
    """The commands (in backticks) of the next step printed for host."""
    lines = [line for line in stdout.splitlines() if line.startswith("  next: ") and host in line]
    assert len(lines) == 1, stdout[-4000:]
    return lines[0], re.findall(r"`([^`]+)`", lines[0])


def test_the_printed_next_step_runs_when_pasted(sim_cluster, serving, tmp_path):
    # A user ran deploy.yml with the profile as an extra var and lost a node. The next
    # step repeats their own playbook, inventory and extra vars; its ping, pasted while the node is
    # still down, fails; pasted once it is back, it succeeds. The re-run is the user's own command
    # (the same words, checked below), which the lost run itself ran when pasted; a full deploy.yml
    # on a serving cluster is test_2a's case, so it is not run a second time here (the test budget).
    head, worker = sim_cluster.hosts
    env = user_env(tmp_path)
    command = ("ansible-playbook playbooks/deploy.yml -i %s -e gb10_profile=minimax-m27-nvfp4"
               % os.path.relpath(sim_cluster.inventory, TOP))
    engine_before = engine_process(head)
    subprocess.run(["docker", "exec", worker, "iptables", "-I", "INPUT", "1"] + SSH_REFUSED, check=True, timeout=30)
    subprocess.run(["docker", "exec", worker, "pkill", "-f", "^sshd: root@"], check=False, timeout=30)
    try:
        lost = paste(command, env, timeout=900)
        assert lost.returncode != 0, lost.stdout[-4000:]
        assert "NEXT STEP (gb10.serving): the run stopped on" in lost.stdout and worker in lost.stdout
        unused_line, (ping, rerun) = next_steps(lost.stdout, worker)
        assert shlex.split(rerun) == shlex.split(command.replace(
            os.path.relpath(sim_cluster.inventory, TOP), sim_cluster.inventory)), rerun
        assert shlex.split(ping)[:2] == ["ansible", worker], ping

        still_down = paste(ping, env, timeout=300)
        assert still_down.returncode != 0, still_down.stdout
    finally:
        subprocess.run(["docker", "exec", worker, "iptables", "-D", "INPUT"] + SSH_REFUSED, check=False, timeout=30)

    back = paste(ping, env, timeout=300)
    assert back.returncode == 0, back.stdout
    # The run that stopped before the launch left the serving engine alone.
    assert engine_process(head)[:2] == engine_before[:2]
    assert healthy(head)


def recap(stdout, host):
    """{'ok': n, 'changed': n, 'unreachable': n, 'failed': n, ...} of host's line in the PLAY RECAP."""
    line = [ln for ln in stdout.splitlines() if re.match(r"^%s\s+:" % re.escape(host), ln)]
    assert line, stdout[-4000:]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line[-1])}


@pytest.mark.rule("A2")
def test_an_unrecorded_host_key_is_refused_and_the_printed_step_records_it_with_its_fingerprints(
        sim_cluster, serving, tmp_path):
    # Rule A2: ansible.cfg checks host keys. The simulated inventory's opt-out is turned
    # back here, against a known_hosts of this test's own and without SSH's shared connections
    # (one already open would skip the check), as a real inventory runs.
    head, worker = sim_cluster.hosts
    env = user_env(tmp_path)
    known = tmp_path / "known_hosts"
    checked = tmp_path / "checked.yml"
    checked.write_text(yaml.safe_dump({"ansible_host_key_checking": True, "ansible_ssh_args": "-o ControlMaster=no",
                                       "ansible_ssh_common_args": "-o UserKnownHostsFile=%s" % known,
                                       "gb10_known_hosts_file": str(known)}))
    inventory = os.path.relpath(sim_cluster.inventory, TOP)
    command = "ansible-playbook playbooks/steps/06_serving_state.yml -i %s -e gb10_profile=%s -e @%s" % (inventory, PROFILE, checked)

    # The step's first task on a node is on the head: it stops there, unreachable.
    refused = paste(command, env, timeout=300)
    assert refused.returncode != 0
    assert recap(refused.stdout, head)["unreachable"] == 1, refused.stdout[-4000:]
    assert "Host key verification failed" in refused.stdout
    line, (record, rerun) = next_steps(refused.stdout, head)
    assert "the SSH host key of %s is not the one this controller recorded" % head in line, line
    assert shlex.split(record)[:2] == ["ansible-playbook", "playbooks/known_hosts.yml"], record
    assert "@%s" % checked in record, record

    # Pasted: each node's keys recorded, with the fingerprints the node itself reads from its key.
    recorded = paste(record, env, timeout=300)
    assert recorded.returncode == 0, recorded.stdout[-4000:]
    shown = " ".join(recorded.stdout.split())  # the result callback folds long messages
    for host in (head, worker):
        own = on_host(host, "ssh-keygen", "-lf", "/etc/ssh/ssh_host_ed25519_key.pub").split()[1]
        assert "%s (%s) offers " % (host, sim_cluster.ips[host]) in shown, recorded.stdout[-4000:]
        assert "%s %s (ED25519)" % (own, sim_cluster.ips[host]) in shown, recorded.stdout[-4000:]
    again = paste(record, env, timeout=300)
    assert again.returncode == 0 and all(recap(again.stdout, h)["changed"] == 0 for h in (head, worker)), again.stdout

    # Another key recorded for the worker (a reinstalled node, or a machine in its place): refused,
    # never overwritten, with the command that removes the old key; pasted, the keys are recorded.
    forged = tmp_path / "forged"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(forged)], check=True, timeout=30)
    address = sim_cluster.ips[worker]
    lines = known.read_text().splitlines()
    worker_lines = [ln for ln in lines if ln.split()[0] == address]
    assert worker_lines, (address, lines)
    kept = [ln for ln in lines if ln not in worker_lines]
    known.write_text("\n".join(kept + ["%s %s" % (address, " ".join(forged.with_suffix(".pub").read_text().split()[:2]))])
                     + "\n")
    spoofed = paste(record, env, timeout=300)
    assert spoofed.returncode != 0
    assert recap(spoofed.stdout, worker)["failed"] == 1 and recap(spoofed.stdout, head)["failed"] == 0
    line = [ln for ln in spoofed.stdout.splitlines() if ln.startswith("- %s failed" % worker)]
    assert line and "holds a host key for %s that the node does not offer now" % address in line[0], spoofed.stdout
    remove = re.search(r"ssh-keygen -R \S+ -f \S+", line[0]).group(0)
    assert paste(remove, env, timeout=60).returncode == 0
    assert paste(record, env, timeout=300).returncode == 0

    # Now the run checks the keys and reaches every node.
    served = paste(rerun, env, timeout=600)
    assert "Host key verification failed" not in served.stdout, served.stdout[-4000:]
    for host in (head, worker):
        assert recap(served.stdout, host)["unreachable"] == 0, served.stdout[-4000:]


# `full` (the test budget): role model_sync alone, against the client machine playing the Hub.
@pytest.mark.full
def test_a_gated_model_downloads_with_the_hub_token_which_is_never_printed(sim_cluster, serving, client,
                                                                           run_playbook, tmp_path):
    head, worker = sim_cluster.hosts
    token = "hf_e2e_" + secrets.token_hex(12)
    repo, path = "gb10/e2e-gated", "/models/gb10-e2e-hub"
    # The client machine plays the Hub (tests/sim/fake_hub.py): a private repo that wants the token.
    subprocess.run(["docker", "cp", os.path.join(TOP, "tests", "sim", "fake_hub.py"), "%s:/srv/fake_hub.py" % client.name],
                   check=True, timeout=60)
    rc, out = client.exec_run(["sh", "-c", "mkdir -p /srv/repo && echo '{\"model_type\": \"llama\"}' > /srv/repo/config.json"
                               " && head -c 4194304 /dev/urandom > /srv/repo/model-00001-of-00001.safetensors"
                               " && cd /srv/repo && sha256sum * | sort"])
    assert rc == 0, out
    source = out.decode()
    client.exec_run(["sh", "-c", "python3 /srv/fake_hub.py /srv/repo %s %s %d > /srv/hub.log 2>&1" % (repo, token, HUB_PORT)],
                    detach=True)
    deadline = time.monotonic() + 30
    while b"listening" not in client.exec_run(["cat", "/srv/hub.log"]).output and time.monotonic() < deadline:
        time.sleep(0.5)
    playbook = role_playbook(tmp_path, "model_sync", model_sync_path=path, model_sync_download=True, model_sync_repo=repo,
                             model_sync_download_image=sim_cluster.image_name,
                             model_sync_revision="0123456789abcdef0123456789abcdef01234567",  # fake_hub.COMMIT
                             model_sync_hub_endpoint="http://%s:%d" % (CLIENT_IP, HUB_PORT))
    try:
        refused = run_playbook(playbook, sim_cluster.inventory, timeout=600)

        assert refused.status == "failed", refused
        assert {host for host, unused_task, unused_msg in refused.failures()} == {head}, refused
        message = dict((task, msg) for unused_host, task, msg in refused.failures())[
            "Say why the download failed (the token never appears)"]
        assert "gb10_hf_token" in message and repo in message, message
        assert "401" in message or "GatedRepo" in message or "Invalid credentials" in message, message

        fetched = run_playbook(playbook, sim_cluster.inventory, timeout=600, extravars={"gb10_hf_token": token})

        assert_succeeded(fetched, sim_cluster.hosts)
        for host in sim_cluster.hosts:
            assert on_host(host, "sh", "-c", "cd %s && sha256sum config.json *.safetensors | sort" % path) == source
        requests = [json.loads(line) for line in client.exec_run(["cat", "/srv/hub.log"]).output.decode().splitlines()
                    if line.startswith("{\"method\"")]
        with_token = [r for r in requests if r["token_ok"]]
        assert any("/resolve/" in r["path"] and r["method"] == "GET" for r in with_token), requests
        assert token not in json.dumps(fetched.events) + json.dumps(refused.events)
    finally:
        client.exec_run(["pkill", "-f", "fake_hub.py"])
        for host in sim_cluster.hosts:
            on_host(host, "rm", "-rf", path)


# `full` (the test budget): every default deploy and recovery checks the known answer it expects.
@pytest.mark.rule("V8")
@pytest.mark.full
def test_a_wrong_expected_answer_fails_the_smoke_test_with_both_answers(sim_cluster, serving, run_playbook):
    # The profile's known answer is checked on every run, kept engine included. Expecting
    # the real recipe's answer ("42") from the tiny model is a wrong expected answer: the launch step
    # fails naming the question, what the engine said and what was expected, and leaves it running.
    head = sim_cluster.head
    engine_before = engine_process(head)
    question = "What is 17 + 25? Reply with the number only."
    wrong = {"prompt": question, "expect": "42", "max_tokens": 16}

    # The same launch as the serving engine's (before the new-key case gives it a key of its own):
    # the engine is kept and the check runs on it as on a no-op re-run (O2).
    result = run_playbook(LAUNCH, sim_cluster.inventory, timeout=1800,
                          extravars={"gb10_profile": PROFILE, "vllm_serve_known_answer": wrong})

    assert result.status == "failed", result
    # The check itself failed, on the head only; the launch's failure repeats it with the logs (H9).
    failures = dict(((h, t), m) for h, t, m in result.failures())
    assert set(failures) == {(head, KNOWN_ANSWER_TASK), (head, LOGS_TASK)}, failures
    message = failures[(head, LOGS_TASK)]
    assert json.dumps(question) in message and TINY_ANSWER in message, message
    assert "known_answer.expect is \"42\"" in message and "The engine was left running" in message, message
    # The drift command it prints names what drift.yml needs (the inventory, the profile and the
    # launch's overlay, check mode) and the collection's own drift.yml by its absolute path, so that
    # it runs when pasted from any directory.
    argv = printed_playbook_command(message)
    assert os.path.samefile(argv[1], os.path.join(TOP, DRIFT)) and argv[-1] == "--check", argv
    assert os.path.samefile(argv[argv.index("-i") + 1], os.path.join(TOP, sim_cluster.inventory)), argv
    for word in ("gb10_profile=" + PROFILE, "gb10_profile_overlay=sim-cpu"):
        assert argv[argv.index(word) - 1] == "-e", argv
    assert engine_process(head)[:2] == engine_before[:2] and healthy(head)


# `full` (the test budget): molecule/api_gateway adds and revokes a client with a reload only.
@pytest.mark.rule("O2", "A1")
@pytest.mark.full
def test_a_revoked_client_key_is_refused_while_the_engine_keeps_serving(sim_cluster, serving, run_playbook):
    # Client keys by name, held by the gateway alone. The gateway step alone adds a
    # client and, run without it, revokes it: a reload, with the engine and Ray untouched.
    head = sim_cluster.head
    ray_before = ray_containers(sim_cluster.hosts, head)
    engine_before = engine_process(head)
    added = run_playbook(GATEWAY, sim_cluster.inventory, timeout=600,
                         extravars={"gb10_profile": PROFILE, "gb10_api_clients": ["e2e-ci"]})
    assert_succeeded(added, sim_cluster.hosts)
    key = api_key(head, "e2e-ci")
    assert key != api_key(head) and key not in run_text(added)
    assert api_client(sim_cluster, key=key, timeout=60).models.list().data

    revoked = run_playbook(GATEWAY, sim_cluster.inventory, timeout=600, extravars={"gb10_profile": PROFILE})

    assert_succeeded(revoked, sim_cluster.hosts)
    with pytest.raises(openai.AuthenticationError):
        api_client(sim_cluster, key=key, timeout=60).models.list()
    assert api_client(sim_cluster, timeout=60).models.list().data  # the default client still gets in
    assert engine_process(head)[:2] == engine_before[:2] and ray_containers(sim_cluster.hosts, head) == ray_before


@pytest.mark.rule("H4", "O1", "O2")
def test_an_engine_not_ready_in_time_fails_with_its_logs(sim_cluster, serving, run_playbook):
    head = sim_cluster.head
    ray_before = ray_container_ids(sim_cluster)
    engine_before = engine_process(head)
    # The new engine waits on the test before vLLM starts (hold_engine_start): it cannot answer
    # /health within the 8 s readiness timeout on any machine. A changed launch (the env) makes
    # the deploy restart it.
    boots = {h: on_host(h, "cat", "/run/gb10-boot-id") for h in sim_cluster.hosts}
    extravars = dict(hold_engine_start(head, "timeout"), vllm_serve_readiness_timeout_s=8, gb10_profile=PROFILE)
    # The launch step alone (deploy.yml's last): the steps before it are the serving cluster's.
    result = run_playbook(LAUNCH, sim_cluster.inventory, timeout=1800, extravars=extravars)

    # The fault was caused: the new engine was held and never released.
    assert engine_start_held(head, "timeout")
    # A changed launch restarts what it must (O2): the engine; the Ray containers are kept.
    assert ray_container_ids(sim_cluster) == ray_before
    assert engine_process(head)[:2] != engine_before[:2]
    # The clean launch stopped the serving engine before Ray and its containers (H4): its ranks
    # ended inside running containers, so no node leaked and none rebooted. (Stopping the
    # containers under the ranks leaves their memory held on a Spark, and on the simulated one.)
    order = [e["event_data"]["task"] for e in result.events if e.get("event") == "runner_on_ok"
             and e["event_data"].get("task") in (ENGINE_STOP_TASK, CONTAINER_STOP_TASK)]
    assert order and order[0] == ENGINE_STOP_TASK and CONTAINER_STOP_TASK in order, order
    memory = result.results_by_host(task="Account for unified memory (H4)")
    assert sorted(memory) == sorted(sim_cluster.hosts) and not [h for h, m in memory.items() if m["leaked"]], memory
    assert {h: on_host(h, "cat", "/run/gb10-boot-id") for h in sim_cluster.hosts} == boots

    assert result.status == "failed", result
    failed = {(host, task) for host, task, unused_msg in result.failures()}
    assert (head, LOGS_TASK) in failed, result
    message = dict(((h, t), m) for h, t, m in result.failures())[(head, LOGS_TASK)]
    assert "was not ready after 8 s" in message and head in message, message
    logs_dir = message.split("logs of every node's containers are in ")[1].split()[0].rstrip("/")
    for host in sim_cluster.hosts:
        assert glob.glob(os.path.join(logs_dir, host, "*")), (logs_dir, os.listdir(logs_dir))
    assert "NEXT STEP (gb10.serving)" in run_text(result)


# `full` (the test budget): a start that fails, with every node's logs gathered and the next step
# printed, is the not-ready case above in the default run; this adds the worker lost under the start.
@pytest.mark.full
def test_a_worker_killed_during_start_up_fails_with_its_logs(sim_cluster, run_playbook):
    # The test before left an engine that never gets ready: this one launches anew anyway, so it
    # does not ask for a serving cluster (which would deploy first).
    head, worker = sim_cluster.hosts

    def kill_worker():
        # The engine waits (held) until its worker is gone: it cannot be ready before, on any machine.
        subprocess.run(["docker", "exec", worker, "docker", "kill", WORKER], timeout=60, check=False)
        release_engine_start(head, "worker")

    handler = when_task_starts(WAIT_TASK, head, kill_worker)
    # Another new launch (another hold folder), so the engine starts and the worker dies under it.
    # A placement group that waits 10 s for the lost node's GPU is enough to name it: vLLM logs the
    # wait at 10 s, then 30 and 70 (the role's default, 60 s, is sized for real start-ups; only the
    # test's wait is shorter).
    extravars = dict(hold_engine_start(head, "worker"), vllm_serve_readiness_timeout_s=300,
                     vllm_serve_placement_wait_s=10, gb10_profile=PROFILE)
    result = run_playbook(LAUNCH, sim_cluster.inventory, timeout=1800, event_handler=handler, extravars=extravars)

    assert handler.fired.is_set() and engine_start_held(head, "worker")
    assert result.status == "failed", result
    message = dict(((h, t), m) for h, t, m in result.failures()).get((head, LOGS_TASK), "")
    # The engine either dies with its rank or waits for Ray GPUs that the lost node took along.
    assert head in message and ("exited during start-up" in message or "is stuck waiting for Ray GPUs" in message), result
    logs_dir = message.split("logs of every node's containers are in ")[1].split()[0].rstrip("/")
    worker_logs = glob.glob(os.path.join(logs_dir, worker, "*"))
    assert worker_logs, (logs_dir, os.listdir(logs_dir))


@pytest.mark.rule("H4")
def test_teardown_stops_the_failed_start_within_its_bound_and_removes_the_ray_containers(sim_cluster, run_playbook):
    # What an operator runs after a failed start above: playbooks/teardown.yml. Its engine, held
    # before its start (or waiting for a lost worker's GPU, in `full`), may not answer SIGTERM; the
    # stop is bounded (here 15 s, as an operator may pass) and then kills it. The engine's ranks end inside running containers
    # first (H4), so no node leaks, and no Ray container is left on any node. (The TP=3 module's
    # deploy then starts from clean nodes instead of waiting out the role's 120 s bound itself.)
    leaks_before = leaks(sim_cluster.hosts)

    result = run_playbook("playbooks/teardown.yml", sim_cluster.inventory, timeout=900,
                          extravars={"gb10_teardown_stop_timeout_s": 15})

    assert_succeeded(result, sim_cluster.hosts)
    stop = engine_stops(result)
    assert stop and set(stop.values()) <= {"stopped", "killed", "none"}, stop
    # Both Ray containers carry serving_containers's role label (ray-head, ray-worker).
    for host in sim_cluster.hosts:
        assert on_host(host, "docker", "ps", "-aq", "--filter", "label=gb10.serving/role").strip() == "", host
    assert leaks(sim_cluster.hosts) == leaks_before


@pytest.mark.rule("O6")
def test_status_after_the_teardown_says_nothing_serves_and_prints_the_launch_step(sim_cluster, run_playbook):
    # The teardown above left no engine, metrics page or serving container: status says so, reads each
    # node's memory itself, and names the one command that serves again, the launch step of the
    # launch the head recorded (not pasted here: the next case launches on purpose without RDMA).
    head = sim_cluster.head
    result = run_playbook("playbooks/status.yml", sim_cluster.inventory, timeout=600)
    assert_succeeded(result, sim_cluster.hosts)
    assert all(stats["changed"] == 0 for stats in result.stats.values()), result.stats
    screen = result.results_by_host(task=STATUS_TASK)[head]["msg"]
    assert screen[0] == "NOT SERVING: no engine runs on the head", screen
    for host in sim_cluster.hosts:
        line = [text for text in screen if text.startswith(host + ": memory 119.7 GiB")]
        assert len(line) == 1 and "no leak" in line[0] and "no metrics page" in line[0], screen
    fix = [text for text in screen if text.startswith("Fix: ")]
    assert len(fix) == 1, screen
    argv = shlex.split(fix[0][len("Fix: "):])
    assert argv[0] == "ansible-playbook" and os.path.samefile(argv[1], os.path.join(TOP, LAUNCH)), argv
    assert os.path.samefile(argv[argv.index("-i") + 1], os.path.join(TOP, sim_cluster.inventory)), argv
    assert argv[argv.index("gb10_profile=" + PROFILE) - 1] == "-e", argv
    assert argv[argv.index("gb10_profile_overlay=sim-cpu") - 1] == "-e", argv


@pytest.mark.rule("N1")
def test_a_launch_whose_containers_cannot_reach_the_rdma_devices_is_refused_naming_the_cause(sim_cluster, run_playbook):
    # The Ray containers as the roles made them before (host network, shm, no RDMA
    # settings): NCCL in them finds no RoCE device and falls back to sockets, silently, whatever
    # the env file says. The simulation's NCCL stand-in does what NCCL does there; the check after
    # the launch names the fallback and what the container lacks, and leaves the engine running.
    # After the teardown above nothing serves, so the containers are made anew without them.
    head = sim_cluster.head
    result = run_playbook(LAUNCH, sim_cluster.inventory, timeout=1800,
                          extravars={"gb10_profile": PROFILE, "serving_containers_rdma": {}})

    assert result.status == "failed", result
    message = dict(((h, t), m) for h, t, m in result.failures())[(head, LOGS_TASK)]
    assert "NET/Socket over %s" % sim_cluster.link_port in message, message
    assert "but the profile's transport is roce: NCCL found no usable RoCE device" in message, message
    assert ("Likely cause: the Ray container %s has no /dev/infiniband device, no IPC_LOCK capability" % HEAD) in message
    assert "The engine was left running" in message and healthy(head), message
    # Its fix names the collection's own teardown.yml by its absolute path and the run's inventory.
    argv = printed_playbook_command(message)
    assert os.path.samefile(argv[1], os.path.join(TOP, "playbooks", "teardown.yml")), argv
    assert argv[2] == "-i" and os.path.samefile(argv[3], os.path.join(TOP, sim_cluster.inventory)), argv


@pytest.mark.rule("H4", "M2", "O1")
def test_the_containers_fixed_under_a_serving_engine_stop_it_first_and_leak_nothing(sim_cluster, run_playbook):
    # The deploy again, without the fault (every step: -e gb10_converge=full, as a user repairs a
    # hand-edited file): the same launch for the engine (its launch id does not cover the
    # containers' devices), but Ray's containers must get the RDMA settings back and be recreated,
    # while the engine of the test above serves in them. Docker's stop would kill its ranks hard (a
    # Spark keeps that memory until a reboot, H4; the simulated driver logs a LEAK), so the launch
    # takes the clean path: the engine stops first, then Ray and the containers.
    # Preflight meets the pool as a serving GB10 keeps it: the live engine holds its utilization's
    # share of every node (the fixture kit's ledger), ~17 GiB available. That is room the launch
    # step gives back, not memory the change lacks (M2).
    head = sim_cluster.head
    assert healthy(head)
    leaks_before = leaks(sim_cluster.hosts)
    boots = {h: on_host(h, "cat", "/run/gb10-boot-id") for h in sim_cluster.hosts}
    ray_before = ray_container_ids(sim_cluster)

    result = run_playbook(PLAYBOOK, sim_cluster.inventory, timeout=2400, extravars={"gb10_converge": "full"})

    assert_succeeded(result, sim_cluster.hosts)
    for host in sim_cluster.hosts:
        seen = [d["res"] for d in result.host_results(host=host) if d.get("task_action") == "gb10.serving.unified_memory"][0]
        assert seen["gpu_workload"] and seen["available_gib"] < 30 and seen["gpu_held_gib"] > 80, (host, seen)
        assert not seen["leaked"], (host, seen)
    assert "would be recreated or restarted" in run_text(result), result
    order = [e["event_data"]["task"] for e in result.events if e.get("event") == "runner_on_ok"
             and e["event_data"].get("task") in (ENGINE_STOP_TASK, CONTAINER_STOP_TASK)]
    assert order and order[0] == ENGINE_STOP_TASK and CONTAINER_STOP_TASK in order, order
    assert leaks(sim_cluster.hosts) == leaks_before
    assert {h: on_host(h, "cat", "/run/gb10-boot-id") for h in sim_cluster.hosts} == boots
    assert all(ray_container_ids(sim_cluster)[h] != ray_before[h] for h in sim_cluster.hosts)
    # And NCCL in the new containers reaches the RoCE devices again (N1, N5).
    note = result.results_by_host(task="NCCL took the cluster's transport in the engine (N5)")[head]["msg"]
    assert note.count("NET/IB over roceP2p1s0f1, rocep1s0f1") == 2 and "NET/Socket" not in note, note


@pytest.mark.rule("N5", "H4")
def test_the_link_is_never_applied_under_a_serving_engine_and_the_printed_teardown_lets_it(
        serving, sim_cluster, run_playbook, tmp_path):
    # The worker's netplan file for the link is gone while the engine serves over the link (a hand
    # clean-up of /etc/netplan, a restore without it): the link must be written and applied there
    # again. `netplan apply` flushes the link's addresses and restarts the renderer (the fixture
    # kit's stand-in does as netplan does), under the engine's ranks. The role refuses before it
    # writes anything, the engine still serving; the teardown its message prints, pasted as
    # printed, stops serving in the order that frees the memory, and the same run then applies it.
    # Last of the module's cases that need an engine: the ones after it run the link's faults.
    head, worker = sim_cluster.hosts
    assert healthy(head)
    leaks_before = leaks(sim_cluster.hosts)
    on_host(worker, "rm", "-f", NETPLAN_FILE)
    playbook = link_playbook(tmp_path)
    apply_task = "Apply the netplan configuration (cluster_link_apply_command)"

    refused = run_playbook(playbook, sim_cluster.inventory, timeout=900)

    assert refused.status == "failed", refused
    messages = failure_messages(refused, "Refuse to apply the link under a serving engine (N5, H4)")
    assert set(messages) == {worker}, refused.failures()
    message = messages[worker]
    assert message.startswith("host %s: the cluster link must be applied here (its netplan file %s is missing or "
                              "differs)" % (worker, NETPLAN_FILE)), message
    assert "the engine serves over it in gb10-ray-worker" in message and "Nothing was changed." in message, message
    assert not refused.results_by_host(task=apply_task)
    assert healthy(head)
    missing = subprocess.run(["docker", "exec", worker, "test", "-e", NETPLAN_FILE], check=False, timeout=60)
    assert missing.returncode == 1
    argv = printed_playbook_command(message)
    assert os.path.samefile(argv[1], os.path.join(TOP, "playbooks", "teardown.yml")), argv
    assert argv[2] == "-i" and os.path.samefile(argv[3], os.path.join(TOP, sim_cluster.inventory)), argv
    assert_succeeded(run_playbook(argv[1], argv[3], timeout=900), sim_cluster.hosts)

    applied = run_playbook(playbook, sim_cluster.inventory, timeout=900)

    assert_succeeded(applied, sim_cluster.hosts)
    assert set(applied.results_by_host(task=apply_task)) == {worker}, applied
    assert leaks(sim_cluster.hosts) == leaks_before
    address = "%s/24" % sim_cluster.cluster_ips[worker]
    assert address in on_host(worker, "ip", "-o", "-4", "addr", "show", "dev", sim_cluster.link_port)
    assert on_host(worker, "test", "-f", NETPLAN_FILE) == ""


# ---- the cluster link and the serving image ----------------------------------------
# Last in this module: no test after them needs the engine, so faults on the link cannot hurt one
# that does. Each runs the role alone, as deploy.yml's play runs it (any_errors_fatal).

def link_playbook(tmp_path):
    """Role cluster_link as deploy.yml's play runs it."""
    return role_playbook(tmp_path, "cluster_link")


def outer_veth(host, port):
    """The name, on this machine, of the veth whose other end is the simulated Spark's port."""
    index = on_host(host, "cat", "/sys/class/net/%s/iflink" % port).strip()
    for line in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout.splitlines():
        number, name = line.split(":")[:2]
        if number.strip() == index:
            return name.strip().split("@")[0]
    raise AssertionError("no interface %s on this machine for %s's %s" % (index, host, port))


ROCE_TASK = "Detect RoCE devices, GID index and the data path from sysfs (N1, N5, N6)"
PORTS_CHECK = "The cluster link's RoCE ports, every twin ACTIVE (N5)"  # nccl_env's drift entry
RAY_CHECK = "Ray container present, running and configured as deployed (R2)"  # serving_containers's


# `full` (the test budget): a twin that keeps its address without an ACTIVE RoCE port is refused by
# roce_facts (test_roce), and drift naming a twin without its address is test_3's link case.
@pytest.mark.rule("N5")
@pytest.mark.full
def test_a_cable_half_down_is_refused_as_half_the_link(sim_cluster, run_playbook):
    # The second half of the cable (the twins' link network) loses its carrier at both
    # ends. Each port keeps its address, the kernel reports its RoCE port DOWN (the fixture kit's
    # gb10-sim-rdma, run again as the kernel updates its port state), and NCCL would run on the
    # first twin alone at half the link. The NCCL env step of host prep refuses it on both hosts,
    # naming the twin, its address and the fix; with the carrier back the same run passes.
    port = sim_cluster.twin_port
    veths = [outer_veth(host, port) for host in sim_cluster.hosts]

    def cable_half(state):
        for veth in veths:
            subprocess.run(["ip", "link", "set", "dev", veth, state], check=True, timeout=30)
        for host in sim_cluster.hosts:
            on_host(host, "sh", "-c", "/opt/gb10-sim/bin/gb10-sim-rdma $(cat /run/gb10-sim-rdma-ports)")

    cable_half("down")
    try:
        result = run_playbook("playbooks/steps/04_host_prep.yml", sim_cluster.inventory, timeout=900,
                              extravars={"gb10_profile": PROFILE})
        # drift.yml, as the CI job runs it, names the same port on each host under N5 and still
        # runs the host's other checks (the Ray containers' among them), which find nothing else.
        drifted = drift(run_playbook, sim_cluster)
    finally:
        cable_half("up")

    assert result.status == "failed", result
    messages = failure_messages(result, ROCE_TASK)
    assert set(messages) == set(sim_cluster.hosts), result.failures()
    for host in sim_cluster.hosts:
        assert ("%s (RoCE port roceP2p1s0f1/1) holds %s/24 but its port is 1: DOWN, not ACTIVE"
                % (port, sim_cluster.twin_ips[host])) in messages[host], messages[host]
        assert "half the link (rule N5)" in messages[host], messages[host]
    assert findings(drifted) == {(host, "N5") for host in sim_cluster.hosts}, drifted.failures()
    ports = finding_messages(drifted, PORTS_CHECK)
    assert all("its port is 1: DOWN, not ACTIVE" in ports[host] for host in sim_cluster.hosts), ports
    assert set(drifted.results_by_host(task=RAY_CHECK)) == set(sim_cluster.hosts), drifted
    assert_succeeded(run_playbook("playbooks/steps/04_host_prep.yml", sim_cluster.inventory, timeout=900,
                                  extravars={"gb10_profile": PROFILE}), sim_cluster.hosts)


@pytest.mark.rule("N5")
@pytest.mark.full
def test_a_peer_that_does_not_answer_on_the_link_is_named(sim_cluster, run_playbook, tmp_path):
    # The worker drops what arrives on its link port but TCP (a peer whose cable or address is
    # wrong, as ping sees it): both ends fail, each naming itself, the interface and the peer.
    head, worker = sim_cluster.hosts
    port = sim_cluster.link_port
    dropped = ["INPUT", "-i", port, "-p", "icmp", "-j", "DROP"]
    on_host(worker, "iptables", "-I", *dropped)
    try:
        result = run_playbook(link_playbook(tmp_path), sim_cluster.inventory, timeout=600)
    finally:
        subprocess.run(["docker", "exec", worker, "iptables", "-D"] + dropped, check=False, timeout=30)

    assert result.status == "failed", result
    messages = failure_messages(result, "Every peer answers on its cluster address over the link")
    assert set(messages) == set(sim_cluster.hosts), result.failures()
    for host, peer in ((head, worker), (worker, head)):
        assert messages[host].startswith("host %s: peer %s (%s) does not answer over %s"
                                         % (host, peer, sim_cluster.cluster_ips[peer], port)), messages[host]
        assert "Fix: check the cable between %s and %s" % (host, peer) in messages[host]
    # The same run with the peer back passes.
    assert_succeeded(run_playbook(link_playbook(tmp_path), sim_cluster.inventory, timeout=600),
                     sim_cluster.hosts)


@pytest.mark.rule("N5")
@pytest.mark.full
def test_an_mtu_mismatch_on_the_link_is_named(sim_cluster, run_playbook, tmp_path):
    # A hop at MTU 1500 between the two ports at 9000 (the worker's end of the simulated cable):
    # small pings pass, the full-size don't-fragment ping fails both ways, naming the MTU to set.
    head, worker = sim_cluster.hosts
    veth = outer_veth(worker, sim_cluster.link_port)
    subprocess.run(["ip", "link", "set", "dev", veth, "mtu", "1500"], check=True, timeout=30)
    try:
        result = run_playbook(link_playbook(tmp_path), sim_cluster.inventory, timeout=600)
    finally:
        subprocess.run(["ip", "link", "set", "dev", veth, "mtu", "9000"], check=False, timeout=30)

    assert result.status == "failed", result
    assert failure_messages(result, "Every peer answers on its cluster address over the link") == {}
    messages = failure_messages(result, "Full-size frames pass unfragmented to every peer")
    assert set(messages) == set(sim_cluster.hosts), result.failures()
    for host, peer in ((head, worker), (worker, head)):
        assert ("host %s: a 9000-byte don't-fragment ping from %s to peer %s (%s) fails"
                % (host, sim_cluster.link_port, peer, sim_cluster.cluster_ips[peer])) in messages[host], messages[host]
        assert "Fix: every hop must run MTU 9000" in messages[host]


REGISTRY_PORT = 5000
# Debian's registry (package docker-registry) on the client machine, with TLS and one htpasswd
# user: what an operator's private registry is to the cluster. $1 address, $2 password.
REGISTRY_SETUP = r"""
set -e
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq && apt-get install -y -qq --no-install-recommends docker-registry apache2-utils openssl >/dev/null
mkdir -p /srv/registry && cd /srv/registry
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$1" -addext "subjectAltName=IP:$1" \
  -keyout key.pem -out cert.pem 2>/dev/null
htpasswd -Bbn gb10 "$2" > htpasswd
cat > config.yml <<CONFIG
version: 0.1
storage: {filesystem: {rootdirectory: /srv/registry/data}}
http: {addr: ":%d", tls: {certificate: /srv/registry/cert.pem, key: /srv/registry/key.pem}}
auth: {htpasswd: {realm: gb10-e2e, path: /srv/registry/htpasswd}}
CONFIG
pkill -x docker-registry || true
nohup docker-registry serve config.yml > registry.log 2>&1 &
""" % REGISTRY_PORT


@pytest.mark.full
def test_a_registry_that_refuses_the_credentials_is_named_and_the_right_ones_pull(sim_cluster, client,
                                                                                  run_playbook, tmp_path):
    # No node has the image: the head pulls it from the registry with the vaulted credentials (a
    # small image: the path is the same for the serving image, the push of 4.7 GB is not worth
    # the minutes), the worker gets it over the link. Wrong credentials: named, never printed.
    head, worker = sim_cluster.hosts
    registry = "%s:%d" % (CLIENT_IP, REGISTRY_PORT)
    image = "%s/gb10-e2e/tiny:1" % registry
    password = "e2e-" + secrets.token_hex(12)
    wrong = "e2e-" + secrets.token_hex(12)
    rc, out = client.exec_run(["sh", "-c", REGISTRY_SETUP, "sh", CLIENT_IP, password])
    assert rc == 0, out.decode()[-2000:]
    ca = client.exec_run(["cat", "/srv/registry/cert.pem"]).output.decode()
    certs = "/etc/docker/certs.d/%s" % registry
    try:
        # The head trusts the registry's certificate (Docker reads certs.d at each pull: no restart).
        subprocess.run(["docker", "exec", "-i", head, "sh", "-c", "mkdir -p %s && cat > %s/ca.crt" % (certs, certs)],
                       input=ca, text=True, check=True, timeout=60)
        subprocess.run(["docker", "exec", "-i", head, "sh", "-c",
                        "tar -cf - -C /etc hostname | docker import - %s >/dev/null && "
                        "docker login -u gb10 --password-stdin %s >/dev/null && docker push %s >/dev/null && "
                        "docker logout %s >/dev/null && docker rmi %s >/dev/null" % (image, registry, image, registry, image)],
                       input=password, text=True, check=True, timeout=300)
        # The tiny image runs nothing (no Python): not a serving image, so the role is not to ask it what it
        # serves (serving_image_check false, as the role's own scenario copies tiny ones).
        playbook = role_playbook(tmp_path, "serving_image", serving_image_name=image, serving_image_check=False,
                                 serving_image_registry_username="gb10",
                                 serving_image_registry_password="{{ gb10_e2e_registry_password }}")

        refused = run_playbook(playbook, sim_cluster.inventory, timeout=600,
                               extravars={"gb10_e2e_registry_password": wrong})

        assert refused.status == "failed", refused
        message = failure_messages(refused, "Say what failed (the registry's answer may carry the credentials; it is not shown)")
        assert set(message) == {head}, refused.failures()
        assert message[head].startswith("host %s: pulling %s failed (login refused by %s)" % (head, image, registry))
        assert "serving_image_registry_password (ansible-vault)" in message[head], message[head]
        assert wrong not in run_text(refused) and password not in run_text(refused)

        pulled = run_playbook(playbook, sim_cluster.inventory, timeout=600,
                              extravars={"gb10_e2e_registry_password": password})

        assert_succeeded(pulled, sim_cluster.hosts)
        assert password not in run_text(pulled)
        got = {h: r["ansible_facts"]["serving_image_result"] for h, r in
               pulled.results_by_host(task="What this node got, for the summary and the callers").items()}
        assert got[head]["action"] == "pulled" and got[worker]["action"] == "copied", got
        assert got[head]["id"] == got[worker]["id"] == on_host(
            worker, "docker", "image", "inspect", "--format", "{{.Id}}", image).strip(), got
        # Logged out again: no credential left in the head's Docker config.
        config = subprocess.run(["docker", "exec", head, "cat", "/root/.docker/config.json"],
                                capture_output=True, text=True, timeout=30, check=False).stdout
        assert registry not in config, config
    finally:
        for host in sim_cluster.hosts:
            subprocess.run(["docker", "exec", host, "sh", "-c", "docker rmi %s; rm -rf %s" % (image, certs)],
                           capture_output=True, timeout=60, check=False)
        client.exec_run(["pkill", "-x", "docker-registry"])
