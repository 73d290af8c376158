"""The bounded command runner of the programs a role leaves on a node (exporter, leak reboot)."""
import sys

import pytest

from ansible_collections.gb10.serving.plugins.module_utils.node_command import run

# The rules this module shows as a whole (docs/rules.md, built from these marks).
pytestmark = pytest.mark.rule("O6")


def test_a_command_answers_with_its_status_and_output():
    assert run([sys.executable, '-c', 'import sys; print("hi"); sys.stderr.write("e"); sys.exit(3)']) == (3, 'hi\n', 'e')


def test_a_command_that_hangs_is_cut_at_its_bound():
    rc, out, err = run([sys.executable, '-c', 'import time; time.sleep(30)'], timeout_s=1)
    assert (rc, out) == (124, '') and 'gave no answer in 1 s' in err
