# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plan of role serving_image: which node is the source of the profile's image, whether it must be
pulled there first, and which nodes need a copy over the cluster link.

Pure functions over what each node reported (image ID, cluster address, whether its cluster-key
cluster-key gate is installed, its Docker version); no I/O. Every refusal names the host,
the variable and the fix, and comes before anything changes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re

GATE = '/usr/local/sbin/gb10-cluster-ssh-gate'
CLIENT = '/usr/local/sbin/gb10-cluster-ssh'
# `docker load` decompresses zstd from Docker 23.0 on (moby PR 41759); gzip it always has.
ZSTD_MIN_DOCKER = 23


class ServingImageError(Exception):
    """Bad input the role refuses before anything changes."""


def is_registry_reference(image):
    """True when the name's first component is a registry host (has '.' or ':' or is localhost),
    as Docker's reference grammar reads it: nvcr.io/nvidia/vllm:25.09-py3, localhost:5000/x.
    A bare name (vllm-node:latest) or a Docker Hub path (eugr/x) is not: such images are built
    locally in the field, and a pull would fetch something else from Docker Hub or fail."""
    image = (image or '').strip()
    if '/' not in image:
        return False
    first = image.split('/', 1)[0]
    return '.' in first or ':' in first or first == 'localhost'


def docker_major(version):
    """Major number of a Docker server version ('28.3.1' -> 28, '20.10.24+dfsg1' -> 20); 0 unknown."""
    match = re.match(r'\s*(\d+)', str(version or ''))
    return int(match.group(1)) if match else 0


def choose_compression(wanted, source_has_zstd, target_versions):
    """zstd, gzip or none for the stream into the targets' `docker load` (the gate runs it as is,
    so the compression must be one the target's Docker reads itself). none is only ever chosen by
    the user: the raw tar, for a link faster than the source's compressor."""
    if wanted in ('zstd', 'gzip', 'none'):
        return wanted
    if source_has_zstd and target_versions and all(docker_major(v) >= ZSTD_MIN_DOCKER for v in target_versions):
        return 'zstd'
    return 'gzip'


def chain_ids(diff_ids):
    """The layer chain IDs of an image whose RootFS.Layers are diff_ids (Docker's layer store keys:
    the first is the first diff ID, each next one sha256 of "<chain so far> <diff ID>")."""
    chains, chain = [], None
    for diff_id in diff_ids or []:
        chain = diff_id if chain is None else 'sha256:' + hashlib.sha256(
            ('%s %s' % (chain, diff_id)).encode('ascii')).hexdigest()
        chains.append(chain)
    return chains


def layers_held(diff_ids, images):
    """How many of the image's first layers (diff_ids, in order) a node already holds, given the
    RootFS.Layers of every image on it: `docker load` then opens only the files of the layers after
    those. A layer is held when its chain ID is, i.e. with every layer under it."""
    held = set()
    for layers in images or []:
        held.update(chain_ids(layers))
    count = 0
    for chain in chain_ids(diff_ids):
        if chain not in held:
            break
        count += 1
    return count


def _node(entry):
    return {
        'host': str(entry.get('host') or ''),
        'id': str(entry.get('id') or ''),
        'cluster_ip': str(entry.get('cluster_ip') or '').strip(),
        'gate_load': bool(entry.get('gate_load')),
        'client': bool(entry.get('client')),
        'zstd': bool(entry.get('zstd')),
        'docker_version': str(entry.get('docker_version') or ''),
        'link_ips': dict((str(k), str(v)) for k, v in (entry.get('link_ips') or {}).items()),
        'layers': [str(layer) for layer in entry.get('layers') or []],
        'images_layers': [[str(layer) for layer in layers or []] for layers in entry.get('images_layers') or []],
    }


