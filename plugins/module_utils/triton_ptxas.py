# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where Triton looks for its assembler (rule H7), for both generations of Triton.

Triton up to 3.5 runs one assembler, ``<triton>/backends/nvidia/bin/ptxas`` or ``TRITON_PTXAS_PATH``
(read in the 3.5.0 wheel: ``get_ptxas()`` takes no architecture and ``bin/`` holds ``ptxas`` alone).
Triton 3.6 and later pick it per architecture: ``get_ptxas(arch)`` in
``triton/backends/nvidia/compiler.py`` returns ``knobs.nvidia.ptxas_blackwell`` for ``arch >= 100``,
that is ``bin/ptxas-blackwell`` or ``TRITON_PTXAS_BLACKWELL_PATH`` (``knobs.env_nvidia_tool``
turns ``ptxas-blackwell`` into that name); a GB10 is sm_121, so only the second is read there.
Either way Triton falls back to its bundled file when the path in the variable does not run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# (file name under <triton>/backends/nvidia/bin, the environment variable that overrides it)
ASSEMBLERS = (('ptxas', 'TRITON_PTXAS_PATH'), ('ptxas-blackwell', 'TRITON_PTXAS_BLACKWELL_PATH'))


def ptxas_env(path):
    """Every variable either generation of Triton reads for its assembler, set to path; none for ''."""
    if not path:
        return {}
    return dict((variable, path) for unused_name, variable in ASSEMBLERS)
