# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stand-in for the Hugging Face Hub, for tests only: no hub is reachable from the test machine.

Serves the files of one directory as the private model repository REPO at one commit (COMMIT,
whatever revision is asked), through the parts of the Hub's HTTP API that huggingface_hub's
``snapshot_download`` and ``model_info(files_metadata=True)`` use (repo info, with each file's size,
git blob id and, for *.safetensors, LFS SHA-256 when ``blobs`` is asked, as the Hub gives them; tree
listing; resolve with HEAD/GET and Range). The record is taken when the server starts and the files
are read when asked, so a file changed after the start is served as a Hub mirror that tampered
with it would serve it. Every request must carry ``Authorization: Bearer
TOKEN``; others get 401, as a gated repository answers. Each request is logged to stdout as one
JSON line (method, path, whether the token matched), which is what a test reads.

Usage: python3 fake_hub.py DIR REPO TOKEN [PORT]   (listens on 0.0.0.0:PORT, default 8088)
"""

import hashlib
import json
import os
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def files_of(root):
    """{relative path: (size, git blob sha1, sha256)} of every file under root."""
    out = {}
    for base, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(base, name)
            data = open(path, "rb").read()
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            out[os.path.relpath(path, root)] = (len(data), blob, hashlib.sha256(data).hexdigest())
    return out


def sibling(name, record, blobs):
    """A file as the Hub's repo info lists it; with blobs, its size, blob id and LFS record."""
    if not blobs:
        return {"rfilename": name}
    size, blob, sha256 = record
    out = {"rfilename": name, "size": size, "blobId": blob}
    if name.endswith(".safetensors"):
        out["lfs"] = {"size": size, "sha256": sha256, "pointerSize": 134}
    return out


def make_handler(root, repo, token):
    files = files_of(root)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # one JSON line per request instead
            pass

        def _log(self, status):
            print(json.dumps({"method": self.command, "path": self.path, "status": status,
                              "token_ok": self._authorized()}), flush=True)

        def _authorized(self):
            return self.headers.get("Authorization", "") == "Bearer " + token

        def _send(self, status, body=b"", headers=None, head=False):
            self._log(status)
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _json(self, data, head=False):
            self._send(200, json.dumps(data).encode(), {"Content-Type": "application/json"}, head)

        def _route(self, head=False):
            path = unquote(urlparse(self.path).path)
            if not self._authorized():
                return self._send(401, b'{"error": "Invalid credentials in Authorization header"}',
                                  {"Content-Type": "application/json", "X-Error-Code": "GatedRepo"}, head)
            info = re.fullmatch(r"/api/models/%s/revision/[^/]+" % re.escape(repo), path)
            if info or path == "/api/models/%s" % repo:
                blobs = "blobs=" in (urlparse(self.path).query or "")
                return self._json({"id": repo, "modelId": repo, "sha": COMMIT, "private": True,
                                   "siblings": [sibling(f, files[f], blobs) for f in sorted(files)]}, head)
            tree = re.fullmatch(r"/api/models/%s/tree/[^/]+(/.*)?" % re.escape(repo), path)
            if tree:
                return self._json([{"type": "file", "oid": blob, "size": size, "path": name,
                                    "lfs": {"oid": sha256, "size": size, "pointerSize": 134}}
                                   for name, (size, blob, sha256) in sorted(files.items())], head)
            resolve = re.fullmatch(r"/%s/resolve/[^/]+/(.+)" % re.escape(repo), path)
            if resolve and resolve.group(1) in files:
                name = resolve.group(1)
                size, unused_blob, sha256 = files[name]
                with open(os.path.join(root, name), "rb") as handle:
                    data = handle.read()
                headers = {"X-Repo-Commit": COMMIT, "ETag": '"%s"' % sha256,
                           "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
                ranged = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
                if ranged:
                    start = int(ranged.group(1))
                    end = int(ranged.group(2)) if ranged.group(2) else size - 1
                    headers["Content-Range"] = "bytes %d-%d/%d" % (start, end, size)
                    return self._send(206, data[start:end + 1], headers, head)
                return self._send(200, data, headers, head)
            return self._send(404, b'{"error": "not found"}',
                              {"Content-Type": "application/json", "X-Error-Code": "EntryNotFound"}, head)

        def do_GET(self):
            self._route()

        def do_HEAD(self):
            self._route(head=True)

    return Handler


def main(argv):
    root, repo, token = argv[1:4]
    port = int(argv[4]) if len(argv) > 4 else 8088
    server = ThreadingHTTPServer(("0.0.0.0", port), make_handler(root, repo, token))
    print(json.dumps({"listening": port, "repo": repo, "files": len(files_of(root))}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv)
