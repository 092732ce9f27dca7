{{/*
Names. Kubernetes names are DNS labels: at most 63 characters, so the full name is cut to
leave room for the longest component suffix ("-spark-connect", 14 characters).
*/}}
{{- define "hudi-sink.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hudi-sink.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 49 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 49 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 49 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "<fullname>-<component>"; call with (dict "root" $ "component" "coordinator"). */}}
{{- define "hudi-sink.componentName" -}}
{{- printf "%s-%s" (include "hudi-sink.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hudi-sink.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels: stable across upgrades (no version, no chart). */}}
{{- define "hudi-sink.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hudi-sink.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Every object's labels; call with (dict "root" $ "component" "…"). */}}
{{- define "hudi-sink.labels" -}}
helm.sh/chart: {{ include "hudi-sink.chart" .root }}
{{ include "hudi-sink.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: {{ include "hudi-sink.name" .root }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
metadata shared by every object; call with
(dict "root" $ "component" "…" "name" "…" ["annotations" (dict …)]).
*/}}
{{- define "hudi-sink.metadata" -}}
name: {{ .name }}
namespace: {{ .root.Release.Namespace }}
labels:
  {{- include "hudi-sink.labels" . | nindent 2 }}
{{- with merge (dict) (.annotations | default dict) .root.Values.commonAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "hudi-sink.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hudi-sink.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image: a digest pins it; the tag defaults to appVersion; "latest" is refused. */}}
{{- define "hudi-sink.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag | toString -}}
{{- if eq $tag "latest" -}}
{{- fail "image.tag: \"latest\" is not allowed; pin a version (default: the chart's appVersion)" -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "hudi-sink.adminSecretName" -}}
{{- default (printf "%s-admin" (include "hudi-sink.fullname" .)) .Values.admin.existingSecret -}}
{{- end -}}

{{- define "hudi-sink.claimName" -}}
{{- default (printf "%s-table" (include "hudi-sink.fullname" .)) .Values.persistence.existingClaim -}}
{{- end -}}

{{- define "hudi-sink.sparkConnectUrl" -}}
{{- printf "sc://%s:%d" (include "hudi-sink.componentName" (dict "root" . "component" "spark-connect")) (int .Values.sparkConnect.port) -}}
{{- end -}}

{{/*
A Kubernetes memory quantity in MiB (integer, rounded down): Ki Mi Gi Ti (binary), k M G T
(decimal) or plain bytes. Fractions ("1.5Gi") are accepted.
*/}}
{{- define "hudi-sink.mebibytes" -}}
{{- $q := toString . -}}
{{- $units := list (list "Ki" 1024.0) (list "Mi" 1048576.0) (list "Gi" 1073741824.0) (list "Ti" 1099511627776.0) (list "k" 1000.0) (list "K" 1000.0) (list "M" 1000000.0) (list "G" 1000000000.0) (list "T" 1000000000000.0) -}}
{{- $bytes := -1.0 -}}
{{- range $units -}}
{{- if and (lt $bytes 0.0) (hasSuffix (index . 0) $q) -}}
{{- $bytes = mulf (float64 (trimSuffix (index . 0) $q)) (index . 1) -}}
{{- end -}}
{{- end -}}
{{- if lt $bytes 0.0 -}}
{{- if not (regexMatch "^[0-9]+(\\.[0-9]+)?$" $q) -}}
{{- fail (printf "cannot read the memory quantity %q (use e.g. 4Gi, 4096Mi)" $q) -}}
{{- end -}}
{{- $bytes = float64 $q -}}
{{- end -}}
{{- floor (divf $bytes 1048576.0) | int64 -}}
{{- end -}}

{{/*
spark.driver.memory from a container memory limit: (limit − reserve) × fraction, in MiB.
Call with (dict "limit" "4Gi" "reserve" "1Gi" "fraction" 0.6 "what" "participant").
*/}}
{{- define "hudi-sink.heapMebibytes" -}}
{{- if not .limit -}}
{{- fail (printf "%s.resources.limits.memory is required: spark.driver.memory is derived from it" .what) -}}
{{- end -}}
{{- $limit := include "hudi-sink.mebibytes" .limit | int64 -}}
{{- $reserve := include "hudi-sink.mebibytes" .reserve | int64 -}}
{{- $heap := floor (mulf (float64 (sub $limit $reserve)) (float64 .fraction)) | int64 -}}
{{- if lt $heap 512 -}}
{{- fail (printf "%s: limits.memory %s leaves a Spark heap of %dMi (< 512Mi) after the %s reserve; raise the limit" .what (toString .limit) $heap (toString .reserve)) -}}
{{- end -}}
{{- $heap -}}
{{- end -}}

{{- define "hudi-sink.participantHeap" -}}
{{- $p := .Values.participant -}}
{{- include "hudi-sink.heapMebibytes" (dict "limit" (($p.resources).limits).memory "reserve" $p.spark.pythonReserve "fraction" $p.spark.heapFraction "what" "participant") -}}
{{- end -}}

{{- define "hudi-sink.sparkConnectHeap" -}}
{{- $s := .Values.sparkConnect -}}
{{- include "hudi-sink.heapMebibytes" (dict "limit" (($s.resources).limits).memory "reserve" $s.spark.reserve "fraction" $s.spark.heapFraction "what" "sparkConnect") -}}
{{- end -}}

{{/*
The sink's YAML config: .Values.config plus what the chart owns (admin, Kafka security,
Spark master and driver memory). Keys the chart owns are refused in .Values.config so a
value can never silently lose to the chart.
*/}}
{{- define "hudi-sink.sinkConfig" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- if hasKey $cfg "admin" -}}
{{- fail "config.admin is set by the chart: use admin.port and admin.existingSecret" -}}
{{- end -}}
{{- $kafka := get $cfg "kafka" | default dict -}}
{{- range list "security_protocol" "sasl_mechanism" "sasl_plain_username" "sasl_plain_password" "ssl_cafile" "ssl_certfile" "ssl_keyfile" -}}
{{- if hasKey $kafka . -}}
{{- fail (printf "config.kafka.%s is set by the chart: use kafka.securityProtocol, kafka.sasl.* and kafka.tls.* (secrets come from existing Secrets)" .) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $kafka "security_protocol" .Values.kafka.securityProtocol -}}
{{- if hasPrefix "SASL" .Values.kafka.securityProtocol -}}
{{- if not .Values.kafka.sasl.mechanism -}}
{{- fail "kafka.sasl.mechanism is required when kafka.securityProtocol is SASL_*" -}}
{{- end -}}
{{- if not .Values.kafka.sasl.existingSecret -}}
{{- fail "kafka.sasl.existingSecret is required when kafka.securityProtocol is SASL_* (the password is never a value)" -}}
{{- end -}}
{{- $_ := set $kafka "sasl_mechanism" .Values.kafka.sasl.mechanism -}}
{{- if .Values.kafka.sasl.username -}}
{{- $_ := set $kafka "sasl_plain_username" .Values.kafka.sasl.username -}}
{{- end -}}
{{- end -}}
{{- if .Values.kafka.tls.existingSecret -}}
{{- if not (hasSuffix "SSL" .Values.kafka.securityProtocol) -}}
{{- fail "kafka.tls.existingSecret needs kafka.securityProtocol SSL or SASL_SSL" -}}
{{- end -}}
{{- if .Values.kafka.tls.caKey -}}
{{- $_ := set $kafka "ssl_cafile" (printf "/etc/hudi-sink/kafka-tls/%s" .Values.kafka.tls.caKey) -}}
{{- end -}}
{{- if and .Values.kafka.tls.certKey .Values.kafka.tls.keyKey -}}
{{- $_ := set $kafka "ssl_certfile" (printf "/etc/hudi-sink/kafka-tls/%s" .Values.kafka.tls.certKey) -}}
{{- $_ := set $kafka "ssl_keyfile" (printf "/etc/hudi-sink/kafka-tls/%s" .Values.kafka.tls.keyKey) -}}
{{- else if or .Values.kafka.tls.certKey .Values.kafka.tls.keyKey -}}
{{- fail "kafka.tls.certKey and kafka.tls.keyKey go together (mutual TLS)" -}}
{{- end -}}
{{- end -}}
{{- $_ := set $cfg "kafka" $kafka -}}
{{- $_ := set $cfg "admin" (dict "host" "0.0.0.0" "port" (int .Values.admin.port)) -}}
{{- $spark := get $cfg "spark" | default dict -}}
{{- $conf := get $spark "conf" | default dict -}}
{{- if hasKey $conf "spark.driver.memory" -}}
{{- fail "config.spark.conf.spark.driver.memory is derived from participant.resources.limits.memory (see participant.spark); set the limit instead" -}}
{{- end -}}
{{- if .Values.sparkConnect.enabled -}}
{{- $_ := set $spark "master" (include "hudi-sink.sparkConnectUrl" .) -}}
{{- else -}}
{{- $_ := set $conf "spark.driver.memory" (printf "%sm" (include "hudi-sink.participantHeap" .)) -}}
{{- $_ := set $conf "spark.local.dir" "/tmp/spark" -}}
{{- end -}}
{{- $_ := set $spark "conf" $conf -}}
{{- $_ := set $cfg "spark" $spark -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* Environment every hudi-sink container gets. */}}
{{- define "hudi-sink.env" -}}
- name: HUDI_SINK__ADMIN__TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "hudi-sink.adminSecretName" . }}
      key: {{ .Values.admin.existingSecretKey }}
{{- if hasPrefix "SASL" .Values.kafka.securityProtocol }}
- name: HUDI_SINK__KAFKA__SASL_PLAIN_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.kafka.sasl.existingSecret }}
      key: {{ .Values.kafka.sasl.passwordKey }}
{{- end }}
- name: HOME
  value: /tmp
- name: PYTHONDONTWRITEBYTECODE
  value: "1"
- name: PYTHONUNBUFFERED
  value: "1"
- name: SPARK_LOCAL_IP
  value: 127.0.0.1
{{- end -}}

{{/* preStop: the sleep action from Kubernetes 1.30 on, an exec'd sleep before. */}}
{{- define "hudi-sink.preStop" -}}
{{- if semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version -}}
sleep:
  seconds: {{ .Values.preStopSleepSeconds }}
{{- else -}}
exec:
  command: ["sleep", "{{ .Values.preStopSleepSeconds }}"]
{{- end -}}
{{- end -}}
