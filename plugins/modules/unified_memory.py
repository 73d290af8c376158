#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: unified_memory
short_description: Account for a GB10 node's unified memory and detect leaked driver memory
version_added: "0.1.0"
description:
  - On GB10 the CPU and the GPU share one LPDDR5X pool. A crashed or hard-stopped container can
    leave tens of GB held by the driver, invisible to nvidia-smi and not freed by dropping caches
    or killing processes; only a reboot frees it (rule H4).
  - Reads C(<proc_root>/meminfo), the GPU's view (NVML through nvidia-ml-py when importable,
    else C(nvidia-smi --query-gpu) and C(--query-compute-apps)), and CUDA-visible total and free
    memory (a CUDA probe, because GB10's nvidia-smi reports memory as C([N/A])).
  - Reports C(unaccounted_gib), memory in use that no process, cache or kernel counter explains,
    and where CUDA sees the whole pool, CUDA's own gap; the larger counts. Run it after dropping
    caches (M(gb10.serving.drop_page_cache)) and with no GPU workload running, as role
    C(gb10.serving.leak_recovery) does.
  - "CUDA's gap is judged against a clean node: on a GB10 CUDA's free figure is MemFree, page
    cache counted as used (measured: unslothai/unsloth PR 10704). The gap is MemFree - CUDA free -
    the node's clean offset: its baseline (O(baseline_file), at most 1 GiB) where one was
    recorded, else 0."
  - C(leaked) is true when C(unaccounted_gib) exceeds O(leak_threshold_gib) and no GPU process
    runs. With GPU processes running the module warns instead, since their memory may be the gap.
  - Changes nothing unless O(record_baseline) asks it to write the node's clean baseline.
options:
  proc_root:
    description:
      - Root of the proc filesystem; C(meminfo) and C(<pid>/status) are read below it.
      - Tests point it at a fixture tree (C(gb10_proc_root)).
    type: path
    default: /proc
  nvidia_smi:
    description:
      - nvidia-smi command, split like a shell would (C(gb10_nvidia_smi)). Used when
        O(gpu_source=nvidia_smi), or with O(gpu_source=auto) when nvidia-ml-py is not importable.
    type: str
    default: nvidia-smi
  gpu_source:
    description:
      - Where the GPU's view comes from. C(auto) is NVML when nvidia-ml-py (C(pynvml)) is
        importable on the node, else nvidia-smi.
    type: str
    choices: [auto, nvml, nvidia_smi]
    default: auto
  cuda_probe:
    description:
      - Command that prints CUDA-visible C(TOTAL FREE) memory in bytes (C(gb10_cuda_probe)).
      - Empty uses the built-in probe, which calls libcuda through ctypes (cuInit, cuDeviceGet,
        cuCtxCreate, cuMemGetInfo) and works wherever the NVIDIA driver is installed.
      - C(none) skips the CUDA view (a node without CUDA); the leak check then uses meminfo only.
    type: str
    default: ""
  leak_threshold_gib:
    description:
      - Unaccounted memory above this is a leak. The field reports saw 33 GB per failed run and
        90 GB on one node, while a healthy node has a few GB no counter explains.
    type: float
    default: 10.0
  baseline_file:
    description:
      - The node's clean memory baseline (JSON, C(cuda_offset_gib) = MemFree - CUDA free on a clean
        node), read on every run. Missing means none yet; 0 is used, what a clean GB10 shows.
      - Empty reads and writes none.
    type: path
    default: /var/lib/gb10/memory/baseline.json
  record_baseline:
    description:
      - Whether this measurement becomes the node's baseline. It is written only when the node is
        known to be clean here, CUDA sees the whole pool, no GPU process runs and the reading is
        not a leak against the offset it was judged by, and its gap is at most 1 GiB (what a clean
        GB10 shows), so a leak is never recorded as the normal.
      - C(never) only reads. C(if_missing) writes when the node has no baseline yet (the first clean
        measurement). C(replace) writes over one (after a reboot the collection made, when the
        driver's memory is certainly free).
    type: str
    choices: [never, if_missing, replace]
    default: never
notes:
  - The CUDA probe creates and destroys a CUDA context for a moment; on GB10 that costs a few
    hundred MB while it runs.
  - On a discrete GPU CUDA's figures describe its own memory; they are reported, not compared with
    the system pool (C(unified=false)).
seealso:
  - module: gb10.serving.drop_page_cache
  - module: gb10.serving.memory_balance
extends_documentation_fragment:
  - gb10.serving.attributes
attributes:
  check_mode:
    support: full
    description: Reads as in a real run; reports the baseline it would write, and writes none.
  diff_mode:
    support: full
    description: Shows the baseline file before and after when O(record_baseline) writes it.
'''

EXAMPLES = r'''
- name: Look for leaked unified memory after dropping caches (H4); the first clean reading is the baseline
  gb10.serving.unified_memory:
    proc_root: "{{ gb10_proc_root | default('/proc') }}"
    nvidia_smi: "{{ gb10_nvidia_smi | default('nvidia-smi') }}"
    cuda_probe: "{{ gb10_cuda_probe | default('') }}"
    record_baseline: if_missing
  register: gb10_memory

- name: Stop here when a node leaked
  ansible.builtin.assert:
    that: not gb10_memory.leaked
    fail_msg: "{{ inventory_hostname }}: {{ gb10_memory.unaccounted_gib }} GiB missing; run playbooks/recover.yml"
'''

RETURN = r'''
total_gib:
  description: MemTotal, the whole unified pool (119.7 on a Spark).
  returned: always
  type: float
  sample: 119.7
available_gib:
  description: MemAvailable.
  returned: always
  type: float
  sample: 114.2
free_gib:
  description: MemFree.
  returned: always
  type: float
  sample: 113.6
page_cache_gib:
  description: Cached plus Buffers (should be small right after a drop, rule H3).
  returned: always
  type: float
  sample: 0.4
processes_gib:
  description:
    - Memory held by processes, AnonPages plus Shmem (shared memory, Ray's object store) plus Mlocked (pages a
      process locked).
  returned: always
  type: float
  sample: 3.1
reclaimable_gib:
  description:
    - MemAvailable minus MemFree, the page cache the kernel reclaims on demand.
    - On a GB10 CUDA counts it as used (its free figure is MemFree), vLLM and the fit do not.
  returned: always
  type: float
  sample: 12.6
locked_gib:
  description: Mlocked, pages processes locked; in use, not reclaimable, not a leak.
  returned: always
  type: float
  sample: 0.0
gpu_held_gib:
  description:
    - Memory in use that no counter owns while a GPU process runs, which on a GB10 is what the GPU workload holds
      (a vLLM engine holds gpu_memory_utilization x the pool from its start to its stop); 0 without a GPU process.
  returned: always
  type: float
  sample: 98.2
kho_cma_gib:
  description:
    - CmaFree beyond CmaTotal, the Kexec HandOver scratch pageblocks of kernel 7.0.0-1019-nvidia (about 9.7 on a
      Spark), which NCCL's memory registration cannot pin (rule H11).
  returned: always
  type: float
  sample: 0.0
leak_gib:
  description: C(unaccounted_gib) when C(leaked), else 0.
  returned: always
  type: float
  sample: 0.0
kernel_gib:
  description: Kernel bookkeeping, SUnreclaim plus KernelStack plus PageTables (plus SecPageTables).
  returned: always
  type: float
  sample: 0.37
gpu_processes_gib:
  description: Sum of what the GPU reports for its processes; 0 where it reports C([N/A]) (GB10).
  returned: always
  type: float
  sample: 0.0
cuda_total_gib:
  description: CUDA-visible total memory; about 62 GB while the DGX OS modprobe override is active (rule H2). Null when O(cuda_probe=none).
  returned: always
  type: float
  sample: 119.7
cuda_free_gib:
  description: CUDA-visible free memory (cuMemGetInfo). Null when O(cuda_probe=none).
  returned: always
  type: float
  sample: 114.0
cuda_sees_whole_pool:
  description: CUDA's total covers at least 90% of MemTotal. False means the modprobe override is active; null when not unified or no CUDA view.
  returned: always
  type: bool
  sample: true
unified:
  description: The GPU reports no memory of its own (nvidia-smi C([N/A]) or NVML NotSupported), so it draws on the system pool, as on GB10.
  returned: always
  type: bool
  sample: true
cuda_offset_gib:
  description:
    - MemFree minus CUDA free as measured now (0 on a healthy GB10, whose CUDA free figure is MemFree).
    - Null without a whole-pool CUDA view.
  returned: always
  type: float
  sample: 0.0
healthy_cuda_offset_gib:
  description:
    - The clean offset CUDA's gap was judged against, the node's baseline (at most 1 GiB) or 0, what a clean GB10 shows.
  returned: always
  type: float
  sample: 0.0
healthy_offset_source:
  description: "C(baseline) (the node's own record) or C(field) (no baseline yet, judged by what a clean GB10 shows)."
  returned: always
  type: str
  sample: baseline
baseline:
  description:
    - The node's baseline record as read before this run (C(cuda_offset_gib), C(recorded_at), C(reason)); null when it has none.
    - Records written since the conformance report gives the node without its engine also hold C(reading), the clean
      reading's meminfo and CUDA figures (C(total_gib), C(available_gib), C(free_gib), C(reclaimable_gib), C(cuda_total_gib),
      C(cuda_free_gib)).
  returned: always
  type: dict
  sample: {cuda_offset_gib: 0.02, recorded_at: "2026-12-02T13:10:00Z", reason: first clean measurement}
