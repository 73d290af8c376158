"""Profiles (M1): every shipped profile validates, the sim overlay changes only what it may,
and malformed profiles fail with messages that name the field and the fix."""
import ast
import copy
import os
import re

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import profile as P
from ansible_collections.gb10.serving.plugins.module_utils.render import vllm_serve_argv

from profile_helpers import RAW, SIM, SIM_REFUSED, SIMULATED, real, sim

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("M1")

# What an overlay may change: image, model path (and what describes the model found there),
# device flags and sizes (profiles/README.md).
ALLOWED_PREFIXES = ('image', 'model.path', 'model.weights_gb', 'model.expert_weights_gb', 'model.shape', 'model.checkpoint_format',
                    'model.family', 'device_args', 'device_env', 'size_args', 'gpu_memory_utilization',
                    'ray.object_store_memory_bytes', 'fit.overhead_gib', 'readiness_timeout_s',
                    'known_answer.expect', 'known_answer.max_tokens', 'why')


def flatten(value, prefix=''):
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out.update(flatten(item, '%s.%s' % (prefix, key) if prefix else key))
        return out
    return {prefix: value}


def test_expected_profiles_ship():
    assert {'minimax-m27-nvfp4', 'minimax-m27-mxfp4', 'minimax-m3-nvfp4', 'deepseek-v4-flash'} <= set(RAW)


@pytest.mark.parametrize('name', sorted(SIM_REFUSED))
def test_a_profile_the_simulation_cannot_run_is_refused_with_the_reason(name):
    assert real(name)['name'] == name
    with pytest.raises(P.ProfileError, match=re.escape(SIM_REFUSED[name])):
        sim(name)


@pytest.mark.parametrize('name', SIMULATED)
def test_profile_and_sim_overlay_validate(name):
    assert real(name)['name'] == name
    assert sim(name)['image'] == 'gb10-sim-serving:local'


@pytest.mark.parametrize('name', SIMULATED)
def test_sim_overlay_changes_only_image_model_path_device_flags_and_sizes(name):
    before, after = flatten(real(name)), flatten(sim(name))
    changed = {k for k in set(before) | set(after) if before.get(k, '<absent>') != after.get(k, '<absent>')}
    assert changed, 'the overlay must change something'
    outside = sorted(k for k in changed if not k.startswith(ALLOWED_PREFIXES))
    assert outside == []
    # The parts a user relies on are untouched: engine, TP, nodes, parsers, served name, port.
    for key in ('engine', 'nodes', 'tensor_parallel_size', 'model.served_name', 'serve.port'):
        assert before[key] == after[key]
    assert real(name)['engine_args'] == sim(name)['engine_args']


@pytest.mark.parametrize('name', SIMULATED)
def test_sim_argv_drops_gpu_only_flags_and_runs_eager(name):
    argv = vllm_serve_argv(sim(name), head_ip='10.0.0.1')
    assert argv[:3] == ['vllm', 'serve', '/models/tiny-llama']
    for flag in ('--attention-backend', '--moe-backend', '--linear-backend', '--quantization', '--kv-cache-dtype',
                 '--load-format', '--compilation-config'):
        assert flag not in argv
    assert '--enforce-eager' in argv
    assert argv[argv.index('--max-model-len') + 1] == '4096'
    assert sim(name)['device_env'] == {'VLLM_CPU_KVCACHE_SPACE': '1'}


