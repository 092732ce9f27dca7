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

{{- define "hudi-sink.sparkConnectSecretName" -}}
{{- default (printf "%s-spark-connect" (include "hudi-sink.fullname" .)) .Values.sparkConnect.auth.existingSecret -}}
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
{{- include "hudi-sink.refuseSecretsInConfig" . -}}
{{- $cfg := deepCopy .Values.config -}}
{{- if hasKey $cfg "admin" -}}
{{- fail "config.admin is set by the chart: use admin.port and admin.existingSecret" -}}
{{- end -}}
{{- $kafka := get $cfg "kafka" | default dict -}}
{{- if hasKey (get $cfg "spark" | default dict) "connect_token" -}}
{{- include "hudi-sink.refuseSecret" (dict "key" "spark.connect_token" "instead" "sparkConnect.auth.existingSecret (the chart's server), or secretConfig.\"spark.connect_token\": {secretName: …, secretKey: …} (a server of your own)") -}}
{{- end -}}
{{- range list "security_protocol" "sasl_mechanism" "sasl_plain_username" "sasl_plain_password" "sasl_oauth_token_file" "ssl_cafile" "ssl_certfile" "ssl_keyfile" -}}
{{- if hasKey $kafka . -}}
{{- fail (printf "config.kafka.%s is set by the chart: use kafka.securityProtocol, kafka.sasl.* and kafka.tls.* (secrets come from existing Secrets)" .) -}}
{{- end -}}
{{- end -}}
{{- $k := .Values.kafka -}}
{{- $_ := set $kafka "security_protocol" $k.securityProtocol -}}
{{- if hasPrefix "SASL" $k.securityProtocol -}}
{{- if not $k.sasl.mechanism -}}
{{- fail "kafka.sasl.mechanism is required when kafka.securityProtocol is SASL_*" -}}
{{- end -}}
{{- $_ := set $kafka "sasl_mechanism" $k.sasl.mechanism -}}
{{- if eq $k.sasl.mechanism "OAUTHBEARER" -}}
{{- if $k.sasl.oauth.mskRegion -}}
{{- $_ := set $kafka "sasl_oauth_msk_region" $k.sasl.oauth.mskRegion -}}
{{- else if $k.sasl.oauth.existingSecret -}}
{{- $_ := set $kafka "sasl_oauth_token_file" (printf "/etc/hudi-sink/kafka-oauth/%s" $k.sasl.oauth.tokenKey) -}}
{{- else -}}
{{- fail "kafka.sasl.mechanism OAUTHBEARER needs kafka.sasl.oauth.existingSecret (a Secret holding the token, mounted as a file and re-read at every login) or kafka.sasl.oauth.mskRegion (Amazon MSK IAM)" -}}
{{- end -}}
{{- else -}}
{{- if not $k.sasl.existingSecret -}}
{{- fail "kafka.sasl.existingSecret is required when kafka.securityProtocol is SASL_* (the password is never a value)" -}}
{{- end -}}
{{- if $k.sasl.username -}}
{{- $_ := set $kafka "sasl_plain_username" $k.sasl.username -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if or $k.tls.existingSecret $k.tls.caSecret -}}
{{- if not (hasSuffix "SSL" $k.securityProtocol) -}}
{{- fail "kafka.tls.existingSecret and kafka.tls.caSecret need kafka.securityProtocol SSL or SASL_SSL" -}}
{{- end -}}
{{- if $k.tls.caKey -}}
{{- $caDir := ternary "/etc/hudi-sink/kafka-ca" "/etc/hudi-sink/kafka-tls" (not (empty $k.tls.caSecret)) -}}
{{- $_ := set $kafka "ssl_cafile" (printf "%s/%s" $caDir $k.tls.caKey) -}}
{{- end -}}
{{- if and $k.tls.certKey $k.tls.keyKey -}}
{{- if not $k.tls.existingSecret -}}
{{- fail "kafka.tls.certKey and kafka.tls.keyKey need kafka.tls.existingSecret (the Secret holding the client certificate and key, e.g. Strimzi's KafkaUser Secret)" -}}
{{- end -}}
{{- $_ := set $kafka "ssl_certfile" (printf "/etc/hudi-sink/kafka-tls/%s" $k.tls.certKey) -}}
{{- $_ := set $kafka "ssl_keyfile" (printf "/etc/hudi-sink/kafka-tls/%s" $k.tls.keyKey) -}}
{{- else if or $k.tls.certKey $k.tls.keyKey -}}
{{- fail "kafka.tls.certKey and kafka.tls.keyKey go together (mutual TLS)" -}}
{{- end -}}
{{- end -}}
{{- if $k.controlSigning.existingSecret -}}
{{- $_ := set $kafka "control_signing_key_file" (printf "/etc/hudi-sink/control-signing/%s" $k.controlSigning.key) -}}
{{- end -}}
{{- $_ := set $cfg "kafka" $kafka -}}
{{- $_ := set $cfg "admin" (dict "host" "0.0.0.0" "port" (int .Values.admin.port)) -}}
{{- $spark := get $cfg "spark" | default dict -}}
{{- $conf := get $spark "conf" | default dict -}}
{{- if hasKey $conf "spark.driver.memory" -}}
{{- fail "config.spark.conf.spark.driver.memory is derived from participant.resources.limits.memory (see participant.spark); set the limit instead" -}}
{{- end -}}
{{- if .Values.sparkConnect.enabled -}}
{{- include "hudi-sink.checkSparkConnectStorage" . -}}
{{- /* The token is not in the URL: participants get spark.connect_token from the Secret. */ -}}
{{- $_ := set $spark "master" (include "hudi-sink.sparkConnectUrl" .) -}}
{{- else -}}
{{- $_ := set $conf "spark.driver.memory" (printf "%sm" (include "hudi-sink.participantHeap" .)) -}}
{{- $_ := set $conf "spark.local.dir" "/tmp/spark" -}}
{{- end -}}
{{- $_ := set $spark "conf" $conf -}}
{{- $_ := set $cfg "spark" $spark -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
An object-store table written through Spark Connect needs Hadoop's S3A connector in the
server: the chart's image ships it (Dockerfile: hadoop-aws in SPARK_HOME/jars, s3:// mapped to
S3A); another server image must say it has it.
*/}}
{{- define "hudi-sink.checkSparkConnectStorage" -}}
{{- $base := toString ((.Values.config.table | default dict).base_path) -}}
{{- $s := .Values.sparkConnect -}}
{{- if and (regexMatch "^s3a?://" $base) $s.image.repository (not $s.image.hadoopAws) -}}
{{- fail (printf "config.table.base_path %s with Spark Connect: the server writes the files itself through Hadoop's S3A connector, and sparkConnect.image (%s) is not this chart's image, which ships hadoop-aws. Build the server image with hadoop-aws 3.5.0 and its AWS SDK bundle (or start it with --packages org.apache.hadoop:hadoop-aws:3.5.0) and set sparkConnect.image.hadoopAws=true, or turn sparkConnect off (local participants upload the files themselves)" $base $s.image.repository) -}}
{{- end -}}
{{- if and (regexMatch "^[a-z][a-z0-9+.-]*://" $base) (not (regexMatch "^s3a?://" $base)) -}}
{{- fail (printf "config.table.base_path %s with Spark Connect: the server writes the files itself and has a connector for s3:// only; turn sparkConnect off (local participants upload the files themselves)" $base) -}}
{{- end -}}
{{- end -}}

