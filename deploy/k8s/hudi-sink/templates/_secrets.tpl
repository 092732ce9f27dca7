{{/*
Secrets never reach the ConfigMap. A secret-bearing key under .Values.config is refused with a
message naming the Secret path to use instead; secretConfig maps config keys to existing
Secrets, delivered as HUDI_SINK__… environment variables (the loader's environment layer,
which wins over the file).
*/}}

{{/* "<config key> is a secret …" failure, pointing at secretConfig (or the value given). */}}
{{- define "hudi-sink.refuseSecret" -}}
{{- $instead := .instead | default (printf "secretConfig.%q: {secretName: …, secretKey: …} (an existing Secret; the pods get it as %s)" .key (include "hudi-sink.secretEnvName" .key)) -}}
{{- fail (printf "config.%s is a secret and would be written into the ConfigMap: put it in a Secret and set %s" .key $instead) -}}
{{- end -}}

{{/*
The environment variable that carries config key KEY ("avro.registry_password",
"table.storage_options.<option>", "spark.conf.<spark key>"): HUDI_SINK__SECTION__KEY, with a
storage option or Spark key kept whole (Kubernetes allows dots in variable names).
*/}}
{{- define "hudi-sink.secretEnvName" -}}
{{- $key := . -}}
{{- $whole := "" -}}
{{- range $prefix := list "spark.conf." "table.storage_options." -}}
{{- if hasPrefix $prefix $key -}}
{{- $whole = $prefix -}}
{{- end -}}
{{- end -}}
{{- if $whole -}}
{{- printf "HUDI_SINK__%s__%s" (trimSuffix "." $whole | replace "." "__" | upper) (trimPrefix $whole $key) -}}
{{- else -}}
{{- printf "HUDI_SINK__%s" ($key | replace "." "__" | upper) -}}
{{- end -}}
{{- end -}}

{{/*
A storage option or Spark setting that holds a secret: its name says so and its value is
not a flag. Names of classes, providers, paths and switches are not secrets
("fs.s3a.aws.credentials.provider", "google_application_credentials", "aws_skip_signature").
Call with (dict "name" … "value" …).
*/}}
{{- define "hudi-sink.isSecretSetting" -}}
{{- $name := lower .name -}}
{{- $value := lower (toString .value) -}}
{{- $secret := regexMatch "secret|password|passwd|token|credential|signature|sas[._]|private[._]key|encryption[._]key|account[._]key|master[._]key|(^|_)key$|_sas$" $name -}}
{{- $notSecret := or (regexMatch "([._](provider|type|impl|class|enabled|path|file|uri|algorithm))$|^google_application_credentials$" $name) (has $value (list "true" "false")) -}}
{{- if and $secret (not $notSecret) -}}true{{- end -}}
{{- end -}}

{{/* A URL carrying credentials: user:password@ in it, or a token/authorization parameter. */}}
{{- define "hudi-sink.urlHasCredentials" -}}
{{- if regexMatch "^[A-Za-z][A-Za-z0-9+.-]*://[^/@]*:[^/@]*@|(?i)[;?&](token|authorization|access_token|password)=" (toString .) -}}true{{- end -}}
{{- end -}}

{{/* Fails on any secret-bearing key in .Values.config; call with the root context. */}}
{{- define "hudi-sink.refuseSecretsInConfig" -}}
{{- $cfg := .Values.config -}}
{{- $avro := get $cfg "avro" | default dict -}}
{{- range $key := list "registry_password" -}}
{{- if hasKey $avro $key -}}
{{- include "hudi-sink.refuseSecret" (dict "key" (printf "avro.%s" $key)) -}}
{{- end -}}
{{- end -}}
{{- if include "hudi-sink.urlHasCredentials" (get $avro "registry_url" | default "") -}}
{{- fail "config.avro.registry_url carries credentials (user:password@ or a token parameter) and would be written into the ConfigMap: set avro.registry_username in config and the password through secretConfig.\"avro.registry_password\": {secretName: …, secretKey: …}" -}}
{{- end -}}
{{- $kafka := get $cfg "kafka" | default dict -}}
{{- if hasKey $kafka "control_signing_key" -}}
{{- include "hudi-sink.refuseSecret" (dict "key" "kafka.control_signing_key" "instead" "kafka.controlSigning.existingSecret (the Secret's key file is mounted and named in kafka.control_signing_key_file)") -}}
{{- end -}}
{{- $table := get $cfg "table" | default dict -}}
{{- range $name, $value := (get $table "storage_options" | default dict) -}}
{{- if include "hudi-sink.isSecretSetting" (dict "name" $name "value" $value) -}}
{{- include "hudi-sink.refuseSecret" (dict "key" (printf "table.storage_options.%s" $name) "instead" (printf "secretConfig.%q: {secretName: …, secretKey: …}, or objectStore.existingSecret with the store's standard variables (AWS_*, AZURE_*, GOOGLE_*)" (printf "table.storage_options.%s" $name))) -}}
{{- end -}}
{{- end -}}
{{- $spark := get $cfg "spark" | default dict -}}
{{- range $name, $value := (get $spark "conf" | default dict) -}}
{{- if include "hudi-sink.isSecretSetting" (dict "name" $name "value" $value) -}}
{{- include "hudi-sink.refuseSecret" (dict "key" (printf "spark.conf.%s" $name)) -}}
{{- end -}}
{{- end -}}
{{- if include "hudi-sink.urlHasCredentials" (get $spark "master" | default "") -}}
{{- fail "config.spark.master carries a token and would be written into the ConfigMap: with sparkConnect.enabled the chart builds the authenticated URL from sparkConnect.auth.existingSecret; for an outside server set secretConfig.\"spark.master\": {secretName: …, secretKey: …} to a Secret holding the whole sc:// URL" -}}
{{- end -}}
{{- end -}}

