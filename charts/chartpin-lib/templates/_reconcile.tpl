{{/*
chartpin.reconcile: the in-cluster digest-on-update path. Renders, in this
order: ServiceAccount, ConfigMap (targets.yaml), one Role and RoleBinding per
target namespace (and the release namespace when registryAuth.secret is set),
CronJob. Renders nothing when reconcile.enabled is false or
when every declared container is pinned or disabled (retired: nothing to do).
Use from a template of the adopting chart:  {{ include "chartpin.reconcile" . }}
*/}}
{{- define "chartpin.reconcile" -}}
{{- $root := . -}}
{{- $plan := include "chartpin.lib.plan" $root | fromYaml -}}
{{- if $plan.active -}}
{{- $rc := $root.Values.reconcile -}}
{{- $name := printf "%s-reconcile" (include "chartpin.lib.base" $root) -}}
{{- $labels := include "chartpin.lib.labels" (dict "root" $root "component" "reconcile") -}}
{{- $rollout := include "chartpin.lib.seconds" (dict "value" $rc.rolloutTimeout "path" "reconcile.rolloutTimeout") | atoi -}}
{{- $maxAttempts := int (ternary $rc.maxAttempts 3 (hasKey $rc "maxAttempts")) -}}
{{- $maxSkips := int (ternary $rc.maxSkips 4 (hasKey $rc "maxSkips")) -}}
{{- if lt $maxAttempts 1 -}}
{{- fail (printf "chartpin: reconcile.maxAttempts %d must be at least 1" $maxAttempts) -}}
{{- end -}}
{{- if lt $maxSkips 0 -}}
{{- fail (printf "chartpin: reconcile.maxSkips %d must not be negative" $maxSkips) -}}
{{- end -}}
{{- /* Each target may wait one full rollout; 100% slack plus a minute for
registry lookups is the tick's own deadline, and the Job's deadline adds two
more minutes for pod start and exit so the tick reports before it is killed
(a deadline equal to the work leaves no slack). The spread wait comes first,
so its window is added too. */ -}}
{{- $spread := $rc.spread | default dict -}}
{{- $window := 0 -}}
{{- if and $spread.window (ne (toString $spread.window) "0") -}}
{{- $window = include "chartpin.lib.seconds" (dict "value" $spread.window "path" "reconcile.spread.window") | atoi -}}
{{- end -}}
{{- $n := len $plan.targets -}}
{{- $deadline := add (mul 2 $n $rollout) 60 $window -}}
{{- $activeDeadline := add $deadline 120 -}}
{{- $secrets := include "chartpin.lib.credentialSecrets" (dict "root" $root "plan" $plan) | fromYamlArray -}}
{{- $_ := set $plan "pullSecrets" $secrets -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace | quote }}
  labels:
    {{- $labels | nindent 4 }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace | quote }}
  labels:
    {{- $labels | nindent 4 }}
data:
  targets.yaml: |
    {{- include "chartpin.lib.targetsFile" $plan | nindent 4 }}
{{- $byNs := dict -}}
{{- $secretsByNs := dict -}}
{{- range $s := $secrets -}}
{{- $names := list -}}
{{- if hasKey $secretsByNs $s.namespace -}}{{- $names = index $secretsByNs $s.namespace -}}{{- end -}}
{{- $_ := set $secretsByNs $s.namespace (append $names $s.name | uniq) -}}
{{- if not (hasKey $byNs $s.namespace) -}}{{- $_ := set $byNs $s.namespace dict -}}{{- end -}}
{{- end -}}
{{- range $t := $plan.targets -}}
{{- $kinds := dict -}}
{{- if hasKey $byNs $t.namespace -}}{{- $kinds = index $byNs $t.namespace -}}{{- end -}}
{{- $names := list -}}
{{- if hasKey $kinds $t.kind -}}{{- $names = index $kinds $t.kind -}}{{- end -}}
{{- $_ := set $kinds $t.kind (append $names $t.name | uniq) -}}
{{- $_ := set $byNs $t.namespace $kinds -}}
{{- end -}}
{{- $resources := dict "Deployment" "deployments" "DaemonSet" "daemonsets" "StatefulSet" "statefulsets" -}}
{{- range $ns, $kinds := $byNs }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ printf "%s-%s" $name $ns }}
  namespace: {{ $ns | quote }}
  labels:
    {{- $labels | nindent 4 }}
