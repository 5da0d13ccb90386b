{{/*
chartpin.autoUpgrade: the auto-upgrade consumer. A CronJob runs one
`chartpin upgrade` tick for this release (--reset-then-reuse-values, a wedged
release rolled back first), with a ServiceAccount whose Roles cover exactly
what `helm upgrade` of this chart touches: Helm's release Secrets, the
library's own objects and the declared workload kinds, per namespace. No
ClusterRole unless the chart declares upgrade.clusterRules. Renders nothing
when autoUpgrade.enabled is false.
Use from a template of the adopting chart:  {{ include "chartpin.autoUpgrade" . }}
*/}}
{{- define "chartpin.autoUpgrade" -}}
{{- $root := . -}}
{{- $au := $root.Values.autoUpgrade | default dict -}}
{{- if eq (toString $au.enabled) "true" -}}
{{- $plan := include "chartpin.lib.plan" $root | fromYaml -}}
{{- $name := printf "%s-upgrade" (include "chartpin.lib.base" $root) -}}
{{- $labels := include "chartpin.lib.labels" (dict "root" $root "component" "auto-upgrade") -}}
{{- $repo := toString ($au.repo | default "") -}}
{{- if not (regexMatch "^(https?|oci)://[^\\s]+$" $repo) -}}
{{- fail (printf "chartpin: autoUpgrade.repo %q is not an https:// chart repository or an oci:// reference; set it, or set autoUpgrade.enabled=false" $repo) -}}
{{- end -}}
{{- $chart := toString ($au.chart | default $root.Chart.Name) -}}
{{- $authSecret := toString (($root.Values.registryAuth | default dict).secret | default "") -}}
{{- $pullNames := include "chartpin.lib.pullSecretNames" $root | fromYamlArray -}}
{{- $timeout := include "chartpin.lib.seconds" (dict "value" $au.timeout "path" "autoUpgrade.timeout") | atoi -}}
{{- /* Soak: an explicit minAge, else ring N waits N x ringSoak (ring 0, the
canaries, takes a version at once). Deprecated versions are never taken. */ -}}
{{- $ring := int ($au.ring | default 0) -}}
{{- if or (lt $ring 0) (gt $ring 9) -}}
{{- fail (printf "chartpin: autoUpgrade.ring %v is not a ring from 0 (canaries, no soak) to 9" $au.ring) -}}
{{- end -}}
{{- $minAge := mul $ring (include "chartpin.lib.seconds" (dict "value" ($au.ringSoak | default "24h") "path" "autoUpgrade.ringSoak") | atoi) -}}
{{- if $au.minAge -}}
{{- $minAge = include "chartpin.lib.seconds" (dict "value" $au.minAge "path" "autoUpgrade.minAge") | atoi -}}
{{- end -}}
{{- /* A tick may roll back a wedged release, upgrade, and (atomic) roll the
failed upgrade back, each bounded by the timeout, plus repository fetches:
three times the timeout plus five minutes, so the Job deadline never
undercuts the upgrade. */ -}}
{{- $activeDeadline := add (mul 3 $timeout) 300 -}}
{{- $full := list "get" "list" "watch" "create" "update" "patch" "delete" -}}
{{- $read := list "get" "list" "watch" -}}
{{- $resources := dict "Deployment" "deployments" "DaemonSet" "daemonsets" "StatefulSet" "statefulsets" -}}
{{- $kindsByNs := dict -}}
{{- range $e := $plan.entries -}}
{{- if $e.enabled -}}
{{- $k := list -}}
{{- if hasKey $kindsByNs $e.namespace -}}{{- $k = index $kindsByNs $e.namespace -}}{{- end -}}
{{- $_ := set $kindsByNs $e.namespace (append $k (index $resources $e.kind) | uniq | sortAlpha) -}}
{{- end -}}
{{- end -}}
{{- $upgrade := $plan.upgrade | default dict -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace | quote }}
  labels:
    {{- $labels | nindent 4 }}
{{- range $ns := $plan.namespaces }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ printf "%s-%s" $name $ns }}
  namespace: {{ $ns | quote }}
  labels:
    {{- $labels | nindent 4 }}
