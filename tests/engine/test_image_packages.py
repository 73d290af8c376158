"""What role serving_image's probe (roles/serving_image/files/image_probe.py) reads of a package pip
installed from a repository commit, and what the verdict makes of it (rule V1). Here, not in
tests/unit: pip builds the package from its repository, which needs a setuptools that builds wheels
(the engine's environment has one; the unit environment's does not).

The repository is a local git one made here (no network): pip records its URL and the full commit in
the package's direct_url.json (PEP 610) as it does for the M3 launcher's `pip install
git+https://github.com/lukealonso/b12x.git@<commit>`."""
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import serving_image as si

pytestmark = pytest.mark.rule("V1")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = os.path.join(TOP, 'roles', 'serving_image', 'files', 'image_probe.py')
PYPROJECT = """[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"
[project]
name = "b12x"
version = "1.3.0"
[tool.setuptools]
packages = ["b12x"]
"""


def git(repo, *argv):
    done = subprocess.run(['git', '-C', str(repo), '-c', 'user.email=test@invalid', '-c', 'user.name=test'] + list(argv),
                          capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.strip()


def probe(site, names):
    """The probe as the role runs it: python3 -c with its text, GB10_IMAGE_PACKAGES in its environment."""
    with open(PROBE) as handle:
        text = handle.read()
    env = {'PATH': os.environ['PATH'], 'PYTHONPATH': str(site), 'GB10_IMAGE_PACKAGES': names}
    done = subprocess.run([sys.executable, '-S', '-c', text], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_probe_reads_the_commit_pip_installed_and_the_verdict_refuses_another(tmp_path):
    repo = tmp_path / 'b12x'
    (repo / 'b12x').mkdir(parents=True)
    (repo / 'b12x' / '__init__.py').write_text('')
    (repo / 'pyproject.toml').write_text(PYPROJECT)
    git(repo, 'init', '-q')
    git(repo, 'add', '-A')
    git(repo, 'commit', '-qm', 'first')
    first = git(repo, 'rev-parse', 'HEAD')
    (repo / 'b12x' / '__init__.py').write_text('COPY_RUNTIME_METADATA = True\n')
    git(repo, 'commit', '-qam', 'second')
    second = git(repo, 'rev-parse', 'HEAD')
    site = tmp_path / 'site'
    subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', '--no-deps', '--no-build-isolation', '--no-index',
                    '--target', str(site), 'git+file://%s@%s' % (repo, first)], check=True, timeout=300)

    output = probe(site, 'b12x,not-there')
    found = si.parse_image_probe(output)['packages']
    assert found['b12x'] == {'version': '1.3.0', 'url': 'file://%s' % repo, 'commit': first, 'error': None}, found
    assert found['not-there']['version'] is None and 'PackageNotFoundError' in found['not-there']['error'], found

    def refusals(commit):
        wanted = {'b12x': {'source': 'https://github.com/lukealonso/b12x.git', 'commit': commit}}
        return [r for r in si.image_refusals(si.parse_image_probe(output), 'm3:1', 'spark1', need_ray=False,
                                             packages=wanted) if 'image_packages' in r]

    assert refusals(first) == []
    refused = refusals(second)
    assert len(refused) == 1 and ('has b12x 1.3.0 from file://%s at commit %s' % (repo, first)) in refused[0], refused
    assert json.loads(output.split('GB10_IMAGE_PROBE ', 1)[1])['packages']['b12x']['commit'] == first
