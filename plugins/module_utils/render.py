# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render a validated profile (module_utils/profile.py) into engine command lines and env.

The argv lists are checked against the real parsers in tests/engine (vLLM's
FlexibleArgumentParser + make_arg_parser, SGLang's server_args.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gb10.serving.plugins.module_utils.profile import NO_MEDIA_DOMAIN, data_parallel, pipeline

# SGLang v0.5.12 spells vLLM's fp8 KV dtype explicitly (rule S1).
SGLANG_KV_DTYPE = {'fp8': 'fp8_e4m3', 'fp8_e4m3': 'fp8_e4m3', 'fp8_e5m2': 'fp8_e5m2', 'auto': 'auto'}


class RenderError(Exception):
    """The profile cannot be rendered for this engine; the message says why and what works."""


def _value(value):
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(',', ':'))
    return str(value)


def flags(args, negatable=True):
    """{'max-model-len': 1024, 'trust-remote-code': True} -> ['--max-model-len', '1024', ...].

    True renders the bare flag; False renders --no-<flag> where the parser has one (vLLM's
    boolean options do) and nothing otherwise; dicts render as compact JSON (vLLM's config
    options such as --compilation-config take JSON).
    """
    out = []
    for key, value in args.items():
        if value is True:
            out.append('--' + key)
        elif value is False:
            if negatable:
                out.append('--no-' + key)
        else:
            out.extend(['--' + key, _value(value)])
    return out


def vllm_serve_argv(profile, head_ip=None, port=None, node_rank=0, master_port=None):
    """argv of `vllm serve` for the head (rank 0) or, with the mp executor, a headless rank.

    With the Ray executor the driver runs inside the Ray head container and finds the cluster
    there (rule R1), so head_ip is not part of the command line. With vLLM's own multi-node mp
    executor it is --master-addr (the head's cluster address, never loopback: rule X1) with
    --master-port, and ranks other than 0 run --headless (no API server). With data parallelism
    (one whole replica per node) it is --data-parallel-address with --data-parallel-rpc-port, and
    --data-parallel-start-rank on the headless ranks.
    """
    if profile.get('engine') != 'vllm':
        raise RenderError('profile %s is for engine %s, not vllm' % (profile.get('name'), profile.get('engine')))
    serve = profile['serve']
    argv = ['vllm', 'serve', profile['model']['path'],
            '--served-model-name', profile['model']['served_name'],
            '--host', serve['host'],
            '--port', str(port or serve['port'])]
    # A6: media only from the hosts the profile names, else none (profile.py, NO_MEDIA_DOMAIN).
    argv.append('--allowed-media-domains')
    argv.extend(serve.get('media_domains') or [NO_MEDIA_DOMAIN])
    argv.extend(['--tensor-parallel-size', str(profile['tensor_parallel_size']),
                 '--gpu-memory-utilization', _value(profile['gpu_memory_utilization'])])
    if pipeline(profile) > 1:
        # Stages of whole layers, one per node (three Sparks where heads do not split by 3).
        argv.extend(['--pipeline-parallel-size', str(pipeline(profile))])
    argv.extend(flags(profile['engine_args']))
    argv.extend(flags(profile['size_args']))
    argv.extend(flags(profile['device_args']))
    if profile['engine_args'].get('distributed-executor-backend') == 'mp' and profile['nodes'] > 1:
        if not head_ip:
            raise RenderError('profile %s uses the multi-node mp executor: pass head_ip (the first '
                              "host's gb10_cluster_ip)" % profile['name'])
        if head_ip.startswith('127.') or head_ip in ('::1', 'localhost'):
            raise RenderError('profile %s uses the multi-node mp executor: --master-addr %s is loopback; the other '
                              "nodes' ranks must reach it: pass the head's gb10_cluster_ip (rule X1)"
                              % (profile['name'], head_ip))
        if not 0 <= node_rank < profile['nodes']:
            raise RenderError('node_rank %r is outside 0..%d for profile %s' % (node_rank, profile['nodes'] - 1, profile['name']))
        if data_parallel(profile) > 1:
            # A whole replica per node: vLLM's multi-node data parallelism, one engine per node, the
            # API server and the DP coordinator with rank 0; the others join at the head's address (X1).
            argv.extend(['--data-parallel-size', str(data_parallel(profile)), '--data-parallel-size-local', '1',
                         '--data-parallel-address', head_ip])
            if master_port:
                argv.extend(['--data-parallel-rpc-port', str(master_port)])
            if node_rank:
                argv.extend(['--data-parallel-start-rank', str(node_rank)])
            else:
                # One API server in front of the replicas: vLLM 0.32 starts one per data-parallel
                # rank on the head otherwise (vllm/entrypoints/cli/serve.py: api_server_count
                # defaults to data_parallel_size under its internal load balancer), each a process of
                # its own in the head's unified memory that neither the fit nor the OOM guard counts;
                # the gateway (A1) is the one front door either way.
                argv.extend(['--api-server-count', '1'])
        else:
            argv.extend(['--nnodes', str(profile['nodes']), '--node-rank', str(node_rank),
                         '--master-addr', head_ip])
            if master_port:
                argv.extend(['--master-port', str(master_port)])
        if node_rank:
            argv.append('--headless')
    return argv


