{{/* Names: namespaced objects take the release's name; cluster-scoped ones the
namespace's too, so that two releases (two providers) never share one. */}}
{{- define "berth.name" -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "berth.clusterName" -}}
{{- printf "%s-%s" .Release.Namespace .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "berth.labels" -}}
app.kubernetes.io/name: berth
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "berth.selector" -}}
app.kubernetes.io/name: berth
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "berth.image" -}}
{{- $repo := required "image.repository: berth publishes no image; build one (docs/operations.md#a-container-image) and name it here" .Values.image.repository -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The port of a host:port listen address. */}}
{{- define "berth.port" -}}
{{- regexReplaceAll "^.*:" . "" -}}
{{- end -}}

{{/* The bus's Redis URL the chart fills in: the reference Redis when enabled. */}}
{{- define "berth.busURL" -}}
{{- if .Values.redis.enabled -}}
{{- printf "redis://%s-redis.%s.svc:6379" (include "berth.name" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* provider.yaml: the settings, with what the chart fills in when left empty. */}}
{{- define "berth.providerSettings" -}}
{{- $s := deepCopy .Values.provider.settings -}}
{{- $_ := required "provider.settings.node: the ledger node's RPC address (tcp://HOST:26657)" $s.node -}}
{{- if and .Values.operators.inventory.enabled (not $s.inventory.operator) -}}
{{- $_ := set $s.inventory "operator" .Values.operators.inventory.settings.name -}}
{{- end -}}
{{- if and (include "berth.busURL" .) (not $s.bus.redis) -}}
{{- $_ := set $s.bus "redis" (include "berth.busURL" .) -}}
{{- end -}}
{{- toPrettyJson $s -}}
{{- end -}}

{{/* An operator's settings file: provider and chain_id from owner, leader election
in the release's namespace, the bus (inventory), when left empty. */}}
{{- define "berth.operatorSettings" -}}
{{- $root := .root -}}
{{- $s := deepCopy (index $root.Values.operators .name).settings -}}
{{- if hasKey $s "provider" -}}
{{- if not $s.provider -}}
{{- $_ := set $s "provider" (required "owner.address: the provider's account address" $root.Values.owner.address) -}}
{{- end -}}
{{- if not $s.chain_id -}}
{{- $_ := set $s "chain_id" (required "owner.chainID: the ledger's chain ID" $root.Values.owner.chainID) -}}
{{- end -}}
{{- end -}}
{{- if not $s.leader_election.namespace -}}
{{- $_ := set $s.leader_election "namespace" $root.Release.Namespace -}}
{{- end -}}
{{- if and (hasKey $s "bus") (include "berth.busURL" $root) (not $s.bus.redis) -}}
{{- $_ := set $s.bus "redis" (include "berth.busURL" $root) -}}
{{- end -}}
{{- toPrettyJson $s -}}
{{- end -}}
