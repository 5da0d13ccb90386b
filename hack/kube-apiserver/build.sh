#!/usr/bin/env bash
# Builds kube-apiserver from the Go module proxy (no Docker, no git clone) into
# a per-machine cache and prints its path. A second run prints the cached path
# at once. Tests find the binary through $KUBE_APISERVER or this cache path.
#
#   hack/kube-apiserver/build.sh            # -> ~/.cache/chartpin/kube-apiserver-v1.37.2
#   KUBE_VERSION=v1.37.2 CHARTPIN_CACHE=/var/cache/chartpin hack/kube-apiserver/build.sh
#
# k8s.io/kubernetes points its staging modules at ./staging/src/...; a scratch
# module replaces each of them with the published v0.X.Y tag instead.
set -euo pipefail

version=${KUBE_VERSION:-v1.37.2}
cache=${CHARTPIN_CACHE:-$HOME/.cache/chartpin}
out=$cache/kube-apiserver-$version
if [[ -x $out ]]; then
  echo "$out"
  exit 0
fi
staging=v0.${version#v1.}
go=${GO:-go}
export GOTOOLCHAIN=local GOFLAGS=-mod=mod

work=$cache/build-kube-apiserver-$version
mkdir -p "$work"
cd "$work"

gomod=$($go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f $gomod ]] || { echo "build.sh: no go.mod for k8s.io/kubernetes@$version from the module proxy" >&2; exit 1; }

{
  echo "module chartpin.local/kube-apiserver-build"
  echo
  echo "go $($go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/').0"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  # Every staging module, except the two sample modules the proxy lacks.
  grep -oE 'k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$gomod" |
    awk '{print $1}' | sort -u |
    grep -vE '^k8s\.io/(sample-cli-plugin|sample-controller)$' |
    sed "s|.*|replace & => & $staging|"
} >go.mod

echo "build.sh: building k8s.io/kubernetes/cmd/kube-apiserver@$version in $work (minutes)" >&2
start=$(date +%s)
# Stamp the version as kube's own build does, so /version reports it.
minor=${version#v1.}
minor=${minor%%.*}
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitVersion=$version -X $pkg.gitTreeState=clean"
nice -n 10 $go build -trimpath -ldflags "$ldflags" -o "$out.tmp" k8s.io/kubernetes/cmd/kube-apiserver
mv "$out.tmp" "$out"
echo "build.sh: built in $(( $(date +%s) - start ))s: $(du -h "$out" | cut -f1)" >&2
echo "$out"
