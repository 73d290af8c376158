# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The profile lookup as a playbook calls it: names, never paths.

Run through `ansible localhost -m debug` with the checkout as the collection, as an operator's
-e gb10_profile=... / -e gb10_profile_overlay=... reaches it."""
import json
import os
import shutil
import subprocess
import sys

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PROFILES = os.path.join(TOP, 'profiles')


@pytest.fixture
def profiles_dir(tmp_path):
    """A copy of profiles/ with a valid overlay file one folder above overlays/, which
    overlay='../outside' would reach if the name were taken as a path."""
    copy = tmp_path / 'profiles'
    shutil.copytree(PROFILES, str(copy))
    shutil.copy(os.path.join(PROFILES, 'overlays', 'sim-cpu.yml'), str(copy / 'outside.yml'))
    return str(copy)


def lookup(profiles_dir, profile, overlay='', image=''):
    """(rc, output) of the lookup in an ad-hoc run; names passed as extra vars, like -e."""
    expr = ("{{ lookup('gb10.serving.profile', gb10_profile, overlay=gb10_profile_overlay, "
            "image=gb10_profile_image, profiles_dir=%r).image }}" % profiles_dir)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(TOP, '.collections'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_CONFIG=os.path.join(TOP, 'ansible.cfg'))
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), 'ansible'), 'localhost', '-c', 'local', '-m',
         'ansible.builtin.debug', '-a', 'msg=' + expr, '-e',
         json.dumps({'gb10_profile': profile, 'gb10_profile_overlay': overlay, 'gb10_profile_image': image})],
        cwd=TOP, env=env, capture_output=True, text=True, timeout=120, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def test_the_sim_overlay_loads_by_name(profiles_dir):
    rc, out = lookup(profiles_dir, 'minimax-m27-nvfp4', 'sim-cpu')
    assert rc == 0 and 'gb10-sim-serving:local' in out, out


def test_the_clusters_image_replaces_the_overlays(profiles_dir):
    rc, out = lookup(profiles_dir, 'minimax-m27-nvfp4', 'sim-cpu', 'gb10-sim-serving:variant')
    assert rc == 0 and 'gb10-sim-serving:variant' in out, out
    rc, out = lookup(profiles_dir, 'minimax-m27-nvfp4', 'sim-cpu', 'gb10-sim-serving')
    assert rc != 0 and 'image (gb10_profile_image): image gb10-sim-serving is not pinned' in out, out


def test_an_overlay_path_outside_overlays_is_refused_before_it_is_read(profiles_dir):
    # profiles/outside.yml is a valid overlay: only the name check stands between it and the run.
    rc, out = lookup(profiles_dir, 'minimax-m27-nvfp4', '../outside')
    assert rc != 0 and 'gb10-sim-serving:local' not in out, out
    assert "profile overlay '../outside' (gb10_profile_overlay) is not a name" in out, out
    assert 'Fix: set gb10_profile_overlay to one of sim-cpu.' in out, out


def test_a_profile_path_is_refused_with_the_known_profiles(profiles_dir):
    rc, out = lookup(profiles_dir, '../profiles/minimax-m3-nvfp4')
    assert rc != 0, out
    assert "profile '../profiles/minimax-m3-nvfp4' (gb10_profile) is not a name" in out, out
    assert 'minimax-m27-nvfp4' in out and 'minimax-m3-nvfp4' in out, out


def test_an_empty_profiles_dir_is_the_collections_own(tmp_path):
    # gb10_profiles_dir's default: the collection's profiles/, whatever directory the run starts in.
    rc, out = lookup('', 'minimax-m27-nvfp4', 'sim-cpu')
    assert rc == 0 and 'gb10-sim-serving:local' in out, out


def test_a_site_profiles_dir_that_is_missing_is_named_with_its_variable(tmp_path):
    rc, out = lookup(str(tmp_path / 'recipes'), 'minimax-m27-nvfp4')
    assert rc != 0, out
    assert 'profiles directory %s does not exist (gb10_profiles_dir' % (tmp_path / 'recipes') in out, out


def test_a_site_recipe_loads_from_its_own_directory_by_the_same_rules(profiles_dir, tmp_path):
    # A site's own recipe (gb10_profiles_dir): the shipped one under another name and image, checked
    # as every shipped profile is (a missing reason is refused the same way).
    import yaml
    site = tmp_path / 'recipes'
    site.mkdir()
    with open(os.path.join(profiles_dir, 'minimax-m27-nvfp4.yml')) as handle:
        recipe = yaml.safe_load(handle)
    recipe.update(name='site-m27', image='vllm-node:0.32.0-site')
    (site / 'site-m27.yml').write_text(yaml.safe_dump(recipe))
    rc, out = lookup(str(site), 'site-m27')
    assert rc == 0 and 'vllm-node:0.32.0-site' in out, out
    del recipe['why']['image']
    (site / 'site-m27.yml').write_text(yaml.safe_dump(recipe))
    rc, out = lookup(str(site), 'site-m27')
    assert rc != 0 and 'no reason given for image' in out, out
