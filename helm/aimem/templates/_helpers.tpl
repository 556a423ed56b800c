{{/* Chart name, truncated to 63 chars. */}}
{{- define "aimem.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: <release>-aimem unless the release already contains it. */}}
{{- define "aimem.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "aimem.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "aimem.labels" -}}
helm.sh/chart: {{ include "aimem.chart" . }}
app.kubernetes.io/name: {{ include "aimem.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: aimem
{{- end }}

{{- define "aimem.selectorLabels" -}}
app.kubernetes.io/name: {{ include "aimem.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The label every pod that mounts the data volume carries (the podAffinity target). */}}
{{- define "aimem.dataLabel" -}}
aimem.dev/data-volume: {{ include "aimem.fullname" . }}
{{- end }}

{{/* The five services: values key, service name (DESIGN.md), module, port. */}}
{{- define "aimem.services" -}}
writer: {name: writer, module: aimem_writer, port: 8704}
ingress: {name: ingress, module: aimem_ingress, port: 8701}
query: {name: query, module: aimem_query, port: 8702}
mcpGateway: {name: mcp-gateway, module: aimem_mcp, port: 8703}
maintainer: {name: maintainer, module: aimem_maintainer, port: 8705}
{{- end }}

{{- define "aimem.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "aimem.secretName" -}}
{{- default (printf "%s-auth" (include "aimem.fullname" .)) .Values.auth.existingSecret }}
{{- end }}

{{- define "aimem.natsUrl" -}}
{{- if .Values.nats.enabled }}
{{- printf "nats://%s-nats:4222" (include "aimem.fullname" .) }}
{{- else }}
{{- required "nats.externalUrl is required when nats.enabled is false" .Values.nats.externalUrl }}
{{- end }}
{{- end }}

{{- define "aimem.dataClaim" -}}
{{- default (printf "%s-data" (include "aimem.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}
