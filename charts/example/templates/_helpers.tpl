{{/* Names of the example chart's workloads, used by the workload templates
and by the chartpin declaration below, so the two cannot drift. */}}
{{- define "example.jobsManager.name" -}}
{{- printf "%s-jobs-manager" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "example.requestsProxy.name" -}}
{{- printf "%s-requests-proxy" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "example.resourceMonitor.name" -}}
{{- printf "%s-resource-monitor" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "example.nodeAgents.namespace" -}}
{{- .Values.nodeAgents.namespace | default .Release.Namespace -}}
{{- end -}}

{{/* example.labels: common labels. Args: root, component. */}}
{{- define "example.labels" -}}
{{ include "example.selector" . }}
app.kubernetes.io/part-of: {{ .root.Chart.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* example.podLabels: pod template labels. No chart version here: a chart
release that moves one image's pin must not roll every other pod. */}}
{{- define "example.podLabels" -}}
{{ include "example.selector" . }}
app.kubernetes.io/part-of: {{ .root.Chart.Name }}
{{- end -}}

{{/* example.selector: selector labels. Args: root, component. */}}
{{- define "example.selector" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* Restricted Pod Security Standard for every pod of the chart. */}}
{{- define "example.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "example.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/*
example.chartpin: the chart's declaration for chartpin-lib: every container
the reconcile may re-image, and what auto-upgrade must be allowed to manage.
The library finds it by name ("<chart name>.chartpin").
*/}}
{{- define "example.chartpin" -}}
{{- $nodeNs := include "example.nodeAgents.namespace" . -}}
workloads:
  - id: jobs-manager-api
    kind: Deployment
    namespace: {{ .Release.Namespace | quote }}
    name: {{ include "example.jobsManager.name" . | quote }}
    container: api
    image: images.jobsManager
  - id: jobs-manager-pods-monitor
    kind: Deployment
    namespace: {{ .Release.Namespace | quote }}
    name: {{ include "example.jobsManager.name" . | quote }}
    container: pods-monitor
    image: images.podsMonitor
  - id: requests-proxy-proxy
    kind: Deployment
    namespace: {{ .Release.Namespace | quote }}
    name: {{ include "example.requestsProxy.name" . | quote }}
    container: proxy
    image: images.requestsProxy
    follows: images.jobsManager
  - id: resource-monitor-resource-monitor
    kind: DaemonSet
    namespace: {{ $nodeNs | quote }}
    name: {{ include "example.resourceMonitor.name" . | quote }}
    container: resource-monitor
    image: images.resourceMonitor
    enabled: {{ .Values.resourceMonitor.enabled }}
upgrade:
  rules:
    # the requests-proxy Service
    - apiGroups: [""]
      resources: ["services"]
      verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
  {{- if and .Values.resourceMonitor.enabled (ne $nodeNs .Release.Namespace) }}
  clusterRules:
    # the node-agents Namespace this chart renders, by name only
    - apiGroups: [""]
      resources: ["namespaces"]
      resourceNames: [{{ $nodeNs | quote }}]
      verbs: ["get", "patch", "update"]
  {{- end }}
{{- end -}}