def plan(image, nodes, source='', pull='auto', build_recipe='', group='gb10_cluster', compression='auto'):
    """Decide what happens on each node.

    image: the profile's image reference. nodes: one dict per host in the group's order, with
    host, id (image ID or ''), cluster_ip, gate_load (the host has the cluster-key gate, which the role gives its docker load),
    client (the host has the cluster ssh client), zstd (the host has zstd), docker_version (its
    Docker server version), link_ips ({peer: the peer's address over this host's own link to it},
    as role cluster_link verified it; in a 3-node mesh each pair has a subnet of its own, and the
    peers' cluster keys are accepted from those addresses only), layers (the image's RootFS.Layers
    where the node has it) and images_layers (the RootFS.Layers of every image the node has). source: '' or
    the head (the first host); any other host is refused (A5: the head is the only source). pull: 'auto' (pull a registry reference only), 'always' (pull any
    name), 'never'. build_recipe: the recipe the role builds the image from on the source when
    no node has it (a directory holding a Dockerfile, or a Dockerfile); it comes before a pull.

    compression: 'auto' (zstd when the source has it and every target's Docker reads it, else
    gzip), 'zstd', 'gzip' or 'none'.

    Returns a dict: source, source_id ('' when it is pulled or built first), pull (bool), build
    (bool: built on the source first), targets (hosts
    that get a copy), targets_ip {host: the address the source reaches it at over the link: its
    link_ips entry, else its cluster_ip}, targets_layers {host: how many of the source image's
    first layers it holds already, which the copy leaves out; 0 when the image is pulled or built
    first, since its layers are not known yet}, compression, actions {host: had|pull|build|copy}, problems (refusals; empty when the
    plan may run), changed (bool).
    """
    nodes = [_node(n) for n in nodes or []]
    hosts = [n['host'] for n in nodes]
    by_host = dict((n['host'], n) for n in nodes)
    result = {'image': image, 'source': '', 'source_id': '', 'pull': False, 'build': False, 'targets': [],
              'targets_ip': {}, 'targets_layers': {}, 'compression': '', 'actions': {}, 'problems': [], 'changed': False}
    problems = result['problems']
    if not (image or '').strip():
        problems.append('serving_image_name is empty: the role copies the profile\'s image. Fix: set '
                        'serving_image_name to the profile\'s `image` (deploy.yml passes it).')
        return result
    if not nodes:
        problems.append('group %s has no hosts in this run. Fix: run the role on every host of %s.' % (group, group))
        return result
    if pull not in ('auto', 'always', 'never'):
        problems.append('serving_image_pull=%s must be auto, always or never.' % pull)
        return result
    if compression not in ('auto', 'zstd', 'gzip', 'none'):
        problems.append('serving_image_compression=%s must be auto, zstd, gzip or none.' % compression)
        return result
    # A5: the head is the image's only trust anchor. A peer is never the source the head takes its
    # image from: a compromised worker only has to `docker tag` an image of its own with the next
    # tag (the head lacks it at every upgrade), and the watchdog runs that image as root with the
    # Docker socket on the head. Every other node is then checked against the head's ID.
    head = hosts[0]
    if source and source != head:
        problems.append('serving_image_source=%s: the image is made on the head (%s) and copied from there only '
                        '(A5: a peer never chooses the image the head runs). Fix: leave serving_image_source empty.'
                        % (source, head))
        return result
    src = head
    if by_host[head]['id']:
        pass
    elif build_recipe:
        # The user named how it is made: built once, on the head only, then copied.
        result['build'] = True
    else:
        may_pull = pull == 'always' or (pull == 'auto' and is_registry_reference(image))
        if not may_pull:
            if pull == 'never':
                how = 'serving_image_pull=never'
            else:
                how = ('it is not a registry reference to pull (serving_image_pull=auto pulls only names '
                       'with a registry host, e.g. nvcr.io/nvidia/vllm:25.09-py3)')
            holders = [h for h in hosts if by_host[h]['id']]
            held = (' %s hold%s an image of that name, which is never copied onto the head (A5: a peer does '
                    'not choose the image the head runs).' % (', '.join(holders), 's' if len(holders) == 1 else '')
                    if holders else '')
            problems.append(
                'image %s is not on the head %s and there is no way to get it there: %s.%s Fix: load or build '
                'it on %s (docker load -i <file>, or the community\'s build-and-copy.sh); the role then copies '
                'it to the other nodes. Or set serving_image_build_recipe to a recipe the role builds there, or '
                'serving_image_pull=always to pull it from Docker Hub.'
                % (image, head, how, held, head))
            return result
        result['pull'] = True

    result['source'] = src
    result['source_id'] = by_host[src]['id']
    for host in hosts:
        if host == src:
            result['actions'][host] = 'pull' if result['pull'] else ('build' if result['build'] else 'had')
        elif by_host[host]['id'] and by_host[host]['id'] == result['source_id']:
            result['actions'][host] = 'had'
        else:
            result['actions'][host] = 'copy'
            result['targets'].append(host)

    if result['targets']:
        need_ip = [src] + result['targets']
        for host in need_ip:
            if not by_host[host]['cluster_ip']:
                problems.append('host %s: gb10_cluster_ip is not set; the image is copied over the cluster '
                                'link only (serving_image_copy needs %s). Fix: set gb10_cluster_ip in the '
                                'inventory (role gb10.serving.cluster_link puts it on the link).'
                                % (host, 'its address' if host != src else 'the source\'s address'))
        if not by_host[src]['client']:
            problems.append('host %s: %s is missing; the copy runs over the cluster key that role '
                            'gb10.serving.cluster_link sets up. Fix: run that role first '
                            '(cluster_link_ssh_trust: true).' % (src, CLIENT))
        for host in result['targets']:
            if not by_host[host]['gate_load']:
                problems.append('host %s: its cluster-key gate (%s) is missing, so %s cannot stream %s into its '
                                '`docker load`. Fix: run role gb10.serving.cluster_link there first '
                                '(cluster_link_ssh_trust: true; playbooks/steps/03_cluster_link.yml).' % (host, GATE, src, image))
        result['targets_ip'] = dict((h, by_host[src]['link_ips'].get(h) or by_host[h]['cluster_ip'])
                                    for h in result['targets'])
        result['targets_layers'] = dict((h, layers_held(by_host[src]['layers'], by_host[h]['images_layers'])
                                         if result['source_id'] else 0) for h in result['targets'])
        result['compression'] = choose_compression(
            compression, by_host[src]['zstd'], [by_host[h]['docker_version'] for h in result['targets']])
    result['changed'] = not problems and (result['pull'] or result['build'] or bool(result['targets']))
    return result


