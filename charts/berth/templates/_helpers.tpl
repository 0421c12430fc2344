{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "berth.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Prefix of every resource name. Cluster-scoped objects (ClusterRoles, ClusterRoleBindings) are
named after it too, so two releases in one cluster need different release names.
*/}}
{{- define "berth.fullname" -}}
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

{{/* <fullname>-<component>, within 63 characters. Usage: include "berth.componentName" (list . "operator") */}}
{{- define "berth.componentName" -}}
{{- $root := index . 0 }}
{{- printf "%s-%s" (include "berth.fullname" $root | trunc (int (sub 62 (len (index . 1))))) (index . 1) | trimSuffix "-" }}
{{- end }}

{{- define "berth.operator.fullname" -}}{{ include "berth.componentName" (list . "operator") }}{{- end }}
{{- define "berth.api.fullname" -}}{{ include "berth.componentName" (list . "api") }}{{- end }}
{{/* The Secret of the API's internal TLS certificate (api.internalTls): tls.crt, tls.key and the CA's ca.crt. */}}
{{- define "berth.api.internalTlsSecret" -}}{{ include "berth.componentName" (list . "api-internal-tls") }}{{- end }}

{{/* The API's public URL (BERTH_PUBLIC_URL, without /api/v1): api.config.publicUrl, else from the
API's Ingress (https with its TLS, its host and path), else empty. */}}
{{- define "berth.api.publicUrl" -}}
{{- $api := .Values.api -}}
{{- if $api.config.publicUrl -}}{{ trimSuffix "/" $api.config.publicUrl }}
{{- else if and $api.ingress.enabled $api.ingress.host -}}{{ ternary "https" "http" $api.ingress.tls.enabled }}://{{ $api.ingress.host }}{{ trimSuffix "/" $api.ingress.path }}
{{- end -}}
{{- end }}

{{- define "berth.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "berth.labels" -}}
helm.sh/chart: {{ include "berth.chart" . }}
app.kubernetes.io/part-of: berth
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
{{- end }}

{{/* Selector labels of a component. Usage: include "berth.selectorLabels" (list . "api") */}}
{{- define "berth.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "berth.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* All labels of a component's objects. Usage: include "berth.componentLabels" (list . "api") */}}
{{- define "berth.componentLabels" -}}
{{ include "berth.labels" (index . 0) }}
{{ include "berth.selectorLabels" . }}
{{- end }}

{{/* image reference: repository@digest, or repository:tag (tag defaulting to appVersion). */}}
{{- define "berth.image" -}}
{{- $image := index . 0 }}
{{- $root := index . 1 }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository (default $root.Chart.AppVersion $image.tag) }}
{{- end }}
{{- end }}

{{/* The Secret and key holding DATABASE_URL. */}}
{{- define "berth.database.secretName" -}}
{{- if .Values.database.existingSecret }}
{{- .Values.database.existingSecret }}
{{- else }}
{{- include "berth.componentName" (list . "database") }}
{{- end }}
{{- end }}

{{/* Env entry DATABASE_URL from a Secret. Usage: include "berth.database.env" (list . secretName) */}}
{{- define "berth.database.env" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ index . 1 }}
      key: {{ (index . 0).Values.database.existingSecretKey }}
{{- end }}

{{/* Pod security context: non-root, RuntimeDefault seccomp ("restricted" Pod Security Standard). */}}
{{- define "berth.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.securityContext.runAsUser }}
runAsGroup: {{ .Values.securityContext.runAsGroup }}
{{- with .Values.securityContext.fsGroup }}
fsGroup: {{ . }}
{{- end }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Container security context: no escalation, no capabilities, read-only root filesystem. */}}
{{- define "berth.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* "true"/"false" as a quoted env value. */}}
{{- define "berth.bool" -}}
{{- ternary "true" "false" (eq (toString .) "true") | quote }}
{{- end }}

{{/* Scheduling fields of a component's pod spec. Usage: include "berth.scheduling" .Values.api */}}
{{- define "berth.scheduling" -}}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
BERTH_WORKSPACE_NETWORK as JSON: workspaces.network, with the egress every workspace pod needs
added in front of workspaces.network.egressTo: cluster DNS, and this release's API pods (the
governance API the pods' toolkit reaches through its Service).
*/}}
{{- define "berth.workspaceNetwork" -}}
{{- $n := .Values.workspaces.network -}}
{{- $dns := dict "to" $n.dns "ports" (list (dict "protocol" "UDP" "port" 53) (dict "protocol" "TCP" "port" 53)) -}}
{{- $apiPeer := dict "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" .Release.Namespace)) "podSelector" (dict "matchLabels" (include "berth.selectorLabels" (list . "api") | fromYaml)) -}}
{{- $api := dict "to" (list $apiPeer) "ports" (list (dict "protocol" "TCP" "port" (.Values.api.config.port | int))) -}}
{{- $out := dict "enabled" $n.enabled "ingressFrom" $n.ingressFrom "egressTo" (concat (list $dns $api) $n.egressTo) "buildEgressTo" $n.buildEgressTo -}}
{{- if kindIs "slice" $n.outside }}{{ $_ := set $out "outside" $n.outside }}{{ end -}}
{{- toJson $out -}}
{{- end }}
