{{/* Chart name and fullname (release-derived, 63 characters at most). */}}
{{- define "composer.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "composer.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "composer.selectorLabels" -}}
app.kubernetes.io/name: {{ include "composer.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "composer.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "composer.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: gpu-composer
{{- end -}}

{{- define "composer.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "composer.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret with the Director password: an existing one, or the chart's own. */}}
{{- define "composer.secretName" -}}
{{- if .Values.director.existingSecret -}}
{{- .Values.director.existingSecret -}}
{{- else -}}
{{- printf "%s-director" (include "composer.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The pod-gating webhook runs: webhook.enabled, and not in DRA mode (dra.mode: dra serves
nvidia.com/gpu through DRA; a node is served by one mode only). "true" or "false". */}}
{{- define "composer.webhookOn" -}}
{{- and .Values.webhook.enabled (ne .Values.dra.mode "dra") -}}
{{- end -}}

{{/* The composer restarts device-plugin pods (and gets the Role in devicePlugin.namespace for it):
devicePlugin.restart, and not in DRA mode (nodes served by DRA run no device plugin). "true" or
"false". */}}
{{- define "composer.restartPlugin" -}}
{{- and .Values.devicePlugin.restart (ne .Values.dra.mode "dra") -}}
{{- end -}}
