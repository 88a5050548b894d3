{{/* Object names: the release is named like the ClusterDeployment (kcm). */}}
{{- define "cluster.name" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "controlplane.name" -}}
{{- include "cluster.name" . }}-cp
{{- end }}