@pytest.mark.rule("V2")
def test_real_m27_nvfp4_recipe():
    prof = real('minimax-m27-nvfp4')
    assert (prof['tensor_parallel_size'], prof['nodes'], prof['gpu_memory_utilization']) == (2, 2, 0.82)
    assert prof['device_args']['attention-backend'] == 'TRITON_ATTN'
    assert prof['device_args']['moe-backend'] == 'marlin'
    assert prof['device_args']['compilation-config'] == {'cudagraph_mode': 'NONE'}
    assert prof['engine_args']['speculative-config'] == {'method': 'ngram', 'num_speculative_tokens': 5}
    # Pinned to vLLM 0.32: the kernel choice by the flags that replaced the env switches,
    # plain safetensors for the compressed-tensors checkpoint.
    assert prof['image'] == 'vllm-node:0.32.0'
    assert prof['device_args']['linear-backend'] == 'marlin'
    assert prof['device_args']['load-format'] == 'safetensors'
    assert prof['device_env'] == {'VLLM_MARLIN_USE_ATOMIC_ADD': '1'}


def test_m3_uses_safetensors_and_1gb_object_store():
    prof = real('minimax-m3-nvfp4')
    assert prof['device_args']['load-format'] == 'safetensors'
    assert prof['ray']['object_store_memory_bytes'] == 1024 ** 3
    assert (prof['tensor_parallel_size'], prof['nodes']) == (3, 3)


def test_overlay_may_not_change_tensor_parallel_size():
    with pytest.raises(P.ProfileError, match=r"key 'tensor_parallel_size' may not be changed by an overlay"):
        P.load('minimax-m27-nvfp4', RAW, {'tensor_parallel_size': 1}, 'bad')


def test_overlay_may_not_change_served_name():
    with pytest.raises(P.ProfileError, match=r'model.served_name may not be changed'):
        P.load('minimax-m27-nvfp4', RAW, {'model': {'served_name': 'x'}}, 'bad')


def test_overlay_may_not_change_the_known_answer_question():
    with pytest.raises(P.ProfileError, match=r'known_answer.prompt may not be changed'):
        P.load('minimax-m27-nvfp4', RAW, {'known_answer': {'prompt': 'Say yes.'}}, 'bad')


@pytest.mark.parametrize('name', SIMULATED)
def test_every_profile_asks_a_question_with_one_right_answer(name):
    known = real(name)['known_answer']
    assert known == {'prompt': 'What is 17 + 25? Reply with the number only.', 'expect': '42', 'max_tokens': 1024}
    # The simulation asks the same question and expects the tiny model's answer (its KNOWN_ANSWER).
    assert sim(name)['known_answer']['prompt'] == known['prompt']


@pytest.mark.rule("V8")
def test_the_sim_overlay_expects_the_tiny_models_answer():
    # tests/sim/model/make_tiny_model.py builds a model whose greedy answer at TP=1 is KNOWN_ANSWER
    # (it checks that with transformers before saving): the overlay must expect exactly that.
    source = os.path.join(os.path.dirname(__file__), *(['..'] * 3), 'sim', 'model', 'make_tiny_model.py')
    with open(source) as f:
        tree = ast.parse(f.read())
    answer = [node.value.value for node in tree.body if isinstance(node, ast.Assign)
              and [t.id for t in node.targets if isinstance(t, ast.Name)] == ['KNOWN_ANSWER']]
    assert answer and SIM['known_answer']['expect'] == answer[0]


@pytest.mark.parametrize('mutate, message', [
    (lambda p: p.pop('known_answer'), r'known_answer: must be a mapping with prompt, expect and max_tokens'),
    (lambda p: p['known_answer'].update({'expect': ' '}), r'known_answer.expect: must be a non-empty string'),
    (lambda p: p['known_answer'].update({'max_tokens': 0}), r'known_answer.max_tokens: must be an integer >= 1'),
])
@pytest.mark.rule("V8")
def test_a_profile_without_a_usable_known_answer_is_refused(mutate, message):
    with pytest.raises(P.ProfileError, match=message):
        P.load('minimax-m27-nvfp4', _broken(mutate))


def test_unknown_profile_lists_known_ones():
    with pytest.raises(P.ProfileError) as err:
        P.load('minimax-m9', RAW)
    assert 'gb10_profile' in str(err.value) and 'minimax-m27-nvfp4' in str(err.value)


