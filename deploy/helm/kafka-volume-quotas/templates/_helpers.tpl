{{/* Resource names start with this: fullnameOverride, else the release name (63 characters at most). */}}
{{- define "kvq.fullname" -}}
{{- .Values.fullnameOverride | default .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; a component's objects add kvq.selectorLabels instead of kvq.labels. */}}
{{- define "kvq.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kafka-volume-quotas
{{- end -}}

{{- define "kvq.labels" -}}
{{ include "kvq.commonLabels" . }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "exporter" "cluster" "east"). */}}
{{- define "kvq.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- with .cluster }}
kafka-volume-quotas/cluster: {{ . }}
{{- end }}
{{- end -}}

{{- define "kvq.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "kvq.exporterName" -}}
{{ include "kvq.fullname" .root }}-exporter-{{ .cluster.name }}
{{- end -}}

{{- define "kvq.configMapName" -}}
{{ include "kvq.fullname" .root }}-config-{{ .cluster.name }}
{{- end -}}

{{- define "kvq.enforcerName" -}}
{{ include "kvq.fullname" . }}-enforcer
{{- end -}}

{{/* The bearer token file the enforcer reads, mounted from enforcer.webhookTokenSecret. */}}
{{- define "kvq.tokenFile" -}}/etc/kvq/webhook/token{{- end -}}

{{/* The enforcer's journal (--journal), in the volume `journal`: the PersistentVolumeClaim of
     state.store local, an emptyDir working copy with kafka, the old claim in the import Job. */}}
{{- define "kvq.journalFile" -}}/var/lib/kvq/enforcer-journal.sqlite3{{- end -}}

{{/* The principals of a Strimzi cluster's own components (docs/strimzi.md, "Strimzi's internal
     principals"): its brokers (Cruise Control's metrics reporter produces with their
     certificate), Cruise Control, the Topic and User Operators, the Kafka Exporter, and the
     Cluster Operator. Throttled, Cruise Control would lose the metrics it needs to move data off
     the full disk. */}}
{{- define "kvq.strimziPrincipals" -}}
{{- $c := . -}}
{{- $names := list (printf "%s-kafka" $c) (printf "%s-cruise-control" $c) (printf "%s-entity-topic-operator" $c) (printf "%s-entity-user-operator" $c) (printf "%s-kafka-exporter" $c) "cluster-operator" -}}
{{- $principals := list -}}
{{- range $names }}{{ $principals = append $principals (printf "User:CN=%s,O=io.strimzi" .) }}{{ end -}}
{{- join ";" $principals -}}
{{- end -}}

{{/* What the `strimzi` block of a cluster writes for one app (dict "root" $ "cluster" c "app"
     "exporter"|"enforcer"), as YAML {properties, env, volumes, volumeMounts}: with an
     authentication, the bootstrap address of the Kafka resource's listener, the cluster CA from
     <cluster>-cluster-ca-cert and the app's credentials from the Secret of its KafkaUser, as the
     User Operator writes them (tls: user.crt, user.key; scram-sha-512: password). The files go
     under /etc/kvq/<name>/, the password into KVQ_<NAME>_PASSWORD: the same as the chart's
     default values write out by hand. */}}
{{- define "kvq.strimziApp" -}}
{{- $s := .cluster.strimzi | default dict -}}
{{- $out := dict "properties" (dict) "env" (list) "volumes" (list) "volumeMounts" (list) -}}
{{- with $s.authentication -}}
{{- $auth := . -}}
{{- $name := $.cluster.name -}}
{{- $p := "client.quota.callback.static.kafka.admin." -}}
{{- $dir := printf "/etc/kvq/%s" $name -}}
{{- $user := ternary ($s.exporterUser | default "kvq-exporter") ($s.enforcerUser | default "kvq-enforcer") (eq $.app "exporter") -}}
{{- $service := printf "%s-kafka-bootstrap" $s.cluster -}}
{{- with $s.namespace }}{{ $service = printf "%s.%s.svc" $service . }}{{ end -}}
{{- $props := dict -}}
{{- $_ := set $props (print $p "bootstrap.servers") (printf "%s:%d" $service (int ($s.port | default 9093))) -}}
{{- $_ := set $props (print $p "security.protocol") (ternary "SSL" "SASL_SSL" (eq $auth "tls")) -}}
{{- $_ := set $props (print $p "ssl.ca.location") (printf "%s/cluster-ca/ca.crt" $dir) -}}
{{- $volumes := list (dict "name" (printf "%s-cluster-ca" $name) "secret" (dict "secretName" (printf "%s-cluster-ca-cert" $s.cluster) "items" (list (dict "key" "ca.crt" "path" "ca.crt")))) -}}
{{- $mounts := list (dict "name" (printf "%s-cluster-ca" $name) "mountPath" (printf "%s/cluster-ca" $dir) "readOnly" true) -}}
{{- if eq $auth "tls" -}}
{{- $_ := set $props (print $p "ssl.certificate.location") (printf "%s/kafka-user/user.crt" $dir) -}}
{{- $_ := set $props (print $p "ssl.key.location") (printf "%s/kafka-user/user.key" $dir) -}}
{{- $items := list (dict "key" "user.crt" "path" "user.crt") (dict "key" "user.key" "path" "user.key") -}}
{{- $volumes = append $volumes (dict "name" (printf "%s-kafka-user" $name) "secret" (dict "secretName" $user "items" $items)) -}}
{{- $mounts = append $mounts (dict "name" (printf "%s-kafka-user" $name) "mountPath" (printf "%s/kafka-user" $dir) "readOnly" true) -}}
{{- else -}}
{{- $variable := printf "KVQ_%s_PASSWORD" ($name | replace "-" "_" | upper) -}}
{{- $_ := set $props (print $p "sasl.mechanism") "SCRAM-SHA-512" -}}
{{- $_ := set $props (print $p "sasl.jaas.config") (printf "org.apache.kafka.common.security.scram.ScramLoginModule required username=%q password=\"${env:%s}\";" $user $variable) -}}
{{- $_ := set $out "env" (list (dict "name" $variable "valueFrom" (dict "secretKeyRef" (dict "name" $user "key" "password")))) -}}
{{- end -}}
{{- $_ := set $out "properties" $props -}}
{{- $_ := set $out "volumes" $volumes -}}
{{- $_ := set $out "volumeMounts" $mounts -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The entries of several lists (.lists) as one, an entry replacing an earlier one with the same
     .key (where the first stood). */}}
{{- define "kvq.mergeByKey" -}}
{{- $key := .key -}}
{{- $order := list -}}
{{- $byKey := dict -}}
{{- range .lists -}}
{{- range (. | default list) -}}
{{- $id := get . $key | toString -}}
{{- if not (hasKey $byKey $id) }}{{ $order = append $order $id }}{{ end -}}
{{- $_ := set $byKey $id . -}}
{{- end -}}
{{- end -}}
{{- $out := list -}}
{{- range $order }}{{ $out = append $out (get $byKey .) }}{{ end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* What one app (dict "root" $ "cluster" c "app" "exporter"|"enforcer") gets of one cluster, as
     YAML {properties, env, volumes, volumeMounts}, each later layer over the earlier: `properties`
     (all clusters), what the cluster's `strimzi` block writes, the cluster's shared keys, the
     cluster's `exporter:`/`enforcer:` block. */}}
{{- define "kvq.app" -}}
{{- $strimzi := include "kvq.strimziApp" . | fromYaml -}}
{{- $own := get .cluster .app | default dict -}}
{{- $properties := dict -}}
{{- range (list .root.Values.properties $strimzi.properties .cluster.properties $own.properties) -}}
{{- $properties = mergeOverwrite $properties (deepCopy (. | default dict)) -}}
{{- end -}}
{{- $out := dict "properties" $properties -}}
{{- range $field, $key := dict "env" "name" "volumes" "name" "volumeMounts" "mountPath" -}}
{{- $lists := list (get $strimzi $field) (get $.cluster $field) (get $own $field) -}}
{{- $_ := set $out $field (include "kvq.mergeByKey" (dict "lists" $lists "key" $key) | fromYamlArray) -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* One app's properties file of one cluster (dict "root" $ "cluster" c "app" ...): kvq.app's
     properties, then what the chart decides (a Strimzi cluster's internal principals added to the
     exclusions; the cluster's name and its label, clusterLabel, which the rules, dashboards and
     Alertmanager route use too; the enforcer's token file and its state settings
     (enforcer.state, which also decide the workload's kind), the same in every file; the enforcer's
     fail-safe reading the cluster's exporters through their Service, unless the exporters ask for
     credentials or TLS (exporter.webConfig) or the values set it). */}}
{{- define "kvq.properties" -}}
{{- $merged := (include "kvq.app" . | fromYaml).properties -}}
{{- with (.cluster.strimzi | default dict).cluster }}
{{- $excluded := "client.quota.callback.static.excluded.principal.name.list" }}
{{- $given := get $merged $excluded | toString | trimSuffix ";" }}
{{- $internal := include "kvq.strimziPrincipals" . }}
{{- $_ := set $merged $excluded (ternary $internal (printf "%s;%s" $given $internal) (empty $given)) }}
{{- end }}
{{- $_ := set $merged "kvq.cluster.name" .cluster.name -}}
{{- $_ := set $merged "kvq.cluster.label" .root.Values.clusterLabel -}}
{{- $_ := set $merged "kvq.enforcer.auth.bearer.token.file" (include "kvq.tokenFile" .) -}}
{{- if eq .app "enforcer" -}}
{{- $state := .root.Values.enforcer.state -}}
{{- $_ := set $merged "kvq.enforcer.state.store" $state.store -}}
{{- $_ := set $merged "kvq.enforcer.state.topic" $state.topic -}}
{{- $_ := set $merged "kvq.enforcer.state.group" $state.group -}}
{{- end -}}
{{- $failsafe := "kvq.enforcer.failsafe.exporter.urls" -}}
{{- if and (eq .app "enforcer") (not (hasKey $merged $failsafe)) (not .root.Values.exporter.webConfig.secretName) -}}
{{- $_ := set $merged $failsafe (printf "http://%s.%s.svc:%v/metrics" (include "kvq.exporterName" .) .root.Release.Namespace .root.Values.exporter.port) -}}
{{- end -}}
# GENERATED by the kafka-volume-quotas chart from its values: cluster {{ .cluster.name }}, {{ .app }}.
{{- range $key, $value := $merged }}
{{- if contains "\n" (toString $value) }}
{{- fail (printf "clusters: %s: the property %s holds a line break; a .properties value is one line (use >- in YAML)" $.cluster.name $key) }}
{{- end }}
{{ $key }}={{ $value }}
{{- end }}
{{- end -}}

{{- define "kvq.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ .Values.serviceAccount.name | default (include "kvq.fullname" .) }}
{{- else -}}
{{ .Values.serviceAccount.name | default "default" }}
{{- end -}}
{{- end -}}

{{/* A component's pod metadata (dict "root" $ "component" "exporter"|"enforcer" "selector"
     <kvq.selectorLabels' dict> "checksum" <text whose change rolls the pods>): podLabels and
     podAnnotations, global then the component's, under the chart's own. */}}
{{- define "kvq.podMetadata" -}}
{{- $values := get .root.Values .component -}}
{{- $labels := merge (include "kvq.selectorLabels" .selector | fromYaml) ($values.podLabels | default dict) (.root.Values.podLabels | default dict) -}}
{{- $annotations := merge (dict "checksum/config" (.checksum | sha256sum)) ($values.podAnnotations | default dict) (.root.Values.podAnnotations | default dict) -}}
labels:
  {{- toYaml $labels | nindent 2 }}
annotations:
  # checksum/config: a changed properties file rolls the pods (the apps read it at start)
  {{- toYaml $annotations | nindent 2 }}
{{- end -}}

{{/* Pod settings both components share (dict "root" $ "component" ... "selector" ...). */}}
{{- define "kvq.podCommon" -}}
{{- $root := .root -}}
{{- $values := get $root.Values .component -}}
serviceAccountName: {{ include "kvq.serviceAccountName" $root }}
automountServiceAccountToken: {{ $root.Values.serviceAccount.automountServiceAccountToken }}
{{- with $root.Values.priorityClassName | default (and $root.Values.priorityClass.create $root.Values.priorityClass.name) }}
priorityClassName: {{ . }}
{{- end }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- $spread := list }}
{{- range ($values.topologySpreadConstraints | default $root.Values.topologySpreadConstraints) }}
{{- $own := dict "labelSelector" (dict "matchLabels" (include "kvq.selectorLabels" $.selector | fromYaml)) }}
{{- $spread = append $spread (ternary . (merge (dict) . $own) (hasKey . "labelSelector")) }}
{{- end }}
{{- with $spread }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* --web.config.file of a component (dict "root" $ "component" ...), as YAML {args, volumeMounts,
     volumes}: the file's Secret and the optional TLS Secret beside it, in /etc/kvq/web. */}}
{{- define "kvq.webConfig" -}}
{{- $web := (get .root.Values .component).webConfig -}}
{{- $out := dict "args" (list) "volumeMounts" (list) "volumes" (list) -}}
{{- if $web.secretName -}}
{{- $dir := "/etc/kvq/web" -}}
{{- $sources := list (dict "secret" (dict "name" $web.secretName "items" (list (dict "key" $web.key "path" $web.key)))) -}}
{{- with $web.tlsSecretName }}{{ $sources = append $sources (dict "secret" (dict "name" .)) }}{{ end -}}
{{- $_ := set $out "args" (list "--web.config.file" (printf "%s/%s" $dir $web.key)) -}}
{{- $_ := set $out "volumeMounts" (list (dict "name" "web-config" "mountPath" $dir "readOnly" true)) -}}
{{- $_ := set $out "volumes" (list (dict "name" "web-config" "projected" (dict "sources" $sources))) -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* A probe's httpGet (dict "root" $ "component" ... "path" ...): HTTPS when the web config turns
     TLS on, with its headers. */}}
{{- define "kvq.probeGet" -}}
{{- $web := (get .root.Values .component).webConfig -}}
httpGet:
  path: {{ .path }}
  port: http
  {{- if $web.tls }}
  scheme: HTTPS
  {{- end }}
  {{- with $web.probeHttpHeaders }}
  httpHeaders:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* Fails unless every cluster name is unique and the names it makes stay within 63 characters. */}}
{{- define "kvq.checkClusters" -}}
{{- $seen := dict -}}
{{- range .Values.clusters -}}
{{- if hasKey $seen .name -}}
{{- fail (printf "clusters: the name %q is given twice; every Kafka cluster needs its own name" .name) -}}
{{- end -}}
{{- $_ := set $seen .name true -}}
{{- $name := include "kvq.exporterName" (dict "root" $ "cluster" .) -}}
{{- if gt (len $name) 63 -}}
{{- fail (printf "clusters: %q makes the name %s, longer than 63 characters; shorten the name or fullnameOverride" .name $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Every cluster's entries of one list (env, volumes, volumeMounts) for the enforcer, which runs
     all of them (what kvq.app gives the enforcer of each): an entry given by two clusters must be
     the same, or the chart fails naming it. */}}
{{- define "kvq.enforcerList" -}}
{{- $field := .field -}}
{{- $key := .key -}}
{{- $byKey := dict -}}
{{- $entries := list -}}
{{- range .root.Values.clusters -}}
{{- $cluster := .name -}}
{{- $app := include "kvq.app" (dict "root" $.root "cluster" . "app" "enforcer") | fromYaml -}}
{{- range (get $app $field) -}}
{{- $id := get . $key | toString -}}
{{- if hasKey $byKey $id -}}
{{- if ne (toJson (get $byKey $id)) (toJson .) -}}
{{- fail (printf "clusters: %s %s %q differs between clusters (the enforcer runs all of them in one pod); give cluster %s another one" $field $key $id $cluster) -}}
{{- end -}}
{{- else -}}
{{- $_ := set $byKey $id . -}}
{{- $entries = append $entries . -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $entries -}}
{{- end -}}

{{/* Every cluster's enforcer properties, for the enforcer's checksum annotation. */}}
{{- define "kvq.enforcerConfigs" -}}
{{- range .Values.clusters }}
{{ include "kvq.properties" (dict "root" $ "cluster" . "app" "enforcer") }}
{{- end }}
{{- end -}}

{{/* The rules file or a dashboard (`text`) with the cluster's label named `label` (clusterLabel)
     instead of `cluster`: wherever PromQL or Grafana names a label, never in prose nor in record
     names (`cluster:...` is the aggregation level):
       (cluster)  (cluster, ..  .., cluster)  , cluster)   grouping lists, label_values(.., cluster)
       {cluster=  , cluster=~   cluster!=                  label matchers
       $labels.cluster  $v.Labels.cluster                  alert templates
       {{cluster}}                                         Grafana legends and annotation texts
       "tagKeys": "cluster"  "cluster": (a JSON key)       Grafana annotation tags, table fields
     tests/deploy checks the result: promtool runs the rules' tests with the label renamed, and no
     query, legend or field of the dashboard keeps `cluster`. */}}
{{- define "kvq.relabel" -}}
{{- $to := .label -}}
{{- $text := .text -}}
{{- $text = regexReplaceAll `([({,]\s*)cluster(\s*(?:[,)]|[=!]))` $text (printf "${1}%s${2}" $to) -}}
{{- $text = regexReplaceAll `([$.][Ll]abels\.)cluster\b` $text (printf "${1}%s" $to) -}}
{{- $text = regexReplaceAll `\{\{\s*cluster\s*\}\}` $text (printf "{{%s}}" $to) -}}
{{- $text = regexReplaceAll `("tagKeys": ")cluster(")` $text (printf "${1}%s${2}" $to) -}}
{{- $text = regexReplaceAll `"cluster":` $text (printf "%q:" $to) -}}
{{- $text -}}
{{- end -}}
