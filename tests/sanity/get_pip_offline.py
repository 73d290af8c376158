"""Stand-in for pypa's get-pip.py, for ansible-test sanity.

ansible-test bootstraps pip into each sanity virtualenv with a get-pip.py that it downloads from
ci-files.testing.ansible.com, which this project's CI cannot reach (PyPI only). scripts/test.sh
places this file where ansible-test caches that download. It bootstraps pip from the
interpreter's own ensurepip, then installs what ansible-test asked for (e.g. pip==24.2) from PyPI.
"""
import subprocess
import sys

# get-pip.py options that `pip install` does not take.
GET_PIP_ONLY = {'--no-setuptools', '--no-wheel'}

subprocess.check_call([sys.executable, '-m', 'ensurepip', '--default-pip'],
                      stdout=subprocess.DEVNULL)
subprocess.check_call([sys.executable, '-m', 'pip', 'install']
                      + [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY])