def _broken(mutate):
    raw = copy.deepcopy(RAW)
    mutate(raw['minimax-m27-nvfp4'])
    return raw


def test_flag_without_reason_is_refused():
    raw = _broken(lambda p: p['device_args'].update({'enable-expert-parallel': True}))
    with pytest.raises(P.ProfileError, match=r'no reason given for device_args.enable-expert-parallel'):
        P.load('minimax-m27-nvfp4', raw)


def test_reason_without_rule_id_is_refused():
    raw = _broken(lambda p: p['why'].update({'image': 'because it works'}))
    with pytest.raises(P.ProfileError, match=r'why.image: must give the reason with the rule ID'):
        P.load('minimax-m27-nvfp4', raw)


@pytest.mark.rule("M1")
@pytest.mark.parametrize('section, name', [('env', 'SAFETENSORS_FAST_GPU'), ('device_env', 'TORCH_CUDA_ARCH_LIST')])
def test_an_engine_env_entry_that_vllm_does_not_carry_to_its_ray_workers_is_refused(section, name):
    # vLLM copies VLLM_*, NCCL_*, HF_* ... to its Ray workers; the ranks never see anything else.
    raw = _broken(lambda p: (p[section].update({name: '1'}), p['why'].update({'%s.%s' % (section, name): 'test (V3)'})))
    with pytest.raises(P.ProfileError, match=r"%s.%s: vLLM does not carry it to its Ray workers.*set it under ray.env"
                       % (section, name)):
        P.load('minimax-m27-nvfp4', raw)


@pytest.mark.rule("M1")
def test_a_name_the_engine_asks_vllm_to_carry_to_its_ray_workers_is_taken():
    # vLLM adds the names its VLLM_RAY_EXTRA_ENV_VARS_TO_COPY lists to what it copies (ray_env.py);
    # a name left out of that list is still refused.
    def named(listed):
        return _broken(lambda p: (p['device_env'].update({'TORCH_CUDA_ARCH_LIST': '12.1a', 'CUTE_DSL_ARCH': 'sm_121a',
                                                          'VLLM_RAY_EXTRA_ENV_VARS_TO_COPY': listed}),
                                  p['why'].update({'device_env': 'test (V1)'})))
    profile = P.load('minimax-m27-nvfp4', named('TORCH_CUDA_ARCH_LIST, CUTE_DSL_ARCH'))
    assert profile['device_env']['CUTE_DSL_ARCH'] == 'sm_121a'
    with pytest.raises(P.ProfileError, match=r"device_env.CUTE_DSL_ARCH: vLLM does not carry it.*or name it in "
                                             r"VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"):
        P.load('minimax-m27-nvfp4', named('TORCH_CUDA_ARCH_LIST'))


def test_variables_vllm_carries_and_ray_env_take_any_name():
    raw = _broken(lambda p: (p['env'].update({'NCCL_DEBUG_SUBSYS': 'INIT', 'PYTHONHASHSEED': '0'}),
                             p['ray']['env'].update({'SAFETENSORS_FAST_GPU': '1'}),
                             p['why'].update({'env': 'test (N5)', 'ray.env': 'test (V3)'})))
    profile = P.load('minimax-m27-nvfp4', raw)
    assert profile['ray']['env']['SAFETENSORS_FAST_GPU'] == '1'


@pytest.mark.parametrize('field, image', [('image', 'vllm-node:latest'), ('image', 'vllm-node'),
                                          ('image', 'localhost:5000/vllm-node'), ('sglang.image', 'lmsysorg/sglang:latest')])
@pytest.mark.rule("M1")
def test_an_image_that_is_not_pinned_is_refused_with_the_fix(field, image):
    def plant(p):
        if field == 'image':
            p['image'] = image
        else:
            p['sglang']['image'] = image
    with pytest.raises(P.ProfileError, match=r"%s: image %s is not pinned.*Fix: name a tag that says the version.*\(M1\)"
                       % (re.escape(field), re.escape(image))):
        P.load('minimax-m27-nvfp4', _broken(plant))


