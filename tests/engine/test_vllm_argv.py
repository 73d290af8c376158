"""Every profile's rendered `vllm serve` argv, checked by vLLM 0.32's own parser (rules V1-V6,
V10), plus the values that parser accepts blindly, checked against vLLM's registries."""
import copy

import pytest

from ansible_collections.gb10.serving.plugins.module_utils.render import engine_env, vllm_serve_argv

from conftest import FORK_OF, VARIANTS, variant

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("V1", "V3", "V5", "V6")

# Read by the vLLM builds of the field's GB10 images (seeds 000/003: vLLM 0.18-0.19 era), no
# longer by vLLM 0.32 (--linear-backend / --moe-backend marlin replaced them). No profile may set
# them (the M3 profile's fork run chose b12x kernels by flag instead).
LEGACY_ENV = {'VLLM_NVFP4_GEMM_BACKEND', 'VLLM_TEST_FORCE_FP8_MARLIN', 'VLLM_USE_FLASHINFER_MOE_FP4'}


def parse(parser, argv):
    assert argv[:2] == ['vllm', 'serve']
    return parser.parse_args(argv[2:])


def registry_problems(args, fork=None):
    """What vLLM's parser does not check but its registries do; fork: the fork's own definitions
    (conftest.FORKS) for a profile whose image is built from one."""
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.model_executor.model_loader import _LOAD_FORMAT_TO_MODEL_LOADER
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    problems = []
    if args.tool_call_parser and args.tool_call_parser not in ToolParserManager.list_registered():
        problems.append('tool-call-parser %s is not registered' % args.tool_call_parser)
    if args.reasoning_parser and args.reasoning_parser not in ReasoningParserManager.list_registered():
        problems.append('reasoning-parser %s is not registered' % args.reasoning_parser)
    if args.load_format not in _LOAD_FORMAT_TO_MODEL_LOADER:
        problems.append('load-format %s has no model loader' % args.load_format)
    backend = args.attention_backend
    backends = fork['attention_backends'] if fork else AttentionBackendEnum.__members__
    if backend is not None and getattr(backend, 'name', backend) not in backends:
        problems.append('attention-backend %s is not a backend of %s' % (backend, fork['repository'] if fork else 'vLLM'))
    if args.quantization is not None and args.quantization not in QUANTIZATION_METHODS:
        problems.append('quantization %s is not a method' % args.quantization)
    return problems


@pytest.mark.parametrize('name,overlay', VARIANTS)
def test_rendered_argv_parses_and_values_are_registered(vllm_parser, name, overlay):
    prof = variant(name, overlay)
    argv = vllm_serve_argv(prof, head_ip='10.0.0.1')
    args = parse(vllm_parser, argv)
    assert args.model_tag == prof['model']['path']
    assert args.tensor_parallel_size == prof['tensor_parallel_size']
    assert args.gpu_memory_utilization == prof['gpu_memory_utilization']
    assert args.max_model_len == prof['size_args']['max-model-len']
    assert args.port == prof['serve']['port']
    # The sim overlay runs vLLM 0.32's CPU build itself, whatever the image of the real profile.
    assert registry_problems(args, None if overlay else FORK_OF.get(name)) == []


@pytest.mark.rule("A6")
@pytest.mark.parametrize('name,overlay', VARIANTS)
def test_the_engine_fetches_no_media_url_and_reads_no_local_file(vllm_parser, name, overlay):
    # What the parsed flags give vLLM's own media connector: a client's URL to the head's own network
    # (a node's exporter) or a local file is refused before anything is fetched.
    from vllm.multimodal.media.connector import MediaConnector
    args = parse(vllm_parser, vllm_serve_argv(variant(name, overlay), head_ip='10.0.0.1'))
    assert args.allowed_media_domains == ['invalid'] and args.allowed_local_media_path == ''
    connector = MediaConnector(allowed_media_domains=args.allowed_media_domains,
                               allowed_local_media_path=args.allowed_local_media_path)
    for url in ('http://127.0.0.1:9100/metrics', 'http://10.0.0.2:8265/'):
        with pytest.raises(ValueError, match='must be from one of the allowed domains'):
            connector.load_from_url(url, media_io=None)
    with pytest.raises(RuntimeError, match='Cannot load local files'):
        connector.load_from_url('file:///etc/gb10/ray-auth/token', media_io=None)


