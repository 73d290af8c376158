# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run by the container's own Python (role triton_ptxas, rule H7); prints one JSON object.

  triton_assembler.py links SOURCE   where Triton looks for its assemblers, without importing it
  triton_assembler.py ask ARCH SOURCE  the assembler Triton itself will run for ARCH (121 on a GB10),
                                       asked of the installed Triton with the container's
                                       environment, and whether it is SOURCE (links resolved)

The file names are plugins/module_utils/triton_ptxas.py's ASSEMBLERS (this file runs inside a
container, where the collection is not installed): `ptxas` for every Triton, `ptxas-blackwell` for
Triton 3.6 and later, whose get_ptxas(arch) runs it for arch >= 100.
"""

import importlib.util
import inspect
import json
import os
import sys

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


def main(argv):
    if len(argv) == 3 and argv[1] == "links":
        result = links(argv[2])
    elif len(argv) == 4 and argv[1] == "ask":
        result = ask(int(argv[2]), argv[3])
    else:
        sys.stderr.write(__doc__)
        return 2
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
