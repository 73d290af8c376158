# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A clone is all a user has: no file the project tracks may send a reader to the folder beside
the checkout where its authors kept their notes. What a reader needs from there
lives in docs/rules.md (the GB10 rules) and tests/sim/README.md (the simulation's measured facts)."""

import os
import re
import subprocess

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# '../' followed by 'shared', written in two parts so this file does not match itself.
OUTSIDE = re.compile(r"\.\./" + "shared")


def tracked_files():
    out = subprocess.run(["git", "ls-files", "-z"], cwd=TOP, capture_output=True, check=True).stdout
    return [name for name in out.decode().split("\0") if name]


def test_no_tracked_file_cites_the_folder_beside_the_checkout():
    hits = []
    for name in tracked_files():
        path = os.path.join(TOP, name)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
        hits += ["%s:%d" % (name, n) for n, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]
    assert hits == [], "cite docs/rules.md or tests/sim/README.md instead: %s" % hits