@pytest.mark.parametrize('image', ['vllm-node:0.32.0', 'localhost:5000/vllm-node:0.32.0', 'nvcr.io/nvidia/vllm:26.04-py3',
                                   'vllm-node@sha256:' + '0' * 64])
def test_a_pinned_image_passes(image):
    assert P.pinned_image(image)
    assert P.load('minimax-m27-nvfp4', _broken(lambda p: p.update({'image': image})))['image'] == image


@pytest.mark.rule("M3")
@pytest.mark.parametrize('revision', ['main', 'refs/pr/1', '0123456789ab', 'F' * 40])
def test_a_model_revision_that_is_no_commit_is_refused(revision):
    # A profile names the commit it was reviewed at, never a branch or tag.
    with pytest.raises(P.ProfileError, match=r'model.revision: must be a 40-digit commit of model.repo'):
        P.load('minimax-m27-nvfp4', _broken(lambda p: p['model'].update({'revision': revision})))
    commit = '0123456789abcdef0123456789abcdef01234567'
    assert P.load('minimax-m27-nvfp4', _broken(lambda p: p['model'].update({'revision': commit})))['model']['revision'] == commit


def test_the_ranks_must_be_one_per_node():
    raw = _broken(lambda p: p.update({'tensor_parallel_size': 3}))
    with pytest.raises(P.ProfileError, match=r'TP 3 x PP 1 x DP 1 over 2 nodes'):
        P.load('minimax-m27-nvfp4', raw)


@pytest.mark.parametrize('stages, message', [
    (0, 'must be an integer >= 1'),
    (63, "must not exceed the model's 62 layers"),
    (4, 'TP 2 x PP 4 x DP 1 over 2 nodes'),  # 8 ranks: fine for vLLM, but a GB10 has one GPU
])
def test_pipeline_stages_are_whole_layers_one_per_node(stages, message):
    raw = _broken(lambda p: p.update({'pipeline_parallel_size': stages}))
    with pytest.raises(P.ProfileError, match=re.escape(message) if '(' not in message else message):
        P.load('minimax-m27-nvfp4', raw)


@pytest.mark.parametrize('change, field, message', [
    (lambda p: p.update({'data_parallel_size': 0}), 'data_parallel_size', 'must be an integer >= 1'),
    (lambda p: p.update({'data_parallel_size': 2}), 'tensor_parallel_size', 'TP 1 x PP 1 x DP 2 over 3 nodes'),
    (lambda p: p.update({'tensor_parallel_size': 3}), 'data_parallel_size', 'one whole replica (TP 1, PP 1)'),
    (lambda p: p['engine_args'].update({'distributed-executor-backend': 'ray'}), 'data_parallel_size',
     "executor only: set engine_args.distributed-executor-backend: mp"),
    (lambda p: p['model'].pop('expert_weights_gb'), 'model.expert_weights_gb', 'splits over the ranks'),
    (lambda p: p['model'].update({'expert_weights_gb': 150}), 'model.expert_weights_gb', 'below model.weights_gb 141.05'),
])
def test_data_parallel_profiles_are_a_replica_per_node_under_vllms_own_executor(change, field, message):
    raw = copy.deepcopy(RAW)
    change(raw['minimax-m27-nvfp4-dp3ep'])
    with pytest.raises(P.ProfileError, match=re.escape(field) + '.*' + re.escape(message)):
        P.load('minimax-m27-nvfp4-dp3ep', raw)


def test_gb10_executor_ray_is_refused_for_a_data_parallel_profile_naming_the_fix():
    with pytest.raises(P.ProfileError, match=r'data_parallel_size: across nodes .* set engine_args.distributed-executor-backend: mp'):
        P.load('minimax-m27-nvfp4-dp3ep', RAW, executor_choice='ray')


