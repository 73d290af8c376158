"""Planner of role serving_image: the source node, a pull only where nobody has the
image, copies only to nodes that lack it or hold a different ID, refusals before anything changes."""
import json

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import serving_image as si

ID_A = 'sha256:' + 'a' * 64
ID_B = 'sha256:' + 'b' * 64


def node(host, image_id='', ip=None, gate=True, client=True, zstd=True, docker='28.3.1'):
    return {'host': host, 'id': image_id, 'cluster_ip': ip if ip is not None else '10.0.0.%s' % host[-1],
            'gate_load': gate, 'client': client, 'zstd': zstd, 'docker_version': docker}


def test_registry_reference():
    assert si.is_registry_reference('nvcr.io/nvidia/vllm:25.09-py3')
    assert si.is_registry_reference('localhost:5000/vllm-node:latest')
    assert si.is_registry_reference('localhost/x')
    assert not si.is_registry_reference('vllm-node:latest')
    assert not si.is_registry_reference('eugr/spark-vllm-docker:latest')
    assert not si.is_registry_reference('')


def test_all_have_the_same_id_is_nothing_to_do():
    p = si.plan('vllm-node:latest', [node('spark1', ID_A), node('spark2', ID_A), node('spark3', ID_A)])
    assert p['problems'] == []
    assert p['source'] == 'spark1' and not p['pull'] and p['targets'] == []
    assert p['actions'] == {'spark1': 'had', 'spark2': 'had', 'spark3': 'had'}
    assert p['changed'] is False


def test_missing_and_different_ids_get_a_copy_from_the_head():
    p = si.plan('vllm-node:latest', [node('spark1', ID_A), node('spark2'), node('spark3', ID_B)])
    assert p['problems'] == []
    assert p['source'] == 'spark1' and p['source_id'] == ID_A
    assert p['targets'] == ['spark2', 'spark3']
    assert p['targets_ip'] == {'spark2': '10.0.0.2', 'spark3': '10.0.0.3'}
    assert p['actions'] == {'spark1': 'had', 'spark2': 'copy', 'spark3': 'copy'}
    assert p['changed'] is True


@pytest.mark.rule("A5")
def test_a_peer_is_never_the_source_of_the_heads_image():
    # A worker that tagged an image of its own with the name the head lacks (the next tag of an
    # upgrade): nothing is copied from it; a registry name is pulled on the head instead.
    p = si.plan('nvcr.io/nvidia/vllm:25.09-py3', [node('spark1'), node('spark2', ID_A)])
    assert p['problems'] == [] and p['pull'] and p['source'] == 'spark1' and p['source_id'] == ''
    assert p['actions'] == {'spark1': 'pull', 'spark2': 'copy'}
    # A local name: refused, naming the holder and why it is not taken.
    p = si.plan('vllm-node:0.32.0', [node('spark1'), node('spark2', ID_A), node('spark3', ID_B)])
    assert len(p['problems']) == 1 and p['changed'] is False
    assert 'spark2, spark3 hold an image of that name, which is never copied onto the head (A5' in p['problems'][0]
    assert 'Fix: load or build it on spark1' in p['problems'][0]


@pytest.mark.rule("A5")
def test_a_source_other_than_the_head_is_refused():
    p = si.plan('vllm-node:latest', [node('spark1', ID_B), node('spark2', ID_A)], source='spark2')
    assert p['problems'] and 'serving_image_source=spark2' in p['problems'][0] and p['targets'] == []
    assert si.plan('vllm-node:latest', [node('spark1', ID_A), node('spark2')], source='spark1')['targets'] == ['spark2']


def test_registry_reference_missing_everywhere_is_pulled_on_the_source_only():
    p = si.plan('nvcr.io/nvidia/vllm:25.09-py3', [node('spark1'), node('spark2')])
    assert p['problems'] == [] and p['pull'] and p['source'] == 'spark1'
    assert p['actions'] == {'spark1': 'pull', 'spark2': 'copy'}
    assert p['targets'] == ['spark2'] and p['source_id'] == ''


def test_local_name_missing_everywhere_is_refused_naming_host_variable_and_fix():
    p = si.plan('vllm-node:latest', [node('spark1'), node('spark2')])
    assert len(p['problems']) == 1
    msg = p['problems'][0]
    assert 'vllm-node:latest is not on the head spark1' in msg
    assert 'serving_image_pull' in msg and 'Fix: load or build it on spark1' in msg
    assert p['changed'] is False


