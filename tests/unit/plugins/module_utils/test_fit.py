"""Fit planner (M2): weights per node, KV bytes per token from the shape, context that fits."""
import copy

import pytest

from ansible_collections.gb10.serving.plugins.module_utils.fit import (
    FIELD_HOST_GIB, FitError, fit_plan, kv_bytes_per_token_per_node, oom_guard_threshold, shape_from_hf_config)

from profile_helpers import real

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("H10", "V5", "M2")

GIB = 1024 ** 3


def test_m27_fp8_over_two_nodes_is_refused_with_the_numbers():
    plan = fit_plan(real('minimax-m27-fp8'), budget_gib=119.7)
    assert plan['fits'] is False
    # 229 GB / 2 = 114.5 GB = 106.6 GiB per node
    assert plan['weights_per_node_gib'] == round(229e9 / 2 / GIB, 2)
    assert 'weights do not fit (M2)' in plan['reason']
    assert '106.6 GiB per node' in plan['reason']
    assert plan['context_fits'] == 0


def test_m27_nvfp4_fits_two_nodes():
    prof = real('minimax-m27-nvfp4')
    plan = fit_plan(prof, budget_gib=119.7)
    # fp8 KV, 8 KV heads split over TP 2: 2 (K,V) x 62 layers x 4 heads x 128 dims x 1 byte
    assert plan['kv_bytes_per_token'] == 2 * 62 * 4 * 128
    kv_gib = 119.7 * 0.82 - 141.05e9 / 2 / GIB - prof['fit']['overhead_gib']
    assert plan['context_fits'] == int(kv_gib * GIB // plan['kv_bytes_per_token'])
    assert plan['fits'] is True and plan['context_fits'] >= 131072


def test_m27_nvfp4_in_three_pipeline_stages_fits_three_nodes():
    # PP=3, TP=1 under vLLM's own executor. A node holds a third of the weights and the
    # KV of its stage's layers (62 over 3: the largest stage, 21), all 8 KV heads.
    prof = real('minimax-m27-nvfp4-pp3')
    plan = fit_plan(prof, budget_gib=119.7)
    assert plan['weights_per_node_gib'] == round(141.05e9 / 3 / GIB, 2)
    assert plan['kv_bytes_per_token'] == 2 * 21 * 8 * 128
    assert 'TP 1 x PP 3' in plan['reason']
    assert plan['fits'] is True and plan['context_fits'] >= prof['size_args']['max-model-len']
    # The oom guard's figure is the same under either executor: a switch by the launch step alone
    # leaves host prep's guard right (H10).
    ray = copy.deepcopy(prof)
    ray['engine_args']['distributed-executor-backend'] = 'ray'
    assert fit_plan(ray, budget_gib=119.7)['oom_guard_gib'] == plan['oom_guard_gib']


def test_m27_nvfp4_as_three_replicas_with_its_experts_split_fits_three_nodes():
    # DP=3 with expert parallelism. A node holds the whole model but two thirds of the routed
    # experts (133 of 141.05 GB), and the KV of all 62 layers with all 8 KV heads (TP 1).
    prof = real('minimax-m27-nvfp4-dp3ep')
    plan = fit_plan(prof, budget_gib=119.7)
    assert plan['weights_per_node_gib'] == round((141.05 - 133 + 133 / 3.0) * 1e9 / GIB, 2)
    assert plan['kv_bytes_per_token'] == 2 * 62 * 8 * 128
    assert 'DP 3 with expert parallelism (133 GB of experts split)' in plan['reason']
    assert plan['fits'] is True and plan['context_fits'] >= prof['size_args']['max-model-len']
    # Without expert parallelism each replica is the whole 141 GB: weights and KV no longer fit.
    whole = copy.deepcopy(prof)
    del whole['engine_args']['enable-expert-parallel']
    plan = fit_plan(whole, budget_gib=119.7)
    assert plan['weights_per_node_gib'] == round(141.05e9 / GIB, 2)
    assert plan['fits'] is False and 'DP 3 (a whole replica each)' in plan['reason']


def test_asked_context_that_does_not_fit_says_the_largest_that_does():
    plan = fit_plan(real('minimax-m27-nvfp4'), budget_gib=119.7, context=1000000)
    assert plan['fits'] is False
    assert 'KV cache too small' in plan['reason']
    assert 'max-model-len to <= %d' % plan['context_fits'] in plan['reason']


def test_low_free_memory_on_poorest_node_is_refused():
    plan = fit_plan(real('minimax-m27-nvfp4'), budget_gib=119.7, free_gib=11.19)
    assert plan['fits'] is False
    assert '11.2 GiB available' in plan['reason'] and 'page cache (H3)' in plan['reason']


def test_kv_heads_per_rank_round_up_and_replicate():
    shape = {'attention': 'gqa', 'num_layers': 10, 'num_kv_heads': 4, 'head_dim': 64}
    assert kv_bytes_per_token_per_node(shape, 3, 2) == 2 * 10 * 2 * 64 * 2  # 4 heads over 3 ranks: 2 each
    assert kv_bytes_per_token_per_node(dict(shape, num_kv_heads=2), 4, 2) == 2 * 10 * 1 * 64 * 2


def test_mla_latent_is_replicated_per_rank():
    shape = {'attention': 'mla', 'num_layers': 61, 'kv_lora_rank': 512, 'qk_rope_head_dim': 64}
    assert kv_bytes_per_token_per_node(shape, 2, 1) == 61 * 576


def test_shape_from_hf_configs():
    llama = {'num_hidden_layers': 2, 'num_attention_heads': 4, 'num_key_value_heads': 2, 'hidden_size': 64}
    assert shape_from_hf_config(llama) == {'attention': 'gqa', 'num_layers': 2, 'num_kv_heads': 2, 'head_dim': 16}
    mla = {'num_hidden_layers': 61, 'kv_lora_rank': 512, 'qk_rope_head_dim': 64}
    assert shape_from_hf_config(mla)['attention'] == 'mla'
    assert shape_from_hf_config({'text_config': llama})['num_layers'] == 2
    assert shape_from_hf_config({'model_type': 'x'}) is None


def test_shape_override_changes_kv_per_token():
    prof = real('minimax-m27-nvfp4')
    shape = {'attention': 'gqa', 'num_layers': 31, 'num_kv_heads': 8, 'head_dim': 128}
    assert fit_plan(prof, 119.7, shape=shape)['kv_bytes_per_token'] == 2 * 31 * 4 * 128


def test_unknown_kv_dtype_and_bad_budget():
    prof = copy.deepcopy(real('minimax-m27-nvfp4'))
    prof['device_args']['kv-cache-dtype'] = 'int3'
    with pytest.raises(FitError, match='kv-cache-dtype'):
        fit_plan(prof, 119.7)
    with pytest.raises(FitError, match='budget_gib'):
        fit_plan(real('minimax-m27-nvfp4'), 0)


# H10: the OOM guard against what a warm node keeps. The field's figure: a healthy warm M3 TP=3
# head at utilization 0.82 with a 1 GiB object store sat at ~96 % of RAM, ~4.4 GB (4.1 GiB) available.
FIELD_WARM_HEAD_GIB = 4.4e9 / GIB


def test_the_field_head_is_what_the_fit_expects_of_a_warm_m3_node():
    plan = fit_plan(real('minimax-m3-nvfp4'), budget_gib=119.7)
    assert abs(plan['warm_available_gib'] - FIELD_WARM_HEAD_GIB) < 0.1
    assert plan['host_gib'] == FIELD_HOST_GIB


@pytest.mark.rule("H10")
def test_the_guard_never_ends_the_field_healthy_warm_head():
    plan = fit_plan(real('minimax-m3-nvfp4'), budget_gib=119.7)
    assert plan['fits'] and plan['oom_guard_gib'] < FIELD_WARM_HEAD_GIB
    # The fixed 4 % of earlier releases sat above it.
    assert 0.04 * 119.7 > FIELD_WARM_HEAD_GIB


@pytest.mark.rule("H10")
def test_a_profile_that_leaves_the_guard_no_margin_is_refused_with_both_figures():
    prof = copy.deepcopy(real('minimax-m3-nvfp4'))
    prof['gpu_memory_utilization'] = 0.85
    plan = fit_plan(prof, budget_gib=119.7)
    assert plan['fits'] is False
    assert 'a warm node would keep 0.6 GiB available' in plan['reason']
    assert 'under the 2.0 GiB the OOM guard needs' in plan['reason']
    assert 'gpu_memory_utilization to <= 0.83' in plan['reason']
    # ... and that utilization is enough.
    prof['gpu_memory_utilization'] = 0.83
    assert fit_plan(prof, budget_gib=119.7)['fits']


def test_a_profile_measured_otherwise_says_so_in_host_gib():
    prof = copy.deepcopy(real('minimax-m3-nvfp4'))
    prof['gpu_memory_utilization'] = 0.85
    prof['fit']['host_gib'] = 8
    assert fit_plan(prof, budget_gib=119.7)['fits']


def test_guard_threshold_is_half_the_warm_headroom_never_below_the_floor():
    assert oom_guard_threshold(4.1) == {'threshold_gib': 2.05, 'kill_gib': 1.02, 'warm_available_gib': 4.1,
                                        'share': 0.5, 'ok': True}
    low = oom_guard_threshold(1.5)
    assert (low['threshold_gib'], low['ok']) == (1.0, False)
    assert oom_guard_threshold(None) == {'threshold_gib': 1.0, 'kill_gib': 0.5, 'warm_available_gib': None,
                                         'share': 0.5, 'ok': True}


def test_an_operator_threshold_is_judged_against_the_same_margin():
    assert oom_guard_threshold(4.1, explicit_gib=2.0)['ok']
    assert not oom_guard_threshold(4.1, explicit_gib=4.8)['ok']
    with pytest.raises(FitError, match='positive number'):
        oom_guard_threshold(4.1, explicit_gib=0)
    with pytest.raises(FitError, match='share must be between 0 and 1'):
        oom_guard_threshold(4.1, share=1)
