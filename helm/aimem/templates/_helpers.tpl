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
{{- $fullname := include "aimem.fullname" . }}
{{- if and .Values.nats.enabled (gt (int .Values.nats.cluster.replicas) 1) }}
{{- $urls := list }}
{{- range $i := until (int .Values.nats.cluster.replicas) }}
{{- $urls = append $urls (printf "nats://%s-nats-%d.%s-nats-headless:4222" $fullname $i $fullname) }}
{{- end }}
{{- join "," $urls }}
{{- else if .Values.nats.enabled }}
{{- printf "nats://%s-nats:4222" $fullname }}
{{- else }}
{{- required "nats.externalUrl is required when nats.enabled is false" .Values.nats.externalUrl }}
{{- end }}
{{- end }}

{{- define "aimem.dataClaim" -}}
{{- default (printf "%s-data" (include "aimem.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{/* The Secret holding the replication credentials (git-remote, AWS_*), per kind. */}}
{{- define "aimem.gitSecret" -}}
{{- default (printf "%s-replication" (include "aimem.fullname" .)) .Values.replication.git.existingSecret }}
{{- end }}
{{- define "aimem.s3Secret" -}}
{{- default (printf "%s-replication" (include "aimem.fullname" .)) .Values.replication.litestream.existingSecret }}
{{- end }}

{{/* Environment of the writer (and its restore init container) for off-node replication. */}}
{{- define "aimem.replicationEnv" -}}
{{- $r := .Values.replication }}
{{- if $r.git.remote }}
- name: AIMEM_REPLICATION__GIT_REMOTE
  valueFrom:
    secretKeyRef: {name: {{ include "aimem.gitSecret" . }}, key: git-remote}
- name: AIMEM_REPLICATION__GIT_BRANCH
  value: {{ $r.git.branch | quote }}
{{- else if $r.git.existingSecret }}
- name: AIMEM_REPLICATION__GIT_REMOTE
  valueFrom:
    secretKeyRef: {name: {{ $r.git.existingSecret }}, key: git-remote}
- name: AIMEM_REPLICATION__GIT_BRANCH
  value: {{ $r.git.branch | quote }}
{{- end }}
{{- if $r.litestream.enabled }}
- name: AIMEM_REPLICATION__S3_BUCKET
  value: {{ $r.litestream.bucket | quote }}
- name: AIMEM_REPLICATION__S3_PATH
  value: {{ $r.litestream.path | quote }}
- name: AIMEM_REPLICATION__S3_REGION
  value: {{ $r.litestream.region | quote }}
- name: AIMEM_REPLICATION__S3_ENDPOINT
  value: {{ $r.litestream.endpoint | quote }}
- name: AIMEM_REPLICATION__S3_FORCE_PATH_STYLE
  value: {{ $r.litestream.forcePathStyle | quote }}
- name: AIMEM_REPLICATION__SYNC_INTERVAL_S
  value: {{ $r.litestream.syncIntervalSeconds | quote }}
{{- if or $r.litestream.accessKeyId $r.litestream.existingSecret }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef: {name: {{ include "aimem.s3Secret" . }}, key: AWS_ACCESS_KEY_ID}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef: {name: {{ include "aimem.s3Secret" . }}, key: AWS_SECRET_ACCESS_KEY}
{{- end }}
{{- end }}
{{- end }}
