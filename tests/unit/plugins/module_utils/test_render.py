"""Rendering profiles into engine command lines (V1, V2, V6, V10, S1-S4)."""
import copy

import pytest

from ansible_collections.gb10.serving.plugins.module_utils.render import (
    RenderError, engine_env, flags, sglang_launch_argv, vllm_serve_argv)

from profile_helpers import real

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("V1")


def pairs(argv):
    return {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith('--')}


def test_m27_nvfp4_vllm_argv():
    argv = vllm_serve_argv(real('minimax-m27-nvfp4'), head_ip='10.0.0.1')
    assert argv[:3] == ['vllm', 'serve', '/models/MiniMax-M2.7-NVFP4-GB10-AC']
    got = pairs(argv)
    assert got['--tensor-parallel-size'] == '2'
    assert got['--gpu-memory-utilization'] == '0.82'
    assert got['--attention-backend'] == 'TRITON_ATTN'
    assert got['--moe-backend'] == 'marlin'
    assert got['--tool-call-parser'] == 'minimax_m2'
    assert got['--reasoning-parser'] == 'minimax_m2_append_think'
    assert got['--compilation-config'] == '{"cudagraph_mode":"NONE"}'
    assert got['--speculative-config'] == '{"method":"ngram","num_speculative_tokens":5}'
    assert '--trust-remote-code' in argv and '--enforce-eager' not in argv
    # Ray executor: the driver runs inside the head container (R1), no address on the line.
    assert '10.0.0.1' not in argv


def test_port_argument_overrides_profile():
    assert pairs(vllm_serve_argv(real('minimax-m27-nvfp4'), port=8123))['--port'] == '8123'


def test_false_renders_negated_flag_for_vllm_and_nothing_for_sglang():
    assert flags({'enable-prefix-caching': False}) == ['--no-enable-prefix-caching']
    assert flags({'enable-prefix-caching': False}, negatable=False) == []


@pytest.mark.rule("X1")
def test_mp_executor_renders_multinode_flags():
    prof = copy.deepcopy(real('minimax-m27-nvfp4'))
    prof['engine_args']['distributed-executor-backend'] = 'mp'
    head = pairs(vllm_serve_argv(prof, head_ip='10.0.0.1', master_port=29501))
    assert (head['--nnodes'], head['--node-rank'], head['--master-addr'], head['--master-port']) == ('2', '0', '10.0.0.1', '29501')
    assert '--headless' not in vllm_serve_argv(prof, head_ip='10.0.0.1')
    assert vllm_serve_argv(prof, head_ip='10.0.0.1', node_rank=1)[-1] == '--headless'
    with pytest.raises(RenderError, match='pass head_ip'):
        vllm_serve_argv(prof)
    # X1: the other nodes' ranks must reach rank 0's store: never a loopback address.
    with pytest.raises(RenderError, match='loopback'):
        vllm_serve_argv(prof, head_ip='127.0.0.1')
    with pytest.raises(RenderError, match='outside 0..1'):
        vllm_serve_argv(prof, head_ip='10.0.0.1', node_rank=2)


@pytest.mark.rule("X1")
def test_data_parallelism_renders_a_replica_per_node_that_meets_at_the_head():
    # DP=3 with expert parallelism, vLLM's multi-node data parallelism (the API server and
    # the DP coordinator with rank 0, a headless engine on each other node), not --nnodes.
    prof = real('minimax-m27-nvfp4-dp3ep')
    argvs = [vllm_serve_argv(prof, head_ip='10.0.0.1', node_rank=rank, master_port=29501) for rank in range(3)]
    for rank, argv in enumerate(argvs):
        got = pairs(argv)
        assert (got['--data-parallel-size'], got['--data-parallel-size-local'], got['--data-parallel-address'],
                got['--data-parallel-rpc-port'], got['--tensor-parallel-size']) == ('3', '1', '10.0.0.1', '29501', '1')
        assert '--enable-expert-parallel' in argv
        assert not {'--nnodes', '--node-rank', '--master-addr', '--master-port'} & set(argv)
        assert ('--headless' in argv) == (rank > 0)
        assert got.get('--data-parallel-start-rank') == (str(rank) if rank else None)
        # One API server on the head, not one per replica (vLLM's default under its internal load
        # balancer); a headless rank starts none and may not be given the flag.
        assert got.get('--api-server-count') == (None if rank else '1')
    with pytest.raises(RenderError, match='loopback'):
        vllm_serve_argv(prof, head_ip='127.0.0.1')


