# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fit planner (rule M2): do the weights plus the KV cache for the asked context fit the poorest
node? Numbers, not guesses: weights per node from the checkpoint size and TP, KV bytes per token
from the model shape (layers, KV heads, head dim, KV dtype), budget from the node's memory and
the profile's GPU memory utilization.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gb10.serving.plugins.module_utils.profile import (
    EXPERT_PARALLEL_ARG, UTILIZATION_CEILING, data_parallel, pipeline)

GIB = 1024.0 ** 3
GB = 1000.0 ** 3

# Bytes per KV element by vLLM --kv-cache-dtype; 'auto' means the activation dtype (bf16 for
# every quantized checkpoint the profiles carry, fp32 for the CPU simulation's model).
KV_DTYPE_BYTES = {'auto': 2, 'bfloat16': 2, 'float16': 2, 'fp8': 1, 'fp8_e4m3': 1, 'fp8_e5m2': 1}
AUTO_BYTES_BY_CHECKPOINT = {'fp32': 4}

# What a serving node uses beside the engine's share (gpu_memory_utilization x budget) and Ray's
# object store: the OS, Docker, Ray's own processes, the API server and the engine's CPU side, all
# from the one unified pool. Field figure: a healthy warm MiniMax M3 TP=3 head at utilization 0.82
# and a 1 GiB object store sat at ~96 % of RAM with ~4.4 GB (4.1 GiB) available (the published
# three-Spark M3 recipe, whose Ray memory monitor false-killed rank 0 at 95 %): 119.7 - 0.82 x 119.7
# - 1 - 4.1 = 16.4 GiB. The head (API server, Ray's head) is the node that uses most, so every node
# is judged by it. A profile measured otherwise says so in fit.host_gib.
FIELD_HOST_GIB = 16.4
# The OOM guard (rule H10, role oom_guard): earlyoom sends SIGTERM when available memory falls to
# its threshold and SIGKILL at half of it. The threshold is half of what a warm node is expected
# to keep available, so the other half is the margin a healthy engine's swings (prefill bursts,
# the sampler) move in; a fixed share of the node (the 4 %, 4.8 GiB, of earlier releases) sat above
# the field's healthy warm head and would have ended its engine. Never below 1 GiB: with SIGKILL at
# 0.5 GiB the node keeps room for SSH, Docker and the watchdog while the engine's memory returns.
OOM_GUARD_SHARE = 0.5
OOM_GUARD_FLOOR_GIB = 1.0


class FitError(Exception):
    """Inputs the planner cannot use; the message names the field."""


def kv_dtype_bytes(profile):
    dtype = profile['device_args'].get('kv-cache-dtype', 'auto')
    if dtype not in KV_DTYPE_BYTES:
        raise FitError('device_args.kv-cache-dtype %r of profile %s: the fit planner knows %s'
                       % (dtype, profile['name'], ', '.join(sorted(KV_DTYPE_BYTES))))
    if dtype == 'auto':
        return AUTO_BYTES_BY_CHECKPOINT.get(profile['model']['checkpoint_format'], 2)
    return KV_DTYPE_BYTES[dtype]


