{{/* Labels and the start of the annotations of one alert rule (prometheusrule.yaml): severity,
metrics.prometheusRule.additionalAlertLabels, and runbook_url when runbookBaseUrl is set (that URL
plus "#" and the alert name in lower case, its section in docs/composer-alerts.md).
Arguments: dict root (the chart context), alert (name), severity. */}}
{{- define "composer.alertMeta" -}}
labels:
  severity: {{ .severity }}
  {{- with .root.Values.metrics.prometheusRule.additionalAlertLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with .root.Values.metrics.prometheusRule.runbookBaseUrl }}
annotations:
  runbook_url: {{ printf "%s#%s" . (lower $.alert) | quote }}
{{- else }}
annotations:
{{- end }}
{{- end }}