rules:
  {{- if eq $ns $root.Release.Namespace }}
  # Helm's release records (sh.helm.release.v1.*), read and written by every upgrade
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: {{ $full | toJson }}
  # the library's own objects: targets ConfigMap, ServiceAccounts, CronJobs
  - apiGroups: [""]
    resources: ["configmaps", "serviceaccounts"]
    verbs: {{ $full | toJson }}
  - apiGroups: ["batch"]
    resources: ["cronjobs"]
    verbs: {{ $full | toJson }}
  - apiGroups: ["batch"]
    resources: ["jobs"]
    verbs: {{ $read | toJson }}
  {{- end }}
  {{- if hasKey $kindsByNs $ns }}
  # the chart's workloads in this namespace
  - apiGroups: ["apps"]
    resources: {{ index $kindsByNs $ns | toJson }}
    verbs: {{ $full | toJson }}
  {{- end }}
  {{- if and (ne $ns $root.Release.Namespace) $pullNames }}
  # the workloads' pull secrets, which the reconcile Role here may read
  - apiGroups: [""]
    resources: ["secrets"]
    resourceNames: {{ $pullNames | toJson }}
    verbs: ["get"]
  {{- end }}
  # rollout waits, and everything the reconcile Role grants here (a Role
  # can only grant what its author holds)
  - apiGroups: ["apps"]
    resources: ["replicasets"]
    verbs: {{ $read | toJson }}
  - apiGroups: [""]
    resources: ["pods"]
    verbs: {{ $read | toJson }}
  - apiGroups: [""]
    resources: ["events"]
    verbs: ["create"]
  # the reconcile's and this job's Roles and RoleBindings
  - apiGroups: ["rbac.authorization.k8s.io"]
    resources: ["roles", "rolebindings"]
    verbs: {{ $full | toJson }}
  {{- if eq $ns $root.Release.Namespace }}
  {{- range $upgrade.rules | default list }}
  - {{ toYaml . | indent 4 | trim }}
  {{- end }}
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
{{- with $upgrade.clusterRules }}
{{- $cname := printf "%s-%s" $root.Release.Namespace $name }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $cname }}
  labels:
    {{- $labels | nindent 4 }}
rules:
  {{- range . }}
  - {{ toYaml . | indent 4 | trim }}
  {{- end }}
  # this ClusterRole and its binding, by name only
  - apiGroups: ["rbac.authorization.k8s.io"]
    resources: ["clusterroles", "clusterrolebindings"]
    resourceNames: [{{ $cname | quote }}]
    verbs: ["get", "patch", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $cname }}
  labels:
    {{- $labels | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $cname }}
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
  schedule: {{ $au.schedule | quote }}
  concurrencyPolicy: Forbid
  startingDeadlineSeconds: 300
  successfulJobsHistoryLimit: 1
  failedJobsHistoryLimit: 3
  jobTemplate:
    spec:
      backoffLimit: 0
      # 3 x timeout {{ $timeout }}s (rollback, upgrade, atomic rollback) + 300s for fetches
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
            - name: upgrade
              image: {{ include "chartpin.image" (dict "root" $root "image" "autoUpgrade.image") | quote }}
              imagePullPolicy: {{ include "chartpin.pullPolicy" (dict "root" $root "image" "autoUpgrade.image") }}
              command: ["chartpin"]
              args:
                - upgrade
                - --release={{ $root.Release.Name }}
                - --namespace={{ $root.Release.Namespace }}
                {{- if hasPrefix "oci://" $repo }}
                - --oci={{ $repo }}
                {{- else }}
                - --repo={{ $repo }}
                {{- end }}
                - --chart={{ $chart }}
                - --timeout={{ $au.timeout }}
                {{- if gt $minAge 0 }}
                - --min-age={{ $minAge }}s
                {{- end }}
              env:
                {{- include "chartpin.lib.toolEnv" $root | nindent 16 }}
                {{- if $authSecret }}
                # repository credentials per host: basic auth for an https index, registry auth for oci://
                - name: DOCKER_CONFIG
                  value: /etc/chartpin/docker
                {{- end }}
              securityContext:
                {{- include "chartpin.lib.containerSecurity" $root | nindent 16 }}
              resources:
                requests:
                  cpu: 50m
                  memory: 128Mi
                limits:
                  memory: 512Mi
              volumeMounts:
                - name: tmp
                  mountPath: /tmp
                {{- if $authSecret }}
                - name: registry-auth
                  mountPath: /etc/chartpin/docker
                  readOnly: true
                {{- end }}
          volumes:
            - name: tmp
              emptyDir: {}
            {{- if $authSecret }}
            - name: registry-auth
              secret:
                secretName: {{ $authSecret | quote }}
                items:
                  - key: .dockerconfigjson
                    path: config.json
            {{- end }}
{{- end -}}
{{- end -}}