def test_pull_always_pulls_a_local_name_and_never_refuses_a_registry_one():
    assert si.plan('vllm-node:latest', [node('spark1'), node('spark2')], pull='always')['pull']
    p = si.plan('nvcr.io/nvidia/vllm:25.09-py3', [node('spark1'), node('spark2')], pull='never')
    assert 'serving_image_pull=never' in p['problems'][0]


def test_a_build_recipe_builds_on_the_source_only_where_no_node_has_the_image():
    p = si.plan('vllm-node:latest', [node('spark1'), node('spark2')], build_recipe='docker/Dockerfile')
    assert p['problems'] == [] and p['build'] and not p['pull'] and p['changed']
    assert p['actions'] == {'spark1': 'build', 'spark2': 'copy'} and p['targets'] == ['spark2']
    # Before a pull, too: the user named how the image is made.
    p = si.plan('nvcr.io/nvidia/vllm:25.09-py3', [node('spark1'), node('spark2')], build_recipe='docker')
    assert p['build'] and not p['pull']
    # A peer that has it is not copied from (A5): built on the head, then copied over the peer's.
    p = si.plan('vllm-node:latest', [node('spark1'), node('spark2', ID_A)], build_recipe='docker/Dockerfile')
    assert p['build'] and p['source'] == 'spark1' and p['actions'] == {'spark1': 'build', 'spark2': 'copy'}


def test_a_target_without_cluster_ip_is_refused():
    p = si.plan('vllm-node:latest', [node('spark1', ID_A), node('spark2', ip='')])
    assert any(m.startswith('host spark2: gb10_cluster_ip is not set') for m in p['problems'])
    assert p['changed'] is False


def test_a_mesh_copy_goes_to_the_address_of_the_direct_link():
    # A 3-node ring: each pair on a subnet of its own (N6), gb10_cluster_ip on the 10 GbE port;
    # the peers' cluster keys are accepted from the direct links' addresses only.
    head = dict(node('spark1', ID_A, ip='10.10.0.1'), link_ips={'spark2': '192.168.101.2', 'spark3': '192.168.103.3'})
    p = si.plan('vllm-node:latest', [head, node('spark2', ip='10.10.0.2'), node('spark3', ip='10.10.0.3')])
    assert p['problems'] == [] and p['targets_ip'] == {'spark2': '192.168.101.2', 'spark3': '192.168.103.3'}
    # Without cluster_link's view (the role alone): the targets' cluster addresses.
    p = si.plan('vllm-node:latest', [node('spark1', ID_A), node('spark2'), node('spark3')])
    assert p['targets_ip'] == {'spark2': '10.0.0.2', 'spark3': '10.0.0.3'}


def test_cluster_ip_is_not_needed_when_nothing_is_copied():
    p = si.plan('vllm-node:latest', [node('spark1', ID_A, ip=''), node('spark2', ID_A, ip='')])
    assert p['problems'] == []


def test_a_target_without_the_gate_and_a_source_without_the_client_are_refused():
    p = si.plan('vllm-node:latest', [node('spark1', ID_A, client=False), node('spark2', gate=False)])
    text = ' | '.join(p['problems'])
    assert 'host spark1: /usr/local/sbin/gb10-cluster-ssh is missing' in text
    assert 'host spark2: its cluster-key gate' in text and 'is missing' in text
    assert 'Fix: run role gb10.serving.cluster_link there first' in text


def test_source_not_in_the_run_and_bad_choices_are_refused():
    assert 'serving_image_source=spark9' in si.plan('x.io/a:1', [node('spark1')], source='spark9')['problems'][0]
    assert 'serving_image_pull=sometimes' in si.plan('x.io/a:1', [node('spark1')], pull='sometimes')['problems'][0]
    assert 'serving_image_compression=xz' in si.plan('x.io/a:1', [node('spark1')], compression='xz')['problems'][0]
    assert 'serving_image_name is empty' in si.plan('', [node('spark1')])['problems'][0]
    assert 'has no hosts' in si.plan('a', [])['problems'][0]


