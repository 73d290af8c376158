"""Rule A4 at boot: the table's unit and Docker's gate on it, as systemd reads them.

systemd.unit(5): a unit that Requires= (or BindsTo=, PartOf=, Requisite=; RequiredBy= and
UpheldBy= in [Install] make the same link from the other side) a unit stopped or restarted by hand
is stopped or restarted with it. Docker and every serving container must not go down because
someone ran `systemctl restart gb10-firewall`; Docker must still not start without the table.
"""
import os
import shutil
import subprocess

import jinja2
import yaml
import pytest

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "roles", "firewall")
# The dependency kinds systemd.unit(5) says carry a stop or restart across to the dependent unit.
PROPAGATING = {"Requires", "BindsTo", "PartOf", "Requisite", "RequiredBy", "UpheldBy", "Upholds"}
TABLE = "inet gb10_serving"


def _render(name, rules_file="/etc/gb10/firewall.nft"):
    with open(os.path.join(ROLE, "templates", name)) as handle:
        return jinja2.Template(handle.read(), keep_trailing_newline=True).render(
            ansible_managed="Ansible managed", firewall_rules_file=rules_file)


def _entries(text):
    """(section, key, value) for every line: systemd allows a key more than once."""
    section, out = None, []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, value = (line.split("=", 1) + [""])[:2]
        out.append((section, key.strip(), value.strip()))
    return out


def _tasks_dest(template):
    """Where the role writes a template, read from its tasks (not restated here)."""
    with open(os.path.join(ROLE, "tasks", "main.yml")) as handle:
        tasks = yaml.safe_load(handle)
    for task in tasks:
        for inner in task.get("block", [task]):
            spec = inner.get("ansible.builtin.template")
            if spec and spec["src"] == template:
                return spec["dest"]
    raise AssertionError("the role does not write %s" % template)


def test_restarting_the_tables_unit_reaches_no_other_unit():
    unit = _entries(_render("gb10-firewall.service.j2"))
    gate = _entries(_render("docker-gb10-firewall.conf.j2"))
    links = [(s, k, v) for s, k, v in unit if k in PROPAGATING]
    links += [(s, k, v) for s, k, v in gate if k in PROPAGATING]
    assert links == [], "a stop or restart of gb10-firewall.service would reach: %r" % links
    assert ("Unit", "Wants", "gb10-firewall.service") in gate
    assert ("Unit", "After", "gb10-firewall.service") in gate


def test_docker_does_not_start_without_the_table():
    assert _tasks_dest("docker-gb10-firewall.conf.j2") == "/etc/systemd/system/docker.service.d/gb10-firewall.conf"
    gate = _entries(_render("docker-gb10-firewall.conf.j2"))
    pre = [v for s, k, v in gate if s == "Service" and k == "ExecStartPre"]
    assert len(pre) == 1 and not pre[0].startswith("-"), pre  # "-" would let Docker start anyway
    assert "/usr/sbin/nft list table %s" % TABLE in pre[0]
    unit = _entries(_render("gb10-firewall.service.j2", "/etc/gb10/firewall.nft"))
    assert ("Service", "ExecStart", "/usr/sbin/nft -f /etc/gb10/firewall.nft") in unit
    assert ("Unit", "Before", "network-pre.target docker.service") in unit


def test_the_gate_fails_when_the_table_is_missing_and_passes_when_it_is_there(tmp_path):
    """Run the gate's command line as systemd would, against an nft that has or lacks the table."""
    gate = _entries(_render("docker-gb10-firewall.conf.j2"))
    (pre,) = [v for s, k, v in gate if k == "ExecStartPre"]
    # systemd's own quoting: /bin/sh -c '<script>'
    assert pre.startswith("/bin/sh -c '") and pre.endswith("'")
    script = pre[len("/bin/sh -c '"):-1].replace("/usr/sbin/nft", str(tmp_path / "nft"))
    fake = tmp_path / "nft"
    for has_table, want in ((False, 1), (True, 0)):
        fake.write_text("#!/bin/sh\n[ \"$*\" = 'list table %s' ] && exit %d\nexit 2\n" % (TABLE, 0 if has_table else 1))
        fake.chmod(0o755)
        assert subprocess.run(["/bin/sh", "-c", script], check=False).returncode == want


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not on this machine")
def test_systemd_accepts_the_unit(tmp_path):
    path = tmp_path / "gb10-firewall.service"
    path.write_text(_render("gb10-firewall.service.j2"))
    done = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "gb10-firewall" not in done.stderr, done.stderr
