# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: profile
short_description: Load a model profile, merge an overlay into it and validate the result
version_added: "0.1.0"
author:
  - gb10.serving developers (@gb10-serving)
description:
  - Reads C(profiles/<name>.yml) of this collection (rule M1), merges
    C(profiles/overlays/<overlay>.yml) when O(overlay) is not empty, validates the result and
    returns it as one dictionary. The schema is in C(profiles/README.md).
  - An overlay may change only image, model path (and the shape/size of the model found there),
    device flags and sizes; any other key is refused. The CPU simulation uses the overlay
    C(sim-cpu).
  - Errors name the profile, the field and the fix, e.g. an unknown profile lists the known ones.
  - The profile and the overlay are names (letters, digits, C(.), C(_), C(-)), never paths; a name
    with a separator or C(..) is refused with the known names before any file is read.
options:
  _terms:
    description: Name of the profile (file name without C(.yml)). Exactly one.
    required: true
    type: list
    elements: str
  overlay:
    description: Name of an overlay under C(profiles/overlays/); empty for none (real Sparks).
    type: str
    default: ''
  executor:
    description:
      - How a multi-node vLLM profile spreads its ranks over the nodes, replacing the profile's
        C(engine_args.distributed-executor-backend); empty for the profile's own.
      - C(ray) (rules R1-R5) or C(mp), vLLM's own multi-node executor (rules X1-X3).
    type: str
    default: ''
  image:
    description:
      - The serving image, replacing the profile's C(image) (and the overlay's); empty for theirs.
      - The cluster role passes C(gb10_profile_image), an upgrade to a new build of the engine without
        a new profile file. Pinned like the profile's own (a tag that says the version, or a digest, M1).
    type: str
    default: ''
  profiles_dir:
    description:
      - Directory holding the profiles (and their C(overlays/)); empty for the collection's C(profiles/).
      - The cluster role passes C(gb10_profiles_dir), a site's own recipes.
      - A string, not a path type, so that empty stays empty (Ansible makes an empty path the
        current directory); C(~) is expanded.
    type: str
    default: ''
'''

EXAMPLES = r'''
- name: The profile the inventory selects, with the simulation overlay where the group sets one
  ansible.builtin.set_fact:
    gb10_profile_data: "{{ lookup('gb10.serving.profile', gb10_profile, overlay=gb10_profile_overlay | default('')) }}"

- name: Show the engine command line it renders to
  ansible.builtin.debug:
    msg: "{{ gb10_profile_data | gb10.serving.vllm_serve_argv(head_ip='10.0.0.1') | join(' ') }}"
'''

RETURN = r'''
_raw:
  description: The merged, validated profile (one dictionary; see profiles/README.md).
  type: list
  elements: dict
'''

import os

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.lookup import LookupBase

from ansible_collections.gb10.serving.plugins.module_utils.profile import ProfileError, check_name, load

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None

DEFAULT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'profiles')


def _read_yaml(path):
    with open(path) as handle:
        try:
            return yaml.safe_load(handle)
        except yaml.YAMLError as exc:
            raise AnsibleError('profile file %s is not valid YAML: %s' % (path, to_native(exc)))


def read_profiles(profiles_dir):
    """{name: dict} of every profiles_dir/*.yml."""
    if not os.path.isdir(profiles_dir):
        raise AnsibleError('profiles directory %s does not exist (option profiles_dir)' % profiles_dir)
    found = {}
    for entry in sorted(os.listdir(profiles_dir)):
        if entry.endswith('.yml'):
            found[entry[:-4]] = _read_yaml(os.path.join(profiles_dir, entry))
    return found


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if yaml is None:
            raise AnsibleError('the gb10.serving.profile lookup needs PyYAML on the controller')
        if len(terms) != 1 or not terms[0]:
            raise AnsibleError('lookup gb10.serving.profile takes exactly one profile name; got %r. '
                               'Set gb10_profile (the deploy playbooks do).' % (terms,))
        profiles_dir = os.path.normpath(os.path.expanduser(self.get_option('profiles_dir') or DEFAULT_DIR))
        if not os.path.isdir(profiles_dir):
            raise AnsibleError('profiles directory %s does not exist (gb10_profiles_dir, the lookup\'s profiles_dir): '
                               'leave gb10_profiles_dir empty for the collection\'s profiles, or name a directory '
                               'on the controller that holds <name>.yml files' % profiles_dir)
        overlay_name = self.get_option('overlay') or ''
        overlays_dir = os.path.join(profiles_dir, 'overlays')
        known = sorted(e[:-4] for e in os.listdir(overlays_dir) if e.endswith('.yml')) if os.path.isdir(overlays_dir) else []
        overlay = None
        try:
            # Names, never paths: '../minimax-m3-nvfp4' must not read a file outside the folder.
            check_name(terms[0], [e[:-4] for e in os.listdir(profiles_dir) if e.endswith('.yml')], 'profile')
            if overlay_name:
                check_name(overlay_name, known, 'overlay')
        except ProfileError as exc:
            raise AnsibleError(to_native(exc))
        if overlay_name:
            overlay_path = os.path.join(overlays_dir, overlay_name + '.yml')
            if not os.path.isfile(overlay_path):
                raise AnsibleError('unknown profile overlay %r (gb10_profile_overlay): no %s. Known: %s; '
                                   'leave it empty on real Sparks.'
                                   % (overlay_name, overlay_path, ', '.join(known) or '(none)'))
            overlay = _read_yaml(overlay_path)
        try:
            return [load(terms[0], read_profiles(profiles_dir), overlay, overlay_name, self.get_option('executor'),
                         self.get_option('image'))]
        except ProfileError as exc:
            raise AnsibleError(to_native(exc))
