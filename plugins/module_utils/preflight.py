# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight: everything knowable before anything changes, from the facts of every node.

Each check returns a list of problems; each problem names the host, the variable and the fix.
roles/preflight gathers the facts (unified_memory, nvidia-smi, interface facts, model path) on
every host and calls preflight_problems() once through the filter of the same name;
preflight_notes() lists what is wrong but will be fixed later in the same deploy (filter
preflight_notes).

A node dict may say in_play=False (the host is not in this run: --limit, host pattern) or
active=False (it dropped out: unreachable, failed): its facts were not read in this run, so only
check_run_hosts() speaks about it; facts other plays left in hostvars are not trusted.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gb10.serving.plugins.module_utils.fit import FitError, fit_plan
from ansible_collections.gb10.serving.plugins.module_utils.profile import COMMIT, UTILIZATION_CEILING
from ansible_collections.gb10.serving.plugins.module_utils.serving_image import is_registry_reference

KNOWN_GOOD_DRIVER_BRANCH = '580'
# Link speed below which the "cluster" interface is the management NIC, not the ConnectX-7 link:
# NCCL over 1 GbE gave ~6 tok/s at TP=3 (N5).
MIN_CLUSTER_LINK_MBPS = 10000

# V4: which vLLM --quantization loaders take which checkpoint formats.
QUANT_LOADER_FORMATS = {
    'mxfp4': ('mxfp4',),
    'gptq_marlin': ('gptq-int4',),
    'fp8': ('fp8', 'bf16', 'fp16'),
    'modelopt_fp4': ('nvfp4',),
}
NGC_IMAGE_PREFIX = 'nvcr.io/nvidia/vllm'


def _names(nodes):
    return ', '.join(n['host'] for n in nodes)


def _read(node):
    """Whether this run read the node's facts (it is in the play and has not dropped out)."""
    return node.get('in_play', True) and node.get('active', True)


def check_run_hosts(nodes, group='gb10_cluster'):
    """Every host of the group takes part in this run: the head is always the group's first host
    and every node holds one tensor-parallel rank (M1), so a run over part of the group (--limit,
    or a host unreachable at preflight) would deploy a cluster that cannot form."""
    if not nodes:
        return []
    head = "groups['%s'][0] (%s)" % (group, nodes[0]['host'])

    def names(missing):
        return ('host ' if len(missing) == 1 else 'hosts ') + ', '.join(
            n['host'] + (' (the head)' if n is nodes[0] else '') for n in missing)

    problems = []
    left_out = [n for n in nodes if not n.get('in_play', True)]
    if left_out:
        problems.append(
            '%s of %s: not in this run (left out by --limit or the play\'s host pattern); every host of '
            'the group holds a rank and the head is %s. Fix: run without --limit (or with --limit %s) so every '
            'host of %s takes part.' % (names(left_out), group, head, group, group))
    dropped = [n for n in nodes if n.get('in_play', True) and not n.get('active', True)]
    if dropped:
        problems.append(
            '%s of %s: dropped out of this run (unreachable, or failed before preflight); '
            'every host of the group holds a rank and the head is %s. Fix: restore SSH to %s (check with '
            'ansible %s -m ansible.builtin.ping), then re-run.'
            % (names(dropped), group, head, ', '.join(n['host'] for n in dropped),
               ':'.join(n['host'] for n in dropped)))
    return problems


def check_inventory(profile, nodes, group='gb10_cluster'):
    """Hosts in the group vs the profile's node count; the same Spark listed twice."""
    problems = []
    if len(nodes) != profile['nodes']:
        problems.append(
            'inventory: group %s has %d host(s) (%s) but profile %s needs %d '
            '(tensor_parallel_size %d, one GB10 per node). Fix: list exactly %d hosts in %s, '
            'or set gb10_profile to a profile for %d node(s).'
            % (group, len(nodes), _names(nodes), profile['name'], profile['nodes'], profile['tensor_parallel_size'],
               profile['nodes'], group, len(nodes)))
    for key, var in (('ansible_host', 'ansible_host'), ('cluster_ip', 'gb10_cluster_ip')):
        seen = {}
        for node in nodes:
            value = node.get(key)
            if not value:
                if key == 'cluster_ip':
                    problems.append('host %s: gb10_cluster_ip is not set. Fix: set it in the inventory to the '
                                    "host's address on the cluster link (roles/roce_facts can fill it)." % node['host'])
                continue
            if value in seen:
                problems.append('hosts %s and %s: both have %s %s; the same Spark is listed twice. Fix: remove '
                                'one from the inventory or correct its %s.' % (seen[value], node['host'], var, value, var))
            else:
                seen[value] = node['host']
    return problems


