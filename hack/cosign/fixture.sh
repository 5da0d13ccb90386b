#!/usr/bin/env bash
# Regenerates cmd/chartpin/testdata/cosign: signatures made by the cosign CLI
# (v2, key-based, no transparency log) on Debian's docker-registry, exported
# as an OCI image layout that the tests load into their own registry.
# CI does not build cosign; run this by hand after changing the fixture:
#   GOBIN=$(go env GOPATH)/bin go install github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5
#   hack/cosign/fixture.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

out=cmd/chartpin/testdata/cosign
cosign=${COSIGN:-cosign}
command -v "$cosign" >/dev/null || { echo "fixture.sh: no cosign on PATH (see the comment at the top)" >&2; exit 2; }
command -v docker-registry >/dev/null || { echo "fixture.sh: no docker-registry (apt-get install -y docker-registry)" >&2; exit 2; }
version=$("$cosign" version 2>/dev/null | sed -n 's/^GitVersion: *//p')
case $version in v2.*) ;; *) echo "fixture.sh: cosign $version; want v2" >&2; exit 2 ;; esac

# The key pair is committed: regenerating the signatures keeps the key.
export COSIGN_PASSWORD=chartpin-test
mkdir -p "$out"
if [[ ! -f $out/cosign.key ]]; then
  (cd "$out" && "$cosign" generate-key-pair)
fi

tmp=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
port=
for p in $(seq 15000 15100); do
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[[ -n $port ]] || { echo "fixture.sh: no free port in 15000-15100" >&2; exit 1; }
host=127.0.0.1:$port
cat >"$tmp/config.yml" <<YAML
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $tmp/data}}
http: {addr: "$host"}
YAML
docker-registry serve "$tmp/config.yml" >"$tmp/registry.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  curl -fsS "http://$host/v2/" >/dev/null 2>&1 && break
  sleep 0.1
done

repo=$host/team/app
digest=$(go run ./hack/cosign push "$repo:1.0")
sign=("$cosign" sign --key "$out/cosign.key" --tlog-upload=false --allow-insecure-registry --yes)
# The sha256-<hex>.sig tag (cosign's default), then an OCI 1.1 referrer:
# docker-registry has no referrers API, so the client keeps the referrers
# index under the fallback tag sha256-<hex>.
"${sign[@]}" "$repo@$digest"
COSIGN_EXPERIMENTAL=1 "${sign[@]}" --registry-referrers-mode=oci-1-1 "$repo@$digest"

# cosign itself accepts both before they are exported.
"$cosign" verify --key "$out/cosign.pub" --insecure-ignore-tlog --allow-insecure-registry "$repo@$digest" >/dev/null
COSIGN_EXPERIMENTAL=1 "$cosign" verify --key "$out/cosign.pub" --insecure-ignore-tlog --allow-insecure-registry \
  --experimental-oci11 "$repo@$digest" >/dev/null

tag=${digest/:/-}
rm -rf "$out/layout"
go run ./hack/cosign export "$out/layout" "$repo" 1.0 "$tag.sig" "$tag"
find "$out" -type f -exec chmod 644 {} +  # git keeps the x bit; layout writers vary
echo "fixture.sh: $out/layout holds $repo@$digest signed by cosign $version (tag $tag.sig and referrers tag $tag)"
