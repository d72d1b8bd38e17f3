#!/usr/bin/env bash
# The system packages the local stack and the tests need, installed with apt-get when their
# command is missing:
#   bwrap  bubblewrap               isolates sandboxes (the node embedded in the local gateway)
#   javac  openjdk-17-jdk-headless  runs DynamoDB Local inside host-mode LocalStack
#   curl   curl                     LocalStack's health checks
#   mkfs.ext4  e2fsprogs            formats each sandbox's disk image (a loop-mounted ext4 file)
#   mount  mount                    mounts it (loop devices; umount too)
# Usage: bash localstack/prereqs.sh [bwrap] [javac] [curl] [mkfs.ext4] [mount]
#        (no argument: all of them)
# Exits 0 when every named command is there afterwards; otherwise it says what is missing and
# why it could not install it (no apt-get, or neither root nor password-less sudo), and exits 1.
set -euo pipefail

log() { printf '[prereqs] %s\n' "$*" >&2; }

package_for() {
  case "$1" in
    bwrap) printf ' bubblewrap' ;;
    javac) printf ' openjdk-17-jdk-headless' ;;
    curl) printf ' curl' ;;
    mkfs.ext4) printf ' e2fsprogs' ;;
    mount) printf ' mount' ;;
    *) log "unknown prerequisite '$1' (known: bwrap, javac, curl, mkfs.ext4, mount)"; return 1 ;;
  esac
}

wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=(bwrap javac curl mkfs.ext4 mount)

missing() {
  local cmd
  for cmd in "${wanted[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || package_for "$cmd"
  done
}

packages=$(missing)
packages=${packages# }
[ -z "$packages" ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  log "missing: $packages; installing needs root (run: apt-get install -y $packages)"
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  log "missing: $packages; no apt-get here, install them with this system's package manager"
  exit 1
fi

log "installing $packages"
# shellcheck disable=SC2086 # one word per package
"${as_root[@]}" apt-get update -qq &&
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages >/dev/null ||
  true
still=$(missing)
still=${still# }
if [ -n "$still" ]; then
  log "still missing after apt-get: $still"
  exit 1
fi
