# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/triton_ptxas/files/triton_assembler.py against Triton packages shaped like both
generations (rule H7): where it links, and what it reports as Triton's own choice. The real Triton
3.6.0 answers in molecule/triton_ptxas; here its get_ptxas(arch) is copied in shape only."""

import pytest
import glob
import json
import os
import subprocess
import sys
import zipfile

from ansible_collections.gb10.serving.plugins.module_utils.triton_ptxas import ASSEMBLERS

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("H7")

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(TOP, "roles", "triton_ptxas", "files", "triton_assembler.py")

KNOBS_36 = 'ptxas = "ptxas"\nptxas_blackwell = "ptxas-blackwell"\n'
COMPILER_36 = '''import os
class Tool:
    def __init__(self, path, version):
        self.path, self.version = path, version
def _tool(name, variable):
    path = os.environ.get(variable)
    if path and os.access(path, os.X_OK):
        return Tool(path, "13.0")
    # The 3.6.0 wheel's own: bin/ptxas is CUDA 12.8's, bin/ptxas-blackwell CUDA 12.9's.
    return Tool(os.path.join(os.path.dirname(__file__), "bin", name), "12.9" if name == "ptxas-blackwell" else "12.8")
def get_ptxas(arch):
    return _tool("ptxas-blackwell", "TRITON_PTXAS_BLACKWELL_PATH") if arch >= 100 else _tool("ptxas", "TRITON_PTXAS_PATH")
'''
GET_36 = COMPILER_36[COMPILER_36.index("def get_ptxas(arch):"):]
COMPILER_34 = COMPILER_36.replace(GET_36, 'def get_ptxas():\n    return _tool("ptxas", "TRITON_PTXAS_PATH")\n')


def triton(tmp_path, knobs, compiler):
    site = tmp_path / "site"
    nvidia = site / "triton" / "backends" / "nvidia"
    (nvidia / "bin").mkdir(parents=True)
    (site / "triton" / "__init__.py").write_text("__version__ = 'fixture'\n")
    (site / "triton" / "knobs.py").write_text(knobs)
    (site / "triton" / "backends" / "__init__.py").write_text("")
    (nvidia / "__init__.py").write_text("")
    (nvidia / "compiler.py").write_text(compiler)
    toolkit = tmp_path / "cuda" / "ptxas"
    toolkit.parent.mkdir()
    toolkit.write_text("#!/bin/sh\necho release 13.0\n")
    toolkit.chmod(0o755)
    return str(site), str(toolkit)


def run(site, *argv, env=None):
    out = subprocess.run([sys.executable, SCRIPT] + list(argv), capture_output=True, text=True, check=True,
                         env=dict(env or {}, PYTHONPATH=site, PATH=os.environ["PATH"]), timeout=60)
    return json.loads(out.stdout)


def test_the_script_knows_the_assemblers_module_utils_names():
    assert tuple(name for name, unused_variable in ASSEMBLERS) == tuple(
        __import__("runpy").run_path(SCRIPT, run_name="triton_assembler")["ASSEMBLERS"])


def test_triton_36_gets_both_links_and_answers_for_sm_121_with_the_blackwell_assembler(tmp_path):
    site, toolkit = triton(tmp_path, KNOBS_36, COMPILER_36)
    found = run(site, "links", toolkit)
    assert found["source_ok"] and [link["name"] for link in found["links"]] == ["ptxas", "ptxas-blackwell"]
    assert found["links"][1]["link"].endswith("/triton/backends/nvidia/bin/ptxas-blackwell")
    # Only TRITON_PTXAS_PATH set (the rule as it first read): sm_121 still runs the bundled one.
    asked = run(site, "ask", "121", toolkit, env={"TRITON_PTXAS_PATH": toolkit})
    assert asked["path"].endswith("bin/ptxas-blackwell") and asked["release"] == "12.9" and not asked["is_source"], asked
    asked = run(site, "ask", "121", toolkit, env={"TRITON_PTXAS_BLACKWELL_PATH": toolkit})
    assert asked["is_source"] and asked["release"] == "13.0", asked


def test_an_older_triton_gets_one_link_and_is_asked_without_an_arch(tmp_path):
    site, toolkit = triton(tmp_path, 'ptxas = "ptxas"\n', COMPILER_34)
    assert [link["name"] for link in run(site, "links", toolkit)["links"]] == ["ptxas"]
    asked = run(site, "ask", "121", toolkit, env={"TRITON_PTXAS_PATH": toolkit})
    assert asked["is_source"], asked


def test_a_triton_that_cannot_be_imported_is_reported_not_raised(tmp_path):
    site, toolkit = triton(tmp_path, KNOBS_36, "raise ImportError('libcuda.so.1: cannot open shared object file')\n")
    asked = run(site, "ask", "121", toolkit)
    assert "libcuda.so.1" in asked["error"] and "path" not in asked


def test_no_triton_no_links(tmp_path):
    found = run(str(tmp_path), "links", "/nonexistent/ptxas")
    assert found == {"source_ok": False, "triton": None, "links": []}


# The real Triton 3.6.0 that tests/images/triton_site.sh unpacks (scripts/test.sh exports where),
# and the wheel it came from, whose bundled assemblers that unpacking leaves out.
REAL_SITE = os.environ.get("GB10_TRITON_SITE", "")
REAL_WHEEL = glob.glob(os.path.join(os.path.dirname(os.path.dirname(REAL_SITE)), "triton-3.6.0-*.whl")) if REAL_SITE else []


@pytest.mark.skipif(not REAL_WHEEL, reason="needs the real Triton 3.6.0 (scripts/test.sh sets GB10_TRITON_SITE)")
def test_triton_36s_own_assemblers_answer_for_sm_121a_as_the_wheel_ships_them(tmp_path):
    # The wheel's bin/ptxas (CUDA 12.8) and bin/ptxas-blackwell (CUDA 12.9), asked with the real
    # Triton's ptx_get_version() and target name: the first has no sm_121a, the second assembles
    # it, so a toolkit as old as the first is refused and Triton 3.6's own is a working fallback.
    with zipfile.ZipFile(REAL_WHEEL[0]) as wheel:
        for name in ("ptxas", "ptxas-blackwell"):
            path = wheel.extract("triton/backends/nvidia/bin/" + name, str(tmp_path))
            os.chmod(path, 0o755)
    folder = tmp_path / "triton" / "backends" / "nvidia" / "bin"
    old = run(REAL_SITE, "assembles", "121", str(folder / "ptxas"))
    assert old["release"] == "12.8" and old["target"] == "sm_121a" and old["ok"] is False, old
    assert "Value 'sm_121a' is not defined for option 'gpu-name'" in old["output"], old
    new = run(REAL_SITE, "assembles", "121", str(folder / "ptxas-blackwell"))
    assert new["release"] == "12.9" and new["ok"] is True, new


def test_a_tool_that_names_no_release_is_reported(tmp_path):
    site, unused_toolkit = triton(tmp_path, KNOBS_36, COMPILER_36)
    silent = tmp_path / "silent"
    silent.write_text("#!/bin/sh\nexit 0\n")
    silent.chmod(0o755)
    found = run(site, "assembles", "121", str(silent))
    assert "names no release" in found["error"] and "ok" not in found, found
