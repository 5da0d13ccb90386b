{{/*
The adopting chart declares its workloads once, in a template named
"<chart name>.chartpin" (see charts/README.md):

  workloads:
    - id: jobs-manager-api          # unique; the reconcile target id
      kind: Deployment              # Deployment | DaemonSet | StatefulSet
      namespace: prod-ns
      name: rel-jobs-manager
      container: api
      image: images.jobsManager     # dotted path to the image block in values
      follows: images.other         # optional: runs that image, inherits its pin
      enabled: true                 # optional, default true
  upgrade:                          # optional, for chartpin.autoUpgrade
    rules: []                       # extra Role rules in the release namespace
    clusterRules: []                # cluster-scoped rules (e.g. a Namespace it renders)

The workload templates and the reconcile targets both read it, so the names
the reconcile patches are the names the chart renders.
*/}}

{{/*
chartpin.lib.config: the chart's declaration, validated, as YAML.
*/}}
{{- define "chartpin.lib.config" -}}
{{- $tpl := printf "%s.chartpin" .Chart.Name -}}
{{- $cfg := include $tpl . | fromYaml -}}
{{- if hasKey $cfg "Error" -}}
{{- fail (printf "chartpin: template %q does not render YAML: %s" $tpl $cfg.Error) -}}
{{- end -}}
{{- $ids := dict -}}
{{- $slots := dict -}}
{{- range $i, $w := $cfg.workloads | default list -}}
{{- range $k := list "id" "kind" "namespace" "name" "container" "image" -}}
{{- if not (index $w $k) -}}
{{- fail (printf "chartpin: %s workload #%d has no %s; every workload needs id, kind, namespace, name, container and image" $tpl $i $k) -}}
{{- end -}}
{{- end -}}
{{- if not (has $w.kind (list "Deployment" "DaemonSet" "StatefulSet")) -}}
{{- fail (printf "chartpin: %s workload %s has kind %q; the reconcile re-images Deployment, DaemonSet and StatefulSet only" $tpl $w.id $w.kind) -}}
{{- end -}}
{{- if hasKey $ids $w.id -}}
{{- fail (printf "chartpin: %s declares the workload id %q twice; ids must be unique" $tpl $w.id) -}}
{{- end -}}
{{- $_ := set $ids $w.id true -}}
{{- $slot := printf "%s/%s/%s/%s" $w.kind $w.namespace $w.name $w.container -}}
{{- if hasKey $slots $slot -}}
{{- fail (printf "chartpin: %s declares the container %s twice" $tpl $slot) -}}
{{- end -}}
{{- $_ := set $slots $slot true -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
chartpin.lib.workload: one declared workload by id, as YAML. Args: root, id.
*/}}
{{- define "chartpin.lib.workload" -}}
{{- $cfg := include "chartpin.lib.config" .root | fromYaml -}}
{{- $found := dict -}}
{{- range $cfg.workloads | default list -}}
{{- if eq .id $.id -}}{{- $found = . -}}{{- end -}}
{{- end -}}
{{- if not $found -}}
{{- fail (printf "chartpin: no workload with id %q in %s.chartpin; declare it there" .id .root.Chart.Name) -}}
{{- end -}}
{{- toYaml $found -}}
{{- end -}}

{{/*
chartpin.lib.plan: every declared workload with its effective reference, the
reconcile targets, and whether the reconcile runs, as YAML
{entries, targets, active, mirror, namespaces, upgrade}.
A target is an enabled, unpinned container. A follower whose leader is itself
a target follows it (same digest, same tick); otherwise it carries its image
and that image's verify policy (the followed image's when it runs that one).
*/}}
{{- define "chartpin.lib.plan" -}}
{{- $root := . -}}
{{- $cfg := include "chartpin.lib.config" $root | fromYaml -}}
{{- $entries := list -}}
{{- range $w := $cfg.workloads | default list -}}
{{- $on := or (not (hasKey $w "enabled")) (eq (toString $w.enabled) "true") -}}
{{- $r := include "chartpin.lib.resolve" (dict "root" $root "image" $w.image "follows" ($w.follows | default "")) | fromYaml -}}
{{- $entries = append $entries (dict "id" $w.id "kind" $w.kind "namespace" (toString $w.namespace) "name" (toString $w.name) "container" (toString $w.container) "image" $w.image "follows" ($w.follows | default "") "enabled" $on "pinned" $r.pinned "ref" $r.ref "verify" ($r.verify | default dict)) -}}
{{- end -}}
{{- $targets := list -}}
{{- $namespaces := list $root.Release.Namespace -}}
{{- range $e := $entries -}}
{{- if $e.enabled -}}
{{- $namespaces = append $namespaces $e.namespace -}}
{{- end -}}
{{- if and $e.enabled (not $e.pinned) -}}
{{- $t := dict "id" $e.id "kind" $e.kind "namespace" $e.namespace "name" $e.name "container" $e.container -}}
{{- $leader := "" -}}
{{- if $e.follows -}}
{{- range $l := $entries -}}
{{- if and (not $leader) (eq $l.image $e.follows) $l.enabled (not $l.pinned) (not $l.follows) -}}
{{- $leader = $l.id -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $leader -}}
{{- $_ := set $t "follows" $leader -}}
{{- else -}}
{{- $_ := set $t "image" $e.ref -}}
{{- with $e.verify -}}{{- $_ := set $t "verify" . -}}{{- end -}}
{{- end -}}
{{- $targets = append $targets $t -}}
{{- end -}}
{{- end -}}
{{- $rc := $root.Values.reconcile | default dict -}}
{{- $active := and (eq (toString $rc.enabled) "true") (gt (len $targets) 0) -}}
{{- toYaml (dict "entries" $entries "targets" $targets "active" $active "mirror" (include "chartpin.lib.mirror" $root) "namespaces" ($namespaces | uniq) "upgrade" ($cfg.upgrade | default dict)) -}}
{{- end -}}

