# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Publish-readiness of the built collection, on the tarball a maintainer would upload:

- built from a checkout that holds what test runs, failed deploys and drift runs leave behind,
  the tarball ships none of it (galaxy.yml build_ignore);
- galaxy-importer (Galaxy's own import: metadata, every role's README, ansible-doc of every
  plugin, changelog) accepts it with no warning or error, run without containers
  (galaxy-importer.cfg);
- the supported ansible-core range is the same in meta/runtime.yml, requirements.txt and README;
  galaxy.yml points at real project URLs;
- `ansible-builder create` makes a build context from execution-environment.yml (building the
  image needs registries this machine cannot reach).

The importer's own ansible-lint run is off (galaxy-importer.cfg) and not repeated here: the lint
stage runs ansible-lint with the production profile and no rule excluded on the whole checkout, a
superset of the importer's command (same profile, rules excluded, tests/ left out) on a superset of
the files, and tests/e2e/test_2a_installed_collection.py deploys from the installed tarball, which
a file left out of it would break. Running it again here cost two minutes of every test run.
"""

import json
import os
import re
import subprocess
import sys
import tarfile

import pytest
import yaml

from .collection import LEFTOVER_PREFIXES, TOP, build

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.dirname(sys.executable)


@pytest.fixture(scope="module")
def tarball(tmp_path_factory):
    return build(str(tmp_path_factory.mktemp("build")), leftovers=True)


def test_the_tarball_ships_no_logs_reports_or_caches(tarball):
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    leftovers = [n for n in names if n.startswith(LEFTOVER_PREFIXES) or "__pycache__" in n or n.endswith(".pyc")]
    assert not leftovers, leftovers
    # ...and it still ships the collection.
    for path in ("MANIFEST.json", "FILES.json", "meta/runtime.yml", "playbooks/deploy_m27.yml",
                 "roles/vllm_serve/README.md", "execution-environment.yml"):
        assert path in names, path


# What a user cannot look up or does not have: the makers' work sessions and machines, files of
# theirs the repository does not hold, and numbers of their issue tracker (rule IDs are the
# project's vocabulary). An upstream project's issue or PR is cited with its owner/name.
FOREIGN_WORDS = re.compile(r"\b[Ss]essions? \d+|\bthis session\b|\bdevice machine\b|\bworkplace\b|seeds/"
                           r"|SIMULATION_NOTES|GB10_RULES|FIELD_FIGURES|\.\./shared/|\b[Ii]ssues? #?\d+")
UPSTREAM = re.compile(r"[\w.-]+/[\w.-]+ $")


def foreign_words(text):
    return [m.group(0) for m in FOREIGN_WORDS.finditer(text)
            if not (m.group(0).lower().startswith("issue") and UPSTREAM.search(text[max(0, m.start() - 80):m.start()]))]


def test_the_project_speaks_of_itself_in_every_shipped_file(tarball):
    found = {}
    with tarfile.open(tarball) as tar:
        for member in tar.getmembers():
            # This file names the words to find them.
            if not member.isfile() or member.name == "tests/publish/test_publish.py":
                continue
            try:
                text = tar.extractfile(member).read().decode("utf-8")
            except UnicodeDecodeError:
                continue
            words = foreign_words(text)
            if words:
                found[member.name] = sorted(set(words))
    assert found == {}, found


def test_the_word_check_finds_what_it_looks_for():
    assert foreign_words("measured in session 37 on the device machine (issue 29)") == [
        "session 37", "device machine", "issue 29"]
    assert foreign_words("vllm-project/vllm issue 48140 and an SSH session") == []


def test_every_role_has_a_readme():
    roles = sorted(os.listdir(os.path.join(TOP, "roles")))
    assert [r for r in roles if not os.path.isfile(os.path.join(TOP, "roles", r, "README.md"))] == []
    for role in roles:
        with open(os.path.join(TOP, "roles", role, "README.md")) as f:
            text = f.read()
        # What it does, its variables through ansible-doc, an example play.
        assert "ansible-doc -t role gb10.serving.%s" % role in text, role
        assert "```yaml" in text and "gb10.serving.%s" % role in text.split("```yaml", 1)[1], role


def test_galaxy_importer_accepts_the_tarball_without_a_warning(tarball, tmp_path):
    env = dict(os.environ, GALAXY_IMPORTER_CONFIG=os.path.join(HERE, "galaxy-importer.cfg"),
               PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)  # the importer installs the tarball into a path of its own
    proc = subprocess.run([sys.executable, "-m", "galaxy_importer.main", tarball], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=1200, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "Importer processing completed successfully" in output, output
    complaints = [line for line in output.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert not complaints, "\n".join(complaints)
    with open(os.path.join(str(tmp_path), "importer_result.json")) as f:
        result = json.load(f)
    roles = {c["content_name"]: c for c in result["docs_blob"]["contents"] if c["content_type"] == "role"}
    with tarfile.open(tarball) as tar:
        shipped = {n.split("/")[1] for n in tar.getnames() if n.startswith("roles/") and n.count("/") >= 2}
    assert sorted(roles) == sorted(shipped)
    assert all(c.get("readme_html") for c in roles.values()), [r for r, c in roles.items() if not c.get("readme_html")]
    assert result["requires_ansible"] == runtime()["requires_ansible"]


def runtime():
    with open(os.path.join(TOP, "meta", "runtime.yml")) as f:
        return yaml.safe_load(f)


def test_the_supported_ansible_core_range_is_the_same_everywhere():
    assert runtime()["requires_ansible"] == ">=2.17.0,<2.21.0"
    with open(os.path.join(TOP, "requirements.txt")) as f:
        assert re.search(r"^ansible-core>=2\.17,<2\.21\b", f.read(), re.M)
    with open(os.path.join(TOP, "README.md")) as f:
        assert "ansible-core 2.17 through 2.20" in " ".join(f.read().split())


def test_galaxy_yml_names_the_project_urls():
    with open(os.path.join(TOP, "galaxy.yml")) as f:
        galaxy = yaml.safe_load(f)
    for key in ("repository", "documentation", "homepage", "issues"):
        assert re.match(r"https://[a-z0-9.-]+\.[a-z]{2,}/", galaxy.get(key) or ""), key
        assert "example" not in galaxy[key] and ".invalid" not in galaxy[key], galaxy[key]


def test_ansible_builder_creates_the_execution_environment_context(tmp_path):
    context = tmp_path / "context"
    proc = subprocess.run([os.path.join(BIN, "ansible-builder"), "create", "-f", "execution-environment.yml",
                           "--context", str(context)], cwd=TOP, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    build_files = context / "_build"
    assert (context / "Containerfile").is_file() or (context / "Dockerfile").is_file(), os.listdir(str(context))
    galaxy = yaml.safe_load((build_files / "requirements.yml").read_text())
    wanted = {"community.docker", "ansible.posix", "community.general", "community.crypto"}
    assert {c["name"] for c in galaxy["collections"]} >= wanted
    python = (build_files / "requirements.txt").read_text()
    assert "pyyaml" in python.lower() and "jinja2" in python.lower(), python
    assert "openssh" in (build_files / "bindep.txt").read_text()
    recipe = ((context / "Containerfile") if (context / "Containerfile").is_file() else (context / "Dockerfile")).read_text()
    assert "ansible-core>=2.17,<2.21" in recipe, recipe


def test_every_role_is_licensed_as_the_collection():
    with open(os.path.join(TOP, "galaxy.yml")) as f:
        licenses = yaml.safe_load(f)["license"]
    for role in sorted(os.listdir(os.path.join(TOP, "roles"))):
        with open(os.path.join(TOP, "roles", role, "meta", "main.yml")) as f:
            assert yaml.safe_load(f)["galaxy_info"]["license"] in licenses, role