def check_engine(profile, engine, head):
    """S4 (SGLang refusals), V4 (quantization loader vs checkpoint), V3 (load format vs image)."""
    problems = []
    if engine not in ('vllm', 'sglang'):
        return ['host %s: gb10_engine is %r. Fix: set it to vllm or sglang.' % (head, engine)]
    if engine == 'sglang' and not profile['sglang']['supported']:
        problems.append('host %s: gb10_engine sglang cannot serve profile %s: %s. Fix: use %s.'
                        % (head, profile['name'], profile['sglang']['reason'], profile['sglang']['alternative']))
    model = profile['model']
    quant = profile['device_args'].get('quantization')
    if quant in QUANT_LOADER_FORMATS and model['checkpoint_format'] not in QUANT_LOADER_FORMATS[quant]:
        problems.append(
            'host %s: profile %s asks for --quantization %s but the checkpoint %s is %s; that loader takes %s (V4). '
            'Fix: set device_args.quantization to %s in profiles/%s.yml.'
            % (head, profile['name'], quant, model['repo'], model['checkpoint_format'],
               ', '.join(QUANT_LOADER_FORMATS[quant]),
               ' or '.join(q for q, f in sorted(QUANT_LOADER_FORMATS.items()) if model['checkpoint_format'] in f)
               or 'the loader of that format', profile['name']))
    mxfp4_loader = quant == 'mxfp4' or (quant is None and model['checkpoint_format'] == 'mxfp4'
                                        and profile['image'].startswith(NGC_IMAGE_PREFIX))
    if mxfp4_loader and model['family'] != 'gpt-oss':
        problems.append(
            "host %s: profile %s loads %s (family %s) with the mxfp4 loader, which takes gpt-oss checkpoints only "
            "in NGC builds (V4; IndexError in fused_moe/layer.py). Fix: use --quantization gptq_marlin for GPTQ-Int4 "
            "or fp8 for FP8 checkpoints, or an image whose loader handles this checkpoint."
            % (head, profile['name'], model['repo'], model['family']))
    if profile['image'].startswith(NGC_IMAGE_PREFIX) and profile['device_args'].get('load-format') == 'fastsafetensors':
        problems.append('host %s: profile %s uses --load-format fastsafetensors with NGC image %s, which raises '
                        'ImportError (V3). Fix: set device_args.load-format to safetensors (or drop it).'
                        % (head, profile['name'], profile['image']))
    return problems


def check_utilization(profile, engine, head, ceiling=UTILIZATION_CEILING):
    """H6: never above 0.90 of the unified pool."""
    if engine == 'sglang' and profile['sglang']['supported']:
        value, field = profile['sglang']['mem_fraction_static'], 'sglang.mem_fraction_static'
    else:
        value, field = profile['gpu_memory_utilization'], 'gpu_memory_utilization'
    if value > ceiling:
        return ['host %s: %s %.2f of profile %s is above the %.2f ceiling (H6): OOM and Xid 43 preemption on '
                'unified memory. Fix: 0.85-0.87 usual, 0.82 for 131K context on two nodes or with other services '
                '(profiles/%s.yml or its overlay).' % (head, field, value, profile['name'], ceiling, profile['name'])]
    return []


def _wrong_driver(node):
    """(version, why) when the node runs a driver branch other than 580, else None."""
    version = (node.get('driver_version') or '').strip()
    branch = version.split('.')[0]
    if not version or branch == KNOWN_GOOD_DRIVER_BRANCH:
        return None
    return version, ('590.x has a CUDA-graph deadlock on GB10' if branch == '590'
                     else 'only 580.x is known good on sm_121')


def _replaced_in_host_prep(node):
    """The deploy's host-prep play installs the known-good branch on this node after preflight
    (node key driver_host_prep: the branch roles/nvidia_driver installs there, '' when it does not
    run or installs nothing)."""
    return str(node.get('driver_host_prep') or '') == KNOWN_GOOD_DRIVER_BRANCH


