# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Model profiles (rule M1): merge a simulation/site overlay into a profile and validate it.

Pure functions over dicts; the lookup plugin reads the YAML files and calls these. The schema is
described in profiles/README.md. An overlay may change only image, model identity (path and the
shape/size of the model found there), device flags and sizes: OVERLAY_KEYS enforces it, so a
profile that runs on the CPU simulation is the real recipe with exactly those parts swapped.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

ENGINES = ('vllm', 'sglang')
# How a multi-node vLLM profile spreads its ranks over the nodes (engine_args): Ray (rules
# R1-R5: a Ray cluster of the serving containers, the engine inside the head's) or vLLM's own
# multi-node multiprocessing executor (rules X1-X3: a rank in every node's serving container, no Ray).
EXECUTOR_ARG = 'distributed-executor-backend'
EXECUTORS = ('ray', 'mp')
# vLLM's flag for expert parallelism (engine_args): the MoE layers' experts split over the ranks.
EXPERT_PARALLEL_ARG = 'enable-expert-parallel'
# A1: where an engine may listen (serve.host): the head's loopback, behind the API gateway.
LOOPBACK_HOSTS = ('127.0.0.1', '::1')
# What vLLM's Ray executor copies from the engine's environment to its Ray workers, where the ranks
# load the weights and run (vllm/ray/ray_env.py of vLLM 0.32: DEFAULT_ENV_VAR_PREFIXES and
# DEFAULT_EXTRA_ENV_VARS, plus vLLM's own VLLM_* variables). Anything else in a vLLM profile's env
# reaches the API server only: it belongs in ray.env, which every node's Ray container (and so every
# rank, and the engine started inside the head) gets.
RAY_CARRIED_PREFIXES = ('VLLM_', 'NCCL_', 'FLASH_ATTENTION_', 'LMCACHE_', 'UCX_', 'HF_', 'HUGGING_FACE_')
RAY_CARRIED_NAMES = ('PYTHONHASHSEED',)
# ...and, added to those, the names the engine's own environment lists in this variable (ray_env.py:
# "additive, not replacing"; read the same way in the M3 fork).
RAY_EXTRA_NAMES_VARIABLE = 'VLLM_RAY_EXTRA_ENV_VARS_TO_COPY'
CHECKPOINT_FORMATS = ('bf16', 'fp16', 'fp32', 'fp8', 'nvfp4', 'mxfp4', 'gptq-int4', 'mixed-fp4-fp8')
RULE_ID = re.compile(r'\b[AHNRVSMOX][0-9]{1,2}\b')
# A Hub commit, as model.revision names it: a branch or tag moves, and with trust-remote-code
# the model's own code comes with the files.
COMMIT = re.compile(r'^[0-9a-f]{40}$')
# Rule H6: no engine asks for more than this share of the unified pool (OOM kills and Xid 43
# preemption above it). The one figure: preflight, the fit, the balance and the cluster role's
# gb10_utilization_ceiling (a unit test holds them equal) read it.
UTILIZATION_CEILING = 0.90

# A6: recipe fields reach configuration files (nginx's, rsyncd's), mounts and command lines, so they
# are checked by shape, never passed as free text. A served name is what clients put in "model": an
# identifier (Hub-style owner/name allowed), no space, quote, brace, semicolon or newline.
SERVED_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$')
# model.path: under the models root (every serving container binds it, the download writes there,
# rsyncd exports it), normalised, each component of a safe alphabet. /, /etc, /run (the Docker
# socket), /root/.ssh or /models/../etc would be bound read-write into the serving containers and
# copied over every worker.
MODELS_ROOT = '/models'
PATH_COMPONENT = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]*$')
# A6: the engine flags the collection sets itself: where the engine listens (the head's loopback,
# behind the gateway: A1), its key and front-door settings, and the ranks' rendezvous (X1). A recipe
# that sets one would win over the collection's (vLLM keeps the last of a repeated flag), e.g.
# host: 0.0.0.0 after --host 127.0.0.1. Compared after vLLM's own normalisation (_ to -).
OWNED_ARGS = frozenset(('host', 'port', 'uds', 'api-key', 'middleware', 'allowed-origins', 'allowed-methods',
                        'allowed-headers', 'allow-credentials', 'root-path', 'disable-fastapi-docs',
                        'enable-ssl-refresh', 'master-addr', 'master-port', 'nnodes', 'node-rank', 'headless',
                        'data-parallel-address', 'data-parallel-rpc-port', 'data-parallel-start-rank',
                        'data-parallel-size-local', 'api-server-count', 'allowed-media-domains', 'allowed-local-media-path'))