{{/* Environment every hudi-sink container gets. */}}
{{- define "hudi-sink.env" -}}
- name: HUDI_SINK__ADMIN__TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "hudi-sink.adminSecretName" . }}
      key: {{ .Values.admin.existingSecretKey }}
{{- if and (hasPrefix "SASL" .Values.kafka.securityProtocol) (ne .Values.kafka.sasl.mechanism "OAUTHBEARER") }}
- name: HUDI_SINK__KAFKA__SASL_PLAIN_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.kafka.sasl.existingSecret }}
      key: {{ .Values.kafka.sasl.passwordKey }}
{{- end }}
{{- include "hudi-sink.secretConfigEnv" . }}
- name: HOME
  value: /tmp
- name: PYTHONDONTWRITEBYTECODE
  value: "1"
- name: PYTHONUNBUFFERED
  value: "1"
- name: SPARK_LOCAL_IP
  value: 127.0.0.1
{{- end -}}

{{/*
A participant's Spark Connect token (spark.connect_token), from the server's Secret: the sink
sends it as the authorization header of every RPC over the server's plain gRPC (PySpark's
";token=" would dial TLS, which the server does not serve: docs/kubernetes.md).
*/}}
{{- define "hudi-sink.sparkConnectEnv" -}}
{{- if .Values.sparkConnect.enabled }}
- name: HUDI_SINK__SPARK__CONNECT_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "hudi-sink.sparkConnectSecretName" . }}
      key: {{ .Values.sparkConnect.auth.existingSecretKey }}
{{- end }}
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
