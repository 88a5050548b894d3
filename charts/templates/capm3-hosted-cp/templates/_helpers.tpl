{{/* Object names: the release is named like the ClusterDeployment (kcm). */}}
{{- define "cluster.name" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "controlplane.name" -}}
{{- include "cluster.name" . }}-cp
{{- end }}

{{- define "machinetemplate.name" -}}
{{- include "cluster.name" . }}-mt
{{- end }}

{{- define "workerconfig.name" -}}
{{- include "cluster.name" . }}-machine-config
{{- end }}

{{- define "machinedeployment.name" -}}
{{- include "cluster.name" . }}-md
{{- end }}
