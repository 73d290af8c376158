"""Shared helpers for module unit tests: run a module's main() in-process and catch its result.

The checkout is importable as ``ansible_collections.gb10.serving`` through the link that
scripts/setup.sh makes under .collections/.
"""
import json
import os
import sys
from unittest import mock

import pytest
import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, '.collections'))
FIXTURES = os.path.join(TOP, 'tests', 'fixtures')

from ansible.module_utils import basic  # noqa: E402  (after the path is set)
from ansible.plugins.loader import fragment_loader, init_plugin_loader  # noqa: E402
from ansible.utils.plugin_docs import add_fragments  # noqa: E402

init_plugin_loader([os.path.join(TOP, '.collections')])

try:  # ansible-core >= 2.19
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core 2.17 / 2.18
    import contextlib

    @contextlib.contextmanager
    def patch_module_args(args):
        payload = json.dumps({'ANSIBLE_MODULE_ARGS': args}).encode()
        with mock.patch.object(basic, '_ANSIBLE_ARGS', payload):
            yield


@pytest.fixture
def module_doc():
    """module_doc(module) -> the module's DOCUMENTATION as ansible-doc shows it: with the doc
    fragments it extends (gb10.serving.attributes) merged in by ansible's own code."""

    def load(module):
        doc = yaml.safe_load(module.DOCUMENTATION)
        add_fragments(doc, module.__file__, fragment_loader=fragment_loader, is_module=True)
        return doc
    return load


class ModuleExit(Exception):
    """Raised in place of exit_json/fail_json; .result holds what the module returned."""

    def __init__(self, result, failed):
        super().__init__(result)
        self.result = result
        self.failed = failed


def _exit(self, **kwargs):
    kwargs.setdefault('changed', False)
    raise ModuleExit(kwargs, failed=False)


def _fail(self, msg, **kwargs):
    kwargs['msg'] = msg
    raise ModuleExit(kwargs, failed=True)


@pytest.fixture
def run_module():
    """run_module(main, args, check_mode=False) -> (failed, result)."""

    def runner(main, args, check_mode=False):
        args = dict(args)
        if check_mode:
            args['_ansible_check_mode'] = True
        with patch_module_args(args), \
                mock.patch.object(basic.AnsibleModule, 'exit_json', _exit), \
                mock.patch.object(basic.AnsibleModule, 'fail_json', _fail):
            with pytest.raises(ModuleExit) as caught:
                main()
        return caught.value.failed, caught.value.result

    return runner


@pytest.fixture
def fixture_path():
    return lambda *parts: os.path.join(FIXTURES, *parts)


@pytest.fixture
def watchdog_program(tmp_path):
    """The watchdog as role watchdog installs it (roles/watchdog/files/gb10_watchdog.py with
    plugins/module_utils/watchdog.py beside it as gb10_watchdog_logic.py), imported from there."""
    import importlib.util
    import shutil
    shutil.copy(os.path.join(TOP, 'roles', 'watchdog', 'files', 'gb10_watchdog.py'), str(tmp_path))
    shutil.copy(os.path.join(TOP, 'plugins', 'module_utils', 'watchdog.py'), str(tmp_path / 'gb10_watchdog_logic.py'))
    spec = importlib.util.spec_from_file_location('gb10_watchdog_under_test', str(tmp_path / 'gb10_watchdog.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop('gb10_watchdog_logic', None)
    sys.path.remove(str(tmp_path))
