{{/* The release's names and labels. */}}
{{- define "firstword.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "firstword.fullname" -}}
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

{{- define "firstword.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "firstword.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "firstword.selectorLabels" -}}
app.kubernetes.io/name: {{ include "firstword.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "firstword.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "firstword.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret the pods read their environment from, or "". */}}
{{- define "firstword.secretName" -}}
{{- if .Values.existingSecret }}
{{- .Values.existingSecret }}
{{- else if .Values.secrets }}
{{- include "firstword.fullname" . }}
{{- end }}
{{- end }}

{{/* terminationGracePeriodSeconds: preStop sleep + shutdown_delay + shutdown_timeout + margin, or the override (which must exceed the first three). */}}
{{- define "firstword.gracePeriod" -}}
{{- $s := .Values.shutdown }}
{{- $needed := add $s.preStopSleepSeconds $s.delaySeconds $s.timeoutSeconds }}
{{- if $s.terminationGracePeriodSeconds }}
{{- if le (int $s.terminationGracePeriodSeconds) (int $needed) }}
{{- fail (printf "shutdown.terminationGracePeriodSeconds (%v) must be above preStopSleepSeconds + delaySeconds + timeoutSeconds (%v), or Kubernetes kills streams shutdown_timeout lets run" $s.terminationGracePeriodSeconds $needed) }}
{{- end }}
{{- $s.terminationGracePeriodSeconds }}
{{- else }}
{{- add $needed $s.marginSeconds }}
{{- end }}
{{- end }}

{{/* firstword.yaml: the user's config with the keys the chart owns. */}}
{{- define "firstword.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) }}
{{- range $key := list "listen" "shutdown_timeout" "shutdown_delay" }}
{{- if hasKey $cfg $key }}
{{- fail (printf "config.%s is set by the chart (port, shutdown.*): remove it from config" $key) }}
{{- end }}
{{- end }}
{{- range $section := list "store" "cache" "resume" }}
{{- if dig $section "url" "" $cfg }}
{{- fail (printf "config.%s.url would put a connection URL (and its password) in a ConfigMap: set config.%s.url_env to a variable name and give its value in secrets or existingSecret" $section $section) }}
{{- end }}
{{- end }}
{{- if dig "metrics" "listen" "" $cfg }}
{{- fail "config.metrics.listen is set by the chart (metrics.port): remove it from config" }}
{{- end }}
{{- include "firstword.refuseLiteralSecrets" $cfg }}
{{- $_ := set $cfg "listen" (printf "0.0.0.0:%v" .Values.port) }}
{{- if include "firstword.metricsOn" . }}
{{- $m := deepCopy (dig "metrics" dict $cfg | default dict) }}
{{- $_ := set $m "listen" (printf "0.0.0.0:%v" .Values.metrics.port) }}
{{- $_ := set $cfg "metrics" $m }}
{{- end }}
{{- $_ := set $cfg "shutdown_timeout" (printf "%vs" .Values.shutdown.timeoutSeconds) }}
{{- $_ := set $cfg "shutdown_delay" (printf "%vs" .Values.shutdown.delaySeconds) }}
{{- toYaml $cfg }}
{{- end }}

{{/* Refuse settings that cannot work: replicas that would not share state. */}}
{{- define "firstword.validate" -}}
{{- $cfg := .Values.config | default dict }}
{{- if include "firstword.fleet" . }}
{{- $store := dig "store" "driver" "sqlite" $cfg }}
{{- if ne $store "postgres" }}
{{- fail (printf "replicaCount > 1 or autoscaling.enabled needs config.store.driver postgres (it is %s): with SQLite each replica would keep its own conversations and keys" $store) }}
{{- end }}
{{- $journal := dig "resume" "journal" "memory" $cfg }}
{{- if ne $journal "redis" }}
{{- fail (printf "replicaCount > 1 or autoscaling.enabled needs config.resume.journal redis (it is %s): with a memory journal an answer cannot be resumed or stopped on another replica" $journal) }}
{{- end }}
{{- if .Values.persistence.existingClaim }}
{{- fail "persistence.existingClaim is for one replica on SQLite; replicas share PostgreSQL instead" }}
{{- end }}
{{- end }}
{{- range $key := list "timeoutSeconds" "delaySeconds" "preStopSleepSeconds" "marginSeconds" "terminationGracePeriodSeconds" }}
{{- $v := index $.Values.shutdown $key }}
{{- if not (and (eq $key "terminationGracePeriodSeconds") (kindIs "invalid" $v)) }}
{{- if not (or (kindIs "int" $v) (kindIs "int64" $v) (and (kindIs "float64" $v) (eq (float64 $v) (floor $v)))) }}
{{- fail (printf "shutdown.%s must be a whole number of seconds, like 30 (it is %q): the chart adds the unit" $key (toString $v)) }}
{{- end }}
{{- if lt (int64 $v) 0 }}
{{- fail (printf "shutdown.%s must not be negative (it is %v)" $key $v) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.secrets .Values.existingSecret }}
{{- fail "set secrets or existingSecret, not both" }}
{{- end }}
{{- if dig "generate" false (get .Values "adminKey" | default dict) }}
{{- fail (printf "adminKey.generate is gone: the key it made changed on every helm template (Argo CD, Flux). Put FIRSTWORD_ADMIN_KEY in existingSecret (or secrets); to keep the key an earlier install made, copy it there from the Secret %s-admin-key before upgrading" (include "firstword.fullname" . | trunc 53 | trimSuffix "-")) }}
{{- end }}
{{- if include "firstword.metricsOn" . }}
{{- if eq (int .Values.metrics.port) (int .Values.port) }}
{{- fail (printf "metrics.port (%v) must differ from port: /metrics is served on a port of its own, which the Ingress never routes" .Values.metrics.port) }}
{{- end }}
{{- else if or .Values.metrics.serviceMonitor.enabled .Values.metrics.prometheusRule.enabled }}
{{- fail "metrics.serviceMonitor and metrics.prometheusRule need /metrics: config.metrics.enabled is false" }}
{{- end }}
{{- if include "firstword.statefulSet" . }}
{{- $spill := toString (dig "usage" "spill_path" "" $cfg) }}
{{- if and (hasPrefix "/" $spill) (not (hasPrefix "/data/" $spill)) }}
{{- fail (printf "config.usage.spill_path %s is outside /data, the volume that outlives the pod: leave it unset (firstword-usage.spill in /data) or put it under /data/" $spill) }}
{{- end }}
{{- end }}
{{- end }}

{{/* "true" with more than one replica (replicaCount > 1 or autoscaling). */}}
{{- define "firstword.fleet" -}}
{{- if or (gt (int .Values.replicaCount) 1) .Values.autoscaling.enabled }}true{{ end }}
{{- end }}

{{/* "true" when the pods are a StatefulSet: a fleet whose /data (the usage spill file) is a claim per pod. */}}
{{- define "firstword.statefulSet" -}}
{{- if and (include "firstword.fleet" .) .Values.persistence.spillClaim.enabled }}true{{ end }}
{{- end }}

{{/* The Service /metrics is on; Prometheus Operator names the scrape job after it. */}}
{{- define "firstword.metricsServiceName" -}}
{{- include "firstword.fullname" . | trunc 55 | trimSuffix "-" }}-metrics
{{- end }}

{{/* "true" unless config.metrics.enabled is false. */}}
{{- define "firstword.metricsOn" -}}
{{- if dig "metrics" "enabled" true (.Values.config | default dict) }}true{{ end }}
{{- end }}

{{/* Fail on secrets written into the config (it becomes a ConfigMap): an
api_key, a header value that reads no ${NAME}, a URL with user info or
a literal query value ({{user}}-style placeholders are fine). */}}
{{- define "firstword.refuseLiteralSecrets" -}}
{{- $cfg := . }}
{{- $outbound := list }}
{{- range $name, $p := ($cfg.providers | default dict) }}
{{- if and $p (hasKey $p "api_key") }}
{{- fail (printf "config.providers.%s.api_key would put the key in a ConfigMap: set api_key_env to a variable name and give its value in secrets or existingSecret" $name) }}
{{- end }}
{{- if $p }}
{{- $outbound = append $outbound (dict "where" (printf "config.providers.%s" $name) "url" (dig "base_url" "" $p) "urlKey" "base_url" "headers" (dig "headers" dict $p)) }}
{{- end }}
{{- end }}
{{- with (dig "guard" "http" nil $cfg) }}
{{- $outbound = append $outbound (dict "where" "config.guard.http" "url" (dig "url" "" .) "urlKey" "url" "headers" (dig "headers" dict .)) }}
{{- end }}
{{- range $i, $l := (dig "sources" "lookups" list $cfg) }}
{{- $outbound = append $outbound (dict "where" (printf "config.sources.lookups[%d]" $i) "url" (dig "url" "" $l) "urlKey" "url" "headers" (dig "headers" dict $l)) }}
{{- end }}
{{- with $cfg.tracing }}
{{- $outbound = append $outbound (dict "where" "config.tracing" "url" (dig "endpoint" "" .) "urlKey" "endpoint" "headers" (dig "headers" dict .)) }}
{{- end }}
{{- range $outbound }}
{{- $url := toString .url }}
{{- if regexMatch "^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@" $url }}
{{- fail (printf "%s.%s has user info (user:password@) and would put it in a ConfigMap: give credentials in a header that reads a variable, e.g. Authorization: \"Bearer ${TOKEN}\", with its value in secrets or existingSecret" .where .urlKey) }}
{{- end }}
{{- if regexMatch "[?&][^=&#]+=[^&#]" (regexReplaceAll "\\{\\{[a-z]+\\}\\}" $url "") }}
{{- fail (printf "%s.%s has a query string, which would put what it carries (often a token) in a ConfigMap: give it in a header that reads a variable (${NAME}) instead" .where .urlKey) }}
{{- end }}
{{- $where := .where }}
{{- range $h, $v := .headers }}
{{- if not (regexMatch "\\$\\{[A-Za-z_][A-Za-z0-9_]*\\}" (toString $v)) }}
{{- fail (printf "%s.headers.%s is written out, so it would be in a ConfigMap: write \"${NAME}\" (or e.g. \"Bearer ${NAME}\") and give NAME's value in secrets or existingSecret" $where $h) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