OWNED_ARG_PREFIXES = ('ssl-',)
# A6: where the engine may fetch a request's media from (image, audio and video URLs: vLLM's
# --allowed-media-domains). vLLM 0.32 fetches from any host when the list is empty
# (vllm/multimodal/media/connector.py, MediaConnector), and the engine runs in the head's network: the
# cluster link, every node's exporter and the head's own services would answer a client's URL. The
# collection passes the profile's serve.media_domains (host names a site trusts), else the reserved
# name `invalid` (RFC 6761: it never resolves), so only media inline in the request (data: URLs) is
# taken; local files never (--allowed-local-media-path is owned and left empty).
NO_MEDIA_DOMAIN = 'invalid'
MEDIA_DOMAIN = re.compile(r'^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$')
ARG_SECTIONS = ('engine_args', 'device_args', 'size_args')


def owned_arg(key):
    """True for an engine flag the collection sets itself (A6)."""
    flag = str(key).lstrip('-').replace('_', '-').lower()
    return flag in OWNED_ARGS or flag.startswith(OWNED_ARG_PREFIXES)


def model_path_problem(path, root=MODELS_ROOT):
    """Why path is not a model directory the collection accepts (A6), or None."""
    if not isinstance(path, str) or not path.startswith(root + '/'):
        return 'must be a directory under %s (the models root every serving container binds), got %r' % (root, path)
    parts = path[len(root) + 1:].split('/')
    if not all(PATH_COMPONENT.match(part) for part in parts):
        return ('must be a normalised path under %s whose every part is letters, digits, ".", "_" or "-" and starts '
                'with a letter or digit (no "..", no empty part, no space, ":" or newline), got %r' % (root, path))
    return None


# Top-level overlay keys and, for dicts, which sub-keys an overlay may touch (None: any).
OVERLAY_KEYS = {
    'image': None,
    # Another image brings its own packages (the CPU simulation's has no GPU kernel library).
    'image_packages': None,
    'model': ('path', 'weights_gb', 'expert_weights_gb', 'shape', 'checkpoint_format', 'family'),
    'device_args': None,
    'device_env': None,
    'size_args': None,
    'gpu_memory_utilization': None,
    'ray': ('object_store_memory_bytes',),
    'fit': ('overhead_gib',),
    'readiness_timeout_s': None,
    # Another model answers otherwise: the overlay's model brings its own expected answer; the
    # question stays the profile's.
    'known_answer': ('expect', 'max_tokens'),
    'why': None,
}

# Arg/env sections whose every key needs a `why` entry (its own or the section's).
EXPLAINED_SECTIONS = ('engine_args', 'device_args', 'size_args', 'env', 'device_env')


class ProfileError(Exception):
    """A profile or overlay is malformed; the message names the file, the field and the fix."""


# A profile or overlay name is a file name without .yml in profiles/ or profiles/overlays/: letters,
# digits, '.', '_' and '-', never a path (no separator, no '..', no leading dot).
NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]*$')
NAME_VARIABLES = {'profile': ('gb10_profile', 'profiles/'), 'overlay': ('gb10_profile_overlay', 'profiles/overlays/')}


def check_name(name, known, kind='profile'):
    """Refuse a profile or overlay name that is not a plain name (a path such as
    '../minimax-m3-nvfp4' would read a file outside its folder), before any file is opened.
    known: the names there are; kind: 'profile' or 'overlay'."""
    variable, folder = NAME_VARIABLES[kind]
    text = name if isinstance(name, str) else str(name)
    if NAME.match(text) and '..' not in text:
        return text
    raise ProfileError(
        '%s %r (%s) is not a name: it must be the name of a file in %s without .yml (letters, '
        'digits, ".", "_", "-"; no "/", "\\" or ".."), never a path. Fix: set %s to one of %s.%s'
        % ('profile overlay' if kind == 'overlay' else 'profile', text, variable, folder, variable,
           ', '.join(sorted(known)) or '(none)', ' Leave it empty on real Sparks.' if kind == 'overlay' else ''))