{{/*
chartpin.lib.base: the name prefix of the objects the library renders.
*/}}
{{- define "chartpin.lib.base" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
chartpin.lib.labels: labels of the objects the library renders. Args: root, component.
*/}}
{{- define "chartpin.lib.labels" -}}
app.kubernetes.io/name: chartpin
app.kubernetes.io/instance: {{ .root.Release.Name | quote }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: {{ .root.Chart.Name | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | quote }}
{{- end -}}

{{/*
chartpin.lib.seconds: a Go duration limited to h/m/s units (e.g. 10m, 1h30m)
as whole seconds. Args: value, path.
*/}}
{{- define "chartpin.lib.seconds" -}}
{{- $v := toString .value -}}
{{- if not (regexMatch "^(([1-9][0-9]*h)([0-9]+m)?([0-9]+s)?|([1-9][0-9]*m)([0-9]+s)?|[1-9][0-9]*s)$" $v) -}}
{{- fail (printf "chartpin: %s %q is not a positive duration in h, m and s (e.g. 10m, 1h30m, 90s)" .path $v) -}}
{{- end -}}
{{- $total := 0 -}}
{{- range $p := regexFindAll "[0-9]+[hms]" $v -1 -}}
{{- $n := trimSuffix "h" (trimSuffix "m" (trimSuffix "s" $p)) | atoi -}}
{{- if hasSuffix "h" $p -}}
{{- $total = add $total (mul $n 3600) -}}
{{- else if hasSuffix "m" $p -}}
{{- $total = add $total (mul $n 60) -}}
{{- else -}}
{{- $total = add $total $n -}}
{{- end -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/*
chartpin.lib.podSecurity / chartpin.lib.containerSecurity: the "restricted"
Pod Security Standard for the CronJobs' pods.
*/}}
{{- define "chartpin.lib.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "chartpin.lib.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/*
chartpin.lib.env: environment for the chartpin container: a writable HOME on
the /tmp emptyDir (the root filesystem is read-only).
*/}}
{{- define "chartpin.lib.toolEnv" -}}
- name: HOME
  value: /tmp
- name: XDG_CACHE_HOME
  value: /tmp/.cache
- name: XDG_CONFIG_HOME
  value: /tmp/.config
- name: XDG_DATA_HOME
  value: /tmp/.local/share
{{- end -}}

{{/*
chartpin.imagePullSecrets: the pod spec's imagePullSecrets from the adopting
chart's imagePullSecrets value (names, or {name: …} as Kubernetes writes
them); nothing when the list is empty. Use in every workload's pod spec:
  {{- with include "chartpin.imagePullSecrets" . }}{{ . | nindent 6 }}{{ end }}
*/}}
{{- define "chartpin.imagePullSecrets" -}}
{{- $names := include "chartpin.lib.pullSecretNames" . | fromYamlArray -}}
{{- if $names -}}
imagePullSecrets:
{{- range $names }}
  - name: {{ . | quote }}
{{- end }}
{{- end -}}
{{- end -}}

{{/*
chartpin.lib.pullSecretNames: the imagePullSecrets value as a list of names.
*/}}
{{- define "chartpin.lib.pullSecretNames" -}}
{{- $names := list -}}
{{- range $s := .Values.imagePullSecrets | default list -}}
{{- $n := $s -}}
{{- if kindIs "map" $s -}}{{- $n = $s.name -}}{{- end -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$" (toString $n)) -}}
{{- fail (printf "chartpin: imagePullSecrets entry %v is not a Secret name; write a name, or {name: NAME}" $s) -}}
{{- end -}}
{{- $names = append $names (toString $n) -}}
{{- end -}}
{{- toYaml ($names | uniq) -}}
{{- end -}}

{{/*
chartpin.lib.credentialSecrets: the Secrets the reconcile reads for registry
credentials, in the order it consults them: the workloads' own
imagePullSecrets in each target namespace (optional, as for the kubelet;
unless registryAuth.workloadPullSecrets is false), then registryAuth.secret in
the release namespace (required). Args: dict root, plan.
*/}}
{{- define "chartpin.lib.credentialSecrets" -}}
{{- $root := .root -}}
{{- $ra := $root.Values.registryAuth | default dict -}}
{{- $out := list -}}
{{- if ne (toString $ra.workloadPullSecrets) "false" -}}
{{- $names := include "chartpin.lib.pullSecretNames" $root | fromYamlArray -}}
{{- $seen := list -}}
{{- range $t := .plan.targets -}}
{{- if not (has $t.namespace $seen) -}}
{{- $seen = append $seen $t.namespace -}}
{{- range $n := $names -}}
{{- $out = append $out (dict "namespace" $t.namespace "name" $n "optional" true) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $ra.secret -}}
{{- $out = append $out (dict "namespace" $root.Release.Namespace "name" (toString .) "optional" false) -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}