# ---- What the image will run (role serving_image's probe, files/image_probe.py; rules R1, N7) ----

IMAGE_PROBE_PREFIX = 'GB10_IMAGE_PROBE '
# Ray's token authentication (RAY_AUTH_MODE=token, rule A3) came with Ray 2.52.
RAY_AUTH_MIN = (2, 52, 0)
# The oldest NCCL each transport's env file works with (N7). roce_ring sets per-connection GIDs
# (NCCL_IB_ADDR_FAMILY/ADDR_RANGE, NCCL_IB_SUBNET_AWARE_ROUTING, NCCL_IB_MERGE_NICS=0: rule N6), and
# NCCL_IB_SUBNET_AWARE_ROUTING first exists in 2.30.7 (NVIDIA/nccl src/transport/net_ib/connect.cc,
# NCCL_PARAM(IbSubnetAwareRouting, ...) at v2.30.7-1, absent at v2.30.4-1): an older NCCL ignores it
# in silence and the ring fails with ibv_modify_qp errors. roce and socket run on every NCCL the
# profiles' images carry.
NCCL_MIN = {'roce_ring': (2, 30, 7)}
# CUDA graphs whose NCCL collectives cross the nodes deadlock in replay on NCCL 2.28.9 within the
# first requests ("RPC call to sample_tokens timed out"), on two DGX Sparks back to back over RoCE;
# NCCL 2.30.4 fixes it with nothing else changed, and --enforce-eager serves
# (vllm-project/vllm issue 52504; the same wedge and fix on eight Sparks in vllm-project/vllm issue 40969).
NCCL_MIN_CROSS_NODE_GRAPHS = (2, 30, 4)


def nccl_version(code):
    """(major, minor, patch) of NCCL_VERSION_CODE as ncclGetVersion() returns it: X*10000+Y*100+Z
    from NCCL 2.9 on, X*1000+Y*100+Z before (nccl.h's NCCL_VERSION macro)."""
    code = int(code)
    if code >= 10000:
        return code // 10000, code % 10000 // 100, code % 100
    return code // 1000, code % 1000 // 100, code % 100


