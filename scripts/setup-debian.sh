#!/usr/bin/env bash
# The Debian step of the set-up: installs what scripts/debian-packages.txt lists and is missing.
# A line is "<package> [min=<version>] [comment]". A package with a minimum version comes from
# the release's own suites when they have it, else from the release's backports suite, which is
# then added to the machine's existing Debian source (deb822 file; the mirror stays the
# machine's own, nothing is written into the project). Backports have a low apt priority:
# adding the suite changes no other package, only the ones installed from it with -t (and the
# libraries they need at their version).
#
# Exit status: 0 all installed; 3 only packages with a minimum version (the optional GPU path)
# could not be had, after a warning naming them; anything else is a hard failure.
#
# Tests point it at a stub machine (tests/test_setup_debian.py): LATBENCH_APT_ETC (default
# /etc/apt), LATBENCH_OS_RELEASE (default /etc/os-release) and LATBENCH_DEBIAN_PACKAGES (default
# scripts/debian-packages.txt); apt-get, apt-cache and dpkg-query are taken from PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_ETC=${LATBENCH_APT_ETC:-/etc/apt}
OS_RELEASE=${LATBENCH_OS_RELEASE:-/etc/os-release}
PACKAGES=${LATBENCH_DEBIAN_PACKAGES:-scripts/debian-packages.txt}
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo

installed_ok() {  # installed, and at least the minimum version if one is given
    local pkg=$1 min=${2:-} ver
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || return 1
    [ -z "$min" ] && return 0
    ver=$(dpkg-query -W -f='${Version}' "$pkg")
    dpkg --compare-versions "$ver" ge "$min"
}

missing=(); needs_min=()
while read -r pkg opt _; do
    [ -z "$pkg" ] || [ "${pkg#\#}" != "$pkg" ] && continue
    min=""; [ "${opt#min=}" != "${opt:-}" ] && min=${opt#min=}
    installed_ok "$pkg" "$min" && continue
    if [ -n "$min" ]; then needs_min+=("$pkg=$min"); else missing+=("$pkg"); fi
done < "$PACKAGES"

# The package lists are refreshed at most once, and once more after a suite is added.
# Everything below runs in this shell (never in $(...)), so that reset reaches apt_update.
apt_updated=""
apt_update() { [ -n "$apt_updated" ] || { $SUDO apt-get update -qq; apt_updated=1; }; }

if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    apt_update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

backports=""
enable_backports() {  # sets $backports to the suite's name, adding it to the source if needed
    local codename suite src=$APT_ETC/sources.list.d/debian.sources
    codename=$(. "$OS_RELEASE" && echo "${VERSION_CODENAME:-}")
    [ -n "$codename" ] || { echo "setup: no VERSION_CODENAME in $OS_RELEASE" >&2; return 1; }
    suite="$codename-backports"
    if ! grep -rqsw -- "$suite" "$APT_ETC/sources.list" "$APT_ETC/sources.list.d/"; then
        [ -f "$src" ] || { echo "setup: cannot add $suite: no $src" >&2; return 1; }
        echo "setup: adding the $suite suite to $src"
        $SUDO awk -v c="$codename" -v s="$suite" \
            '!done && /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == c) { $0 = $0 " " s; done = 1; break } } { print }' \
            "$src" > "$src.latbench" && $SUDO mv "$src.latbench" "$src"
        grep -qw -- "$suite" "$src" || { echo "setup: no stanza for $codename in $src" >&2; return 1; }
        apt_updated=""
    fi
    backports=$suite
}

candidate_ok() {  # the suites apt uses by default offer at least the minimum version
    local candidate
    candidate=$(apt-cache policy "$1" | awk '/Candidate:/ { print $2 }')
    [ -n "$candidate" ] && [ "$candidate" != "(none)" ] && dpkg --compare-versions "$candidate" ge "$2"
}

unavailable=()
for spec in "${needs_min[@]}"; do
    pkg=${spec%%=*}; min=${spec#*=}
    apt_update || echo "setup: apt-get update failed; trying with the lists as they are" >&2
    if candidate_ok "$pkg" "$min"; then
        echo "setup: installing $pkg (>= $min)"
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$pkg" >/dev/null || true
    elif enable_backports && apt_update; then
        echo "setup: installing $pkg (>= $min) from $backports"
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq -t "$backports" "$pkg" >/dev/null || true
    fi
    installed_ok "$pkg" "$min" || unavailable+=("$pkg >= $min")
done

if [ ${#unavailable[@]} -gt 0 ]; then
    echo "setup: warning: could not install ${unavailable[*]}; GPU scenarios and their tests are unavailable (docs/gpu.md)" >&2
    exit 3
fi
