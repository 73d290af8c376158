# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Download one commit of a Hub model repository and check every file against the Hub's own record
of that commit (a profile names the commit, never a moving branch).

    python3 hub_download.py REPO COMMIT DIR

Runs inside the serving image (huggingface_hub is there; the collection is not), with HF_TOKEN_PATH
(a file holding the token, which huggingface_hub reads itself) and HF_ENDPOINT in its environment. The files land in DIR/.gb10-download first (model_sync leaves
.gb10-* out of its copies) and move to DIR only once every one matches, so a node never holds an
unchecked model under its real path: model_sync takes DIR/config.json for a model in place. COMMIT must be a full 40-digit commit: a branch or tag moves, and a
model's own code (trust-remote-code) comes with the files. The Hub's record of the commit
(model_info with files_metadata) gives each file's LFS SHA-256, or for a file kept in git its blob
id (the SHA-1 of "blob <size>\\0" + content); after snapshot_download each file on disk is hashed and
compared. Prints one line "GB10_HUB_DOWNLOAD {json}" (commit, files, problems) and exits 0 when
every file matches, 2 for a revision that is no commit, 3 when the Hub resolves it to another
commit, 4 when a file is missing or differs (the files stay in DIR/.gb10-download: the next run
resumes there).
"""

from __future__ import absolute_import, division, print_function

import hashlib
import json
import os
import re
import shutil
import sys

PREFIX = "GB10_HUB_DOWNLOAD "
STAGING = ".gb10-download"
COMMIT = re.compile(r"^[0-9a-f]{40}$")
CHUNK = 16 * 1024 * 1024


def digests(path):
    """(sha256, git blob sha1) of a file, read once."""
    size = os.path.getsize(path)
    sha256, blob = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % size)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            sha256.update(chunk)
            blob.update(chunk)
    return sha256.hexdigest(), blob.hexdigest()


def check(siblings, root):
    """Problems of the files under root against the Hub's record: [{file, problem}]."""
    problems = []
    for sibling in siblings:
        name = sibling.rfilename
        path = os.path.join(root, name)
        if not os.path.isfile(path):
            problems.append({"file": name, "problem": "missing"})
            continue
        sha256, blob = digests(path)
        if sibling.lfs is not None:
            expected, got, kind = sibling.lfs.sha256, sha256, "LFS SHA-256"
        elif sibling.blob_id:
            expected, got, kind = sibling.blob_id, blob, "git blob id"
        else:
            problems.append({"file": name, "problem": "the Hub gives no checksum for it"})
            continue
        if got != expected:
            problems.append({"file": name, "problem": "%s %s, the Hub's commit says %s" % (kind, got, expected)})
    return problems


def report(code, **fields):
    print(PREFIX + json.dumps(fields, sort_keys=True), flush=True)
    return code


def main(argv):
    repo, commit, root = argv[1:4]
    if not COMMIT.match(commit):
        return report(2, commit=commit, problems=[{"file": None, "problem": "%r is not a 40-digit commit" % commit}])
    from huggingface_hub import HfApi, snapshot_download  # the image's; imported late so usage errors need none

    info = HfApi().model_info(repo, revision=commit, files_metadata=True)
    if info.sha != commit:
        return report(3, commit=commit, problems=[{"file": None, "problem": "the Hub resolves it to %s" % info.sha}])
    staging = os.path.join(root, STAGING)
    snapshot_download(repo, revision=commit, local_dir=staging)
    siblings = info.siblings or []
    problems = check(siblings, staging)
    if problems:
        return report(4, commit=commit, files=len(siblings), problems=problems, staging=staging)
    for sibling in siblings:
        target = os.path.join(root, sibling.rfilename)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.rename(os.path.join(staging, sibling.rfilename), target)
    shutil.rmtree(staging)
    return report(0, commit=commit, files=len(siblings), problems=[])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