@pytest.mark.rule("V1")
@pytest.mark.parametrize('name,overlay', VARIANTS)
def test_engine_env_names_are_known_to_vllm(name, overlay):
    from vllm import envs
    fork = None if overlay else FORK_OF.get(name)
    known = set(fork['environment_variables']) if fork else set(envs.environment_variables)
    names = {k for k in engine_env(variant(name, overlay)) if k.startswith('VLLM_')}
    unknown = names - known
    assert not unknown, 'env names %s does not read: %s' % (fork['repository'] if fork else 'vLLM 0.32', sorted(unknown))


def test_legacy_env_names_are_really_gone_from_vllm_032():
    from vllm import envs
    assert LEGACY_ENV.isdisjoint(envs.environment_variables)


@pytest.mark.rule("V1", "V2", "V3", "V10")
def test_m27_nvfp4_parsed_values(vllm_parser):
    args = parse(vllm_parser, vllm_serve_argv(variant('minimax-m27-nvfp4', None)))
    assert args.compilation_config.cudagraph_mode.name == 'NONE'  # V2
    assert args.speculative_config == {'method': 'ngram', 'num_speculative_tokens': 5}  # V10
    assert args.kv_cache_dtype == 'fp8_e4m3'
    assert args.moe_backend == 'marlin'  # V1
    assert args.linear_backend == 'marlin'  # V1: what VLLM_NVFP4_GEMM_BACKEND=marlin was
    assert args.load_format == 'safetensors'  # V3: a compressed-tensors checkpoint
    assert args.distributed_executor_backend == 'ray'  # R1
    assert args.enable_auto_tool_choice and args.trust_remote_code  # V6


@pytest.mark.rule("V10")
def test_speculative_method_is_one_vllm_knows():
    from typing import get_args

    from vllm.config.speculative import SpeculativeMethod
    spec = variant('minimax-m27-nvfp4', None)['engine_args']['speculative-config']
    assert spec['method'] in get_args(SpeculativeMethod)


@pytest.mark.rule("X1")
@pytest.mark.parametrize('name,overlay', VARIANTS)
def test_mp_executor_multinode_flags_parse(vllm_parser, name, overlay):
    # Every profile under vLLM's own multi-node executor (gb10_executor=mp), every rank, as vLLM's
    # own parser reads it: rank 0 serves the API, the others run headless, all meet at the head.
    prof = copy.deepcopy(variant(name, overlay))
    if prof['engine'] != 'vllm' or prof['nodes'] == 1:
        pytest.skip('%s runs no multi-node vLLM' % name)
    prof['engine_args']['distributed-executor-backend'] = 'mp'
    for rank in range(prof['nodes']):
        args = parse(vllm_parser, vllm_serve_argv(prof, head_ip='10.0.0.1', node_rank=rank, master_port=29501))
        if prof.get('data_parallel_size', 1) > 1:
            # A replica per node: vLLM's multi-node data parallelism, each engine TP 1.
            assert (args.data_parallel_size, args.data_parallel_size_local, args.data_parallel_address,
                    args.data_parallel_rpc_port, args.data_parallel_start_rank, args.headless, args.nnodes) \
                == (prof['nodes'], 1, '10.0.0.1', 29501, rank if rank else None, rank > 0, 1)
            assert args.enable_expert_parallel is True
            # One API server on the head: left unset, vLLM's serve command (cli/serve.py) starts
            # data_parallel_size of them there; a headless rank must leave it unset (vLLM refuses it).
            assert args.api_server_count == (None if rank else 1)
        else:
            assert (args.nnodes, args.node_rank, args.master_addr, args.master_port, args.headless) \
                == (prof['nodes'], rank, '10.0.0.1', 29501, rank > 0)
        assert args.distributed_executor_backend == 'mp'


# Negative tests: the checks above must be able to fail.

