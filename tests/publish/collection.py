# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build the collection tarball as a maintainer would publish it (tests/publish and the e2e
installed-collection case use it).

build(dest, leftovers=False) copies the files of the checkout that git tracks (as the sanity stage
does: a fresh clone's files) into a fresh folder, optionally plants there what test runs, failed deploys
and drift runs leave in a checkout (LEFTOVERS), and runs `ansible-galaxy collection build` in
it: galaxy.yml's build_ignore must keep every leftover out.
"""

import glob
import os
import shutil
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)

# Paths a checkout holds after a test run, a failed deploy or a drift run (relative to its root).
LEFTOVERS = [
    ".pytest_cache/v/cache/lastfailed",
    "tests/unit/.pytest_cache/README.md",
    "playbooks/logs/20260101T000000Z/gb10-sim-spark1/gb10-ray-head.log",
    "logs/20260101T000000Z/gb10-sim-spark1/gb10-ray-head.log",
    "drift-report/drift-report.json",
    "playbooks/drift-report/drift-report.xml",
    "tests/output/e2e/session/runner/stdout",
    "plugins/modules/__pycache__/unified_memory.cpython-311.pyc",
    ".cache/facts/gb10-sim-spark1",
    ".sim/id_ed25519",
    "importer_result.json",
]
# A shipped path that starts with one of these is a leftover.
LEFTOVER_PREFIXES = (".pytest_cache", "tests/unit/.pytest_cache", "playbooks/logs", "logs/", "drift-report",
                     "playbooks/drift-report", "tests/output", ".cache", ".sim", ".venv", ".collections",
                     ".git/", "importer_result.json")


def git_files():
    out = subprocess.run(["git", "ls-files", "-z"], cwd=TOP,
                         check=True, capture_output=True).stdout.decode()
    return [f for f in out.split("\0") if f and os.path.isfile(os.path.join(TOP, f))]


def build(dest, leftovers=False):
    """Path of gb10-serving-<version>.tar.gz built in dest (a new folder)."""
    src = os.path.join(dest, "src")
    out = os.path.join(dest, "dist")
    os.makedirs(out)
    for rel in git_files():
        target = os.path.join(src, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(TOP, rel), target, follow_symlinks=False)
    if leftovers:
        for rel in LEFTOVERS:
            target = os.path.join(src, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w") as f:
                f.write("left over by a run\n")
    subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", out], cwd=src,
                   check=True, capture_output=True)
    tarballs = glob.glob(os.path.join(out, "gb10-serving-*.tar.gz"))
    assert len(tarballs) == 1, tarballs
    return tarballs[0]
