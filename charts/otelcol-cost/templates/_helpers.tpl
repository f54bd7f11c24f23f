{{- define "otelcol-cost.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "otelcol-cost.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "otelcol-cost.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ include "otelcol-cost.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one tier: pass (dict "root" $ "component" "gateway"). */}}
{{- define "otelcol-cost.selectorLabels" -}}
app.kubernetes.io/name: {{ include "otelcol-cost.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "otelcol-cost.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "otelcol-cost.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "otelcol-cost.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{- define "otelcol-cost.samplerHeadless" -}}
{{ include "otelcol-cost.fullname" . }}-sampler-headless
{{- end -}}

{{- define "otelcol-cost.samplerHeadlessFQDN" -}}
{{ include "otelcol-cost.samplerHeadless" . }}.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}
{{- end -}}

{{/*
GOMEMLIMIT from a memory limit ("2Gi", "1536Mi", "2G", "1500M"): the given
percentage of it, in MiB. Fails clearly on a unit it cannot read.
*/}}
{{- define "otelcol-cost.goMemLimit" -}}
{{- printf "%sMiB" (include "otelcol-cost.softLimitMiB" .) -}}
{{- end -}}

{{/*
The given percentage of a memory limit ("2Gi", "1536Mi", "2G", "1500M"),
as a number of MiB. Fails clearly on a unit it cannot read.
*/}}
{{- define "otelcol-cost.softLimitMiB" -}}
{{- $limit := .limit | toString -}}
{{- $mib := 0 -}}
{{- if hasSuffix "Gi" $limit -}}{{- $mib = mul (trimSuffix "Gi" $limit | int) 1024 -}}
{{- else if hasSuffix "Mi" $limit -}}{{- $mib = trimSuffix "Mi" $limit | int -}}
{{- else if hasSuffix "G" $limit -}}{{- $mib = div (mul (trimSuffix "G" $limit | int) 1000000000) 1048576 -}}
{{- else if hasSuffix "M" $limit -}}{{- $mib = div (mul (trimSuffix "M" $limit | int) 1000000) 1048576 -}}
{{- else -}}{{- fail (printf "resources.limits.memory %q: use Gi, Mi, G or M" $limit) -}}
{{- end -}}
{{- div (mul $mib .percentage) 100 -}}
{{- end -}}

{{/* The pricing block, for span_cost and the sampler's budget. */}}
{{- define "otelcol-cost.pricing" -}}
preset: {{ .preset }}
{{- with .perGiBIngested }}
per_gib_ingested: {{ . }}
{{- end }}
{{- with .perMillionSpans }}
per_million_spans: {{ . }}
{{- end }}
{{- with .perGiBMonthStored }}
per_gib_month_stored: {{ . }}
{{- end }}
{{- with .retention }}
retention: {{ . }}
{{- end }}
{{- with .compressionRatio }}
compression_ratio: {{ . }}
{{- end }}
currency: {{ .currency }}
{{- end -}}

{{/* Internal telemetry and health, the same in both tiers. */}}
{{- define "otelcol-cost.telemetry" -}}
telemetry:
  logs:
    level: {{ .Values.logLevel }}
  metrics:
    level: detailed
    readers:
      - pull:
          exporter:
            prometheus:
              host: 0.0.0.0
              port: 8888
              # Pinned: type and unit suffixes (the series names the alerts and the
              # dashboard use).
              without_type_suffix: false
              without_units: false
{{- end -}}