def test_compression_zstd_only_when_every_target_docker_reads_it():
    nodes = [node('spark1', ID_A), node('spark2', docker='28.3.1'), node('spark3', docker='27.0.3')]
    assert si.plan('a', nodes)['compression'] == 'zstd'
    nodes[2]['docker_version'] = '20.10.24+dfsg1'
    assert si.plan('a', nodes)['compression'] == 'gzip'
    nodes[0]['zstd'] = False
    nodes[2]['docker_version'] = '28.0.0'
    assert si.plan('a', nodes)['compression'] == 'gzip'
    assert si.plan('a', nodes, compression='zstd')['compression'] == 'zstd'
    # The raw tar only when asked for (a link faster than the compressor).
    assert si.plan('a', nodes, compression='none')['compression'] == 'none'
    assert si.plan('a', nodes, compression='lz4')['problems'] == [
        'serving_image_compression=lz4 must be auto, zstd, gzip or none.']


def test_docker_major():
    assert si.docker_major('20.10.24+dfsg1') == 20 and si.docker_major('') == 0


# A copy leaves out the layers a target holds already. Diff IDs and chain IDs of an image
# built on this project's machine (Docker 20.10), as its layer store keeps them
# (/var/lib/docker/image/overlay2/layerdb/sha256/<chain ID>/diff).
DIFF_IDS = ['sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
            'sha256:7aa7f18429206de4a0bd66a4caf63a05fa86fc389e795a2cd34a9ed1cb2c4e53',
            'sha256:8e62d67a8f6ff08a7c42d229c4fd5f542703f971d057c92d76e6255dd238fce6']
CHAIN_IDS = ['sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
             'sha256:412e44b15dd4cdf21a95bc10281db4cf0ecb111fd0a77f59a5aba25bbd3e7665',
             'sha256:4e78ef129c1dba8d63eb3e9ae25f5d43deb8c777ce6c38fd6e2e9a596f61665b']
OTHER_LAYER = 'sha256:' + 'c' * 64


def test_chain_ids_are_dockers_layer_store_keys():
    assert si.chain_ids(DIFF_IDS) == CHAIN_IDS
    assert si.chain_ids([]) == []


def test_layers_held_counts_the_leading_layers_under_any_image():
    # An earlier build: the same first two layers, another last one.
    assert si.layers_held(DIFF_IDS, [DIFF_IDS[:2] + [OTHER_LAYER]]) == 2
    assert si.layers_held(DIFF_IDS, [DIFF_IDS[:1], ['sha256:' + 'd' * 64]]) == 1
    assert si.layers_held(DIFF_IDS, [DIFF_IDS]) == 3
    assert si.layers_held(DIFF_IDS, []) == 0
    # The same layer over another one is another chain: not held.
    assert si.layers_held(DIFF_IDS, [[OTHER_LAYER] + DIFF_IDS[1:]]) == 0


def test_each_target_gets_the_count_of_layers_it_holds():
    source = dict(node('spark1', ID_A), layers=DIFF_IDS, images_layers=[DIFF_IDS])
    p = si.plan('vllm-node:latest', [source, dict(node('spark2'), images_layers=[DIFF_IDS[:2]]),
                                     dict(node('spark3', ID_B), images_layers=[[OTHER_LAYER]])])
    assert p['problems'] == []
    assert p['targets_layers'] == {'spark2': 2, 'spark3': 0}


def test_an_image_pulled_or_built_first_goes_whole():
    # Its layers are not known when the plan is made.
    p = si.plan('nvcr.io/nvidia/vllm:25.09-py3', [node('spark1'), dict(node('spark2'), images_layers=[DIFF_IDS])])
    assert p['pull'] and p['targets_layers'] == {'spark2': 0}


