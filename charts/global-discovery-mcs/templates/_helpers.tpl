{{- define "gdmcs.labels" -}}
app.kubernetes.io/part-of: global-discovery-mcs
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{- define "gdmcs.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The registry URLs the controller dials, with the chart's checks. */}}
{{- define "gdmcs.registryUrls" -}}
{{- $urls := .Values.controller.registryUrls -}}
{{- if not $urls -}}
{{- if not .Values.registry.enabled -}}
{{- fail "controller.registryUrls: required when registry.enabled=false (the controller must know the registry's gRPC URL)" -}}
{{- end -}}
{{- $scheme := ternary "https" "http" (ne .Values.registry.tls.secretName "") -}}
{{- $urls = list (printf "%s://mcs-registry.%s.svc:%v" $scheme .Release.Namespace .Values.registry.service.grpcPort) -}}
{{- end -}}
{{- range $urls -}}
{{- if and (hasPrefix "http://" .) (not $.Values.controller.registryAllowInsecureHttp) -}}
{{- fail (printf "controller.registryUrls: %q is plaintext http://; use an https:// URL, or set controller.registryAllowInsecureHttp=true to allow it" .) -}}
{{- end -}}
{{- end -}}
{{- join "," $urls -}}
{{- end }}