def check_driver(node):
    """H1: driver 580.x; 590.x deadlocks CUDA graphs on GB10. A wrong branch that the same deploy's
    host prep replaces is a note (preflight_notes), not a refusal; a missing driver stays a refusal:
    without a readable driver nothing else about the node can be trusted."""
    version = (node.get('driver_version') or '').strip()
    if not version:
        return ['host %s: no driver version from gb10_nvidia_smi (%s): %s. Fix: install the 580 driver '
                '(roles/nvidia_driver) or point gb10_nvidia_smi at nvidia-smi.'
                % (node['host'], node.get('nvidia_smi', 'nvidia-smi'), node.get('driver_error') or 'empty output')]
    wrong = _wrong_driver(node)
    if wrong and not _replaced_in_host_prep(node):
        return ['host %s: NVIDIA driver %s: %s (H1). Fix: run roles/nvidia_driver to pin 580.x (580.142 known '
                'good), reboot, re-run.' % (node['host'], wrong[0], wrong[1])]
    return []


def _never_the_cluster_link(node):
    """N3: an interface that can never be the cluster link, whatever host prep would do to it:
    loopback, or the management NIC (the one that carries ansible_host). A refusal naming it, or
    None. Checked before the link is left to host prep, which would otherwise configure it."""
    host, name, iface = node['host'], node.get('cluster_iface'), node.get('iface') or {}
    if iface.get('type') == 'loopback' or name == 'lo':
        return ('host %s: gb10_cluster_iface %s is loopback; Gloo/NCCL on loopback gives "Connection refused" '
                'or hangs (N3). Fix: set gb10_cluster_iface to the ConnectX-7 port of the cluster link (the '
                'interface ibdev2netdev shows "(Up)", e.g. enp1s0f1np1).' % (host, name))
    if node.get('ansible_host') and node['ansible_host'] in (iface.get('ipv4') or []):
        return ('host %s: gb10_cluster_iface %s carries the management address %s (ansible_host): the '
                'management NIC, where NCCL gave ~6 tok/s at TP=3 (N3, N5). Fix: set gb10_cluster_iface to '
                'the ConnectX-7 port of the cluster link (the interface ibdev2netdev shows "(Up)", e.g. '
                'enp1s0f1np1).' % (host, name, node['ansible_host']))
    return None


def _link_awaits_host_prep(node):
    """The deploy's host prep configures the cluster link (node key link_host_prep) and the
    interface is not there yet or lacks gb10_cluster_ip: a fresh Spark's port, a bond not made.
    Never for an interface that cannot be the link (_never_the_cluster_link)."""
    iface = node.get('iface') or {}
    return bool(node.get('link_host_prep')) and not _never_the_cluster_link(node) and not (
        iface.get('present') and node.get('cluster_ip') in (iface.get('ipv4') or []))


def preflight_notes(nodes):
    """What is wrong now but fixed later in the same deploy, shown instead of refused: a driver that
    host prep replaces (H1), a cluster link that host prep configures (N3), a model that
    model_sync downloads (M3)."""
    notes = []
    for node in nodes:
        wrong = _wrong_driver(node) if _read(node) else None
        if wrong and _replaced_in_host_prep(node):
            notes.append('host %s: driver %s will be replaced by %s.x in host prep (H1): %s; preflight_host_prep_follows '
                         'is true and nvidia_driver_install is true for this host.'
                         % (node['host'], wrong[0], KNOWN_GOOD_DRIVER_BRANCH, wrong[1]))
        if node.get('cluster_iface') and _read(node) and _slow(node) and _coordinates_only(node):
            notes.append('host %s: gb10_cluster_iface %s runs at %d Mb/s: on the 3-node ring it carries only '
                         'coordination (Gloo, Ray, MASTER_ADDR); NCCL\'s data takes the ConnectX-7 mesh (roce_ring, '
                         'N6), which the link check and NCCL\'s own log check after host prep (N5).'
                         % (node['host'], node['cluster_iface'], node['iface']['speed']))
        if node.get('cluster_iface') and _link_awaits_host_prep(node):
            notes.append('host %s: gb10_cluster_ip %s is not on gb10_cluster_iface %s yet; role cluster_link '
                         'configures the link in host prep and verifies it from every node (N3, N5).'
                         % (node['host'], node.get('cluster_ip') or '(unset)', node['cluster_iface']))
    if nodes and not any(n.get('model_present') for n in nodes) and nodes[0].get('model_download'):
        notes.append('host %s: the model is on no host yet; model_sync downloads it here from the Hub '
                     '(gb10_model_download is true), at commit %s, checks every file against the Hub\'s record '
                     'of that commit, then copies it to the others (M3).'
                     % (nodes[0]['host'], nodes[0].get('model_revision') or '(none)'))
    return notes