def test_the_ray_executor_renders_no_rendezvous():
    argv = vllm_serve_argv(real('minimax-m27-nvfp4'), head_ip='10.0.0.1', master_port=29501)
    assert not {'--nnodes', '--node-rank', '--master-addr', '--master-port', '--headless'} & set(argv)


def test_engine_env_is_env_plus_device_env_as_strings():
    env = engine_env(real('minimax-m27-nvfp4'))
    assert env['VLLM_MARLIN_USE_ATOMIC_ADD'] == '1'
    assert env['HF_HUB_OFFLINE'] == '1'
    assert all(isinstance(v, str) for v in env.values())
    assert 'RAY_memory_monitor_refresh_ms' not in env  # belongs to ray start (ray.env)


@pytest.mark.rule("A6")
def test_the_engine_fetches_media_from_no_host_unless_the_profile_names_its_hosts():
    argv = vllm_serve_argv(real('minimax-m3-nvfp4'), head_ip='10.0.0.1', master_port=29501)
    at = argv.index('--allowed-media-domains')
    assert argv[at + 1] == 'invalid' and argv[at + 2].startswith('--'), argv
    profile = dict(real('minimax-m27-nvfp4'))
    profile['serve'] = dict(profile['serve'], media_domains=['images.example.com', 'cdn.example.org'])
    argv = vllm_serve_argv(profile)
    at = argv.index('--allowed-media-domains')
    assert argv[at + 1:at + 3] == ['images.example.com', 'cdn.example.org'] and argv[at + 3].startswith('--'), argv


@pytest.mark.rule("A7")
def test_every_engine_bounds_what_one_request_asks_and_a_recipe_may_say_otherwise():
    for name in ('minimax-m27-nvfp4', 'minimax-m27-nvfp4-dp3ep', 'minimax-m3-nvfp4'):
        env = engine_env(real(name))
        assert env['VLLM_MAX_N_SEQUENCES'] == '8' and env['VLLM_MAX_COMPLETION_PROMPTS'] == '8', (name, env)
    profile = dict(real('minimax-m27-nvfp4'))
    profile['env'] = dict(profile['env'], VLLM_MAX_N_SEQUENCES=32)
    assert engine_env(profile)['VLLM_MAX_N_SEQUENCES'] == '32'


@pytest.mark.rule("S3")
def test_sglang_multinode_launch_uses_v0512_names():
    argv = sglang_launch_argv(real('minimax-m27-nvfp4'), head_ip='10.0.0.1', node_rank=1)
    assert argv[:3] == ['python3', '-m', 'sglang.launch_server']
    got = pairs(argv)
    assert got['--nnodes'] == '2' and got['--node-rank'] == '1'
    assert got['--dist-init-addr'] == '10.0.0.1:20000'
    assert got['--mem-fraction-static'] == '0.75'
    assert got['--dist-timeout'] == '1800'
    assert got['--context-length'] == '131072'
    assert got['--kv-cache-dtype'] == 'fp8_e4m3'
    assert '--disable-cuda-graph' in argv
    for old in ('--num-nodes', '--master-addr', '--master-port', '--gpu-memory-utilization', '--max-model-len'):
        assert old not in argv


@pytest.mark.rule("S2")
def test_sglang_disables_cuda_graphs_on_multinode_even_if_profile_forgets():
    prof = copy.deepcopy(real('minimax-m27-nvfp4'))
    del prof['sglang']['args']['disable-cuda-graph']
    assert '--disable-cuda-graph' in sglang_launch_argv(prof, head_ip='10.0.0.1', node_rank=0)


def test_sglang_refuses_deepseek_v4_flash_with_reason_and_alternative():
    with pytest.raises(RenderError) as err:
        sglang_launch_argv(real('deepseek-v4-flash'), head_ip='10.0.0.1', node_rank=0)
    assert 'FlashMLA' in str(err.value) and 'engine vllm' in str(err.value) and 'S4' in str(err.value)


def test_sglang_refuses_m27_fp8_deep_gemm():
    with pytest.raises(RenderError, match='deep_gemm'):
        sglang_launch_argv(real('minimax-m27-fp8'), head_ip='10.0.0.1', node_rank=0)


@pytest.mark.parametrize('rank', [2, -1, True])
def test_sglang_rank_out_of_range(rank):
    with pytest.raises(RenderError, match='outside 0..1'):
        sglang_launch_argv(real('minimax-m27-nvfp4'), head_ip='10.0.0.1', node_rank=rank)