@pytest.mark.rule("N7")
def test_cross_node_cuda_graphs_refuse_an_nccl_before_2_30_4_and_eager_or_graphless_launches_pass():
    # vllm-project/vllm issue 52504: on two DGX Sparks, CUDA graphs whose NCCL collectives cross the
    # nodes deadlock in replay on NCCL 2.28.9 (the version torch 2.11's pip wheel brings); 2.30.4 fixes
    # it. Asked through the filter with the shipped profiles, as role serving_image asks it.
    from ansible_collections.gb10.serving.plugins.filter.image_verdict import _image_verdict
    from ansible_collections.gb10.serving.plugins.module_utils.profile import cuda_graphs
    from profile_helpers import real, sim

    def verdict(code, profile):
        probe = {"ray": {"version": "2.60.0", "error": None},
                 "nccl": {"version": code, "path": "/usr/lib/aarch64-linux-gnu/libnccl.so.2", "kind": "system",
                          "name": "libnccl.so.2", "asked": "vllm", "error": None},
                 "nccl_other": [], "nccl_conf": [],
                 "packages": {"b12x": {"version": "1.3.0", "url": "https://github.com/lukealonso/b12x.git",
                                       "commit": B12X, "error": None}}}
        output = "GB10_IMAGE_PROBE " + json.dumps(probe)
        return _image_verdict({"container": {"Output": output, "State": {"ExitCode": 0}}}, "x:1", "spark1",
                              profile=profile)["refusals"]

    m3, m27 = real("minimax-m3-nvfp4"), real("minimax-m27-nvfp4")
    assert cuda_graphs(m3) and not cuda_graphs(m27) and not cuda_graphs(sim("minimax-m3-nvfp4"))
    refused = verdict(22809, m3)
    assert len(refused) == 1 and "captures CUDA graphs across the nodes" in refused[0], refused
    assert "NCCL 2.30.4 or later" in refused[0] and "enforce-eager: true" in refused[0], refused
    assert verdict(23004, m3) == []
    # M2.7's recipe runs cudagraph_mode NONE; the simulation's overlay runs eager; one node crosses nothing.
    assert verdict(22809, m27) == [] and verdict(22809, sim("minimax-m3-nvfp4")) == []
    assert verdict(22809, dict(m3, nodes=1)) == [] and verdict(22809, None) == []


B12X = "08e980c303b0b6291700a6b85aa09aa874fc27cb"  # the M3 profile's image_packages


@pytest.mark.rule("V1")
@pytest.mark.parametrize("held, said", [
    (None, "has no b12x (not asked)"),
    ({"version": None, "url": None, "commit": None, "error": "PackageNotFoundError: No package metadata was found for b12x"},
     "has no b12x (PackageNotFoundError"),
    ({"version": "1.3.0", "url": "https://github.com/lukealonso/b12x.git", "commit": "c4222d09ad5cf52e4e5765f8218988379d53e080",
      "error": None}, "has b12x 1.3.0 from https://github.com/lukealonso/b12x.git at commit c4222d09ad5cf52e4e5765f8218988379d53e080"),
    ({"version": "1.3.0", "url": None, "commit": None, "error": None}, "has b12x 1.3.0, not installed from a repository commit (pip recorded none)"),
])
def test_an_image_without_the_profiles_package_commit_is_refused_with_the_line_that_builds_it(held, said):
    # The published M3 launcher pip-installs b12x at 08e980c at every container start; the collection
    # asks the image instead, before any copy, and names the line a build recipe runs.
    from ansible_collections.gb10.serving.plugins.filter.image_verdict import _image_verdict
    from profile_helpers import real, sim

    m3 = real("minimax-m3-nvfp4")
    assert m3["image_packages"] == {"b12x": {"source": "https://github.com/lukealonso/b12x.git", "commit": B12X}}
    probe = {"ray": {"version": "2.60.0", "error": None},
             "nccl": {"version": 23007, "path": "/usr/lib/libnccl.so.2", "kind": "system", "name": "libnccl.so.2",
                      "asked": "vllm", "error": None},
             "nccl_other": [], "nccl_conf": [], "packages": {} if held is None else {"b12x": held}}

    def refusals(profile, found):
        output = "GB10_IMAGE_PROBE " + json.dumps(dict(probe, packages=found))
        return _image_verdict({"container": {"Output": output, "State": {"ExitCode": 0}}}, "m3:1", "spark1",
                              profile=profile)["refusals"]

    refused = refusals(m3, probe["packages"])
    assert len(refused) == 1, refused
    assert refused[0].startswith("host spark1: image m3:1 " + said), refused
    assert ("needs it from https://github.com/lukealonso/b12x.git at commit %s" % B12X) in refused[0]
    assert ('pip install --no-deps --force-reinstall "git+https://github.com/lukealonso/b12x.git@%s"' % B12X) in refused[0]
    # The commit pip recorded passes; the simulation's overlay names no package.
    assert refusals(m3, {"b12x": dict(held or {}, version="1.3.0", commit=B12X)}) == []
    assert refusals(sim("minimax-m3-nvfp4"), probe["packages"]) == []