def check_interface(node, min_mbps=MIN_CLUSTER_LINK_MBPS):
    """N3/N5: the cluster interface exists, is up, carries gb10_cluster_ip, is not loopback, and is
    not the 1 GbE management NIC."""
    host, name, iface = node['host'], node.get('cluster_iface'), node.get('iface') or {}
    if not name:
        return ['host %s: gb10_cluster_iface is not set. Fix: set it to the cluster link: a ConnectX-7 port '
                'ibdev2netdev shows "(Up)", e.g. enp1s0f1np1, or bond0; on a 3-node mesh, the port that '
                'coordinates, e.g. the 10 GbE RJ-45 port enP7s7.' % host]
    never = _never_the_cluster_link(node)
    if never:
        return [never]
    if _link_awaits_host_prep(node):
        # Role cluster_link configures the link in host prep and verifies it there (address,
        # every peer, MTU end to end): preflight_notes says so instead.
        return []
    if not iface.get('present'):
        return ['host %s: gb10_cluster_iface %s does not exist on this host (it has %s). Fix: set it to the '
                'cluster link.' % (host, name, ', '.join(node.get('interfaces') or []) or 'no interfaces')]
    problems = []
    if not iface.get('active'):
        problems.append('host %s: gb10_cluster_iface %s is down (N5). Fix: bring the link up (cable, '
                        'netplan) or name the interface that is up.' % (host, name))
    addresses = iface.get('ipv4') or []
    if node.get('cluster_ip') and node['cluster_ip'] not in addresses:
        problems.append('host %s: gb10_cluster_ip %s is not an address of gb10_cluster_iface %s (it has %s) (N5). '
                        'Fix: make the two agree.' % (host, node['cluster_ip'], name, ', '.join(addresses) or 'none'))
    if _slow(node, min_mbps) and not _coordinates_only(node):
        problems.append('host %s: gb10_cluster_iface %s runs at %d Mb/s, the management NIC class; NCCL over '
                        'it gave ~6 tok/s at TP=3 (N5). Fix: name the ConnectX-7 link (>= %d Mb/s).'
                        % (host, name, iface['speed'], min_mbps))
    return problems


def _slow(node, min_mbps=MIN_CLUSTER_LINK_MBPS):
    speed = (node.get('iface') or {}).get('speed')
    return isinstance(speed, int) and 0 < speed < min_mbps


def _coordinates_only(node):
    """On the switchless 3-node ring (roce_ring, N6) NCCL's data takes the CX7 mesh, each cable on
    its own subnet; gb10_cluster_iface carries only Gloo, Ray and MASTER_ADDR, so a slow port there
    is fine (the field's M3 cluster coordinated over enP7s7). NCCL on it is still caught after the
    launch (N5: its init log against the transport)."""
    return node.get('transport') == 'roce_ring'


def check_rdma(node):
    """N1: transport roce / roce_ring needs the ConnectX-7's verbs devices on the host (the Ray
    containers get them, filter rdma_container); without them NCCL falls back to sockets."""
    transport = node.get('transport') or 'roce'
    if transport == 'socket' or node.get('uverbs'):
        return []
    rdma_dir = node.get('rdma_dir') or '/dev/infiniband'
    return ['host %s: gb10_nccl_transport %s needs the RDMA verbs devices %s/uverbs*, and this host has none '
            '(N1): NCCL would fall back to sockets. Fix: load the ConnectX-7 RDMA drivers (`sudo modprobe '
            'ib_uverbs mlx5_ib`; DGX OS ships them with its OFED/rdma-core packages) and check `ls %s`, or '
            'choose TCP explicitly with gb10_nccl_transport: socket (N4).'
            % (node['host'], transport, rdma_dir, rdma_dir)]


