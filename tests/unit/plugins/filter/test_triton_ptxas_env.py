# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
import pytest
import os
import re

from ansible_collections.gb10.serving.plugins.filter.triton_ptxas_env import FilterModule

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("H7")

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ptxas_env = FilterModule().filters()["triton_ptxas_env"]


def test_both_generations_of_triton_get_the_toolkits_assembler():
    assert ptxas_env("/usr/local/cuda/bin/ptxas") == {"TRITON_PTXAS_PATH": "/usr/local/cuda/bin/ptxas",
                                                      "TRITON_PTXAS_BLACKWELL_PATH": "/usr/local/cuda/bin/ptxas"}


def test_no_path_sets_nothing():
    assert ptxas_env("") == {}


def test_the_names_are_the_ones_triton_derives_from_its_tool_names():
    # knobs.env_nvidia_tool: f"TRITON_{binary.upper().replace('-', '_')}_PATH" (Triton 3.6.0).
    from ansible_collections.gb10.serving.plugins.module_utils.triton_ptxas import ASSEMBLERS
    for name, variable in ASSEMBLERS:
        assert variable == "TRITON_%s_PATH" % name.upper().replace("-", "_")


def test_every_container_that_runs_triton_takes_the_variables_from_the_filter():
    for path in ("roles/serving_containers/vars/main.yml", "roles/sglang_serve/tasks/main.yml"):
        with open(os.path.join(TOP, path)) as f:
            text = f.read()
        assert "gb10.serving.triton_ptxas_env" in text, path
        assert not re.search(r"'TRITON_PTXAS_(BLACKWELL_)?PATH'", text), path
