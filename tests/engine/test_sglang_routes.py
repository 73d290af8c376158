"""SGLang behind the API gateway (A1), checked against SGLang 0.5.12's own route table.

SGLang cannot be imported here (tests/engine/test_sglang_flags.py says why), so its FastAPI routes
are read from the installed package's srt/entrypoints/http_server.py with Python's ast module: every
@app.get/post/put/delete/api_route decorator, its path and methods. The gateway
(roles/api_gateway, api_gateway_routes) forwards only its allowlist to the engine on the head's
loopback; these tests show that SGLang serves each of those routes with that method (a client with
a key reaches SGLang as it reaches vLLM), that SGLang's own admin routes (weights, LoRA, memory,
profiling, logging) are many and none is forwarded, and that every SGLang launch the collection
renders listens on the head's loopback only, where nothing but the gateway can reach them.
"""
import ast
import importlib.util
import os

import pytest
import yaml

from ansible_collections.gb10.serving.plugins.module_utils.render import sglang_launch_argv

from conftest import RAW, VARIANTS, variant

pytestmark = pytest.mark.rule("A1")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
METHODS = {'get': ['GET'], 'post': ['POST'], 'put': ['PUT'], 'delete': ['DELETE']}


def sglang_routes():
    """{path: set of methods} of every literal route in SGLang's http_server.py."""
    spec = importlib.util.find_spec('sglang')
    assert spec is not None, 'sglang is not installed in .venv-engine (scripts/engine-venv.sh)'
    with open(os.path.join(os.path.dirname(spec.origin), 'srt', 'entrypoints', 'http_server.py')) as handle:
        tree = ast.parse(handle.read())
    routes = {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute)
                    and getattr(deco.func.value, 'id', None) == 'app' and deco.args
                    and isinstance(deco.args[0], ast.Constant) and isinstance(deco.args[0].value, str)):
                continue
            kind = deco.func.attr
            methods = METHODS.get(kind)
            if kind == 'api_route':
                methods = next(([e.value for e in kw.value.elts] for kw in deco.keywords if kw.arg == 'methods'), ['GET'])
            if methods:
                routes.setdefault(deco.args[0].value, set()).update(methods)
    return routes


@pytest.fixture(scope='module')
def routes():
    found = sglang_routes()
    assert len(found) > 50, found  # the whole table, not a sample
    return found


def gateway_routes():
    with open(os.path.join(TOP, 'roles', 'api_gateway', 'defaults', 'main.yml')) as handle:
        return yaml.safe_load(handle)['api_gateway_routes']


def test_sglang_serves_every_route_the_gateway_forwards_with_its_method(routes):
    for route in gateway_routes():
        assert route['path'] in routes, (route, sorted(routes))
        assert set(route['methods']) <= routes[route['path']], (route, routes[route['path']])
    # The gateway's unauthenticated /health answers with the engine's status: SGLang has one.
    assert 'GET' in routes['/health']


def test_sglangs_admin_routes_exist_and_none_is_forwarded(routes):
    # What a client must never reach: new weights from a path, LoRA adapters, freeing the GPU memory,
    # the profiler, the log settings. SGLang serves them on the same port as the chat API.
    admin = {'/update_weights_from_disk', '/load_lora_adapter', '/release_memory_occupation',
             '/start_profile', '/configure_logging', '/flush_cache', '/abort_request'}
    assert admin <= set(routes), sorted(admin - set(routes))
    assert not admin & {r['path'] for r in gateway_routes()}


@pytest.mark.parametrize('name,overlay', [(n, o) for n, o in VARIANTS if RAW[n]['sglang']['supported']])
def test_every_sglang_launch_listens_on_the_heads_loopback_only(name, overlay):
    # A1: the profile's serve.host, which the profile loader refuses unless it is loopback; the
    # distributed port (--dist-init-addr) is on the cluster link, which the firewall passes between
    # the nodes only (A4).
    argv = sglang_launch_argv(variant(name, overlay), head_ip='10.0.0.1', node_rank=0)
    assert argv[argv.index('--host') + 1] in ('127.0.0.1', '::1'), argv
    assert argv[argv.index('--dist-init-addr') + 1].startswith('10.0.0.1:'), argv
