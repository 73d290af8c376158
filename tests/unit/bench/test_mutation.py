# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench mutation's own guards: a module a stopped run left mutated is not scored, and a session
is named after the module's and its tests' content (changed tests score afresh)."""
import subprocess

from bench import mutation


def checkout(tmp_path, monkeypatch):
    """A git checkout with one module and its test, as bench mutation finds them."""
    subprocess.run(['git', 'init', '-q', str(tmp_path)], check=True)
    module = tmp_path / 'plugins' / 'module_utils' / 'example.py'
    module.parent.mkdir(parents=True)
    module.write_text('def double(x):\n    return x * 2\n')
    test = tmp_path / 'tests' / 'unit' / 'test_example.py'
    test.parent.mkdir(parents=True)
    test.write_text('from ansible_collections.gb10.serving.plugins.module_utils.example import double\n')
    subprocess.run(['git', '-C', str(tmp_path), 'add', '-A'], check=True)
    subprocess.run(['git', '-C', str(tmp_path), '-c', 'user.email=a@b', '-c', 'user.name=t', 'commit', '-qm', 'x'],
                   check=True)
    monkeypatch.setattr(mutation, 'TOP', str(tmp_path))
    monkeypatch.setattr(mutation, 'OUT', str(tmp_path / 'out'))
    return module, test


def test_a_module_a_stopped_run_left_mutated_is_refused_with_the_checkout_to_run(tmp_path, monkeypatch):
    module, _test = checkout(tmp_path, monkeypatch)
    module.write_text('def double(x):\n    return x * 3\n')  # the mutant cosmic-ray was testing
    result = mutation.run_module('example', '/nonexistent/cosmic-ray', 10)
    assert result == {'module': 'example', 'error': 'plugins/module_utils/example.py differs from git (a mutant '
                                                    'of a stopped run?): git checkout -- plugins/module_utils/example.py, '
                                                    'then run again'}


def test_changed_tests_name_another_session(tmp_path, monkeypatch):
    _module, test = checkout(tmp_path, monkeypatch)
    calls = []
    monkeypatch.setattr(mutation, 'cosmic_ray', lambda argv, binary: calls.append(argv) or subprocess.CompletedProcess(
        argv, 1, '', 'stop here'))
    mutation.run_module('example', '/nonexistent/cosmic-ray', 10)
    test.write_text(test.read_text() + '\n\ndef test_double():\n    assert double(2) == 4\n')
    mutation.run_module('example', '/nonexistent/cosmic-ray', 10)
    first, second = calls[0][2], calls[1][2]  # cosmic-ray init CONFIG SESSION
    assert first != second and first.startswith(str(tmp_path / 'out' / 'example-')), calls
