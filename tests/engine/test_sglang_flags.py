"""Rendered SGLang launches (S1-S4) checked against SGLang 0.5.12's own CLI definition.

SGLang cannot be imported here (its pinned transformers clashes with vLLM's in .venv-engine
and it has no CPU build), so its parser is not built; instead the flags, choices and parser
registries are read from the real source files of the installed sglang 0.5.12 package with
Python's ast module: server_args.py (add_argument calls), function_call_parser.py
(ToolCallParserEnum), reasoning_parser.py (DetectorMap).
"""
import ast
import copy
import importlib.util
import os

import pytest

from ansible_collections.gb10.serving.plugins.module_utils.render import RenderError, sglang_launch_argv

from conftest import RAW, VARIANTS, variant

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("S1")

SGLANG_VERSION = '0.5.12'


def _sglang_file(*parts):
    spec = importlib.util.find_spec('sglang')
    assert spec is not None, 'sglang %s is not installed in .venv-engine (scripts/engine-venv.sh)' % SGLANG_VERSION
    return os.path.join(os.path.dirname(spec.origin), *parts)


def _tree(*parts):
    with open(_sglang_file(*parts)) as handle:
        return ast.parse(handle.read())


def cli_options():
    """{'--flag': choices-or-None} from every add_argument call in server_args.py."""
    options = {}
    for node in ast.walk(_tree('srt', 'server_args.py')):
        if isinstance(node, ast.Call) and getattr(node.func, 'attr', None) == 'add_argument':
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            choices = None
            for kw in node.keywords:
                if kw.arg == 'choices' and isinstance(kw.value, (ast.List, ast.Tuple)):
                    choices = [e.value for e in kw.value.elts if isinstance(e, ast.Constant)]
            for name in names:
                if name.startswith('--'):
                    options[name] = choices
    return options


def dict_keys(parts, attr):
    for node in ast.walk(_tree(*parts)):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, 'id', None) == attr and isinstance(node.value, ast.Dict):
            return {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    raise AssertionError('%s not found in %s' % (attr, '/'.join(parts)))


@pytest.fixture(scope='module')
def sglang_cli():
    return {
        'options': cli_options(),
        'tool_parsers': dict_keys(('srt', 'function_call', 'function_call_parser.py'), 'ToolCallParserEnum'),
        'reasoning_parsers': dict_keys(('srt', 'parser', 'reasoning_parser.py'), 'DetectorMap'),
    }


def problems(argv, cli):
    out = []
    assert argv[:3] == ['python3', '-m', 'sglang.launch_server']
    i = 3
    while i < len(argv):
        flag = argv[i]
        value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith('--') else None
        i += 2 if value is not None else 1
        if flag not in cli['options']:
            out.append('%s is not an SGLang %s flag' % (flag, SGLANG_VERSION))
            continue
        choices = cli['options'][flag]
        if choices is not None and value not in choices:
            out.append('%s %s is not one of %s' % (flag, value, choices))
        if flag == '--tool-call-parser' and value not in cli['tool_parsers']:
            out.append('tool-call-parser %s is not registered' % value)
        if flag == '--reasoning-parser' and value not in cli['reasoning_parsers']:
            out.append('reasoning-parser %s is not registered' % value)
    return out


SUPPORTED = [(n, o) for n, o in VARIANTS if RAW[n]['sglang']['supported']]
REFUSED = sorted(n for n in RAW if not RAW[n]['sglang']['supported'])


def test_some_profile_supports_sglang_and_some_are_refused():
    assert SUPPORTED and 'deepseek-v4-flash' in REFUSED


@pytest.mark.parametrize('name,overlay', SUPPORTED)
@pytest.mark.parametrize('rank', [0, 1])
def test_rendered_launch_uses_only_real_flags(sglang_cli, name, overlay, rank):
    argv = sglang_launch_argv(variant(name, overlay), head_ip='10.0.0.1', node_rank=rank)
    assert problems(argv, sglang_cli) == []


def test_s1_renamed_flags_exist_and_old_ones_do_not(sglang_cli):
    opts = sglang_cli['options']
    for new in ('--nnodes', '--dist-init-addr', '--mem-fraction-static', '--context-length',
                '--fp8-gemm-backend', '--disable-cuda-graph', '--dist-timeout'):
        assert new in opts
    for old in ('--num-nodes', '--master-addr', '--master-port', '--gpu-memory-utilization',
                '--max-model-len', '--fp8-gemm-runner-backend'):
        assert old not in opts
    assert 'fp8_e4m3' in opts['--kv-cache-dtype'] and 'fp8' not in opts['--kv-cache-dtype']


@pytest.mark.parametrize('name', REFUSED)
def test_refused_profiles_raise_with_rule_and_alternative(name):
    with pytest.raises(RenderError) as err:
        sglang_launch_argv(variant(name, None), head_ip='10.0.0.1', node_rank=0)
    assert 'S4' in str(err.value) and 'Use instead' in str(err.value)


def test_check_catches_renamed_flag_and_unknown_parser(sglang_cli):
    prof = copy.deepcopy(variant('minimax-m27-nvfp4', None))
    prof['sglang']['args']['tool-call-parser'] = 'minimax_m2'   # vLLM's spelling, not SGLang's
    prof['sglang']['args']['num-nodes'] = 2                      # pre-0.5.12 name (S1)
    found = problems(sglang_launch_argv(prof, head_ip='10.0.0.1', node_rank=0), sglang_cli)
    assert any('--num-nodes is not an SGLang' in p for p in found)
    assert any('minimax_m2 is not one of' in p or 'minimax_m2 is not registered' in p for p in found)
