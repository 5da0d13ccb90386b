#!/usr/bin/env bash
# Installs chartpin for the GitHub Action and the Helm plugin.
#
#   install/install.sh plan          prints "release" or "source"
#   install/install.sh install DEST  installs the binary at DEST
#
# "release": the checkout is the commit tagged with the version named in
# install/VERSION. The release binary for this machine is downloaded and
# installed only if its SHA-256 equals the one committed in
# install/SHA256SUMS, so a replaced release file is refused, never run.
# "source": any other commit; chartpin is built from this checkout with Go.
#
# Environment:
#   CHARTPIN_REF             tag or commit SHA this checkout is (default: git rev-parse HEAD)
#   CHARTPIN_REPOSITORY_URL  where the release tag lives (default https://github.com/chartpin/chartpin)
#   CHARTPIN_DOWNLOAD_URL    release files base URL (default: the repository's releases/download)
#   CHARTPIN_INSTALL_MODE    release or source: skip the plan (the action plans once)
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
repo=${CHARTPIN_REPOSITORY_URL:-https://github.com/chartpin/chartpin}
downloads=${CHARTPIN_DOWNLOAD_URL:-${repo%.git}/releases/download}
version=$(tr -d '[:space:]' 2>/dev/null <"$src/install/VERSION" || true)

die() { echo "chartpin install: $*" >&2; exit 1; }

ref() {
  if [[ -n ${CHARTPIN_REF:-} ]]; then
    echo "$CHARTPIN_REF"
  else
    git -C "$src" rev-parse HEAD 2>/dev/null || true
  fi
}

# plan decides between the verified release binary and a source build.
plan() {
  local r tagged
  r=$(ref)
  if [[ -z $version ]]; then echo source; return; fi
  if [[ $r == "$version" ]]; then echo release; return; fi
  if [[ $r =~ ^[0-9a-f]{40}$ ]]; then
    # The tag's commit: the peeled line of an annotated tag sorts last.
    if ! tagged=$(git ls-remote "$repo" "refs/tags/$version" "refs/tags/$version^{}" | awk 'END {print $1}'); then
      echo "chartpin install: cannot list the tags of $repo: building from source" >&2
    fi
    if [[ $tagged == "$r" ]]; then echo release; return; fi
  fi
  echo source
}

platform() {
  local os arch
  case "$(uname -s)" in
    Linux) os=linux ;;
    Darwin) os=darwin ;;
    MINGW* | MSYS* | CYGWIN*) os=windows ;;
    *) die "no release binary for $(uname -s); build from source with go install" ;;
  esac
  case "$(uname -m)" in
    x86_64 | amd64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) die "no release binary for $(uname -m); build from source with go install" ;;
  esac
  echo "chartpin_${os}_${arch}$([[ $os == windows ]] && echo .exe)"
}

sha256() {
  if command -v sha256sum >/dev/null; then sha256sum "$1"; else shasum -a 256 "$1"; fi | awk '{print $1}'
}

install_release() {
  local dest=$1 file want got
  file=$(platform)
  want=$(awk -v f="$file" '$2 == f {print $1}' "$src/install/SHA256SUMS")
  [[ -n $want ]] || die "install/SHA256SUMS has no checksum for $file"
  # Global, not local: the EXIT trap runs after this function has returned.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  curl -fsSL --retry 3 -o "$tmp/$file" "$downloads/$version/$file" ||
    die "downloading $downloads/$version/$file failed"
  got=$(sha256 "$tmp/$file")
  [[ $got == "$want" ]] ||
    die "$file from $downloads/$version has SHA-256 $got, but install/SHA256SUMS says $want: refusing to install it"
  chmod 0755 "$tmp/$file"
  mkdir -p "$(dirname "$dest")"
  mv -f "$tmp/$file" "$dest.tmp$$" && mv -f "$dest.tmp$$" "$dest"
  echo "chartpin install: $version ($file, SHA-256 verified) at $dest" >&2
}

install_source() {
  local dest=$1 v
  v=$(ref)
  v=${v:0:12}
  command -v go >/dev/null || die "this commit is not a release: building chartpin needs Go (or use a release tag)"
  (cd "$src" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -tags urfave_cli_no_docs \
    -ldflags "-s -w -X main.version=${v:-dev}" -o "$dest" ./cmd/chartpin)
  echo "chartpin install: built from source at $dest" >&2
}

case "${1:-}" in
  plan) plan ;;
  install)
    [[ -n ${2:-} ]] || die "usage: $0 install DEST"
    mode=${CHARTPIN_INSTALL_MODE:-$(plan)}
    case "$mode" in
      release) install_release "$2" ;;
      source) install_source "$2" ;;
      *) die "CHARTPIN_INSTALL_MODE $mode: want release or source" ;;
    esac
    ;;
  *) die "usage: $0 plan | install DEST" ;;
esac
