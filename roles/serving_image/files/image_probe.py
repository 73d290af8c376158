# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the serving image will run, asked of the image itself (rules R1, N7).

Runs as `python3 -c` in a container of the image (no network, the image's own entrypoint left
out), before the image goes to any other node, and prints one JSON line prefixed
"GB10_IMAGE_PROBE ":

- ray: the version `import ray` gives, or why it fails (R1: the Ray executor runs `ray start`);
- nccl: the NCCL library the engine will load and its *runtime* version. vLLM loads it with
  ctypes by the name vllm.utils.nccl.find_nccl_library() returns (VLLM_NCCL_SO_PATH, else
  libnccl.so.2 on a CUDA torch) after `import torch`; a CUDA torch has by then loaded the NCCL it
  links (its RPATH: pip's nvidia-nccl-cuXX), and the dynamic loader hands that one to the name.
  So the probe imports torch, asks vLLM for the name (the CUDA answer where the torch has no
  CUDA), loads it, calls ncclGetVersion() and reads which file is mapped (/proc/self/maps).
  torch.cuda.nccl.version() is not asked: it is the version torch was built against, a constant.
- nccl_other: every other libnccl.so.2 the image holds (pip's beside the system's, or the reverse)
  with its own runtime version, loaded by path: the field's M2.7 TP=2 hang went away only when the
  pip library was swapped for the system one (vllm-project/vllm issues 41725 and 42354);
- nccl_conf: NCCL's own configuration files in the image (/etc/nccl.conf, and NCCL_CONF_FILE when
  the image's environment sets it), with their settings: NCCL reads them beside the environment,
  so one baked into the image sets what the cluster's env file (N1-N4) leaves unset;
- packages: for each Python distribution named in GB10_IMAGE_PACKAGES (comma-separated: the
  profile's image_packages), its version and, for one pip installed from a repository, the URL
  and commit pip recorded (its direct_url.json, PEP 610): a kernel library that the field's
  launcher installs at container start from one commit is then checked in the image instead.

Self-contained on purpose (it runs in the image, where the collection is not installed): the
verdict is plugins/module_utils/serving_image.py's image_refusals(), and role link_check's probe
reads the runtime version the same way (tests/unit compares the two).
"""

from __future__ import absolute_import, division, print_function

import ctypes
import glob
import json
import os
import sys

PREFIX = 'GB10_IMAGE_PROBE '
SONAME = 'libnccl.so.2'


def nccl_version(library):
    """ncclGetVersion() of a loaded NCCL (ctypes.CDLL): the integer NCCL_VERSION_CODE, or None."""
    code = ctypes.c_int(0)
    if library.ncclGetVersion(ctypes.byref(code)) != 0:
        return None
    return code.value


def mapped(name_part):
    """The files this process maps whose name holds name_part (from /proc/self/maps), in order."""
    found = []
    try:
        with open('/proc/self/maps') as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) == 6 and name_part in os.path.basename(fields[5].strip()):
                    path = os.path.realpath(fields[5].strip())
                    if path not in found:
                        found.append(path)
    except (IOError, OSError):
        pass
    return found


def engine_library_name():
    """The name vLLM loads NCCL by, asked of vLLM (its module moved between versions)."""
    for module in ('vllm.utils.nccl', 'vllm.utils'):
        try:
            found = __import__(module, fromlist=['find_nccl_library']).find_nccl_library
        except Exception:  # pylint: disable=broad-except
            continue
        try:
            return found(), 'vllm'
        except Exception as exc:  # pylint: disable=broad-except
            # a torch without CUDA (the CPU simulation): vLLM would load the CUDA name
            return os.environ.get('VLLM_NCCL_SO_PATH') or SONAME, 'default (%s)' % (str(exc)[:120],)
    return os.environ.get('VLLM_NCCL_SO_PATH') or SONAME, 'default (vllm not importable)'


def candidates():
    """Every libnccl.so.2 file the image holds where the loader or pip would find it."""
    patterns = ['/usr/lib/*/libnccl.so.2*', '/usr/lib/libnccl.so.2*', '/usr/lib64/libnccl.so.2*',
                '/usr/local/lib/libnccl.so.2*', '/usr/local/cuda*/lib*/libnccl.so.2*',
                '/usr/local/lib/python3*/*-packages/nvidia/nccl/lib/libnccl.so.2*',
                '/usr/lib/python3*/*-packages/nvidia/nccl/lib/libnccl.so.2*']
    for entry in sys.path:
        if entry.endswith('-packages'):
            patterns.append(os.path.join(entry, 'nvidia', 'nccl', 'lib', 'libnccl.so.2*'))
    found = []
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            real = os.path.realpath(path)
            if os.path.isfile(real) and real not in found:
                found.append(real)
    return found


def kind(path):
    return 'pip' if os.sep + os.path.join('nvidia', 'nccl', 'lib') + os.sep in path else 'system'


def probe_nccl():
    result = {'torch': None, 'asked': None, 'name': None, 'path': None, 'version': None, 'error': None}
    try:
        import torch
        result['torch'] = '%s (cuda %s)' % (torch.__version__, torch.version.cuda)
    except Exception as exc:  # pylint: disable=broad-except
        result['torch'] = 'not importable: %s' % (str(exc)[:200],)
    result['name'], result['asked'] = engine_library_name()
    try:
        library = ctypes.CDLL(result['name'])
        result['version'] = nccl_version(library)
    except (OSError, AttributeError) as exc:
        result['error'] = str(exc)[:300]
        return result, []
    loaded = mapped('libnccl')
    result['path'] = loaded[0] if loaded else result['name']
    result['kind'] = kind(result['path'])
    others = []
    for path in candidates():
        if path in loaded:
            continue
        other = {'path': path, 'kind': kind(path), 'version': None}
        try:
            other['version'] = nccl_version(ctypes.CDLL(path))
        except (OSError, AttributeError) as exc:
            other['error'] = str(exc)[:200]
        others.append(other)
    return result, others


def probe_conf():
    paths = ['/etc/nccl.conf']
    if os.environ.get('NCCL_CONF_FILE'):
        paths.append(os.environ['NCCL_CONF_FILE'])
    found = []
    for path in paths:
        if os.path.isfile(path):
            try:
                with open(path) as handle:
                    settings = [line.strip() for line in handle
                                if line.strip() and not line.strip().startswith('#')]
            except (IOError, OSError) as exc:
                settings = ['(unreadable: %s)' % (exc,)]
            found.append({'path': path, 'settings': settings[:20]})
    return found


def probe_ray():
    try:
        import ray
        return {'version': ray.__version__, 'error': None}
    except Exception as exc:  # pylint: disable=broad-except
        return {'version': None, 'error': '%s: %s' % (type(exc).__name__, str(exc)[:300])}


def probe_packages(names):
    found = {}
    for name in names:
        entry = {'version': None, 'url': None, 'commit': None, 'error': None}
        try:
            from importlib import metadata
            distribution = metadata.distribution(name)
            entry['version'] = distribution.version
            direct = json.loads(distribution.read_text('direct_url.json') or 'null') or {}
            entry['url'] = direct.get('url')
            entry['commit'] = (direct.get('vcs_info') or {}).get('commit_id')
        except Exception as exc:  # pylint: disable=broad-except
            entry['error'] = '%s: %s' % (type(exc).__name__, str(exc)[:200])
        found[name] = entry
    return found


def main():
    nccl, others = probe_nccl()
    names = [name.strip() for name in os.environ.get('GB10_IMAGE_PACKAGES', '').split(',') if name.strip()]
    result = {'ray': probe_ray(), 'nccl': nccl, 'nccl_other': others, 'nccl_conf': probe_conf(),
              'packages': probe_packages(names)}
    sys.stdout.write(PREFIX + json.dumps(result, sort_keys=True) + '\n')
    sys.stdout.flush()
    return 0


if __name__ == '__main__':
    sys.exit(main())