def test_refused_sglang_needs_reason_with_rule_id():
    raw = copy.deepcopy(RAW)
    raw['deepseek-v4-flash']['sglang']['reason'] = 'does not work'
    with pytest.raises(P.ProfileError, match=r'sglang.reason: .*rule ID \(S4\)'):
        P.load('deepseek-v4-flash', raw)


def test_null_in_overlay_deletes_and_dicts_merge():
    merged = P.merge_overlay({'device_args': {'a': 1, 'b': 2}, 'image': 'x'},
                             {'device_args': {'a': None, 'c': 3}}, 't')
    assert merged == {'device_args': {'b': 2, 'c': 3}, 'image': 'x'}


def test_overlay_file_is_limited_to_the_allowed_keys():
    assert set(SIM) <= set(P.OVERLAY_KEYS)


@pytest.mark.parametrize('name', ['../minimax-m3-nvfp4', 'overlays/sim-cpu', '/etc/passwd', '..', '.hidden',
                                  'a\\b', 'minimax-m27-nvfp4/../minimax-m3-nvfp4', ''])
def test_a_profile_name_that_is_a_path_is_refused_with_the_known_names(name):
    with pytest.raises(P.ProfileError) as err:
        P.load(name, RAW)
    message = str(err.value)
    assert 'is not a name' in message and '(gb10_profile)' in message, message
    assert 'minimax-m27-nvfp4' in message and 'minimax-m3-nvfp4' in message, message


@pytest.mark.parametrize('name', ['../minimax-m3-nvfp4', 'sub/sim-cpu', '..'])
def test_an_overlay_name_that_is_a_path_is_refused_with_the_known_names(name):
    with pytest.raises(P.ProfileError) as err:
        P.check_name(name, ['sim-cpu'], 'overlay')
    message = str(err.value)
    assert "profile overlay %r (gb10_profile_overlay) is not a name" % name in message, message
    assert 'one of sim-cpu' in message and 'Leave it empty on real Sparks' in message, message


def test_plain_names_pass_the_name_check():
    for name in list(RAW) + ['sim-cpu', 'site_a.v2']:
        assert P.check_name(name, RAW) == name


@pytest.mark.rule("A1")
@pytest.mark.parametrize('host', ['0.0.0.0', '192.168.1.10', '::'])
def test_a_profile_whose_engine_faces_the_network_is_refused(host):
    # A1: vLLM's --api-key leaves /invocations, /tokenize, /load ... open, so only the API gateway
    # may face clients; the engine binds the head's loopback.
    raw = _broken(lambda p: p['serve'].update({'host': host}))
    with pytest.raises(P.ProfileError, match=r"serve.host: must be the head's loopback .*not '%s'.*API gateway"
                       % re.escape(host)):
        P.load('minimax-m27-nvfp4', raw)


@pytest.mark.parametrize('name', sorted(RAW))
def test_every_shipped_profile_binds_the_engine_to_loopback(name):
    assert P.load(name, RAW)['serve']['host'] == '127.0.0.1', name


@pytest.mark.rule("X1")
def test_the_cluster_may_choose_the_executor_and_the_reason_says_so():
    raw = copy.deepcopy(RAW)
    chosen = P.load('minimax-m27-nvfp4', raw, executor_choice='mp')
    assert chosen['engine_args']['distributed-executor-backend'] == 'mp'
    assert 'gb10_executor=mp' in chosen['why']['engine_args.distributed-executor-backend']
    # The profile's own choice again: nothing changes, its own reason stays.
    same = P.load('minimax-m27-nvfp4', raw, executor_choice='ray')
    assert same == P.load('minimax-m27-nvfp4', raw)
    assert RAW == raw  # the files as read are not changed


