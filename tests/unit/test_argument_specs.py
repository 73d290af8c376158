"""Every role's meta/argument_specs.yml against its defaults/main.yml (bad input gets a
clear error before anything changes). ansible-core validates a role's variables against this spec
before the role's first task (validate_argument_spec, with ansible's own ArgumentSpecValidator);
these tests run that validator over the same files.

- every variable of defaults/main.yml is an option of an entry point, with a type and a
  description; every option has a type and a description;
- every literal default passes its own option's spec (type, choices, elements);
- a spec default, where given for a literal, equals the one in defaults/main.yml;
- the bad inputs of docs/bad-input.md that the specs refuse get ansible's message naming the
  variable and what it accepts.
"""
import os

import pytest
import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = sorted(r for r in os.listdir(os.path.join(TOP, 'roles'))
               if os.path.isfile(os.path.join(TOP, 'roles', r, 'meta', 'argument_specs.yml')))


def _load(role, *path):
    with open(os.path.join(TOP, 'roles', role, *path)) as f:
        return yaml.safe_load(f) or {}


def _options(role):
    """{option: spec} over every entry point of the role."""
    merged = {}
    for entry in _load(role, 'meta', 'argument_specs.yml')['argument_specs'].values():
        merged.update(entry.get('options') or {})
    return merged


def _templated(value):
    if isinstance(value, str):
        return '{{' in value
    if isinstance(value, list):
        return any(_templated(v) for v in value)
    if isinstance(value, dict):
        return any(_templated(v) for v in value.values())
    return False


def _errors(spec, name, value):
    """ansible's validation messages for one variable, as validate_argument_spec gives them."""
    one = dict(spec)
    one.pop('required', None)
    one.pop('default', None)
    return ArgumentSpecValidator({name: one}).validate({name: value}, validate_role_argument_spec=True).error_messages


def test_every_role_has_a_spec():
    assert ROLES == sorted(os.listdir(os.path.join(TOP, 'roles'))) and len(ROLES) >= 14, ROLES


@pytest.mark.parametrize('role', ROLES)
def test_every_default_is_specified_with_type_and_description(role):
    options = _options(role)
    defaults = _load(role, 'defaults', 'main.yml')
    assert not [v for v in defaults if v not in options], 'variables of defaults/main.yml missing from the spec'
    for name, spec in options.items():
        assert spec.get('type'), '%s: no type' % name
        assert spec.get('description'), '%s: no description' % name
        if spec['type'] == 'list':
            assert spec.get('elements'), '%s: a list without elements' % name
        # The spec documents the role's variables only: role prefix (var-naming[no-role-prefix]);
        # the cluster role's are the inventory's cluster-wide gb10_* names.
        assert name.startswith('gb10_' if role == 'cluster' else role + '_'), name


@pytest.mark.parametrize('role', ROLES)
def test_literal_defaults_pass_their_spec(role):
    options = _options(role)
    for name, value in _load(role, 'defaults', 'main.yml').items():
        spec = options[name]
        if _templated(value):
            continue
        assert _errors(spec, name, value) == [], name
        if 'default' in spec and not _templated(spec['default']):
            assert spec['default'] == value, '%s: spec default %r, defaults/main.yml %r' % (name, spec['default'], value)


@pytest.mark.parametrize('role,name,value,fragment', [
    # gb10_engine feeds preflight_engine (S4): the spec refuses it before preflight reads anything.
    ('preflight', 'preflight_engine', 'trtllm', 'value of preflight_engine must be one of: , vllm, sglang, got: trtllm'),
    ('preflight', 'preflight_host_prep_follows', 'maybe', "argument 'preflight_host_prep_follows' is of type str"),
    ('preflight', 'preflight_min_link_mbps', '10G',
     "argument 'preflight_min_link_mbps' is of type str and we were unable to convert to int"),
    ('nccl_env', 'nccl_env_transport', 'tcp', 'value of nccl_env_transport must be one of: roce, roce_ring, socket, got: tcp'),
    ('container_runtime', 'container_runtime_log_driver', 'none',
     'value of container_runtime_log_driver must be one of: json-file, local, journald, got: none'),
    ('container_runtime', 'container_runtime_restart_policy', 'sometimes', 'container_runtime_restart_policy must be one of'),
    ('serving_containers', 'serving_containers_object_store_memory_bytes', '2GB',
     "argument 'serving_containers_object_store_memory_bytes' is of type str and we were unable to convert to int"),
    ('firewall', 'firewall_api_sources', {'any': True}, "argument 'firewall_api_sources' is of type dict"),
])
def test_bad_values_are_refused_with_the_variable_named(role, name, value, fragment):
    found = _errors(_options(role)[name], name, value)
    assert len(found) == 1 and fragment in found[0], found
