# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/triton_ptxas/files/triton_assembler.py against Triton packages shaped like both
generations (rule H7): where it links, and what it reports as Triton's own choice. The real Triton
3.6.0 answers in molecule/triton_ptxas; here its get_ptxas(arch) is copied in shape only."""

import pytest
import json
import os
import subprocess
import sys

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
    return Tool(os.path.join(os.path.dirname(__file__), "bin", name), "12.8")
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
    assert asked["path"].endswith("bin/ptxas-blackwell") and asked["release"] == "12.8" and not asked["is_source"], asked
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