{{/* Pod-level settings shared by both tiers: pass (dict "root" $ "tier" .Values.gateway "component" "gateway"). */}}
{{- define "otelcol-cost.podCommon" -}}
serviceAccountName: {{ include "otelcol-cost.serviceAccountName" .root }}
{{- with .tier.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- if .tier.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- range .tier.topologySpreadConstraints }}
  {{- $c := deepCopy . }}
  {{- if not (hasKey $c "labelSelector") }}
  {{- $_ := set $c "labelSelector" (dict "matchLabels" (include "otelcol-cost.selectorLabels" (dict "root" $.root "component" $.component) | fromYaml)) }}
  {{- end }}
  - {{- toYaml $c | nindent 4 }}
  {{- end }}
{{- end }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .tier.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tier.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tier.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Pod annotations: the config checksum and the tier's podAnnotations. */}}
{{- define "otelcol-cost.podAnnotations" -}}
checksum/config: {{ .checksum }}
{{- with .tier.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Env var names of the backend headers, in the order of their names. */}}
{{- define "otelcol-cost.headerEnv" -}}
OTELCOL_COST_BACKEND_HEADER_{{ . | upper | replace "-" "_" | replace "." "_" }}
{{- end -}}

{{/*
A tier's collector config: the shipped one (YAML text in .shipped),
deep-merged with the tier's `config` value.
*/}}
{{- define "otelcol-cost.mergedConfig" -}}
{{- $shipped := .shipped | fromYaml -}}
{{- if hasKey $shipped "Error" -}}{{- fail (printf "internal: shipped config does not parse: %s" $shipped.Error) -}}{{- end -}}
{{- toYaml (mustMergeOverwrite $shipped (deepCopy .tier.config)) -}}
{{- end -}}

{{/* The collector container: pass (dict "root" $ "tier" .Values.sampler "backendHeaders" true|false). */}}
{{- define "otelcol-cost.container" -}}
- name: otelcol-cost
  image: {{ include "otelcol-cost.image" .root }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  command:
    {{- toYaml .root.Values.image.command | nindent 4 }}
  args: ["--config", "/conf/config.yaml"]
  env:
    - name: GOMEMLIMIT
      value: {{ include "otelcol-cost.goMemLimit" (dict "limit" .tier.resources.limits.memory "percentage" (.root.Values.goMemLimitPercentage | int)) | quote }}
    {{- if .backendHeaders }}
    {{- range $header, $ref := .root.Values.backend.headers }}
    - name: {{ include "otelcol-cost.headerEnv" $header }}
      valueFrom:
        secretKeyRef: {name: {{ $ref.secretName }}, key: {{ $ref.secretKey }}}
    {{- end }}
    {{- end }}
    {{- if .handoff }}
    - name: POD_IP
      valueFrom:
        fieldRef: {fieldPath: status.podIP}
    {{- end }}
    {{- with .tier.extraEnvs }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .tier.extraEnvsFrom }}
  envFrom:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  ports:
    - {name: otlp-grpc, containerPort: 4317, protocol: TCP}
    - {name: otlp-http, containerPort: 4318, protocol: TCP}
    - {name: metrics, containerPort: 8888, protocol: TCP}
    - {name: health, containerPort: 13133, protocol: TCP}
    {{- if .handoff }}
    - {name: handoff, containerPort: {{ .handoff.port }}, protocol: TCP}
    {{- end }}
  {{- if and .handoff .handoff.preStopSeconds }}
  # Serve while the gateways and peers re-resolve the Service without this
  # pod; SIGTERM then hands the rest of the buffer over.
  lifecycle:
    preStop:
      sleep: {seconds: {{ .handoff.preStopSeconds }}}
  {{- end }}
  livenessProbe:
    httpGet: {path: /, port: health}
    initialDelaySeconds: 5
    periodSeconds: 10
  readinessProbe:
    httpGet: {path: /, port: health}
    periodSeconds: 5
  resources:
    {{- toYaml .tier.resources | nindent 4 }}
  securityContext:
    {{- toYaml .root.Values.securityContext | nindent 4 }}
  volumeMounts:
    - {name: config, mountPath: /conf, readOnly: true}
    {{- if .state }}
    - {name: state, mountPath: /var/lib/otelcol-cost}
    {{- end }}
    {{- if .policy }}
    # A directory, not a subPath: the kubelet updates it in place.
    - {name: policy, mountPath: /etc/otelcol-cost/policy, readOnly: true}
    {{- end }}
    {{- with .tier.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/* Whole seconds of a duration written as <n>s, <n>m or <n>h. */}}
{{- define "otelcol-cost.seconds" -}}
{{- $d := . | toString -}}
{{- if regexMatch "^[0-9]+s$" $d -}}{{ trimSuffix "s" $d }}
{{- else if regexMatch "^[0-9]+m$" $d -}}{{ mul (trimSuffix "m" $d | int) 60 }}
{{- else if regexMatch "^[0-9]+h$" $d -}}{{ mul (trimSuffix "h" $d | int) 3600 }}
{{- else -}}{{ fail (printf "duration %q: write it as <n>s, <n>m or <n>h" $d) }}
{{- end -}}
{{- end -}}

{{/* Seconds a terminating sampler has to hand its buffer over: the grace
period after the preStop sleep, less 10 s for deciding what is left. */}}
{{- define "otelcol-cost.handoffShutdownSeconds" -}}
{{- $grace := include "otelcol-cost.samplerGrace" . | int -}}
{{- max 5 (sub (sub $grace .Values.sampler.handoff.preStopSeconds) 10) -}}
{{- end -}}

{{/* The samplers' termination grace period: decision_wait + 30 s unless set. */}}
{{- define "otelcol-cost.samplerGrace" -}}
{{- $grace := .Values.sampler.terminationGracePeriodSeconds | int -}}
{{- if eq $grace 0 -}}
{{- $grace = add (include "otelcol-cost.seconds" .Values.sampler.decisionWait | int) 30 -}}
{{- if .Values.sampler.handoff.enabled -}}{{- $grace = add $grace .Values.sampler.handoff.preStopSeconds -}}{{- end -}}
{{- end -}}
{{- $grace -}}
{{- end -}}

{{/* The budget's kind: the first of the three set above zero. */}}
{{- define "otelcol-cost.budgetKind" -}}
{{- if gt (float64 .Values.budget.spansPerSecond) 0.0 -}}
spans_per_second
{{- else if gt (float64 .Values.budget.bytesPerSecond) 0.0 -}}
bytes_per_second
{{- else -}}
monthly_cost
{{- end -}}
{{- end -}}

{{/* "true" when the sampler's rare is on (an interval other than zero). */}}
{{- define "otelcol-cost.rareOn" -}}
{{- if not (has (toString .Values.sampler.rare.interval) (list "" "0" "0s" "0m" "0h")) }}true{{ end -}}
{{- end -}}