rules:
  {{- range $kind, $names := $kinds }}
  # set image by digest on exactly the targets in this namespace
  - apiGroups: ["apps"]
    resources: [{{ index $resources $kind | quote }}]
    resourceNames: {{ $names | sortAlpha | toJson }}
    verbs: ["get", "patch"]
  {{- end }}
  {{- with index $secretsByNs $ns }}
  # registry credentials: exactly the pull secrets named in targets.yaml
  - apiGroups: [""]
    resources: ["secrets"]
    resourceNames: {{ . | toJson }}
    verbs: ["get"]
  {{- end }}
  {{- if $kinds }}
  # the imageID each workload's pods actually run
  - apiGroups: [""]
    resources: ["pods"]
    verbs: ["list"]
  # an Event on each workload it re-images, locks out or cannot resolve
  - apiGroups: [""]
    resources: ["events"]
    verbs: ["create"]
  {{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ printf "%s-%s" $name $ns }}
  namespace: {{ $ns | quote }}
  labels:
    {{- $labels | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ printf "%s-%s" $name $ns }}
subjects:
  - kind: ServiceAccount
    name: {{ $name }}
    namespace: {{ $root.Release.Namespace | quote }}
{{- end }}
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace | quote }}
  labels:
    {{- $labels | nindent 4 }}
spec:
  schedule: {{ $rc.schedule | quote }}
  concurrencyPolicy: Forbid
  startingDeadlineSeconds: 300
  successfulJobsHistoryLimit: 1
  failedJobsHistoryLimit: 3
  jobTemplate:
    spec:
      backoffLimit: 0
      # {{ $n }} targets x rolloutTimeout {{ $rollout }}s x 2 + 60s + spread window {{ $window }}s = --deadline, + 120s
      activeDeadlineSeconds: {{ $activeDeadline }}
      template:
        metadata:
          labels:
            {{- $labels | nindent 12 }}
        spec:
          serviceAccountName: {{ $name }}
          automountServiceAccountToken: true
          restartPolicy: Never
          {{- with include "chartpin.imagePullSecrets" $root }}{{ . | nindent 10 }}{{ end }}
          securityContext:
            {{- include "chartpin.lib.podSecurity" $root | nindent 12 }}
          containers:
            - name: reconcile
              image: {{ include "chartpin.image" (dict "root" $root "image" "reconcile.image") | quote }}
              imagePullPolicy: {{ include "chartpin.pullPolicy" (dict "root" $root "image" "reconcile.image") }}
              command: ["chartpin"]
              args:
                - reconcile
                - --targets=/etc/chartpin/targets.yaml
                - --rollout-timeout={{ $rc.rolloutTimeout }}
                - --max-attempts={{ $maxAttempts }}
                - --max-skips={{ $maxSkips }}
                - --deadline={{ $deadline }}s
                {{- if $window }}
                - --jitter={{ $window }}s
                {{- with $spread.key }}
                - --jitter-key={{ . }}
                {{- end }}
                {{- end }}
              env:
                {{- include "chartpin.lib.toolEnv" $root | nindent 16 }}
              securityContext:
                {{- include "chartpin.lib.containerSecurity" $root | nindent 16 }}
              resources:
                requests:
                  cpu: 10m
                  memory: 64Mi
                limits:
                  memory: 256Mi
              volumeMounts:
                - name: targets
                  mountPath: /etc/chartpin
                  readOnly: true
                - name: tmp
                  mountPath: /tmp
          volumes:
            - name: targets
              configMap:
                name: {{ $name }}
            - name: tmp
              emptyDir: {}
{{- end -}}
{{- end -}}

{{/*
chartpin.lib.targetsFile: the reconcile targets file (`chartpin reconcile
--targets FILE`). Args: a plan.
*/}}
{{- define "chartpin.lib.targetsFile" -}}
# rendered by chartpin-lib from the same declaration as the workloads; do not edit
# registry that serves the pulls on this edge ("" = none; images below already carry it)
mirror: {{ .mirror | quote }}
{{- with .pullSecrets }}
# Secrets read for registry credentials, in this order (kubelet matching per registry)
pullSecrets:
{{- range . }}
  - {namespace: {{ .namespace | quote }}, name: {{ .name | quote }}, optional: {{ .optional }}}
{{- end }}
{{- end }}
targets:
{{- range .targets }}
  - id: {{ .id | quote }}
    kind: {{ .kind }}
    namespace: {{ .namespace | quote }}
    name: {{ .name | quote }}
    container: {{ .container | quote }}
    {{- if .follows }}
    follows: {{ .follows | quote }}
    {{- else }}
    image: {{ .image | quote }}
    {{- with .verify }}
    {{- if .key }}
    # a new digest is rolled out only when a signature by this key verifies
    verify:
      key: |
        {{- .key | trim | nindent 8 }}
    {{- else }}
    # a new digest is rolled out only when a keyless signature by this identity verifies
    verify:
      identity: {{ .identity | quote }}
      issuer: {{ .issuer | quote }}
      trustedRoot: |
        {{- .trustedRoot | trim | nindent 8 }}
    {{- end }}
    {{- end }}
    {{- end }}
{{- end }}
{{- end -}}