{{/* secretConfig entries, checked: keys the chart owns elsewhere and unusable names fail. */}}
{{- define "hudi-sink.secretConfigEnv" -}}
{{- range $key, $ref := .Values.secretConfig }}
{{- $owned := dict "admin.token" "admin.existingSecret" "kafka.sasl_plain_password" "kafka.sasl.existingSecret" "kafka.control_signing_key" "kafka.controlSigning.existingSecret" -}}
{{- if $.Values.sparkConnect.enabled }}
{{- $_ := set $owned "spark.connect_token" "sparkConnect.auth.existingSecret" }}
{{- end }}
{{- if hasKey $owned $key }}
{{- fail (printf "secretConfig.%q: set %s instead" $key (get $owned $key)) }}
{{- end }}
{{- if not (and $ref.secretName $ref.secretKey) }}
{{- fail (printf "secretConfig.%q needs secretName and secretKey" $key) }}
{{- end }}
{{- $env := include "hudi-sink.secretEnvName" $key }}
{{- if not (regexMatch "^[-._a-zA-Z][-._a-zA-Z0-9]*$" $env) }}
{{- fail (printf "secretConfig.%q: %s is not a valid environment variable name" $key $env) }}
{{- end }}
{{- if and (hasPrefix "spark.conf." $key) (ne $key (lower $key)) }}
{{- fail (printf "secretConfig.%q: the loader lower-cases environment keys, so a Spark setting with capitals cannot come this way" $key) }}
{{- end }}
- name: {{ $env }}
  valueFrom:
    secretKeyRef:
      name: {{ $ref.secretName }}
      key: {{ $ref.secretKey }}
{{- end }}
{{- end -}}

{{/*
Secrets mounted as files (read-only, 0440): Kafka's CA (kafka.tls.caSecret, e.g. Strimzi's
<cluster>-cluster-ca-cert) apart from the client certificate and key (kafka.tls.existingSecret,
e.g. Strimzi's KafkaUser Secret), the OAUTHBEARER token (re-read at every login, so a rotated
Secret is picked up without a restart) and the control-message signing keys.
*/}}
{{- define "hudi-sink.secretFiles" -}}
{{- $k := .Values.kafka -}}
{{- $files := list -}}
{{- if $k.tls.existingSecret -}}
{{- $files = append $files (list "kafka-tls" $k.tls.existingSecret "/etc/hudi-sink/kafka-tls") -}}
{{- end -}}
{{- if $k.tls.caSecret -}}
{{- $files = append $files (list "kafka-ca" $k.tls.caSecret "/etc/hudi-sink/kafka-ca") -}}
{{- end -}}
{{- if and (eq $k.sasl.mechanism "OAUTHBEARER") $k.sasl.oauth.existingSecret (hasPrefix "SASL" $k.securityProtocol) -}}
{{- $files = append $files (list "kafka-oauth" $k.sasl.oauth.existingSecret "/etc/hudi-sink/kafka-oauth") -}}
{{- end -}}
{{- if $k.controlSigning.existingSecret -}}
{{- $files = append $files (list "control-signing" $k.controlSigning.existingSecret "/etc/hudi-sink/control-signing") -}}
{{- end -}}
{{- toJson $files -}}
{{- end -}}

{{- define "hudi-sink.secretMounts" -}}
{{- range (include "hudi-sink.secretFiles" . | fromJsonArray) }}
- name: {{ index . 0 }}
  mountPath: {{ index . 2 }}
  readOnly: true
{{- end }}
{{- end -}}

{{- define "hudi-sink.secretVolumes" -}}
{{- range (include "hudi-sink.secretFiles" . | fromJsonArray) }}
- name: {{ index . 0 }}
  secret:
    secretName: {{ index . 1 }}
    defaultMode: 0440
{{- end }}
{{- end -}}