def merge_overlay(profile, overlay, overlay_name='overlay'):
    """Return a deep copy of profile with overlay merged in.

    Dicts merge key by key; a null value deletes the key (how the CPU overlay drops GPU-only
    flags such as --attention-backend). Keys outside OVERLAY_KEYS are refused.
    """
    if not isinstance(overlay, dict):
        raise ProfileError('overlay %s: expected a mapping at the top level, got %s'
                           % (overlay_name, type(overlay).__name__))
    for key, value in overlay.items():
        if key not in OVERLAY_KEYS:
            raise ProfileError(
                'overlay %s: key %r may not be changed by an overlay (allowed: %s). An overlay '
                'changes only image, model path, device flags and sizes; put other changes in '
                'a profile of their own under profiles/.'
                % (overlay_name, key, ', '.join(sorted(OVERLAY_KEYS))))
        allowed = OVERLAY_KEYS[key]
        if allowed is not None:
            if not isinstance(value, dict):
                raise ProfileError('overlay %s: %s must be a mapping' % (overlay_name, key))
            for sub in value:
                if sub not in allowed:
                    raise ProfileError(
                        'overlay %s: %s.%s may not be changed by an overlay (allowed: %s)'
                        % (overlay_name, key, sub, ', '.join('%s.%s' % (key, a) for a in allowed)))
    merged = copy.deepcopy(profile)
    _deep_merge(merged, copy.deepcopy(overlay))
    return merged


def _deep_merge(dest, src):
    for key, value in src.items():
        if value is None:
            dest.pop(key, None)
        elif isinstance(value, dict) and isinstance(dest.get(key), dict):
            _deep_merge(dest[key], value)
        else:
            dest[key] = value


# A Python distribution name (PEP 508) and where pip installs it from: an https repository.
DISTRIBUTION = re.compile(r'^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$')
PACKAGE_SOURCE = re.compile(r'^https://[A-Za-z0-9.-]+(/[A-Za-z0-9._~-]+)+$')


def _validate_image_packages(packages, source):
    """image_packages: the Python distributions the image must hold as pip installed them from one
    repository commit (role serving_image asks the image; V1)."""
    _need(isinstance(packages, dict), source, 'image_packages',
          'must be a mapping of Python distribution name to {source, commit} ({} or absent for none)')
    for name, wanted in packages.items():
        field = 'image_packages.%s' % name
        _need(isinstance(name, str) and DISTRIBUTION.match(name), source, field, 'is not a Python distribution name')
        _need(isinstance(wanted, dict) and set(wanted) == {'source', 'commit'}, source, field,
              'must have exactly source (the https URL of its repository) and commit (40 hex digits)')
        _need(isinstance(wanted['source'], str) and PACKAGE_SOURCE.match(wanted['source']), source, field + '.source',
              'must be the https URL of the repository pip installs it from, got %r' % (wanted['source'],))
        _need(isinstance(wanted['commit'], str) and COMMIT.match(wanted['commit']), source, field + '.commit',
              'must be a 40-digit commit (pip records the full commit it installed; a branch or tag moves)')


def _need(cond, source, field, msg):
    if not cond:
        raise ProfileError('profile %s: %s: %s' % (source, field, msg))