# H11: more than this much CMA beyond any CMA area is Kexec HandOver's scratch (NVIDIA/NV-Kernels PR
# 591: ~9.3 GiB of pageblocks, CmaFree ~9.7 GiB with CmaTotal 0); a healthy node shows none.
KHO_CMA_GIB = 1.0


def check_kho(node):
    """H11: kernel 7.0.0-1019-nvidia's Kexec HandOver returns ~9.3 GiB of scratch pageblocks as CMA,
    which long-term pins cannot use: NCCL's ibv_reg_mr fails with ENOMEM under GPU memory pressure
    (NVIDIA/NV-Kernels PR 591; the field's fix: kho=off, or the 6.17.0-1032 kernel)."""
    cma = (node.get('memory') or {}).get('kho_cma_gib')
    if not isinstance(cma, (int, float)) or cma <= KHO_CMA_GIB:
        return []
    return ['host %s: %.1f GiB of CMA beyond any CMA area (meminfo CmaFree above CmaTotal): the kernel\'s Kexec '
            'HandOver scratch (kernel 7.0.0-1019-nvidia), which NCCL\'s memory registration cannot pin: ibv_reg_mr '
            'fails with ENOMEM (H11). Fix: add kho=off to GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, run sudo '
            'update-grub and reboot (or boot 6.17.0-1032-nvidia); then run the deploy again.' % (node['host'], cma)]


def check_image(profile, nodes):
    """M1, A5: the serving image must be on the head, or come there by a pull or a build, before
    anything on a node changes (the image step comes after host prep). The head's facts say
    image_state present, absent (its Docker answered: no such image) or unknown (no Docker yet),
    image_pull (serving_image_pull) and image_build_recipe (serving_image_build_recipe)."""
    if not nodes:
        return []
    head = nodes[0]
    if head.get('image_state') != 'absent' or head.get('image_build_recipe'):
        return []
    pull = head.get('image_pull') or 'auto'
    image = profile['image']
    if pull == 'always' or (pull == 'auto' and is_registry_reference(image)):
        return []
    name, _sep, tag = image.rpartition(':') if ':' in image.split('/')[-1] else (image, '', '')
    return ['host %s (the head): image %s of profile %s is not there, and %s. The deploy copies it from the head '
            'to the other nodes, never from them (A5). Fix on %s: build it and tag it with the profile\'s tag '
            '(docker tag %s %s), or docker load -i <file>; or set serving_image_build_recipe to a recipe the '
            'deploy builds there. Then run the deploy again.'
            % (head['host'], image, profile['name'],
               'serving_image_pull=never' if pull == 'never' else
               'a local name (no registry host) is not pulled (serving_image_pull=auto)',
               head['host'], name or image, image)]


def check_model(profile, nodes):
    """The model must be somewhere: model_sync copies it from the first host (M3), or downloads it
    there first when that host's model_download is set (gb10_model_download; a note then), at a
    commit (model_revision: gb10_model_revision or the profile's model.revision), never a moving
    branch."""
    if nodes and not any(n.get('model_present') for n in nodes) and nodes[0].get('model_download'):
        revision = nodes[0].get('model_revision') or ''
        if not COMMIT.match(revision):
            repo = profile['model']['repo']
            return ['host %s: gb10_model_download would fetch %s from the Hub at %s: a download takes one commit, '
                    'never a branch or tag, which moves (and with it the model\'s own code). Fix: look up the '
                    'commit you have reviewed (curl -s https://huggingface.co/api/models/%s/revision/main prints '
                    'it as "sha"; a gated repository needs -H "Authorization: Bearer <your token>"), then set '
                    'gb10_model_revision to it, or model.revision in profile %s.'
                    % (nodes[0]['host'], repo, repr(revision) if revision else 'no revision', repo, profile['name'])]
    if nodes and not any(n.get('model_present') for n in nodes) and not nodes[0].get('model_download'):
        return ['hosts %s: model.path %s of profile %s is absent on every host. Fix: download %s to %s on '
                'the first host (%s), or set gb10_model_download: true (with gb10_hf_token in ansible-vault '
                'for a gated repository); model_sync copies it to the others.'
                % (_names(nodes), profile['model']['path'], profile['name'], profile['model']['repo'],
                   profile['model']['path'], nodes[0]['host'])]
    return []


