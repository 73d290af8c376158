from ansible_collections.gb10.serving.plugins.lookup import converge_inputs


def test_only_the_collections_variables_count_and_not_the_runs_own_facts():
    names = ['gb10_profile', 'vllm_serve_port', 'cluster_link_ports', 'ansible_host', 'gb10_deploy_profile',
             'gb10_converge_inputs', 'gb10_converge', 'gb10_converged_x', 'vllm_serve_probe_extra', 'unrelated']
    assert converge_inputs.input_names(names, ['vllm_serve', 'cluster_link']) == [
        'cluster_link_ports', 'gb10_converged_x', 'gb10_profile', 'vllm_serve_port', 'vllm_serve_probe_extra']


def test_a_changed_value_or_member_gives_another_key():
    base = converge_inputs.inputs_digest('c', ['a', 'b'], {'gb10_profile': 'm27'})
    assert base == converge_inputs.inputs_digest('c', ['a', 'b'], {'gb10_profile': 'm27'})
    assert base != converge_inputs.inputs_digest('c', ['a', 'b'], {'gb10_profile': 'm3'})
    assert base != converge_inputs.inputs_digest('c', ['a'], {'gb10_profile': 'm27'})
    assert base != converge_inputs.inputs_digest('d', ['a', 'b'], {'gb10_profile': 'm27'})


def test_the_content_key_follows_the_files_not_their_caches(tmp_path):
    (tmp_path / 'roles' / 'r' / 'tasks').mkdir(parents=True)
    (tmp_path / 'roles' / 'r' / 'tasks' / 'main.yml').write_text('---\n')
    first = converge_inputs.content_digest(str(tmp_path))
    (tmp_path / 'roles' / 'r' / '__pycache__').mkdir()
    (tmp_path / 'roles' / 'r' / '__pycache__' / 'x.pyc').write_bytes(b'\0')
    assert converge_inputs.content_digest(str(tmp_path)) == first
    (tmp_path / 'roles' / 'r' / 'tasks' / 'main.yml').write_text('---\n# changed\n')
    assert converge_inputs.content_digest(str(tmp_path)) != first


def test_a_changed_site_recipe_changes_the_key(tmp_path):
    # A site's recipe (gb10_profiles_dir) is an input: a new image or flag there is a new launch.
    site = tmp_path / 'site-recipes'
    site.mkdir()
    (site / 'ours.yml').write_text('image: vllm-node:0.32.0\n')
    first = converge_inputs.site_recipes_digest(str(site))
    assert first and first == converge_inputs.site_recipes_digest(str(site))
    (site / 'ours.yml').write_text('image: vllm-node:0.32.1\n')
    assert converge_inputs.site_recipes_digest(str(site)) != first
    assert converge_inputs.site_recipes_digest('') == '' == converge_inputs.site_recipes_digest(str(tmp_path / 'none'))
