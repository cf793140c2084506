#!/usr/bin/env bash
# Installs the Debian packages the test bed needs (containerd, runc, CNI plugins, iptables tooling, Node.js and npm
# for Azurite) when they are missing. Quick and silent when everything is present, so `make demo` and `make test` can always call it.
set -euo pipefail

declare -A need=(
  [containerd]=containerd [ctr]=containerd [containerd-shim-runc-v2]=containerd [runc]=runc
  [/usr/lib/cni/bridge]=containernetworking-plugins [/usr/lib/cni/host-local]=containernetworking-plugins
  [/usr/lib/cni/loopback]=containernetworking-plugins [/usr/lib/cni/portmap]=containernetworking-plugins
  [iptables]=iptables [iptables-save]=iptables [ip]=iproute2 [conntrack]=conntrack [ethtool]=ethtool
  [socat]=socat [ebtables]=ebtables [nsenter]=util-linux [mount]=mount [git]=git [make]=make
  [node]=nodejs [npm]=npm
)
missing=()
for bin in "${!need[@]}"; do
  if [[ $bin == /* ]]; then [[ -e $bin ]] && continue; else command -v "$bin" >/dev/null 2>&1 && continue; fi
  missing+=("${need[$bin]}")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
mapfile -t pkgs < <(printf '%s\n' "${missing[@]}" | sort -u)
if [[ $(id -u) -ne 0 ]]; then
  echo "prereqs: missing Debian packages ${pkgs[*]}; the test bed needs root, run as root" >&2
  exit 1
fi
echo "prereqs: installing ${pkgs[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Keep package scripts from starting the system containerd: the test bed runs its own.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