@pytest.mark.parametrize('choice, message', [
    ('mpi', 'one of ray, mp'),
    ('external_launcher', 'one of ray, mp'),
])
def test_an_unknown_executor_is_refused_with_the_known_ones(choice, message):
    with pytest.raises(P.ProfileError, match=message):
        P.load('minimax-m27-nvfp4', copy.deepcopy(RAW), executor_choice=choice)


@pytest.mark.rule("O8")
def test_the_cluster_may_choose_the_serving_image_and_the_reason_says_so():
    raw = copy.deepcopy(RAW)
    chosen = P.load('minimax-m27-nvfp4', raw, image_choice='vllm-node:0.33.0')
    assert chosen['image'] == 'vllm-node:0.33.0'
    assert 'gb10_profile_image=vllm-node:0.33.0 (the profile says vllm-node:0.32.0' in chosen['why']['image']
    # Over an overlay's image too: the choice is the cluster's, made last.
    sim = P.load('minimax-m27-nvfp4', raw, overlay={'image': 'gb10-sim-serving:local'}, overlay_name='sim',
                 image_choice='gb10-sim-serving:variant')
    assert sim['image'] == 'gb10-sim-serving:variant'
    # The profile's own image again: nothing changes, its own reason stays.
    assert P.load('minimax-m27-nvfp4', raw, image_choice='vllm-node:0.32.0') == P.load('minimax-m27-nvfp4', raw)
    assert RAW == raw


@pytest.mark.parametrize('choice, message', [
    ('vllm-node', 'image vllm-node is not pinned'),
    ('vllm-node:latest', 'is not pinned'),
    ('vllm-node:0.33.0 --privileged', 'must be one image name'),
    (' vllm-node:0.33.0', 'must be one image name'),
])
def test_an_unpinned_or_malformed_image_choice_is_refused(choice, message):
    with pytest.raises(P.ProfileError, match=message):
        P.load('minimax-m27-nvfp4', copy.deepcopy(RAW), image_choice=choice)


@pytest.mark.rule("O8")
@pytest.mark.parametrize('gate, message', [
    ({'decode_within_pct': 15}, None),
    ({'decode_within_pct': 0}, None),
    ({'decode_within_pct': 100}, 'from 0 to below 100'),
    ({'decode_within_pct': '15'}, 'from 0 to below 100'),
    ({'decode_within_pct': 15, 'ttft_within_pct': 10}, 'decode_within_pct alone'),
    (15, 'decode_within_pct alone'),
])
def test_the_upgrade_gate_is_a_percentage_below_100(gate, message):
    raw = copy.deepcopy(RAW)
    raw['minimax-m27-nvfp4']['upgrade_gate'] = gate
    if message is None:
        assert P.load('minimax-m27-nvfp4', raw)['upgrade_gate'] == gate
    else:
        with pytest.raises(P.ProfileError, match='upgrade_gate.*' + message):
            P.load('minimax-m27-nvfp4', raw)


def test_a_multinode_vllm_profile_must_name_its_executor():
    raw = copy.deepcopy(RAW)
    del raw['minimax-m27-nvfp4']['engine_args']['distributed-executor-backend']
    with pytest.raises(P.ProfileError, match='distributed-executor-backend.*must name how the ranks reach'):
        P.load('minimax-m27-nvfp4', raw)


@pytest.mark.rule("A6")
@pytest.mark.parametrize('name', ['minimax-m2.7\n}\nserver { listen 8443; location / { proxy_pass http://127.0.0.1:8000; } }',
                                  'm"x', 'two words', '', 'a;b', 'x' * 129])
def test_a_served_name_that_is_not_a_model_name_is_refused_naming_the_field(name):
    # It is written into the gateway's configuration: a newline there added an open server.
    raw = _broken(lambda p: p['model'].update({'served_name': name}))
    with pytest.raises(P.ProfileError, match=r'model.served_name'):
        P.load('minimax-m27-nvfp4', raw)


