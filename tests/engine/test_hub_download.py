"""roles/model_sync/files/hub_download.py, run as the role runs it (python3 of the image, here
.venv-engine's, whose huggingface_hub is vLLM's), against tests/sim/fake_hub.py on loopback: one
commit downloaded and every file checked against the Hub's own record of it."""
import json
import os
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer

import pytest

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("M3")

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(TOP, 'roles', 'model_sync', 'files', 'hub_download.py')
sys.path.insert(0, os.path.join(TOP, 'tests', 'sim'))

import fake_hub  # noqa: E402

REPO, TOKEN = 'gb10/engine-hub', 'hf_engine_test_token'


@pytest.fixture
def hub(tmp_path):
    """A private repository of a config and a shard, served on 127.0.0.1."""
    repo = tmp_path / 'repo'
    repo.mkdir()
    (repo / 'config.json').write_text('{"model_type": "llama"}\n')
    (repo / 'model-00001-of-00001.safetensors').write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    server = ThreadingHTTPServer(('127.0.0.1', 0), fake_hub.make_handler(str(repo), REPO, TOKEN))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield repo, 'http://127.0.0.1:%d' % server.server_address[1]
    server.shutdown()
    server.server_close()


def download(endpoint, commit, dest):
    env = dict(os.environ, HF_ENDPOINT=endpoint, HF_TOKEN=TOKEN, HF_HUB_DISABLE_TELEMETRY='1', HF_HUB_OFFLINE='0',
               HF_HOME=str(dest) + '-hf-home')
    done = subprocess.run([sys.executable, SCRIPT, REPO, commit, str(dest)], env=env, capture_output=True, text=True, check=False,
                          timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith('GB10_HUB_DOWNLOAD ')]
    assert len(lines) == 1, (done.stdout, done.stderr)
    return done.returncode, json.loads(lines[0][len('GB10_HUB_DOWNLOAD '):])


def test_the_pinned_commit_is_downloaded_and_every_file_matches_the_hubs_record(hub, tmp_path):
    repo, endpoint = hub
    rc, out = download(endpoint, fake_hub.COMMIT, tmp_path / 'model')
    assert (rc, out['problems'], out['files']) == (0, [], 2), out
    for name in ('config.json', 'model-00001-of-00001.safetensors'):
        assert (tmp_path / 'model' / name).read_bytes() == (repo / name).read_bytes()
    assert sorted(os.listdir(tmp_path / 'model')) == ['config.json', 'model-00001-of-00001.safetensors']


def test_a_file_that_differs_from_the_commits_record_is_named(hub, tmp_path):
    # Served as a tampering mirror would: the Hub's record of the commit, other bytes of the same size.
    repo, endpoint = hub
    shard = repo / 'model-00001-of-00001.safetensors'
    data = bytearray(shard.read_bytes())
    data[1000] ^= 0xFF
    shard.write_bytes(bytes(data))
    rc, out = download(endpoint, fake_hub.COMMIT, tmp_path / 'model')
    assert rc == 4, out
    (problem,) = out['problems']
    assert problem['file'] == 'model-00001-of-00001.safetensors' and 'LFS SHA-256' in problem['problem'], out
    # Nothing under the model's real path (model_sync takes config.json there for a model in place).
    assert os.listdir(tmp_path / 'model') == ['.gb10-download'] and out['staging'] == str(tmp_path / 'model' / '.gb10-download')


def test_a_branch_is_refused_before_anything_is_fetched(hub, tmp_path):
    rc, out = download(hub[1], 'main', tmp_path / 'model')
    assert rc == 2 and 'not a 40-digit commit' in out['problems'][0]['problem'], out
    assert not (tmp_path / 'model').exists()


def test_a_commit_the_hub_does_not_resolve_to_is_refused(hub, tmp_path):
    rc, out = download(hub[1], 'f' * 40, tmp_path / 'model')
    assert rc == 3 and 'the Hub resolves it to %s' % fake_hub.COMMIT in out['problems'][0]['problem'], out
    assert not (tmp_path / 'model').exists()