def version_text(version):
    return '.'.join(str(part) for part in version)


def _release(text):
    """(2, 60, 0) of '2.60.0', '2.52.0rc1', '2.9'; None when it does not start with a number."""
    found = re.match(r'^(\d+)(?:\.(\d+))?(?:\.(\d+))?', (text or '').strip())
    if not found:
        return None
    return tuple(int(part or 0) for part in found.groups())


def parse_image_probe(output):
    """The probe's result from the container's output (the last line with the prefix), or None:
    the engine's imports may print their own lines before it."""
    for line in reversed((output or '').splitlines()):
        if line.startswith(IMAGE_PROBE_PREFIX):
            try:
                return json.loads(line[len(IMAGE_PROBE_PREFIX):])
            except ValueError:
                return None
    return None


def _nccl_line(entry):
    version = entry.get('version')
    shown = version_text(nccl_version(version)) if version else 'of unknown version'
    return 'NCCL %s (%s, %s)' % (shown, entry.get('path') or entry.get('name'), entry.get('kind', 'system'))


def image_report(probe):
    """One line for the summary: Ray, the NCCL the engine loads, the other NCCLs in the image."""
    if not probe:
        return 'not asked'
    ray = probe.get('ray') or {}
    nccl = probe.get('nccl') or {}
    parts = ['Ray %s' % ray['version'] if ray.get('version') else 'no Ray']
    if nccl.get('error') or not nccl.get('version'):
        parts.append('no NCCL loads (%s)' % (nccl.get('error') or 'ncclGetVersion failed'))
    else:
        parts.append('the engine loads ' + _nccl_line(nccl))
    others = probe.get('nccl_other') or []
    for other in others:
        parts.append('the image also holds ' + _nccl_line(other))
    if any(other.get('kind') != nccl.get('kind') for other in others) and nccl.get('kind') == 'pip':
        # Reported, not refused (N7): both are NCCL releases, and the field's hang is one report.
        parts.append("pip's NCCL beside a system one: an M2.7 TP=2 hang in the field went away only with the "
                     'system library alone (vllm-project/vllm issues 41725, 42354)')
    return '; '.join(parts)


