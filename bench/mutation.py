# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mutation score of the unit tests: cosmic-ray (PyPI) changes one thing at a time in a module of
plugins/module_utils/ (or the watchdog's and the nodes' own programs), runs the unit tests that
import it or a plugin built on it (a filter, a module), and counts the changes no test notices
(survivors). A survivor is either equivalent
(the change cannot alter behaviour) or a test that is missing.

    pip install cosmic-ray==8.7.0          # beside the project's venv, or in it
    python -m bench mutation --modules status firewall

cosmic-ray mutates the files in place and puts each back; run it on a checkout nobody else is
testing, and after stopping it by hand put back the one mutant it was testing (`git checkout` the
file; the command refuses to start while the file differs from git). Each module's session is kept
under tests/output/bench/mutation/, named after the module's and its tests' content: re-running goes
on where it stopped, and changed code or tests score afresh. Not in CI: a module takes minutes, all
of them hours on 2 cores. `--functions Watchdog.recover` mutates only those functions' lines
(cosmic-ray's own line filter, `cr-filter-lines`): the decisions a unit suite owns, where the rest
of a program is I/O that the e2e cases run.
"""
import ast
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(TOP, 'tests', 'output', 'bench', 'mutation')
# Programs that run on the nodes, with the unit tests that run them.
PROGRAMS = {
    'watchdog': ('roles/watchdog/files/gb10_watchdog.py', ['tests/unit/test_watchdog_recover.py']),
    'leak_reboot': ('roles/leak_recovery/files/gb10_leak_reboot.py', ['tests/unit/test_leak_reboot.py']),
}


def module_targets(name):
    """(file, [unit test files]) of a module_utils module or a node program: the tests that import it."""
    if name in PROGRAMS:
        path, tests = PROGRAMS[name]
        return os.path.join(TOP, path), [os.path.join(TOP, t) for t in tests]
    path = os.path.join(TOP, 'plugins', 'module_utils', name + '.py')
    if not os.path.isfile(path):
        raise SystemExit('no module %s (plugins/module_utils/%s.py) or program %s' % (name, name, sorted(PROGRAMS)))
    uses = re.compile(r'module_utils(\.%s\b| import [^\n]*\b%s\b)' % (name, name))
    # The plugins built on the module (a filter, a module), whose tests reach it through them.
    plugins = []
    for plugin in glob.glob(os.path.join(TOP, 'plugins', '*', '*.py')):
        if '/module_utils/' not in plugin:
            with open(plugin) as handle:
                if uses.search(handle.read()):
                    kind, stem = plugin.split(os.sep)[-2], os.path.basename(plugin)[:-3]
                    plugins.append(re.compile(r'plugins[./]%s[./]%s\b|plugins\.%s import [^\n]*\b%s\b'
                                              % (kind, stem, kind, stem)))
    tests = []
    for test in sorted(glob.glob(os.path.join(TOP, 'tests', 'unit', '**', 'test_*.py'), recursive=True)):
        with open(test) as handle:
            text = handle.read()
        if uses.search(text) or any(plugin.search(text) for plugin in plugins):
            tests.append(test)
    return path, tests


def cosmic_ray(argv, binary):
    return subprocess.run([binary] + argv, cwd=TOP, capture_output=True, text=True, check=False)


def function_lines(path, names):
    """'first-last' line ranges of the named functions or Class.method in a module."""
    with open(path) as handle:
        tree = ast.parse(handle.read())
    found = {}
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        for member in members:
            if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qualified = '%s.%s' % (node.name, member.name) if member is not node else member.name
                found[qualified] = '%d-%d' % (member.lineno, member.end_lineno)
    missing = [name for name in names if name not in found]
    if missing:
        raise SystemExit('no function %s in %s' % (', '.join(missing), os.path.relpath(path, TOP)))
    return [found[name] for name in names]


def run_module(name, binary, timeout_s, functions=None):
    path, tests = module_targets(name)
    if not tests:
        return {'module': name, 'error': 'no unit test imports it'}
    os.makedirs(OUT, exist_ok=True)
    module_path = os.path.relpath(path, TOP)
    # cosmic-ray mutates the file in place: one left behind by a run stopped by hand would be every
    # mutant's baseline (and fail the tests it did not break).
    left = subprocess.run(['git', 'diff', '--quiet', '--', module_path], cwd=TOP, check=False)
    if left.returncode:
        return {'module': name, 'error': '%s differs from git (a mutant of a stopped run?): git checkout -- %s, '
                                         'then run again' % (module_path, module_path)}
    # A session goes on where it stopped only for the same module and tests: changed code or tests
    # score afresh, never on a stopped run's results.
    digest = hashlib.sha256()
    for source in [path] + sorted(tests):
        with open(source, 'rb') as handle:
            digest.update(handle.read())
    stem = name + ('-' + '-'.join(functions) if functions else '') + '-' + digest.hexdigest()[:12]
    config = os.path.join(OUT, stem + '.toml')
    session = os.path.join(OUT, stem + '.sqlite')
    test_command = ' '.join([sys.executable, '-m', 'pytest', '-x', '-q', '-p', 'no:cacheprovider']
                            + [os.path.relpath(t, TOP) for t in tests])
    with open(config, 'w') as handle:
        handle.write('[cosmic-ray]\nmodule-path = "%s"\ntimeout = %.1f\nexcluded-modules = []\n'
                     'test-command = "%s"\n\n[cosmic-ray.distributor]\nname = "local"\n'
                     % (module_path, timeout_s, test_command))
        if functions:
            handle.write('\n[cosmic-ray.filters.line-filter.lines]\n"%s" = %s\n'
                         % (module_path, json.dumps(function_lines(path, functions))))
    if not os.path.exists(session):
        init = cosmic_ray(['init', config, session], binary)
        if init.returncode:
            return {'module': name, 'error': init.stderr[-2000:]}
        if functions:
            lines = subprocess.run([os.path.join(os.path.dirname(binary), 'cr-filter-lines'), '--config', config,
                                    session], cwd=TOP, capture_output=True, text=True, check=False)
            if lines.returncode:
                return {'module': name, 'error': lines.stderr[-2000:]}
    run = cosmic_ray(['exec', config, session], binary)
    if run.returncode:
        return {'module': name, 'error': run.stderr[-2000:]}
    dump = cosmic_ray(['dump', session], binary)
    outcomes = {}
    survivors = []
    for line in dump.stdout.splitlines():
        job, result = json.loads(line)
        outcome = ('skipped' if (result or {}).get('worker_outcome') == 'skipped'
                   else (result or {}).get('test_outcome') or 'pending')
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if outcome == 'survived':
            mutation = job['mutations'][0]
            survivors.append({'operator': mutation['operator_name'], 'occurrence': mutation['occurrence'],
                              'line': mutation['start_pos'][0], 'diff': (result.get('diff') or '')[:600]})
    killed, survived = outcomes.get('killed', 0), outcomes.get('survived', 0)
    return {'module': name, 'functions': functions or [], 'tests': [os.path.relpath(t, TOP) for t in tests],
            'outcomes': outcomes,
            'score': round(killed / (killed + survived), 3) if killed + survived else None, 'survivors': survivors}


def run(args):
    binary = args.cosmic_ray or shutil.which('cosmic-ray')
    if not binary:
        raise SystemExit('cosmic-ray is not installed: pip install cosmic-ray==8.7.0 (then --cosmic-ray PATH if it '
                         'is not on PATH)')
    names = args.modules or sorted(os.path.basename(p)[:-3] for p in glob.glob(
        os.path.join(TOP, 'plugins', 'module_utils', '*.py')) if not p.endswith('__init__.py')) + sorted(PROGRAMS)
    return {'results': [run_module(name, binary, args.mutant_timeout_s, args.functions) for name in names]}


def table(result):
    lines = ['| module | mutants | killed | survived | other | score |', '|---|---|---|---|---|---|']
    for one in result['results']:
        if 'error' in one:
            lines.append('| %s | error: %s | | | | |' % (one['module'], (one['error'].strip().splitlines() or [''])[-1][:80]))
            continue
        o = one['outcomes']
        other = sum(v for k, v in o.items() if k not in ('killed', 'survived', 'skipped'))
        label = one['module'] + (' (%s)' % ', '.join(one['functions']) if one.get('functions') else '')
        row = (label, sum(o.values()) - o.get('skipped', 0), o.get('killed', 0), o.get('survived', 0), other,
               one['score'])
        lines.append('| %s | %d | %d | %d | %d | %s |' % row)
    return '\n'.join(lines)
