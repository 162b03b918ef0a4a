"""The set-up's Debian step (scripts/setup-debian.sh) against a stub machine.

apt-get, apt-cache, dpkg-query (and sudo) on PATH are small programs that model a Debian
archive: suites with package versions, the package lists as of the last ``apt-get update``
(taken from the deb822 source file at that moment), and what is installed. They behave like
the real tools where the set-up depends on it: ``apt-cache policy`` answers from the lists,
``apt-get install -t SUITE`` refuses a suite the lists do not have, ``apt-get update`` fails
(exit 100) for a suite the archive does not serve. dpkg itself is the machine's (version
comparison). The first run on a fresh machine must install Mesa from the backports suite: the
earlier set-up added the suite but never refreshed the lists, and failed exactly there.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "setup-debian.sh"

pytestmark = pytest.mark.skipif(shutil.which("dpkg") is None, reason="needs dpkg (version comparison): not a Debian machine")

SOURCES = """Types: deb
URIs: http://archive.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://archive.invalid/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""

# One Python program plays every tool; argv[0] says which.
STUB = r'''#!PYTHON
import json, os, re, sys
state = os.environ["STUB_STATE"]
tool = os.path.basename(sys.argv[0]); args = sys.argv[1:]
def load(name):
    with open(os.path.join(state, name)) as f:
        return json.load(f)
def save(name, value):
    with open(os.path.join(state, name), "w") as f:
        json.dump(value, f)
with open(os.path.join(state, "calls.log"), "a") as f:
    f.write(json.dumps([tool] + args) + "\n")
archive, installed = load("archive.json"), load("installed.json")
def vkey(v):  # good enough for the versions these tests use
    return [int(x) if x.isdigit() else x for x in re.split(r"[.\-+~]", v)]
def suites_in_sources():
    src = os.path.join(os.environ["LATBENCH_APT_ETC"], "sources.list.d", "debian.sources")
    out = []
    for line in open(src):
        if line.startswith("Suites:"):
            out += line.split()[1:]
    return out
if tool == "sudo":
    os.execvp(args[0], args)
if tool == "dpkg-query":
    fmt = [a for a in args if a.startswith("-f")][0]
    pkg = args[-1]
    if pkg not in installed:
        print(f"dpkg-query: no packages found matching {pkg}", file=sys.stderr); sys.exit(1)
    print("install ok installed" if "Status" in fmt else installed[pkg], end=""); sys.exit(0)
lists = load("lists.json")
def default_candidate(pkg):
    vs = [archive[s][pkg] for s in lists if not s.endswith("-backports") and pkg in archive.get(s, {})]
    return max(vs, key=vkey) if vs else None
if tool == "apt-cache":
    assert args[0] == "policy", args
    pkg = args[1]
    print(f"{pkg}:\n  Installed: {installed.get(pkg, '(none)')}\n  Candidate: {default_candidate(pkg) or '(none)'}")
    sys.exit(0)
if tool == "apt-get":
    if args[0] == "update":
        wanted = suites_in_sources()
        save("lists.json", [s for s in wanted if s in archive])
        missing = [s for s in wanted if s not in archive]
        for s in missing:
            print(f"E: The repository 'http://archive.invalid/debian {s} Release' does not have a Release file.", file=sys.stderr)
        sys.exit(100 if missing else 0)
    assert "install" in args, args
    suite = args[args.index("-t") + 1] if "-t" in args else None
    pkgs = [a for a in args[args.index("install") + 1:] if not a.startswith("-") and a != suite]
    if suite and suite not in lists:
        print(f"E: The value '{suite}' is invalid for APT::Default-Release as such a release is not available in the sources", file=sys.stderr)
        sys.exit(100)
    new = {}
    for pkg in pkgs:
        v = archive[suite].get(pkg) if suite else None
        v = v or default_candidate(pkg)
        if v is None:
            print(f"E: Unable to locate package {pkg}", file=sys.stderr); sys.exit(100)
        new[pkg] = v
    installed.update(new); save("installed.json", installed); sys.exit(0)
sys.exit(f"stub: unexpected call {tool} {args}")
'''


