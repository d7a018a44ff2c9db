{{/*
The prefix of every object's name. By default "mcs", the manual's names (deployment/mcs-registry,
mcs-registry.<namespace>.svc, deployment/mcs-controller); fullnameOverride replaces it, and
nameOverride makes it <release>-<nameOverride>, so two releases can share a namespace.
*/}}
{{- define "gdmcs.prefix" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if .Values.nameOverride -}}
{{- printf "%s-%s" .Release.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
mcs
{{- end -}}
{{- end }}

{{- define "gdmcs.registryName" -}}{{ include "gdmcs.prefix" . }}-registry{{- end }}

{{- define "gdmcs.controllerName" -}}{{ include "gdmcs.prefix" . }}-controller{{- end }}

{{/* The PrometheusRule and dashboard: "global-discovery-mcs" unless the names are overridden. */}}
{{- define "gdmcs.monitoringName" -}}
{{- if or .Values.fullnameOverride .Values.nameOverride -}}{{ include "gdmcs.prefix" . }}{{- else -}}global-discovery-mcs{{- end -}}
{{- end }}

{{/* The controller's leader-election Lease (by default the binary's own default name). */}}
{{- define "gdmcs.leaderElectionId" -}}{{ include "gdmcs.controllerName" . }}.multicluster.dynamo.nvidia.com{{- end }}

{{- define "gdmcs.labels" -}}
app.kubernetes.io/part-of: global-discovery-mcs
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
{{- end }}

{{- define "gdmcs.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The registry URLs the controller dials, with the chart's checks. */}}
{{/*
gdmcs.registryInsecure is "true" when the controller may dial http:// URLs: only with
controller.registryAllowInsecureHttp, even for this release's own registry Service (the
user manual: the chart refuses the plaintext URL otherwise).
*/}}
{{- define "gdmcs.registryInsecure" -}}
{{- if .Values.controller.registryAllowInsecureHttp -}}
true
{{- end -}}
{{- end }}

{{- define "gdmcs.registryUrls" -}}
{{- $urls := .Values.controller.registryUrls -}}
{{- if not $urls -}}
{{- if not .Values.registry.enabled -}}
{{- fail "controller.registryUrls: required when registry.enabled=false (the controller must know the registry's gRPC URL)" -}}
{{- end -}}
{{- $scheme := ternary "https" "http" (ne .Values.registry.tls.secretName "") -}}
{{- $urls = list (printf "%s://%s.%s.svc:%v" $scheme (include "gdmcs.registryName" .) .Release.Namespace .Values.registry.service.grpcPort) -}}
{{- if and (eq $scheme "http") (not (include "gdmcs.registryInsecure" .)) -}}
{{- fail (printf "controller.registryAllowInsecureHttp: the controller dials this release's registry in plaintext (%s, as registry.tls.secretName is empty); set controller.registryAllowInsecureHttp=true, or serve TLS with registry.tls.secretName" (first $urls)) -}}
{{- end -}}
{{- end -}}
{{- range $urls -}}
{{- if and (hasPrefix "http://" .) (not (include "gdmcs.registryInsecure" $)) -}}
{{- fail (printf "controller.registryUrls: %q is plaintext http://; use an https:// URL, or set controller.registryAllowInsecureHttp=true to allow it" .) -}}
{{- end -}}
{{- end -}}
{{- join "," $urls -}}
{{- end }}

{{/* The ServiceAccount name of a component ("registry" or "controller"). */}}
{{- define "gdmcs.serviceAccountName" -}}
{{- $c := index .root.Values .component -}}
{{- $c.serviceAccount.name | default (printf "%s-%s" (include "gdmcs.prefix" .root) .component) -}}
{{- end }}

{{/* The annotations of a component's ServiceAccount: the chart-wide ones and its own. */}}
{{- define "gdmcs.serviceAccountAnnotations" -}}
{{- $c := index .root.Values .component -}}
{{- $a := merge (deepCopy ($c.serviceAccount.annotations | default dict)) (.root.Values.serviceAccount.annotations | default dict) -}}
{{- with $a }}{{ toYaml . }}{{ end -}}
{{- end }}

{{/* Pod-level settings of a component: priority class, topology spread. */}}
{{- define "gdmcs.podSpecExtras" -}}
{{- $c := index .root.Values .component -}}
{{- with $c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $c.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
