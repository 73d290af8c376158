# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What role serving_image asks of a serving image (roles/serving_image/files/image_probe.py) and
role link_check's probe (roles/link_check/files/allreduce_probe.py) read of the NCCL they run, both
against real shared libraries: the fixture kit's stand-in libnccl.so.2
(tests/sim/images/serving/libnccl_standin.c) compiled here with the field's version codes, loaded
by the dynamic loader as the engine loads NCCL. The verdict (plugins/module_utils/serving_image.py)
is then asked about what the probe printed (rules R1, N7)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import serving_image as si

pytestmark = pytest.mark.rule("N7")

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROBE = os.path.join(TOP, "roles", "serving_image", "files", "image_probe.py")
LINK_PROBE = os.path.join(TOP, "roles", "link_check", "files", "allreduce_probe.py")
STANDIN = os.path.join(TOP, "tests", "sim", "images", "serving", "libnccl_standin.c")
FIXTURES = os.path.join(TOP, "tests", "fixtures", "nccl")


def standin(directory, code):
    """A libnccl.so.2 answering ncclGetVersion() with code, in directory (made if missing)."""
    os.makedirs(str(directory), exist_ok=True)
    out = os.path.join(str(directory), "libnccl.so.2")
    subprocess.run([shutil.which("gcc") or "cc", "-shared", "-fPIC", "-Wl,-soname,libnccl.so.2",
                    "-DGB10_NCCL_VERSION_CODE=%d" % code, "-o", out, STANDIN], check=True)
    return out