@pytest.mark.parametrize('bad', [
    ['--max-model-length', '1024'],          # misspelt/renamed flag
    ['--num-nodes', '2'],                    # SGLang's old name, not vLLM's
    ['--kv-cache-dtype', 'fp8_e4m3fn'],      # not a choice
    ['--moe-backend', 'cutlass_fp4'],        # not a choice
])
def test_parser_rejects_unknown_flags_and_choices(vllm_parser, bad):
    argv = vllm_serve_argv(variant('minimax-m27-nvfp4', 'sim-cpu')) + bad
    with pytest.raises(SystemExit):
        parse(vllm_parser, argv)


def test_registry_check_catches_what_the_parser_accepts(vllm_parser):
    prof = copy.deepcopy(variant('minimax-m27-nvfp4', None))
    prof['engine_args']['tool-call-parser'] = 'minimax_m9'
    prof['engine_args']['reasoning-parser'] = 'minimax_m2_think_twice'
    prof['device_args']['load-format'] = 'fastersafetensors'
    prof['device_args']['attention-backend'] = 'TRITON_ATTENTION'
    args = parse(vllm_parser, vllm_serve_argv(prof))
    assert len(registry_problems(args)) == 4


def test_the_m3_fork_and_vllm_032_name_the_b12x_attention_backend_apart(vllm_parser):
    # Each name passes only where it is registered: the fork's definitions are not 0.32's.
    from vllm import envs
    fork = FORK_OF['minimax-m3-nvfp4']
    args = parse(vllm_parser, vllm_serve_argv(variant('minimax-m3-nvfp4', None), head_ip='10.0.0.1'))
    assert registry_problems(args) == ['attention-backend B12X_ATTN is not a backend of vLLM']
    args.attention_backend = 'B12X'
    assert registry_problems(args, fork) == ['attention-backend B12X is not a backend of local-inference-lab/vllm']
    assert registry_problems(args) == []
    assert 'VLLM_USE_B12X_MINIMAX_M3_MSA' in fork['environment_variables']
    assert 'VLLM_USE_B12X_MINIMAX_M3_MSA' not in envs.environment_variables


@pytest.mark.rule("V5")
def test_deepseek_v4_pages_in_the_block_size_its_sparse_mla_takes(vllm_parser):
    args = parse(vllm_parser, vllm_serve_argv(variant('deepseek-v4-flash', None)))
    assert args.block_size == 256


@pytest.mark.rule("V5")
def test_m3_is_the_field_recipe_of_three_sparks(vllm_parser):
    """The published three-Spark M3 TP=3 launcher (m3vllm.sh): the vision tower's 16 heads do not
    split over 3 ranks, the fork's b12x kernels by flag and by switch, fp8 KV in 128-token blocks,
    piecewise CUDA graphs, sizes for a head at ~96 % of RAM."""
    prof = variant('minimax-m3-nvfp4', None)
    args = parse(vllm_parser, vllm_serve_argv(prof, head_ip='10.0.0.1'))
    assert args.mm_encoder_tp_mode == 'data' and args.skip_mm_profiling
    assert getattr(args.attention_backend, 'name', args.attention_backend) == 'B12X_ATTN'
    assert (args.moe_backend, args.quantization) == ('b12x', 'modelopt_fp4')
    assert (args.kv_cache_dtype, args.block_size) == ('fp8_e4m3', 128)
    assert (args.compilation_config.mode, args.compilation_config.cudagraph_mode.name) == (3, 'PIECEWISE')
    assert args.enable_chunked_prefill and args.enable_prefix_caching
    assert (args.gpu_memory_utilization, args.max_num_seqs, args.max_num_batched_tokens, args.max_model_len) \
        == (0.82, 2, 512, 200000)
    env = engine_env(prof)
    assert {k: env[k] for k in ('VLLM_USE_B12X_MOE', 'VLLM_USE_B12X_MINIMAX_M3_MSA', 'VLLM_USE_B12X_SPARSE_INDEXER',
                                'VLLM_USE_B12X_FP8_GEMM', 'CUTE_DSL_ARCH')} \
        == {'VLLM_USE_B12X_MOE': '1', 'VLLM_USE_B12X_MINIMAX_M3_MSA': '1', 'VLLM_USE_B12X_SPARSE_INDEXER': '1',
            'VLLM_USE_B12X_FP8_GEMM': '0', 'CUTE_DSL_ARCH': 'sm_121a'}