def image_refusals(probe, image, host, status=None, output='', need_ray=True, ray_auth=True,
                   transport='roce', cross_node_graphs=False, packages=None):
    """What makes the image unfit to serve, one sentence each with the image, the finding and the
    fix; empty when it is fit. probe: parse_image_probe()'s result (None when the probe did not
    print one); status and output: the container's exit status and output, for the message;
    cross_node_graphs: the launch captures CUDA graphs across more than one node; packages: the
    profile's image_packages (distribution name: {source, commit}), each of which the image must
    hold as pip installed it from that commit."""
    head = 'host %s: image %s' % (host, image)
    copied = 'Nothing was copied.'
    if not probe:
        return ['%s could not be asked what it runs (python3 -c on the probe, exit status %s: %s). A serving '
                'image runs Python (vLLM, and Ray for the Ray executor). %s Fix: name a serving image in '
                "the profile's image, or set serving_image_check: false for an image that serves nothing."
                % (head, status if status is not None else 'none', (output or '').strip()[-400:] or 'no output', copied)]
    problems = []
    ray = probe.get('ray') or {}
    if need_ray and not ray.get('version'):
        problems.append(
            '%s cannot import ray (%s). The Ray head and workers run `ray start` in it (R1), and recent NGC vLLM '
            'images no longer ship Ray. %s Fix: build an image from it with Ray added (a recipe for '
            'serving_image_build_recipe whose Dockerfile runs pip install "ray[default]" at the version its vLLM '
            "supports), name that image in the profile's image, or run the profile with "
            'distributed-executor-backend: mp (no Ray).' % (head, ray.get('error') or 'no version', copied))
    elif need_ray and ray_auth and (_release(ray['version']) or (0,)) < RAY_AUTH_MIN:
        problems.append(
            '%s has Ray %s, which ignores RAY_AUTH_MODE=token (token authentication came with Ray 2.52): its '
            'cluster would take jobs from any process that reaches it. %s Fix: an image with Ray 2.52 or later '
            '(serving_image_build_recipe: pip install "ray[default]>=2.52"), or gb10_ray_auth: false to run this '
            'one without a token, knowingly.' % (head, ray['version'], copied))
    nccl = probe.get('nccl') or {}
    if nccl.get('error') or not nccl.get('version'):
        problems.append(
            '%s loads no NCCL: %s (the name %s, as %s answers) %s. The engine splits the model across the nodes '
            'over NCCL (N7). %s Fix: an image whose torch is a CUDA build (it brings pip\'s nvidia-nccl-cuXX) or '
            'that has the system libnccl2.'
            % (head, 'loading' if nccl.get('error') else 'ncclGetVersion of', nccl.get('name'), nccl.get('asked'),
               'fails: ' + nccl['error'] if nccl.get('error') else 'fails', copied))
    else:
        floor = NCCL_MIN.get(transport)
        have = nccl_version(nccl['version'])
        if floor and have < floor:
            problems.append(
                '%s loads %s at runtime, and gb10_nccl_transport=%s needs NCCL %s or later: the switchless ring\'s '
                'per-connection GIDs (NCCL_IB_ADDR_RANGE, NCCL_IB_SUBNET_AWARE_ROUTING, NCCL_IB_MERGE_NICS=0; N6, '
                'N7) need it. %s Fix: an image with NCCL %s or later (a recipe for serving_image_build_recipe that '
                'runs pip install "nvidia-nccl-cu13>=%s"), or a transport this NCCL runs.'
                % (head, _nccl_line(nccl), transport, version_text(floor), copied, version_text(floor),
                   version_text(floor)))
        if cross_node_graphs and have < NCCL_MIN_CROSS_NODE_GRAPHS:
            floor = version_text(NCCL_MIN_CROSS_NODE_GRAPHS)
            problems.append(
                '%s loads %s at runtime, and the profile captures CUDA graphs across the nodes: their NCCL '
                'collectives deadlock in replay before NCCL %s, within the first requests (vllm-project/vllm issue '
                '52504; N7). %s Fix: an image with NCCL %s or later (a recipe for serving_image_build_recipe that '
                'runs pip install "nvidia-nccl-cu13>=%s"), or engine_args enforce-eager: true in the profile '
                '(no CUDA graphs, slower decode).'
                % (head, _nccl_line(nccl), floor, copied, floor, floor))
    for conf in probe.get('nccl_conf') or []:
        problems.append(
            '%s carries NCCL configuration file %s (%s). NCCL reads it beside the environment, so it sets what the '
            "cluster's env file (N1-N4) leaves unset, on every node and unseen by drift (N7). %s Fix: build the "
            'image without it (RUN rm -f %s in a recipe for serving_image_build_recipe) and set what it needs in '
            "the nccl_env role's variables."
            % (head, conf.get('path'), '; '.join(conf.get('settings') or []) or 'empty', copied, conf.get('path')))
    found = probe.get('packages') or {}
    for name, wanted in sorted((packages or {}).items()):
        have = found.get(name) or {}
        if have.get('commit') == wanted['commit']:
            continue
        if not have.get('version'):
            held = 'has no %s (%s)' % (name, have.get('error') or 'not asked')
        elif have.get('commit'):
            held = 'has %s %s from %s at commit %s' % (name, have['version'], have.get('url'), have['commit'])
        else:
            held = 'has %s %s, not installed from a repository commit (pip recorded none)' % (name, have['version'])
        problems.append(
            "%s %s, and the profile's image_packages needs it from %s at commit %s: the engine's kernels come "
            'from it, and another build of it fails at start or serves with other kernels (V1). %s Fix: build the '
            'image with it (a recipe for serving_image_build_recipe whose Dockerfile runs pip install --no-deps '
            '--force-reinstall "git+%s@%s"), or name an image that has it in the profile\'s image.'
            % (head, held, wanted['source'], wanted['commit'], copied, wanted['source'], wanted['commit']))
    return problems