def run_probe(tmp_path, env_extra, *extra_path):
    """image_probe.py as the role runs it (python3 -c, its text as the argument), with LD_LIBRARY_PATH
    where the loader finds the 'system' library and extra sys.path entries (a pip site-packages)."""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join(extra_path)}
    env.update(env_extra)
    with open(PROBE) as handle:
        text = handle.read()
    done = subprocess.run([sys.executable, "-S", "-c", text], env=env, capture_output=True, text=True,
                          cwd=str(tmp_path), timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return si.parse_image_probe(done.stdout)


def test_the_probe_reads_the_runtime_version_of_the_library_the_loader_gives(tmp_path):
    system = standin(tmp_path / "system", 22809)
    probe = run_probe(tmp_path, {"LD_LIBRARY_PATH": str(tmp_path / "system")})
    assert probe["nccl"]["version"] == 22809, probe
    assert probe["nccl"]["path"] == os.path.realpath(system) and probe["nccl"]["kind"] == "system", probe
    assert probe["nccl_conf"] == [] or all(c["path"] == "/etc/nccl.conf" for c in probe["nccl_conf"]), probe
    assert "NCCL 2.28.9 (%s, system)" % os.path.realpath(system) in si.image_report(probe)


def test_the_probe_reports_a_second_nccl_in_the_image_with_its_own_version(tmp_path):
    # pip's nvidia-nccl beside the system library (the field's M2.7 hang, vllm-project/vllm issues 41725 and 42354):
    # the loader gives the system one; the pip one is found by path and asked for its own version.
    standin(tmp_path / "system", 22809)
    site = tmp_path / "site-packages"
    pip = standin(site / "nvidia" / "nccl" / "lib", 22907)
    probe = run_probe(tmp_path, {"LD_LIBRARY_PATH": str(tmp_path / "system")}, str(site))
    assert probe["nccl"]["version"] == 22809, probe
    others = {o["path"]: o for o in probe["nccl_other"]}
    assert others[os.path.realpath(pip)]["version"] == 22907 and others[os.path.realpath(pip)]["kind"] == "pip", probe
    report = si.image_report(probe)
    assert "the image also holds NCCL 2.29.7 (%s, pip)" % os.path.realpath(pip) in report, report


def test_vllm_nccl_so_path_names_the_library_the_engine_loads(tmp_path):
    chosen = standin(tmp_path / "chosen", 23001)
    probe = run_probe(tmp_path, {"VLLM_NCCL_SO_PATH": chosen})
    assert probe["nccl"]["version"] == 23001 and probe["nccl"]["path"] == os.path.realpath(chosen), probe


def test_no_nccl_is_a_finding_not_a_crash(tmp_path):
    probe = run_probe(tmp_path, {"LD_LIBRARY_PATH": str(tmp_path)})
    if probe["nccl"]["version"]:
        pytest.skip("this machine has a libnccl.so.2 of its own: %s" % probe["nccl"]["path"])
    assert "libnccl.so.2" in probe["nccl"]["error"], probe
    problems = si.image_refusals(probe, "img:1", "spark1", need_ray=False)
    assert any("loads no NCCL" in p and "Fix: an image whose torch is a CUDA build" in p for p in problems), problems


def test_the_link_probe_reads_the_runtime_version_as_the_image_probe_does(tmp_path):
    # allreduce_probe.nccl_runtime() reads the libnccl the process mapped; here a process that loaded
    # the stand-in as the engine loads NCCL. Both probes must give the same answer.
    lib = standin(tmp_path / "system", 22907)
    code = ("import ctypes, sys; sys.path.insert(0, %r); import allreduce_probe as p; "
            "ctypes.CDLL('libnccl.so.2'); print(p.nccl_runtime())" % os.path.dirname(LINK_PROBE))
    done = subprocess.run([sys.executable, "-c", code], env={"PATH": os.environ["PATH"],
                                                             "LD_LIBRARY_PATH": str(tmp_path / "system")},
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == str(("2.29.7", os.path.realpath(lib))), done.stdout
    probe = run_probe(tmp_path, {"LD_LIBRARY_PATH": str(tmp_path / "system")})
    assert si.version_text(si.nccl_version(probe["nccl"]["version"])) == "2.29.7"


@pytest.mark.parametrize("code, text", [(22809, "2.28.9"), (23000, "2.30.0"), (2708, "2.7.8"), (21903, "2.19.3")])
def test_nccl_version_codes_decode_as_nccl_h_encodes_them(code, text):
    assert si.version_text(si.nccl_version(code)) == text


def probe_result(ray="2.60.0", nccl=22809, conf=()):
    return {"ray": {"version": ray, "error": None if ray else "ModuleNotFoundError: No module named 'ray'"},
            "nccl": {"version": nccl, "path": "/usr/lib/aarch64-linux-gnu/libnccl.so.2", "kind": "system",
                     "name": "libnccl.so.2", "asked": "vllm", "error": None},
            "nccl_other": [], "nccl_conf": list(conf)}


def test_a_fit_image_has_no_refusal():
    assert si.image_refusals(probe_result(), "vllm-node:0.32.0", "spark1") == []
    assert si.image_refusals(probe_result(nccl=23007), "vllm-node:0.32.0", "spark1", transport="roce_ring") == []


def test_the_ring_refuses_an_nccl_before_2_30_naming_the_image_the_finding_and_the_fix():
    problems = si.image_refusals(probe_result(nccl=22907), "m3-fork:fb63c9a", "spark1", transport="roce_ring")
    assert len(problems) == 1, problems
    assert problems[0].startswith("host spark1: image m3-fork:fb63c9a loads NCCL 2.29.7 (/usr/lib/aarch64"), problems
    assert "gb10_nccl_transport=roce_ring needs NCCL 2.30.7 or later" in problems[0], problems
    assert 'Fix: an image with NCCL 2.30.7 or later' in problems[0] and "Nothing was copied." in problems[0]
    # The same image is fit on a pair's transport.
    assert si.image_refusals(probe_result(nccl=22907), "m3-fork:fb63c9a", "spark1", transport="roce") == []


def test_an_nccl_conf_in_the_image_is_refused_with_its_settings():
    conf = [{"path": "/etc/nccl.conf", "settings": ["NCCL_SOCKET_IFNAME=eth0", "NCCL_IB_DISABLE=1"]}]
    problems = si.image_refusals(probe_result(conf=conf), "vllm-node:0.32.0", "spark1")
    assert len(problems) == 1 and "carries NCCL configuration file /etc/nccl.conf" in problems[0], problems
    assert "NCCL_SOCKET_IFNAME=eth0; NCCL_IB_DISABLE=1" in problems[0] and "RUN rm -f /etc/nccl.conf" in problems[0]


def test_ray_is_asked_for_only_where_the_executor_needs_it():
    problems = si.image_refusals(probe_result(ray=None), "nvcr.io/nvidia/vllm:26.01-py3", "spark1")
    assert len(problems) == 1 and "cannot import ray (ModuleNotFoundError" in problems[0], problems
    assert "Fix: build an image from it with Ray added" in problems[0]
    assert si.image_refusals(probe_result(ray=None), "nvcr.io/nvidia/vllm:26.01-py3", "spark1", need_ray=False) == []
    old = si.image_refusals(probe_result(ray="2.49.2"), "img:1", "spark1")
    assert len(old) == 1 and "has Ray 2.49.2, which ignores RAY_AUTH_MODE=token" in old[0], old
    assert si.image_refusals(probe_result(ray="2.49.2"), "img:1", "spark1", ray_auth=False) == []


def test_an_image_that_cannot_run_the_probe_is_refused_with_what_it_said():
    problems = si.image_refusals(None, "gb10-si-tiny:1", "spark1", status=127,
                                 output='exec: "python3": executable file not found in $PATH')
    assert len(problems) == 1 and "could not be asked what it runs" in problems[0], problems
    assert "exit status 127" in problems[0] and "python3" in problems[0] and "serving_image_check: false" in problems[0]


def test_the_probe_line_is_found_after_the_engines_own_output():
    line = si.IMAGE_PROBE_PREFIX + json.dumps(probe_result())
    assert si.parse_image_probe("INFO vllm: Found nccl from library libnccl.so.2\n" + line + "\n") == probe_result()
    assert si.parse_image_probe("no probe here") is None


def test_a_real_cuda_machine_with_pips_nccl_and_a_systems_one_is_read_as_it_is():
    # Captured on an NVIDIA GPU machine (tests/fixtures/nccl/README.md): torch 2.11.0+cu130 loads pip's
    # nvidia-nccl-cu13 2.28.9; a system libnccl 2.28.3 sits beside it. The probe named the one the
    # engine loads by its runtime version and file, and the other by its own.
    with open(os.path.join(FIXTURES, "device_h200_image_probe.log")) as handle:
        probe = si.parse_image_probe(handle.read())
    assert probe["nccl"]["version"] == 22809 and probe["nccl"]["kind"] == "pip", probe
    assert probe["nccl"]["path"].endswith("/site-packages/nvidia/nccl/lib/libnccl.so.2"), probe
    assert [(o["kind"], o["version"]) for o in probe["nccl_other"]] == [("system", 22803)], probe
    report = si.image_report(probe)
    assert "the engine loads NCCL 2.28.9 (" in report and "the image also holds NCCL 2.28.3 (" in report, report
    assert "went away only with the system library alone" in report, report
    # Without Ray (a torch machine): refused where the executor is Ray, fit for mp on a pair.
    assert si.image_refusals(probe, "device", "h200", need_ray=False) == []
    assert si.image_refusals(probe, "device", "h200", need_ray=False, transport="roce_ring")[0].startswith(
        "host h200: image device loads NCCL 2.28.9 (")


def test_the_link_probe_on_a_real_cuda_machine_reports_the_runtime_nccl_and_its_file():
    with open(os.path.join(FIXTURES, "device_h200_link_probe_nccl_runtime.log")) as handle:
        line = next(line for line in handle if line.startswith("GB10_LINK_PROBE "))
    result = json.loads(line[len("GB10_LINK_PROBE "):])
    assert result["nccl"] == "2.28.9" and result["nccl_library"].endswith("/nvidia/nccl/lib/libnccl.so.2"), result


@pytest.mark.rule("N6", "N7")
def test_the_ring_refuses_2_30_4_which_ignores_subnet_aware_routing():
    # NCCL_IB_SUBNET_AWARE_ROUTING first exists in 2.30.7 (NVIDIA/nccl src/transport/net_ib/connect.cc at
    # v2.30.7-1, absent at v2.30.4-1): 2.30.4 would ignore the ring's setting in silence.
    assert si.image_refusals(probe_result(nccl=23004), "x:1", "spark1", transport="roce_ring")
    assert si.image_refusals(probe_result(nccl=23007), "x:1", "spark1", transport="roce_ring") == []
