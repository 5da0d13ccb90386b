{{- define "shop.chartpin" -}}
workloads:
  - id: web
    kind: Deployment
    namespace: {{ .Release.Namespace | quote }}
    name: {{ printf "%s-web" .Release.Name | quote }}
    container: web
    image: web.image
  - id: worker
    kind: Deployment
    namespace: {{ .Release.Namespace | quote }}
    name: {{ printf "%s-web" .Release.Name | quote }}
    container: worker
    image: web.workerImage
    follows: web.image
  - id: db
    kind: StatefulSet
    namespace: {{ .Release.Namespace | quote }}
    name: {{ printf "%s-db" .Release.Name | quote }}
    container: postgres
    image: db.image
{{- end -}}
