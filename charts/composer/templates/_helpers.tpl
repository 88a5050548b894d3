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

{{/* Env that points an in-cluster client at kubernetesService.host/port (declared env wins over the
kubelet's service variables), for clusters where the kubernetes Service's ClusterIP is not
routable; nothing when the host is empty. */}}
{{- define "composer.apiServerEnv" -}}
{{- with .Values.kubernetesService.host }}
- name: KUBERNETES_SERVICE_HOST
  value: {{ . | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ $.Values.kubernetesService.port | quote }}
{{- end }}
{{- end -}}

{{/* The DRA kubelet plugin's DaemonSet is rendered: dra.mode dra, kubeletPlugin.enabled, and no
targetCluster.kubeconfigSecret (the plugin's Pods belong on the target cluster's nodes). "true" or
"false". */}}
{{- define "composer.kubeletPluginOn" -}}
{{- and (eq .Values.dra.mode "dra") .Values.kubeletPlugin.enabled (not .Values.targetCluster.kubeconfigSecret) -}}
{{- end -}}

{{/* Selector labels of the kubelet plugin's Pods: a name of their own, so that the composer's
selectors (Deployment, Service, PodMonitor) never match them. */}}
{{- define "composer.kubeletPluginSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-kubelet-plugin" (include "composer.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