def check_memory(profile, nodes, shape=None, recover_command=None, executor='ray'):
    """M2 (and H3-H5): weights + KV for the asked context on the poorest node. A node's free_gib is
    its room for the engine (role preflight): what vLLM sizes from on an integrated GPU,
    MemAvailable (page cache included: the kernel reclaims it, and the launch step drops it), plus
    what the collection's own running engine holds there, which the launch step frees before a
    changed launch starts. A node whose
    memory leaked (H4: unified_memory's verdict) is named as such, with the command that frees it,
    when the profile would fit on the memory it has back after that reboot."""
    sized = [n for n in nodes if isinstance((n.get('memory') or {}).get('budget_gib'), (int, float))]
    if not sized:
        return ['hosts %s: no memory figures (gb10_proc_root / gb10_cuda_probe). Fix: check those variables.'
                % _names(nodes)]

    def room(node, after_reboot=False):
        memory = node['memory']
        free = memory.get('free_gib')
        if not isinstance(free, (int, float)):
            return memory['budget_gib']
        if after_reboot and memory.get('leaked') and isinstance(memory.get('unaccounted_gib'), (int, float)):
            free += memory['unaccounted_gib']
        return min(free, memory['budget_gib'])

    poorest = min(sized, key=room)
    budget = min(n['memory']['budget_gib'] for n in sized)
    rooms = [room(n) for n in sized if isinstance(n['memory'].get('free_gib'), (int, float))]
    # H10 on the whole pool: CUDA sees all of it once host prep has removed a capping override (H2).
    pools = [n['memory']['pool_gib'] for n in sized if isinstance(n['memory'].get('pool_gib'), (int, float))]
    pool = min(pools) if pools else None
    try:
        plan = fit_plan(profile, budget, free_gib=min(rooms) if rooms else None, shape=shape, pool_gib=pool,
                        executor=executor)
    except FitError as exc:
        return ['host %s: %s' % (poorest['host'], exc)]
    if plan['fits']:
        return []
    leaked = [n for n in sized if n['memory'].get('leaked')]
    if leaked and rooms:
        after = fit_plan(profile, budget, free_gib=min(room(n, after_reboot=True) for n in sized), shape=shape,
                         pool_gib=pool, executor=executor)
        if after['fits']:
            return ['host%s %s: unified memory leaked (H4: %s; memory in use that no process, cache or kernel '
                    'counter explains, with no GPU process left, which only a reboot frees), so profile %s '
                    '(gb10_profile) does not fit now: %.1f GiB available on the poorest node, %.1f GiB needed; '
                    'after the reboot it fits. Fix: %s reboots only the leaked nodes; then run this deploy again.'
                    % ('s' if len(leaked) > 1 else '', _names(leaked),
                       ', '.join('%s %.1f GiB' % (n['host'], n['memory']['unaccounted_gib']) for n in leaked),
                       profile['name'], min(rooms), plan['needed_free_gib'],
                       recover_command or 'playbooks/recover.yml with this inventory')]
    return ['host %s (poorest node: %.1f GiB CUDA-visible, %.1f GiB available with what its own engine '
            'holds): profile %s (gb10_profile) does not fit: %s'
            % (poorest['host'], budget, room(poorest), profile['name'], plan['reason'])]


def preflight_problems(profile, nodes, engine=None, shape=None, ceiling=UTILIZATION_CEILING,
                       min_link_mbps=MIN_CLUSTER_LINK_MBPS, group='gb10_cluster', recover_command=None,
                       executor='ray'):
    """All problems for this profile on these nodes (first = head), in a stable order. Nodes this
    run did not read are reported by check_run_hosts only; the model and memory checks, which
    need every node, wait until the whole group is in the run."""
    engine = engine or profile['engine']
    head = nodes[0]['host'] if nodes else '(no hosts)'
    read = [n for n in nodes if _read(n)]
    problems = check_run_hosts(nodes, group)
    problems += check_inventory(profile, nodes, group)
    problems += check_engine(profile, engine, head)
    problems += check_utilization(profile, engine, head, ceiling)
    for node in read:
        problems += check_driver(node)
        problems += check_interface(node, min_link_mbps)
        problems += check_rdma(node)
        problems += check_kho(node)
    if len(read) == len(nodes):
        problems += check_image(profile, nodes)
        problems += check_model(profile, nodes)
        problems += check_memory(profile, nodes, shape, recover_command, executor)
    return problems