baseline_recorded:
  description: This run wrote (or, in check mode, would write) the baseline.
  returned: always
  type: bool
  sample: false
unaccounted_gib:
  description:
    - Memory in use that nothing explains, the larger of the meminfo gap and (unified, whole pool) CUDA's gap,
      MemFree minus CUDA free minus the healthy offset.
  returned: always
  type: float
  sample: 33.4
unaccounted_basis:
  description: Which figure C(unaccounted_gib) came from, C(meminfo) or C(cuda).
  returned: always
  type: str
  sample: meminfo
leak_threshold_gib:
  description: The threshold applied.
  returned: always
  type: float
  sample: 10.0
leaked:
  description: C(unaccounted_gib) is above the threshold and no GPU process runs; only a reboot frees it (rule H4).
  returned: always
  type: bool
  sample: true
gpu_workload:
  description: At least one GPU compute process runs, so a gap may be its memory and C(leaked) stays false.
  returned: always
  type: bool
  sample: false
gpu_processes:
  description: GPU compute processes with what the GPU reports for them and their resident memory.
  returned: always
  type: list
  elements: dict
  contains:
    pid:
      description: Process ID.
      type: int
    name:
      description: Process name as the GPU reports it.
      type: str
    used_gib:
      description: GPU memory the GPU reports for it; null where it reports C([N/A]) (GB10).
      type: float
    rss_gib:
      description: VmRSS from C(<proc_root>/<pid>/status); null when the process is not visible there.
      type: float
  sample: [{pid: 4121, name: python3, used_gib: null, rss_gib: 61.2}]
