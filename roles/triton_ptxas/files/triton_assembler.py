# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run by the container's own Python (role triton_ptxas, rule H7); prints one JSON object.

  triton_assembler.py links SOURCE   where Triton looks for its assemblers, without importing it
  triton_assembler.py ask ARCH SOURCE  the assembler Triton itself will run for ARCH (121 on a GB10),
                                       asked of the installed Triton with the container's
                                       environment, and whether it is SOURCE (links resolved)
  triton_assembler.py assembles ARCH TOOL  whether TOOL assembles a kernel for ARCH as Triton's JIT
                                       calls it: the PTX version Triton writes for TOOL's release,
                                       Triton's target name (sm_121a), its --gpu-name argument

The file names are plugins/module_utils/triton_ptxas.py's ASSEMBLERS (this file runs inside a
container, where the collection is not installed): `ptxas` for every Triton, `ptxas-blackwell` for
Triton 3.6 and later, whose get_ptxas(arch) runs it for arch >= 100.
"""

import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile

ASSEMBLERS = ("ptxas", "ptxas-blackwell")


def triton_folder():
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def picks_per_arch(folder):
    """Whether this Triton knows ptxas-blackwell: its knobs name the tool (3.6 and later)."""
    try:
        with open(os.path.join(folder, "knobs.py")) as handle:
            return "ptxas-blackwell" in handle.read()
    except OSError:
        return False


def links(source):
    out = {"source_ok": os.path.isfile(source) and os.access(source, os.X_OK), "triton": triton_folder(), "links": []}
    if out["triton"] is None:
        return out
    names = ASSEMBLERS if picks_per_arch(out["triton"]) else ASSEMBLERS[:1]
    for name in names:
        link = os.path.join(out["triton"], "backends", "nvidia", "bin", name)
        out["links"].append({"name": name, "link": link,
                             "target": os.readlink(link) if os.path.islink(link) else None,
                             "file": os.path.isfile(link) and not os.path.islink(link)})
    return out


def ask(arch, source):
    """Triton's own choice: get_ptxas(arch) (3.6 and later), get_ptxas() (3.2-3.5) or
    _path_to_binary('ptxas') (earlier), each of which reads the environment and falls back to the
    bundled file when the variable's path does not run."""
    out = {"arch": arch}
    try:
        import triton
        from triton.backends.nvidia import compiler
        out["version"] = getattr(triton, "__version__", None)
        get = getattr(compiler, "get_ptxas", None)
        if get is not None:
            tool = get(arch) if "arch" in inspect.signature(get).parameters else get()
            out.update(path=tool.path, release=tool.version)
        else:
            out["path"], out["release"] = compiler._path_to_binary("ptxas")
    except Exception as exc:  # noqa: BLE001 - any failure is reported, the role says what it means
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
        return out
    out["realpath"] = os.path.realpath(out["path"])
    out["is_source"] = out["realpath"] == os.path.realpath(source)
    return out


# A kernel that stores one number: enough for an assembler to say whether it knows the target.
KERNEL = """.version %d.%d
.target %s
.address_size 64
.visible .entry gb10_probe(.param .u64 out)
{
  .reg .b64 %%rd<3>;
  .reg .b32 %%r<2>;
  ld.param.u64 %%rd1, [out];
  cvta.to.global.u64 %%rd2, %%rd1;
  mov.u32 %%r1, 121;
  st.global.u32 [%%rd2], %%r1;
  ret;
}
"""


def assembles(arch, tool):
    """Whether TOOL assembles for ARCH what Triton's JIT would give it: the PTX version Triton's own
    ptx_get_version() derives from TOOL's release, for Triton's own target name, with the
    --gpu-name argument Triton's make_cubin() passes. An assembler older than the target (CUDA
    12.8's ptxas has no sm_121a) refuses it, as the engine's first kernel would fail."""
    out = {"arch": arch, "tool": tool}
    try:
        from triton.backends.nvidia import compiler
        version = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=60, check=False)
        found = re.search(r"release (\d+\.\d+)", version.stdout)
        if not found:
            out["error"] = "`%s --version` names no release: %s" % (tool, (version.stdout + version.stderr).strip()[-300:])
            return out
        out["release"] = found.group(1)
        ptx = compiler.ptx_get_version(out["release"])
        target = compiler.sm_arch_from_capability(arch)
        out["target"] = target
        with tempfile.TemporaryDirectory() as folder:
            source = os.path.join(folder, "probe.ptx")
            with open(source, "w") as handle:
                handle.write(KERNEL % (ptx // 10, ptx % 10, target))
            ran = subprocess.run([tool, "--gpu-name=%s" % target, source, "-o", source + ".o"],
                                 capture_output=True, text=True, timeout=120, check=False)
            out["ok"] = ran.returncode == 0 and os.path.isfile(source + ".o")
            out["output"] = (ran.stdout + ran.stderr).strip()[-500:]
    except Exception as exc:  # noqa: BLE001 - any failure is reported, the role says what it means
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
    return out


def main(argv):
    if len(argv) == 3 and argv[1] == "links":
        result = links(argv[2])
    elif len(argv) == 4 and argv[1] == "ask":
        result = ask(int(argv[2]), argv[3])
    elif len(argv) == 4 and argv[1] == "assembles":
        result = assembles(int(argv[2]), argv[3])
    else:
        sys.stderr.write(__doc__)
        return 2
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