def kv_bytes_per_token_per_node(shape, tp, dtype_bytes, pp=1):
    """KV cache bytes one token costs on one node (one rank per node on GB10).

    GQA: K and V, per layer, for the KV heads this rank holds; heads split over TP, and a rank
    holds at least one (vLLM replicates KV heads when TP exceeds them). MLA: one latent vector
    (kv_lora_rank + rope dims) per layer, replicated on every rank. With pipeline parallelism a
    node holds only its stage's layers: the largest stage, ceil(layers / PP), counts.
    """
    layers = -(-shape['num_layers'] // pp)
    if shape.get('attention', 'gqa') == 'mla':
        return layers * (shape['kv_lora_rank'] + shape['qk_rope_head_dim']) * dtype_bytes
    heads_per_rank = max(1, -(-shape['num_kv_heads'] // tp))
    return 2 * layers * heads_per_rank * shape['head_dim'] * dtype_bytes


def shape_from_hf_config(config):
    """Model shape from a Hugging Face config.json dict, or None when it lacks the fields."""
    if not isinstance(config, dict):
        return None
    config = config.get('text_config', config) if isinstance(config.get('text_config'), dict) else config
    layers = config.get('num_hidden_layers')
    if not isinstance(layers, int):
        return None
    if isinstance(config.get('kv_lora_rank'), int) and isinstance(config.get('qk_rope_head_dim'), int):
        return {'attention': 'mla', 'num_layers': layers, 'kv_lora_rank': config['kv_lora_rank'],
                'qk_rope_head_dim': config['qk_rope_head_dim']}
    heads = config.get('num_attention_heads')
    kv_heads = config.get('num_key_value_heads', heads)
    head_dim = config.get('head_dim')
    if not isinstance(head_dim, int) and isinstance(config.get('hidden_size'), int) and isinstance(heads, int) and heads:
        head_dim = config['hidden_size'] // heads
    if not all(isinstance(v, int) and v > 0 for v in (kv_heads, head_dim)):
        return None
    return {'attention': 'gqa', 'num_layers': layers, 'num_kv_heads': kv_heads, 'head_dim': head_dim}


def _r(value):
    return round(value, 2)


def oom_guard_threshold(warm_available_gib, share=OOM_GUARD_SHARE, floor_gib=OOM_GUARD_FLOOR_GIB,
                        explicit_gib=None):
    """The OOM guard's SIGTERM threshold for a node expected to keep warm_available_gib available
    once its engine is warm: share of it, at least floor_gib, or explicit_gib when the operator set
    one. 'ok' is false when the threshold leaves less than the same again as margin below the warm
    figure: the guard would end a healthy engine (H10). Without a warm figure (no profile known)
    the floor, or the operator's figure, is taken as it is."""
    for name, value in (('share', share), ('floor_gib', floor_gib), ('warm_available_gib', warm_available_gib)):
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            raise FitError('%s must be a number, got %r' % (name, value))
    if not 0 < share < 1:
        raise FitError('share must be between 0 and 1 (the part of the warm headroom the guard lets the '
                       'engine use), got %r' % (share,))
    if explicit_gib is not None and (not isinstance(explicit_gib, (int, float)) or isinstance(explicit_gib, bool)
                                     or explicit_gib <= 0):
        raise FitError('the threshold must be a positive number of GiB, got %r' % (explicit_gib,))
    if warm_available_gib is None:
        threshold = floor_gib if explicit_gib is None else explicit_gib
        return {'threshold_gib': _r(threshold), 'kill_gib': _r(threshold / 2.0), 'warm_available_gib': None,
                'share': share, 'ok': True}
    threshold = max(floor_gib, warm_available_gib * share) if explicit_gib is None else explicit_gib
    return {'threshold_gib': _r(threshold), 'kill_gib': _r(threshold / 2.0),
            'warm_available_gib': _r(warm_available_gib), 'share': share,
            'ok': threshold <= warm_available_gib * share}


def fit_plan(profile, budget_gib, free_gib=None, context=None, shape=None, pool_gib=None, executor='ray'):
    """Plan the memory of the poorest node.

    budget_gib: memory CUDA sees on that node (~119.7 GiB on a Spark with rule H2 applied).
    free_gib: memory available there now, if known; vLLM refuses to start when it is below
      utilization x budget (rules H3, H4, H5).
    context: tokens one sequence must fit (default: size_args.max-model-len).
    shape: model shape read from config.json, overriding the profile's (M2).
    pool_gib: the node's whole unified pool (MemTotal), default budget_gib. What a warm node keeps
      (H10) is judged on it: once host prep has removed an override that caps CUDA (H2), CUDA sees
      all of it and the engine takes its utilization of all of it.
    executor: 'ray' or 'mp' (vLLM's own multi-node executor, gb10_executor). Ray's object store is
      memory the engine's start needs only where Ray runs; the warm figure keeps it either way
      (object_store_note says why).
    Returns numbers in GiB, 'fits' and a 'reason' that says them.
    """
    if not isinstance(budget_gib, (int, float)) or isinstance(budget_gib, bool) or budget_gib <= 0:
        raise FitError('budget_gib must be a positive number of GiB (memory CUDA sees on the poorest node), '
                       'got %r' % (budget_gib,))
    tp = profile['tensor_parallel_size']
    pp = pipeline(profile)
    util = profile['gpu_memory_utilization']
    context = int(context or profile['size_args']['max-model-len'])
    shape = shape or profile['model']['shape']
    dtype_bytes = kv_dtype_bytes(profile)

    # One rank per node: TP x PP ranks share the weights (a PP stage holds its layers' share). A
    # data-parallel rank holds a whole replica, less the routed experts that expert parallelism puts
    # on the other ranks.
    dp = data_parallel(profile)
    weights_gb = profile['model']['weights_gb']
    split = 'TP %d' % tp if pp == 1 else 'TP %d x PP %d' % (tp, pp)
    if dp > 1:
        experts_gb = profile['model'].get('expert_weights_gb', 0) if profile['engine_args'].get(EXPERT_PARALLEL_ARG) else 0
        weights_gb = weights_gb - experts_gb + experts_gb / float(dp)
        split = 'DP %d %s' % (dp, 'with expert parallelism (%s GB of experts split)' % experts_gb if experts_gb
                              else '(a whole replica each)')
    weights_gib = weights_gb * GB / GIB / (tp * pp)
    engine_gib = budget_gib * util
    overhead_gib = profile['fit']['overhead_gib']
    kv_gib = engine_gib - weights_gib - overhead_gib
    per_token = kv_bytes_per_token_per_node(shape, tp, dtype_bytes, pp)
    context_fits = int(kv_gib * GIB // per_token) if kv_gib > 0 else 0
    # Ray's object store: the start needs it free only where Ray runs (vLLM's own multi-node
    # executor starts none). The warm figure, which sizes the OOM guard host prep sets (H10), keeps
    # it whichever executor runs: host prep does not follow the launch step's executor, and a switch
    # by the launch step alone must not leave the guard set for the other one (1-2 GiB of headroom).
    if executor not in ('ray', 'mp'):
        raise FitError("executor must be 'ray' or 'mp' (gb10_executor), got %r" % (executor,))
    object_store_gib = profile['ray']['object_store_memory_bytes'] / GIB
    start_object_store_gib = object_store_gib if executor == 'ray' else 0.0
    host_gib = profile['fit'].get('host_gib', FIELD_HOST_GIB)
    pool_gib = budget_gib if pool_gib is None else max(pool_gib, budget_gib)
    warm_available_gib = pool_gib * (1 - util) - object_store_gib - host_gib
    guard = oom_guard_threshold(warm_available_gib)
    plan = {
        'profile': profile['name'],
        'budget_gib': _r(budget_gib),
        'gpu_memory_utilization': util,
        'engine_gib': _r(engine_gib),
        'weights_per_node_gib': _r(weights_gib),
        'overhead_gib': _r(overhead_gib),
        'kv_cache_gib': _r(kv_gib),
        'kv_bytes_per_token': per_token,
        'kv_dtype_bytes': dtype_bytes,
        'context_asked': context,
        'context_fits': context_fits,
        'max_concurrent_full_contexts': context_fits // context if context else 0,
        'headroom_after_weights_gib': _r(budget_gib - weights_gib),
        'object_store_gib': _r(object_store_gib),
        'pool_gib': _r(pool_gib),
        'host_gib': _r(host_gib),
        'warm_available_gib': _r(warm_available_gib),
        'oom_guard_gib': guard['threshold_gib'],
        'free_gib': None if free_gib is None else _r(free_gib),
        'needed_free_gib': _r(engine_gib + start_object_store_gib),
        'executor': executor,
        'object_store_note': ('counted in the start (Ray runs) and in the warm figure' if executor == 'ray' else
                              'not counted in the start (vLLM\'s own executor starts no Ray); kept in the warm '
                              'figure, which sizes the OOM guard host prep sets whichever executor the launch '
                              'step runs'),
    }
    numbers = ('%s GB of weights over %s = %.1f GiB per node; node budget %.1f GiB x utilization %.2f = '
               '%.1f GiB for the engine; minus %.1f GiB overhead leaves %.1f GiB for KV at %d bytes/token '
               '= %d tokens (asked %d)'
               % (profile['model']['weights_gb'], split, weights_gib,
                  budget_gib, util, engine_gib,
                  overhead_gib, kv_gib, per_token, context_fits, context))
    if weights_gib + overhead_gib >= engine_gib:
        plan['fits'] = False
        plan['reason'] = ('weights do not fit (M2): %s. Only %.1f GiB is left after the weights. Use a smaller '
                          'quantization (e.g. NVFP4) or more nodes.' % (numbers, budget_gib - weights_gib))
    elif context_fits < context:
        plan['fits'] = False
        plan['reason'] = ('KV cache too small for the asked context (M2): %s. Lower size_args.max-model-len to '
                          '<= %d, use an fp8 KV cache, or raise utilization within the %.2f ceiling (H6).'
                          % (numbers, context_fits, UTILIZATION_CEILING))
    elif not guard['ok']:
        # The utilization that leaves the guard its threshold and the same again (H10).
        ceiling = (pool_gib - object_store_gib - host_gib - OOM_GUARD_FLOOR_GIB / OOM_GUARD_SHARE) / pool_gib
        plan['fits'] = False
        plan['reason'] = ('a warm node would keep %.1f GiB available (its %.1f GiB pool - %.1f GiB for the '
                          'engine - %.1f GiB Ray object store - %.1f GiB the node uses beside them, fit.host_gib), '
                          'under the %.1f GiB the OOM guard needs (H10: its %.1f GiB threshold and the same again '
                          'as margin), so the guard would end a healthy engine or the node would freeze. Lower '
                          'gpu_memory_utilization to <= %.2f or the Ray object store.'
                          % (warm_available_gib, pool_gib, pool_gib * util, object_store_gib, host_gib,
                             OOM_GUARD_FLOOR_GIB / OOM_GUARD_SHARE, OOM_GUARD_FLOOR_GIB, int(ceiling * 100) / 100.0))
    elif free_gib is not None and free_gib < plan['needed_free_gib']:
        plan['fits'] = False
        plan['reason'] = ('the poorest node has %.1f GiB available but the engine needs %.1f GiB (utilization) '
                          '+ %.1f GiB Ray object store: drop the page cache (H3), reboot a node with leaked '
                          'memory (H4), or lower gpu_memory_utilization (H5). %s'
                          % (free_gib, engine_gib, start_object_store_gib, numbers))
    else:
        plan['fits'] = True
        plan['reason'] = 'fits (M2): %s.' % numbers
    return plan
