"""Module gb10.serving.serving_image_plan: the role's plan (source, pull, targets) or a refusal
before anything changes, the same in check mode."""
import yaml

from ansible_collections.gb10.serving.plugins.modules import serving_image_plan

ID_A = 'sha256:' + 'a' * 64


def nodes(second_id='', second_ip='10.0.0.2'):
    return [
        {'host': 'spark1', 'id': ID_A, 'cluster_ip': '10.0.0.1', 'gate_load': True, 'client': True,
         'zstd': True, 'docker_version': '28.3.1'},
        {'host': 'spark2', 'id': second_id, 'cluster_ip': second_ip, 'gate_load': True, 'client': True,
         'zstd': False, 'docker_version': '20.10.24+dfsg1'},
    ]


def test_doc_blocks_are_yaml(module_doc):
    doc = module_doc(serving_image_plan)
    assert doc['module'] == 'serving_image_plan'
    assert doc['attributes']['check_mode']['support'] == 'full'
    assert isinstance(yaml.safe_load(serving_image_plan.EXAMPLES), list)
    assert yaml.safe_load(serving_image_plan.RETURN)


def test_copy_to_the_node_that_lacks_it(run_module):
    failed, result = run_module(serving_image_plan.main, {'image': 'vllm-node:latest', 'nodes': nodes()},
                                check_mode=True)
    assert not failed, result
    assert result['changed'] is False and result['would_change'] is True
    assert result['targets'] == ['spark2'] and result['targets_ip'] == {'spark2': '10.0.0.2'}
    assert result['compression'] == 'gzip'  # spark2's Docker 20.10 cannot load zstd
    assert set(result) - {'changed', 'invocation'} == set(yaml.safe_load(serving_image_plan.RETURN))


def test_nothing_to_do_when_ids_agree(run_module):
    failed, result = run_module(serving_image_plan.main, {'image': 'vllm-node:latest', 'nodes': nodes(ID_A)})
    assert not failed and result['would_change'] is False and result['targets'] == []


def test_refusal_names_host_variable_and_fix(run_module):
    failed, result = run_module(serving_image_plan.main,
                                {'image': 'vllm-node:latest', 'nodes': nodes(second_ip='')})
    assert failed
    assert result['msg'].startswith('serving image refused before anything changed: host spark2: '
                                    'gb10_cluster_ip is not set')
    assert 'Fix: set gb10_cluster_ip' in result['msg']