class StubMachine:
    def __init__(self, tmp: Path, archive: dict, installed: dict, packages: str):
        self.tmp = tmp
        self.state = tmp / "state"
        self.etc = tmp / "etc" / "apt"
        bindir = tmp / "bin"
        for d in (self.state, self.etc / "sources.list.d", bindir):
            d.mkdir(parents=True)
        (self.etc / "sources.list.d" / "debian.sources").write_text(SOURCES)
        (tmp / "os-release").write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_CODENAME=bookworm\n')
        (tmp / "packages.txt").write_text(packages)
        (self.state / "archive.json").write_text(json.dumps(archive))
        (self.state / "installed.json").write_text(json.dumps(installed))
        # the lists as a fresh machine has them: refreshed long ago from the sources as they are
        (self.state / "lists.json").write_text(json.dumps(["bookworm", "bookworm-updates", "bookworm-security"]))
        stub = STUB.replace("PYTHON", sys.executable)
        for tool in ("apt-get", "apt-cache", "dpkg-query", "sudo"):
            path = bindir / tool
            path.write_text(stub)
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
        self.env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "STUB_STATE": str(self.state),
                    "LATBENCH_APT_ETC": str(self.etc), "LATBENCH_OS_RELEASE": str(tmp / "os-release"),
                    "LATBENCH_DEBIAN_PACKAGES": str(tmp / "packages.txt")}

    def run(self) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(SCRIPT)], env=self.env, capture_output=True, text=True, timeout=60)

    @property
    def installed(self) -> dict:
        return json.loads((self.state / "installed.json").read_text())

    @property
    def calls(self) -> list[list[str]]:
        return [json.loads(ln) for ln in (self.state / "calls.log").read_text().splitlines()] \
            if (self.state / "calls.log").is_file() else []

    def suites(self) -> list[str]:
        text = (self.etc / "sources.list.d" / "debian.sources").read_text()
        return [s for ln in text.splitlines() if ln.startswith("Suites:") for s in ln.split()[1:]]


ARCHIVE = {
    "bookworm": {"cmake": "3.25.1-1", "mesa-vulkan-drivers": "22.3.6-1+deb12u1"},
    "bookworm-updates": {},
    "bookworm-security": {},
    "bookworm-backports": {"mesa-vulkan-drivers": "25.0.7-2~bpo12+1"},
}
PACKAGES = "# a comment\ncmake     native runtime build\nmesa-vulkan-drivers  min=23   lavapipe\n"


def test_first_run_adds_backports_refreshes_the_lists_and_installs_mesa_from_it(tmp_path):
    m = StubMachine(tmp_path, ARCHIVE, {}, PACKAGES)
    r = m.run()
    assert r.returncode == 0, r.stderr
    assert m.installed == {"cmake": "3.25.1-1", "mesa-vulkan-drivers": "25.0.7-2~bpo12+1"}
    # the suite is added to the existing stanza of the release, the mirror untouched
    assert m.suites() == ["bookworm", "bookworm-updates", "bookworm-backports", "bookworm-security"]
    assert "http://archive.invalid/debian\n" in (m.etc / "sources.list.d" / "debian.sources").read_text()
    apt = [c for c in m.calls if c[0] == "apt-get"]
    # lists refreshed once for the missing packages, once more after the suite was added, then the install from it
    assert [c[1] for c in apt] == ["update", "install", "update", "install"]
    assert apt[3][-3:] == ["-t", "bookworm-backports", "mesa-vulkan-drivers"]
    assert "from bookworm-backports" in r.stdout


def test_a_second_run_installs_nothing(tmp_path):
    m = StubMachine(tmp_path, ARCHIVE, {"cmake": "3.25.1-1", "mesa-vulkan-drivers": "25.0.7-2~bpo12+1"}, PACKAGES)
    r = m.run()
    assert r.returncode == 0, r.stderr
    assert [c for c in m.calls if c[0] in ("apt-get", "apt-cache")] == []


def test_a_new_enough_release_package_is_taken_without_backports(tmp_path):
    archive = {**ARCHIVE, "bookworm": {"cmake": "3.25.1-1", "mesa-vulkan-drivers": "24.2.8-1"}}
    m = StubMachine(tmp_path, archive, {"cmake": "3.25.1-1", "mesa-vulkan-drivers": "22.3.6-1+deb12u1"}, PACKAGES)
    r = m.run()
    assert r.returncode == 0, r.stderr
    assert m.installed["mesa-vulkan-drivers"] == "24.2.8-1"
    assert "bookworm-backports" not in m.suites()


def test_without_a_backports_suite_the_gpu_driver_is_a_warning_and_the_rest_installs(tmp_path):
    archive = {k: v for k, v in ARCHIVE.items() if k != "bookworm-backports"}
    m = StubMachine(tmp_path, archive, {}, PACKAGES)
    r = m.run()
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert m.installed == {"cmake": "3.25.1-1"}  # Debian's Mesa 22.3 is not installed in its place
    warning = [ln for ln in r.stderr.splitlines() if ln.startswith("setup: warning:")]
    assert len(warning) == 1 and "mesa-vulkan-drivers >= 23" in warning[0] and "GPU" in warning[0]


def test_a_missing_plain_package_is_a_hard_failure(tmp_path):
    m = StubMachine(tmp_path, ARCHIVE, {}, "no-such-package\n")
    r = m.run()
    assert r.returncode not in (0, 3)
    assert "Unable to locate package no-such-package" in r.stderr
