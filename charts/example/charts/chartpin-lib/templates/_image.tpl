{{/*
Image references and the pull-policy rule.

Every helper takes a dict with "root" (the adopting chart's top context, $)
and one of:
  "id"     a workload id from the chart's "<chart>.chartpin" declaration
  "image"  a dotted path to an image block under .Values (e.g. images.jobsManager),
           optionally with "follows" (the dotted path of the image it runs)
*/}}

{{/*
chartpin.lib.env: the edge's environment (dev | stg | prod, default prod).
*/}}
{{- define "chartpin.lib.env" -}}
{{- $env := toString (.Values.env | default "prod") -}}
{{- if not (has $env (list "dev" "stg" "prod")) -}}
{{- fail (printf "chartpin: env %q is not one of dev, stg, prod; set env in values.yaml" $env) -}}
{{- end -}}
{{- $env -}}
{{- end -}}

{{/*
chartpin.lib.mirror: the registry that serves every pull on this edge, or "".
An empty global.imageRegistry means no mirror ("" must never make every edge a mirror edge).
*/}}
{{- define "chartpin.lib.mirror" -}}
{{- $g := .Values.global | default dict -}}
{{- $m := toString ($g.imageRegistry | default "") | trimSuffix "/" -}}
{{- if and $m (not (regexMatch "^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)*$" $m)) -}}
{{- fail (printf "chartpin: global.imageRegistry %q is not a registry host[:port][/path]; set it to e.g. mirror.example:5000 or \"\"" $m) -}}
{{- end -}}
{{- $m -}}
{{- end -}}

{{/*
chartpin.lib.repository: registry/path of a repository as the pull sees it.
A mirror replaces the registry host (docker.io/chartpin/x -> mirror/chartpin/x),
the same mapping as chartpin's --registry-mirror docker.io=mirror.
Args: root, repository, path.
*/}}
{{- define "chartpin.lib.repository" -}}
{{- $repo := toString .repository -}}
{{- if not (regexMatch "^([a-z0-9.-]+(:[0-9]+)?/)?[a-z0-9._-]+(/[a-z0-9._-]+)*$" $repo) -}}
{{- fail (printf "chartpin: %s.repository %q is not registry/repository without tag or digest; put the tag in tag or channelTags" .path $repo) -}}
{{- end -}}
{{- $parts := splitList "/" $repo -}}
{{- $first := first $parts -}}
{{- $host := "docker.io" -}}
{{- $rest := $repo -}}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- $host = $first -}}
{{- $rest = join "/" (rest $parts) -}}
{{- else if eq (len $parts) 1 -}}
{{- $rest = printf "library/%s" $repo -}}
{{- end -}}
{{- $mirror := include "chartpin.lib.mirror" .root -}}
{{- if $mirror -}}
{{- printf "%s/%s" $mirror $rest -}}
{{- else -}}
{{- printf "%s/%s" $host $rest -}}
{{- end -}}
{{- end -}}

{{/*
chartpin.lib.block: the image block at a dotted path under .Values, as YAML.
Args: root, path.
*/}}
{{- define "chartpin.lib.block" -}}
{{- $cur := .root.Values -}}
{{- range $k := splitList "." .path -}}
{{- if not (and (kindIs "map" $cur) (hasKey $cur $k)) -}}
{{- fail (printf "chartpin: values have no image block at %s; add it to values.yaml or fix the image path in the chart's chartpin declaration" $.path) -}}
{{- end -}}
{{- $cur = index $cur $k -}}
{{- end -}}
{{- if not (kindIs "map" $cur) -}}
{{- fail (printf "chartpin: %s is not an image block (repository, tag, channelTags, digest, prodDigest, prodPin)" .path) -}}
{{- end -}}
{{- toYaml $cur -}}
{{- end -}}

