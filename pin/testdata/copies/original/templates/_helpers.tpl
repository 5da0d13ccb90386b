{{- define "ingestor.sha" -}}
{{- default "1111111111111111111111111111111111111111111111111111111111111111" .Values.images.ingestor.sha -}}
{{- end -}}