def _is_num(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _scalar_map(profile, source, field):
    value = profile.get(field)
    _need(isinstance(value, dict), source, field, 'must be a mapping (use {} for none)')
    for key, item in value.items():
        _need(isinstance(key, str) and key and not key.startswith('-'), source, '%s.%s' % (field, key),
              'keys are flag/variable names without leading dashes')
        _need(item is None or isinstance(item, (str, int, float, bool, dict, list)), source,
              '%s.%s' % (field, key), 'value must be a scalar, a list or a mapping')
    return value


def _validate_shape(shape, source):
    _need(isinstance(shape, dict), source, 'model.shape', 'must be a mapping (see profiles/README.md)')
    attention = shape.get('attention', 'gqa')
    _need(attention in ('gqa', 'mla'), source, 'model.shape.attention', "must be 'gqa' or 'mla'")
    needed = ('num_layers', 'num_kv_heads', 'head_dim') if attention == 'gqa' else \
        ('num_layers', 'kv_lora_rank', 'qk_rope_head_dim')
    for key in needed:
        _need(_is_int(shape.get(key)) and shape[key] > 0, source, 'model.shape.%s' % key,
              'must be a positive integer (read it from the checkpoint config.json)')


def pinned_image(image):
    """True when an image reference names one build: a digest, or a tag other than `latest`."""
    if '@sha256:' in image:
        return True
    last = image.rsplit('/', 1)[-1]
    return ':' in last and last.rsplit(':', 1)[1] != 'latest'


def _need_pinned(image, source, field):
    # M1: `latest` (or no tag) is whatever was built or pulled last on that node: the
    # community's build script tags every build `vllm-node`, from vLLM main, so two nodes or two
    # re-runs can serve different vLLM versions under one name, with other flags and env names.
    _need(pinned_image(image), source, field,
          'image %s is not pinned: `latest` or no tag names whatever was built or pulled last. Fix: name a tag '
          'that says the version (e.g. vllm-node:0.32.0, after `docker tag vllm-node vllm-node:0.32.0`) or a '
          'digest (name@sha256:...) (M1)' % image)


def validate_profile(profile, source='<profile>'):
    """Check the schema of a merged profile; return it unchanged or raise ProfileError."""
    _need(isinstance(profile, dict), source, '(top level)', 'must be a mapping')
    for key in ('name', 'description', 'image'):
        _need(isinstance(profile.get(key), str) and profile[key].strip(), source, key,
              'must be a non-empty string')
    _need_pinned(profile['image'], source, 'image')
    _need(profile.get('engine') in ENGINES, source, 'engine', 'must be one of %s' % ', '.join(ENGINES))

    model = profile.get('model')
    _need(isinstance(model, dict), source, 'model', 'must be a mapping with path, repo, served_name, ...')
    _need(isinstance(model.get('path'), str) and model['path'].startswith('/'), source, 'model.path',
          'must be an absolute path (the same on every node, rule M3)')
    _need(model_path_problem(model['path']) is None, source, 'model.path', model_path_problem(model['path']))
    for key in ('repo', 'served_name', 'family'):
        _need(isinstance(model.get(key), str) and model[key], source, 'model.%s' % key, 'must be a non-empty string')
    _need(SERVED_NAME.match(model['served_name']), source, 'model.served_name',
          'must be a model name clients send (letters, digits and . _ : / -, at most 128, starting with a letter or '
          'digit; A6: it is written into the gateway\'s configuration), got %r' % model['served_name'])
    _need(_is_num(model.get('weights_gb')) and model['weights_gb'] > 0, source, 'model.weights_gb',
          'must be a positive number: size of the weights on disk in GB (10^9 bytes)')
    _need(model.get('checkpoint_format') in CHECKPOINT_FORMATS, source, 'model.checkpoint_format',
          'must be one of %s' % ', '.join(CHECKPOINT_FORMATS))
    _validate_shape(model.get('shape'), source)
    _need('revision' not in model or (isinstance(model['revision'], str) and COMMIT.match(model['revision'])), source,
          'model.revision', 'must be a 40-digit commit of model.repo, not a branch or tag (a moving revision brings '
          'other files, and the model\'s own code, A1/M3)')
    _validate_image_packages(profile.get('image_packages', {}), source)

    for key in ('nodes', 'tensor_parallel_size', 'readiness_timeout_s'):
        _need(_is_int(profile.get(key)) and profile[key] >= 1, source, key, 'must be an integer >= 1')
    # The ranks are TP x PP x DP, one GB10 GPU per node: a node per rank.
    _need('pipeline_parallel_size' not in profile
          or (_is_int(profile['pipeline_parallel_size']) and profile['pipeline_parallel_size'] >= 1),
          source, 'pipeline_parallel_size', 'must be an integer >= 1 (1: no pipeline parallelism)')
    _need(pipeline(profile) == 1 or pipeline(profile) <= profile['model']['shape']['num_layers'], source,
          'pipeline_parallel_size', 'must not exceed the model\'s %s layers (each stage holds whole layers)'
          % profile['model']['shape']['num_layers'])
    _need('data_parallel_size' not in profile
          or (_is_int(profile['data_parallel_size']) and profile['data_parallel_size'] >= 1),
          source, 'data_parallel_size', 'must be an integer >= 1 (1: no data parallelism)')
    _need(data_parallel(profile) == 1 or profile['tensor_parallel_size'] * pipeline(profile) == 1, source,
          'data_parallel_size', 'with data parallelism each node holds one whole replica (TP 1, PP 1): vLLM\'s '
          'multi-node data parallelism is rendered one rank per node, got TP %s x PP %s per replica'
          % (profile['tensor_parallel_size'], pipeline(profile)))
    _need(ranks(profile) == profile['nodes'], source, 'tensor_parallel_size',
          'times pipeline_parallel_size times data_parallel_size must equal nodes (one GB10 GPU per node, a rank on '
          'each), got TP %s x PP %s x DP %s over %s nodes'
          % (profile['tensor_parallel_size'], pipeline(profile), data_parallel(profile), profile['nodes']))
    util = profile.get('gpu_memory_utilization')
    _need(_is_num(util) and 0 < util <= 1, source, 'gpu_memory_utilization', 'must be a number in (0, 1]')

    for section in ('engine_args', 'device_args', 'size_args', 'env', 'device_env'):
        _scalar_map(profile, source, section)
    for section in ARG_SECTIONS:
        for key in profile[section]:
            _need(not owned_arg(key), source, '%s.%s' % (section, key),
                  'is set by the collection itself (A6: the engine listens on the head\'s loopback behind the '
                  'gateway, its key, CORS and TLS are the gateway\'s, the ranks\' rendezvous is the cluster '
                  'link\'s): remove it from the recipe')
    _need(_is_int(profile['size_args'].get('max-model-len')), source, 'size_args.max-model-len',
          'must be set: the context length the fit planner sizes the KV cache for (rule M2)')
    engine_env = dict(profile['env'], **profile['device_env'])
    extra = set(name.strip() for name in str(engine_env.get(RAY_EXTRA_NAMES_VARIABLE, '')).split(',') if name.strip())
    for section in ('env', 'device_env'):
        for key, value in profile[section].items():
            _need(re.match(r'^[A-Za-z_][A-Za-z0-9_]*$', key), source, '%s.%s' % (section, key),
                  'is not a valid environment variable name')
            _need(isinstance(value, (str, int, float)) and not isinstance(value, bool), source,
                  '%s.%s' % (section, key), 'environment values must be strings or numbers (quote them)')
            _need(profile['engine'] != 'vllm' or key.startswith(RAY_CARRIED_PREFIXES) or key in RAY_CARRIED_NAMES
                  or key in extra, source, '%s.%s' % (section, key),
                  'vLLM does not carry it to its Ray workers, where the ranks load and run the model (it copies '
                  'only %s*, %s and the names %s lists): set it under ray.env instead, which every node\'s Ray '
                  'container gets, or name it in %s'
                  % ('*, '.join(RAY_CARRIED_PREFIXES), ', '.join(RAY_CARRIED_NAMES), RAY_EXTRA_NAMES_VARIABLE,
                     RAY_EXTRA_NAMES_VARIABLE))

    ray = profile.get('ray')
    _need(isinstance(ray, dict), source, 'ray', 'must be a mapping with object_store_memory_bytes and env')
    _need(_is_int(ray.get('object_store_memory_bytes')) and ray['object_store_memory_bytes'] > 0, source,
          'ray.object_store_memory_bytes', 'must be a positive integer (rule R2: 1-2 GB on a Spark)')
    _need(isinstance(ray.get('env'), dict), source, 'ray.env', 'must be a mapping (use {} for none)')

    serve = profile.get('serve')
    _need(isinstance(serve, dict), source, 'serve', 'must be a mapping with port and host')
    _need(_is_int(serve.get('port')) and 0 < serve['port'] < 65536, source, 'serve.port', 'must be a TCP port')
    _need(isinstance(serve.get('host'), str) and serve['host'], source, 'serve.host', 'must be an address to bind')
    # A1: vLLM's --api-key guards only some path prefixes (/invocations, /tokenize, /load, ... answer
    # without it), so the engine must not face the network: the gateway on the head does.
    _need(serve['host'] in LOOPBACK_HOSTS, source, 'serve.host',
          'must be the head\'s loopback (%s), not %r: the engine answers routes without any key, so only '
          'the API gateway (role api_gateway, gb10_api_port) may face clients' % (' or '.join(LOOPBACK_HOSTS), serve['host']))

    domains = serve.get('media_domains', [])
    _need(isinstance(domains, list) and all(isinstance(d, str) and MEDIA_DOMAIN.match(d) for d in domains), source,
          'serve.media_domains', 'must be a list of host names (lower case, a dot and a top-level name: no address, '
          'port, scheme or wildcard), the hosts the engine may fetch a request\'s media from (A6), got %r' % (domains,))

    fit = profile.get('fit')
    _need(isinstance(fit, dict) and _is_num(fit.get('overhead_gib')) and fit['overhead_gib'] >= 0, source,
          'fit.overhead_gib', 'must be a number >= 0: GiB per node for activations, graphs and buffers')
    _need('host_gib' not in fit or (_is_num(fit['host_gib']) and fit['host_gib'] >= 0), source, 'fit.host_gib',
          'must be a number >= 0: GiB a serving node uses beside the engine and the object store (H10)')

    _need(profile['engine'] != 'vllm' or profile['nodes'] == 1 or profile['engine_args'].get(EXECUTOR_ARG) in EXECUTORS,
          source, 'engine_args.%s' % EXECUTOR_ARG,
          'must name how the ranks reach the other nodes, one of %s (ray: rules R1-R5; mp: vLLM\'s own '
          'multi-node executor, rules X1-X3), got %r' % (', '.join(EXECUTORS), profile['engine_args'].get(EXECUTOR_ARG)))

    _need(pipeline(profile) == 1 or profile['engine'] == 'vllm', source, 'pipeline_parallel_size',
          'is rendered for vLLM only; SGLang profiles split by tensor_parallel_size')
    _need(data_parallel(profile) == 1 or profile['engine'] == 'vllm', source, 'data_parallel_size',
          'is rendered for vLLM only; SGLang profiles split by tensor_parallel_size')
    # vLLM's multi-node data parallelism is its own launch (--data-parallel-address, a headless engine per
    # node); under Ray it would be --data-parallel-backend ray, which no recipe here ran.
    _need(data_parallel(profile) == 1 or profile['nodes'] == 1 or profile['engine_args'].get(EXECUTOR_ARG) == 'mp',
          source, 'data_parallel_size', 'across nodes is rendered for vLLM\'s own multi-node executor only: set '
          'engine_args.%s: mp (or gb10_executor=mp), got %r' % (EXECUTOR_ARG, profile['engine_args'].get(EXECUTOR_ARG)))
    # M2: with expert parallelism a data-parallel rank holds only its share of the routed experts; the fit
    # needs to know how much of the weights that is.
    if profile['engine_args'].get(EXPERT_PARALLEL_ARG) or 'expert_weights_gb' in profile['model']:
        experts = profile['model'].get('expert_weights_gb')
        _need(_is_num(experts) and 0 <= experts < profile['model']['weights_gb'], source, 'model.expert_weights_gb',
              'must be a number (and is needed with engine_args.%s): the GB of the routed experts\' weights, which expert parallelism '
              'splits over the ranks (>= 0 and below model.weights_gb %s, 0 for a dense model), got %r'
              % (EXPERT_PARALLEL_ARG, profile['model']['weights_gb'], experts))
        # vLLM 0.32 refuses it at start-up for a dense model ("Number of experts in the model must be greater
        # than 0 when expert parallelism is enabled"); said here, before anything starts.
        _need(not profile['engine_args'].get(EXPERT_PARALLEL_ARG) or experts > 0, source, 'engine_args.%s' % EXPERT_PARALLEL_ARG,
              'needs a model with routed experts (model.expert_weights_gb > 0): vLLM refuses expert parallelism for '
              'a dense model (%s at %s)' % (profile['model']['family'], profile['model']['path']))

    _validate_known_answer(profile, source)
    _validate_upgrade_gate(profile, source)
    _validate_sglang(profile, source)
    _validate_why(profile, source)
    return profile


def _validate_known_answer(profile, source):
    """known_answer: a question whose greedy answer the smoke test checks, because a
    reply of the right shape can still be wrong (a broken tensor-parallel split answers fluently)."""
    known = profile.get('known_answer')
    _need(isinstance(known, dict), source, 'known_answer',
          'must be a mapping with prompt, expect and max_tokens: a question with one right answer, the text '
          'that answer contains, and the token budget to reach it (thinking included, V8)')
    for key in ('prompt', 'expect'):
        _need(isinstance(known.get(key), str) and known[key].strip(), source, 'known_answer.%s' % key,
              'must be a non-empty string')
    _need(_is_int(known.get('max_tokens')) and known['max_tokens'] >= 1, source, 'known_answer.max_tokens',
          'must be an integer >= 1 (a reasoning model needs room to think first, V8)')


def _validate_upgrade_gate(profile, source):
    """upgrade_gate (optional): upgrade.yml measures the launch that serves and, after the cut-over,
    the new one the same way; a new launch that decodes more than decode_within_pct percent slower
    gives way to the old one (O8)."""
    if 'upgrade_gate' not in profile:
        return
    gate = profile['upgrade_gate']
    _need(isinstance(gate, dict) and set(gate) == {'decode_within_pct'}, source, 'upgrade_gate',
          'must be a mapping with decode_within_pct alone, got %r' % (gate,))
    _need(_is_num(gate['decode_within_pct']) and 0 <= gate['decode_within_pct'] < 100, source,
          'upgrade_gate.decode_within_pct', 'must be a number from 0 to below 100 (percent), got %r' % (gate['decode_within_pct'],))


def _validate_sglang(profile, source):
    sgl = profile.get('sglang')
    _need(isinstance(sgl, dict) and isinstance(sgl.get('supported'), bool), source, 'sglang.supported',
          'must be true or false (rule S4: say whether SGLang can serve this recipe)')
    if sgl['supported']:
        _need(isinstance(sgl.get('image'), str) and sgl['image'], source, 'sglang.image',
              'must name the SGLang image (one container per node)')
        _need_pinned(sgl['image'], source, 'sglang.image')
        _need(_is_num(sgl.get('mem_fraction_static')) and 0 < sgl['mem_fraction_static'] <= UTILIZATION_CEILING, source,
              'sglang.mem_fraction_static', 'must be a number in (0, %.1f] (rule S3 uses 0.75)' % UTILIZATION_CEILING)
        _need(_is_int(sgl.get('dist_timeout')) and sgl['dist_timeout'] > 0, source, 'sglang.dist_timeout',
              'must be a positive integer of seconds (rule S3 uses 1800)')
        _need(_is_int(sgl.get('dist_port')) and 0 < sgl['dist_port'] < 65536, source, 'sglang.dist_port',
              'must be a TCP port for --dist-init-addr')
        for key in ('args', 'env'):
            _need(isinstance(sgl.get(key), dict), source, 'sglang.%s' % key, 'must be a mapping (use {} for none)')
    else:
        _need(isinstance(sgl.get('reason'), str) and RULE_ID.search(sgl['reason']), source, 'sglang.reason',
              'must say why SGLang is refused, with the rule ID (S4)')
        _need(isinstance(sgl.get('alternative'), str) and sgl['alternative'], source, 'sglang.alternative',
              'must name the working alternative (engine and profile)')


def _validate_why(profile, source):
    why = profile.get('why')
    _need(isinstance(why, dict), source, 'why', 'must map each non-obvious choice to its reason')
    for key, text in why.items():
        _need(isinstance(text, str) and RULE_ID.search(text), source, 'why.%s' % key,
              'must give the reason with the rule ID it comes from (e.g. "(V1)")')
    explained = ['gpu_memory_utilization', 'image', 'ray.object_store_memory_bytes', 'fit.overhead_gib']
    for section in EXPLAINED_SECTIONS:
        explained.extend('%s.%s' % (section, key) for key in profile[section])
    explained.extend('ray.env.%s' % key for key in profile['ray']['env'])
    for path in explained:
        section = path.rsplit('.', 1)[0]
        _need(path in why or section in why, source, 'why',
              'no reason given for %s: add why.%s (or why.%s for the whole section) with the rule ID'
              % (path, path, section))


def data_parallel(profile):
    """The profile's data-parallel replicas (three Sparks each a replica of attention, with
    expert parallelism splitting the routed experts over them); 1 when it names none."""
    return profile.get('data_parallel_size', 1)


def ranks(profile):
    """GPUs the profile runs on, one per GB10 node: TP x PP x DP."""
    return profile['tensor_parallel_size'] * pipeline(profile) * data_parallel(profile)


def pipeline(profile):
    """The profile's pipeline-parallel stages (three Sparks split a model whose heads do not
    divide by 3 into stages of whole layers); 1 when it names none."""
    return profile.get('pipeline_parallel_size', 1)


def _cluster_choice(profile, field, chosen, variable, rule=''):
    """A copy of the profile with its field (a top-level key, or 'section.key') set to the cluster's
    choice, the reason with it: the profile's own reason kept after it, unchanged where it is the
    profile's own value already."""
    profile = copy.deepcopy(profile)
    section, _sep, key = field.rpartition('.')
    holder = profile[section] if section else profile
    own = holder.get(key)
    holder[key] = chosen
    if own != chosen:
        profile.setdefault('why', {})[field] = (
            'set for this cluster with %s=%s (%sthe profile says %s: %s)'
            % (variable, chosen, (rule + '; ') if rule else '', own, profile.get('why', {}).get(field, 'no reason given')))
    return profile


def choose_executor(profile, chosen, source):
    """The profile with its executor replaced by the cluster's choice (gb10_executor), the reason with it."""
    _need(chosen in EXECUTORS, source, 'executor (gb10_executor)',
          'must be empty (the profile\'s own) or one of %s, got %r' % (', '.join(EXECUTORS), chosen))
    _need(profile.get('engine') == 'vllm', source, 'executor (gb10_executor)',
          'chooses how vLLM spreads its ranks; this profile is for engine %r' % profile.get('engine'))
    return _cluster_choice(profile, 'engine_args.%s' % EXECUTOR_ARG, chosen, 'gb10_executor', 'X1')


def choose_image(profile, chosen, source):
    """The profile with its serving image replaced by the cluster's choice (gb10_profile_image: an
    upgrade to a new build without a new profile file), the reason with it. Pinned like the profile's (M1)."""
    _need(isinstance(chosen, str) and chosen.strip() == chosen and ' ' not in chosen, source, 'image (gb10_profile_image)',
          'must be one image name (repository:tag or repository@sha256:digest), got %r' % (chosen,))
    _need_pinned(chosen, source, 'image (gb10_profile_image)')
    return _cluster_choice(profile, 'image', chosen, 'gb10_profile_image')


def load(name, profiles, overlay=None, overlay_name=None, executor_choice=None, image_choice=None):
    """Merge and validate. profiles: {name: dict} read from profiles/; overlay: dict or None;
    executor_choice: the cluster's executor (gb10_executor), None or '' for the profile's own;
    image_choice: the cluster's serving image (gb10_profile_image), None or '' for the profile's own."""
    check_name(name, profiles, 'profile')
    if name not in profiles:
        raise ProfileError(
            'unknown profile %r: set gb10_profile to one of %s (files in profiles/*.yml)'
            % (name, ', '.join(sorted(profiles)) or '(none found)'))
    profile = profiles[name]
    _need(isinstance(profile, dict), name, '(top level)', 'must be a mapping')
    _need(profile.get('name') == name, name, 'name', 'must equal the file name (%s.yml)' % name)
    source = name
    if overlay:
        profile = merge_overlay(profile, overlay, overlay_name or 'overlay')
        source = '%s + overlay %s' % (name, overlay_name or 'overlay')
    if executor_choice:
        profile = choose_executor(profile, executor_choice, source)
    if image_choice:
        profile = choose_image(profile, image_choice, source)
    return validate_profile(profile, source)


def cuda_graphs(profile):
    """Whether the engine captures CUDA graphs with this profile: on unless --enforce-eager or a
    compilation-config whose cudagraph_mode is NONE (vLLM's CompilationConfig), in any section."""
    for section in ARG_SECTIONS:
        args = profile.get(section) or {}
        if args.get('enforce-eager') is True:
            return False
        config = args.get('compilation-config')
        if isinstance(config, dict) and str(config.get('cudagraph_mode', '')).upper() == 'NONE':
            return False
    return True