gpus:
  description: The GPUs as the GPU source lists them; memory figures null where not reported.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: GPU index.
      type: int
    name:
      description: Product name.
      type: str
    uuid:
      description: GPU UUID.
      type: str
    memory_total_gib:
      description: Framebuffer total; null on GB10.
      type: float
    memory_free_gib:
      description: Framebuffer free; null on GB10.
      type: float
  sample: [{index: 0, name: NVIDIA GB10, uuid: GPU-5e1f0a73-9c2d-4b8e-a61f-2f0c7d3e9b14, memory_total_gib: null, memory_free_gib: null}]
driver_version:
  description: NVIDIA driver version the GPU source reports (rule H1 pins 580.x).
  returned: always
  type: str
  sample: "580.142"
gpu_source:
  description: C(nvml) or C(nvidia_smi).
  returned: always
  type: str
  sample: nvidia_smi
cuda_source:
  description: C(libcuda) (built-in probe), C(command) or C(none).
  returned: always
  type: str
  sample: libcuda
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gb10.serving.plugins.module_utils.unified_memory import (
    BASELINE_MODES,
    DEFAULT_BASELINE_FILE,
    MeasureError,
    baseline_text,
    baseline_to_record,
    measure,
)

BASELINE_REASONS = {'if_missing': 'first clean measurement',
                    'replace': 'clean measurement after a reboot the collection made'}


def write_baseline(module, path, text):
    """Write the baseline atomically (a reader never sees half a file), mode 0644, folder made."""
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    temporary = path + '.tmp'
    with open(temporary, 'w') as handle:
        handle.write(text)
    os.chmod(temporary, 0o644)
    module.atomic_move(temporary, path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            proc_root=dict(type='path', default='/proc'),
            nvidia_smi=dict(type='str', default='nvidia-smi'),
            gpu_source=dict(type='str', default='auto', choices=['auto', 'nvml', 'nvidia_smi']),
            cuda_probe=dict(type='str', default=''),
            leak_threshold_gib=dict(type='float', default=10.0),
            baseline_file=dict(type='path', default=DEFAULT_BASELINE_FILE),
            record_baseline=dict(type='str', default='never', choices=list(BASELINE_MODES)),
        ),
        supports_check_mode=True,
    )
    if module.params['leak_threshold_gib'] <= 0:
        module.fail_json(msg='leak_threshold_gib must be above 0, got %s'
                             % module.params['leak_threshold_gib'])
    params = dict(module.params)
    mode = params.pop('record_baseline')
    path = params['baseline_file']
    try:
        # One definition of the reading (module_utils), shared with role node_metrics' exporter
        # and its leak reboot.
        result, warnings = measure(lambda argv: module.run_command(argv, handle_exceptions=False),
                                   **params)
    except MeasureError as exc:
        module.fail_json(msg=str(exc), **exc.details)
    for warning in warnings:
        module.warn(warning)
    record = baseline_to_record(result, mode, BASELINE_REASONS.get(mode, '')) if path else None
    result['baseline_recorded'] = record is not None
    diff = {}
    if record is not None:
        before = baseline_text(result['baseline']) if result['baseline'] else ''
        diff = dict(before_header=path, after_header=path, before=before, after=baseline_text(record))
        if not module.check_mode:
            try:
                write_baseline(module, path, diff['after'])
            except (IOError, OSError) as exc:
                module.fail_json(msg='cannot write the memory baseline %s: %s. Fix: make its folder '
                                     'writable, or set baseline_file' % (path, exc), **result)
    if diff:
        result['diff'] = diff
    module.exit_json(changed=record is not None, **result)


if __name__ == '__main__':
    main()