@pytest.mark.rule("A6")
@pytest.mark.parametrize('path', ['/', '/etc', '/run', '/root/.ssh', '/models', '/models/../etc', '/models/a/../../etc',
                                  '/models/x\ny', '/models/a:b', '/models//x', '/models/.hidden', 'models/x'])
def test_a_model_path_outside_the_models_root_is_refused(path):
    # The path becomes a read-write bind of every serving container (/run brings the Docker socket),
    # the download's destination, a line of rsyncd.conf and a tree copied over every worker.
    raw = _broken(lambda p: p['model'].update({'path': path}))
    with pytest.raises(P.ProfileError, match=r'model.path'):
        P.load('minimax-m27-nvfp4', raw)


@pytest.mark.rule("A6", "A1")
@pytest.mark.parametrize('section, key', [('engine_args', 'host'), ('engine_args', 'port'), ('device_args', 'host'),
                                          ('engine_args', 'api_key'), ('size_args', 'uds'),
                                          ('engine_args', 'allowed-origins'), ('engine_args', 'ssl-keyfile'),
                                          ('engine_args', 'root-path'), ('engine_args', 'master-addr'),
                                          ('engine_args', 'middleware'), ('device_args', 'data-parallel-address'),
                                          ('engine_args', 'allowed-media-domains'),
                                          ('engine_args', 'allowed_local_media_path')])
def test_a_flag_the_collection_sets_is_refused_in_every_args_section(section, key):
    # vLLM keeps the last of a repeated flag: host 0.0.0.0 after the collection's --host 127.0.0.1 wins.
    raw = _broken(lambda p: (p[section].update({key: '0.0.0.0'}), p['why'].update({'%s.%s' % (section, key): 'x (A1)'})))
    with pytest.raises(P.ProfileError, match=r'%s.%s: is set by the collection itself' % (section, key)):
        P.load('minimax-m27-nvfp4', raw)


@pytest.mark.rule("A6")
@pytest.mark.parametrize('domains', [['127.0.0.1'], ['localhost'], ['*.example.com'], ['https://images.example.com'],
                                     ['images.example.com:443'], 'images.example.com', ['Images.Example.com'], [['x.io']]])
def test_a_media_domain_that_is_no_host_name_is_refused_naming_the_field(domains):
    # An address, a scheme, a port or a wildcard would let the engine fetch from the head's own network.
    raw = _broken(lambda p: p['serve'].update({'media_domains': domains}))
    with pytest.raises(P.ProfileError, match=r'serve.media_domains: must be a list of host names'):
        P.load('minimax-m27-nvfp4', raw)


@pytest.mark.rule("A6")
def test_host_names_a_site_trusts_are_taken_as_the_engines_media_domains():
    raw = _broken(lambda p: p['serve'].update({'media_domains': ['images.example.com', 'cdn.example.org']}))
    assert P.load('minimax-m27-nvfp4', raw)['serve']['media_domains'] == ['images.example.com', 'cdn.example.org']


@pytest.mark.rule("V1")
@pytest.mark.parametrize('packages, said', [
    ({'b12x': {'source': 'https://github.com/lukealonso/b12x.git', 'commit': 'master'}},
     r'image_packages.b12x.commit: must be a 40-digit commit'),
    ({'b12x': {'source': 'git@github.com:lukealonso/b12x.git', 'commit': '0' * 40}},
     r'image_packages.b12x.source: must be the https URL'),
    ({'b12x': {'commit': '0' * 40}}, r'image_packages.b12x: must have exactly source .* and commit'),
    ({'b12x ; rm': {'source': 'https://github.com/lukealonso/b12x.git', 'commit': '0' * 40}},
     r'is not a Python distribution name'),
])
def test_image_packages_name_a_distribution_its_https_repository_and_a_full_commit(packages, said):
    raw = _broken(lambda p: (p.update({'image_packages': packages}), p['why'].update({'image_packages': 'test (V1)'})))
    with pytest.raises(P.ProfileError, match=said):
        P.load('minimax-m27-nvfp4', raw)