# A7: what one request may ask. The gateway bounds a key's requests (rate, concurrency), not what
# one of them asks: vLLM 0.32 takes up to 16384 choices (`n`) in one request and 1024 prompts in one
# /v1/completions request (VLLM_MAX_N_SEQUENCES, VLLM_MAX_COMPLETION_PROMPTS in vllm/envs.py; checked
# in vllm/sampling_params.py and the completion protocol), each up to max-model-len tokens
# (vllm/entrypoints/serve/utils/api_utils.py, get_max_tokens). Eight of each: a client that wants
# more asks again, under its key's limits. A recipe's env may set either, for its own reason.
REQUEST_LIMITS = {'VLLM_MAX_N_SEQUENCES': 8, 'VLLM_MAX_COMPLETION_PROMPTS': 8}


def engine_env(profile):
    """Environment of the engine process: what one request may ask (REQUEST_LIMITS), then the
    profile's env and its device env, as strings."""
    env = dict((key, str(value)) for key, value in REQUEST_LIMITS.items())
    for section in ('env', 'device_env'):
        for key, value in profile[section].items():
            env[key] = str(value)
    return env


def sglang_refusal(profile):
    """None when SGLang can serve the profile, else the reason and the working alternative (S4)."""
    sgl = profile['sglang']
    if sgl['supported']:
        return None
    return 'profile %s cannot run on SGLang: %s. Use instead: %s.' % (
        profile['name'], sgl['reason'], sgl['alternative'])


def sglang_launch_argv(profile, head_ip, node_rank, port=None):
    """argv of SGLang's launch_server for one node of a multi-node launch (rules S1-S3).

    One container per node, all with the same command but --node-rank; rank 0 serves HTTP.
    """
    refusal = sglang_refusal(profile)
    if refusal:
        raise RenderError(refusal)
    if not head_ip:
        raise RenderError("sglang_launch_argv needs head_ip: the first host's gb10_cluster_ip")
    nodes = profile['nodes']
    if not isinstance(node_rank, int) or isinstance(node_rank, bool) or not 0 <= node_rank < nodes:
        raise RenderError('node_rank %r is outside 0..%d for profile %s' % (node_rank, nodes - 1, profile['name']))
    sgl = profile['sglang']
    serve = profile['serve']
    argv = ['python3', '-m', 'sglang.launch_server',
            '--model-path', profile['model']['path'],
            '--served-model-name', profile['model']['served_name'],
            '--host', serve['host'],
            '--port', str(port or serve['port']),
            '--tp-size', str(profile['tensor_parallel_size']),
            # S1: --nnodes and --dist-init-addr X:Y replace --num-nodes and --master-addr/-port.
            '--nnodes', str(nodes),
            '--node-rank', str(node_rank),
            '--dist-init-addr', '%s:%d' % (head_ip, sgl['dist_port']),
            # S3: nodes load at different speeds; 0.75 leaves the poorer node headroom (H5).
            '--dist-timeout', str(sgl['dist_timeout']),
            '--mem-fraction-static', _value(sgl['mem_fraction_static']),
            # S1: --context-length replaces --max-model-len.
            '--context-length', str(profile['size_args']['max-model-len'])]
    if 'max-num-seqs' in profile['size_args']:
        argv.extend(['--max-running-requests', str(profile['size_args']['max-num-seqs'])])
    kv_dtype = profile['device_args'].get('kv-cache-dtype')
    if kv_dtype is not None:
        if kv_dtype not in SGLANG_KV_DTYPE:
            raise RenderError('kv-cache-dtype %r of profile %s has no SGLang equivalent (choose one of %s)'
                              % (kv_dtype, profile['name'], ', '.join(sorted(SGLANG_KV_DTYPE))))
        # S1: SGLang wants fp8_e4m3 where vLLM takes fp8.
        argv.extend(['--kv-cache-dtype', SGLANG_KV_DTYPE[kv_dtype]])
    argv.extend(flags(sgl['args'], negatable=False))
    if nodes > 1 and '--disable-cuda-graph' not in argv:
        # S2: graph capture deadlocks across nodes; only the flag works (the env var does not).
        argv.append('--disable-cuda-graph')
    return argv


def sglang_env(profile):
    """Environment of an SGLang node: the profile's env plus its sglang.env, as strings."""
    env = dict((k, str(v)) for k, v in profile['env'].items())
    env.update((k, str(v)) for k, v in profile['sglang'].get('env', {}).items())
    return env