{{/*
chartpin.lib.resolveBlock: one image block's own reference, as YAML
{ref, pinned, by}. Precedence: digest > prodDigest (env prod and prodPin not
false) > tag (tag, else channelTags[env]). Args: root, path.
*/}}
{{- define "chartpin.lib.resolveBlock" -}}
{{- $root := .root -}}
{{- $path := .path -}}
{{- $b := include "chartpin.lib.block" (dict "root" $root "path" $path) | fromYaml -}}
{{- $env := include "chartpin.lib.env" $root -}}
{{- $repo := include "chartpin.lib.repository" (dict "root" $root "repository" ($b.repository | default "") "path" $path) -}}
{{- $digest := toString ($b.digest | default "") -}}
{{- $prodDigest := toString ($b.prodDigest | default "") -}}
{{- range $k, $v := dict "digest" $digest "prodDigest" $prodDigest -}}
{{- if and $v (not (regexMatch "^sha256:[a-f0-9]{64}$" $v)) -}}
{{- fail (printf "chartpin: %s.%s %q is not sha256:<64 lowercase hex>; run chartpin pin or set it to \"\"" $path $k $v) -}}
{{- end -}}
{{- end -}}
{{- $pin := "" -}}
{{- $by := "tag" -}}
{{- if $digest -}}
{{- $pin = $digest -}}
{{- $by = "digest" -}}
{{- else if and (eq $env "prod") (ne (toString $b.prodPin) "false") $prodDigest -}}
{{- $pin = $prodDigest -}}
{{- $by = "prodDigest" -}}
{{- end -}}
{{- $verify := dict -}}
{{- if and (hasKey $b "verify") (not (kindIs "invalid" $b.verify)) -}}
{{- $v := $b.verify -}}
{{- if not (kindIs "map" $v) -}}{{- $v = dict -}}{{- end -}}
{{- $key := toString ($v.key | default "") -}}
{{- $identity := toString ($v.identity | default "") -}}
{{- $issuer := toString ($v.issuer | default "") -}}
{{- $trustedRoot := toString ($v.trustedRoot | default "") -}}
{{- if and $key (or $identity $issuer $trustedRoot) -}}
{{- fail (printf "chartpin: %s.verify has key and a keyless identity; give one policy: key, or identity, issuer and trustedRoot" $path) -}}
{{- else if or $identity $issuer $trustedRoot -}}
{{- if not (and $identity $issuer $trustedRoot) -}}
{{- fail (printf "chartpin: %s.verify needs identity, issuer and trustedRoot together (trustedRoot: the text of trusted_root.json, --set-file %s.verify.trustedRoot=trusted_root.json)" $path $path) -}}
{{- end -}}
{{- if not (hasPrefix "{" (trim $trustedRoot)) -}}
{{- fail (printf "chartpin: %s.verify.trustedRoot is the JSON of trusted_root.json itself (--set-file %s.verify.trustedRoot=trusted_root.json), not a path" $path $path) -}}
{{- end -}}
{{- $verify = dict "identity" $identity "issuer" $issuer "trustedRoot" $trustedRoot -}}
{{- else -}}
{{- if not (regexMatch "-----BEGIN [A-Z ]*PUBLIC KEY-----" $key) -}}
{{- fail (printf "chartpin: %s.verify needs key: the PEM public key itself (the contents of cosign.pub), not a path; or identity, issuer and trustedRoot for keyless signatures" $path) -}}
{{- end -}}
{{- $verify = dict "key" $key -}}
{{- end -}}
{{- end -}}
{{- $tag := toString ($b.tag | default "") -}}
{{- if not $tag -}}
{{- $tag = toString (index ($b.channelTags | default dict) $env | default "") -}}
{{- end -}}
{{- if eq $tag "latest" -}}
{{- fail (printf "chartpin: %s uses the tag \"latest\"; use a version or channel tag (channelTags.%s) so the reference says which release it follows" $path $env) -}}
{{- end -}}
{{- if $pin -}}
{{- dict "ref" (printf "%s@%s" $repo $pin) "pinned" true "by" $by "verify" $verify | toYaml -}}
{{- else if $tag -}}
{{- dict "ref" (printf "%s:%s" $repo $tag) "pinned" false "by" $by "verify" $verify | toYaml -}}
{{- else -}}
{{- fail (printf "chartpin: %s has no digest, no tag and no channelTags.%s; set one of them" $path $env) -}}
{{- end -}}
{{- end -}}

