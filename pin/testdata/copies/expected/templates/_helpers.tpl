{{- define "ingestor.sha" -}}
{{- default "4f229cf42c4ae81f0fe4b5e57798e405f7445227395f025739239c7a18bb8515" .Values.images.ingestor.sha -}}
{{- end -}}