{{/*
chartpin.lib.resolve: the effective reference of an image, as YAML
{ref, pinned, by}. A follower (an image that runs another's image) uses its
own pin if it has one, else exactly the reference of the image it follows.
Args: root and id, or root, image and optional follows.
*/}}
{{- define "chartpin.lib.resolve" -}}
{{- $image := .image | default "" -}}
{{- $follows := .follows | default "" -}}
{{- if .id -}}
{{- $w := include "chartpin.lib.workload" . | fromYaml -}}
{{- $image = $w.image -}}
{{- $follows = $w.follows | default "" -}}
{{- end -}}
{{- if not $image -}}
{{- fail "chartpin: an image helper was called without id or image; pass (dict \"root\" $ \"id\" \"<workload id>\")" -}}
{{- end -}}
{{- $own := include "chartpin.lib.resolveBlock" (dict "root" .root "path" $image) | fromYaml -}}
{{- if or $own.pinned (not $follows) -}}
{{- toYaml $own -}}
{{- else -}}
{{- $leader := include "chartpin.lib.resolveBlock" (dict "root" .root "path" $follows) | fromYaml -}}
{{- dict "ref" $leader.ref "pinned" $leader.pinned "by" (printf "follows %s (%s)" $follows $leader.by) "verify" $leader.verify | toYaml -}}
{{- end -}}
{{- end -}}

{{/*
chartpin.image: the image reference to render: registry/repository@digest or
registry/repository:tag, with global.imageRegistry applied.
*/}}
{{- define "chartpin.image" -}}
{{- (include "chartpin.lib.resolve" . | fromYaml).ref -}}
{{- end -}}

{{/*
chartpin.follows: the reference of an image that runs another's image: its own
pin if it has one, else the followed image's pin or tag. Args: root, image, follows.
*/}}
{{- define "chartpin.follows" -}}
{{- if not .follows -}}
{{- fail (printf "chartpin.follows: %s needs \"follows\" (the dotted path of the image it runs)" (.image | default "an image")) -}}
{{- end -}}
{{- include "chartpin.image" . -}}
{{- end -}}

{{/*
chartpin.pullPolicy: IfNotPresent for a digest pin; IfNotPresent when the
reconcile runs on this edge and targets this container (it changes the
reference, which is what the kubelet pulls); Always otherwise, because a
floating tag plus a restart is then the only update path. One rule for every
call site, the CronJobs' own image included.
*/}}
{{- define "chartpin.pullPolicy" -}}
{{- $r := include "chartpin.lib.resolve" . | fromYaml -}}
{{- if $r.pinned -}}
IfNotPresent
{{- else if .id -}}
{{- $plan := include "chartpin.lib.plan" .root | fromYaml -}}
{{- $target := false -}}
{{- range $plan.targets -}}
{{- if eq .id $.id -}}{{- $target = true -}}{{- end -}}
{{- end -}}
{{- if and $plan.active $target -}}
IfNotPresent
{{- else -}}
Always
{{- end -}}
{{- else -}}
Always
{{- end -}}
{{- end -}}

{{/*
chartpin.container: name, image and imagePullPolicy of a declared workload
container, so the name the reconcile targets is the name the chart renders.
Use as:   - {{ include "chartpin.container" (dict "root" $ "id" "x") | indent 10 | trim }}
*/}}
{{- define "chartpin.container" -}}
{{- $w := include "chartpin.lib.workload" . | fromYaml -}}
name: {{ $w.container }}
image: {{ include "chartpin.image" . | quote }}
imagePullPolicy: {{ include "chartpin.pullPolicy" . }}
{{- end -}}
