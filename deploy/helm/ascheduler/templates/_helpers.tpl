{{/* The objects' name: the release's, unless fullnameOverride. */}}
{{- define "ascheduler.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ascheduler.serviceAccountName" -}}
{{- default (include "ascheduler.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "ascheduler.labels" -}}
app.kubernetes.io/name: ascheduler
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "ascheduler.selector" -}}
app.kubernetes.io/name: ascheduler
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ascheduler.binderSelector" -}}
app.kubernetes.io/name: ascheduler-binder
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The scheduler configuration, as YAML: the values rendered, schedulerConfig merged over. */}}
{{- define "ascheduler.config" -}}
{{- $v := .Values -}}
{{- $le := dict "leaderElect" $v.leaderElection.enabled "resourceName" (default (include "ascheduler.fullname" .) $v.leaderElection.resourceName) "resourceNamespace" .Release.Namespace "leaseDuration" $v.leaderElection.leaseDuration "renewDeadline" $v.leaderElection.renewDeadline "retryPeriod" $v.leaderElection.retryPeriod -}}
{{- $profiles := $v.profiles -}}
{{- if not $profiles -}}
{{- $name := ternary "default-scheduler" $v.schedulerName (eq $v.mode "replacement") -}}
{{- $profiles = list (dict "schedulerName" $name) -}}
{{- end -}}
{{- $lock := dict "policy" $v.nodeLock.policy "deviceResources" $v.nodeLock.deviceResources "key" $v.nodeLock.key "timeout" $v.nodeLock.timeout "linger" $v.nodeLock.linger "whenAlone" $v.nodeLock.whenAlone "memberDuration" $v.nodeLock.memberDuration -}}
{{- if $v.nodeLock.object -}}{{- $_ := set $lock "object" $v.nodeLock.object -}}{{- end -}}
{{- if not (kindIs "invalid" $v.nodeLock.leaseGroups) -}}{{- $_ := set $lock "leaseGroups" (int $v.nodeLock.leaseGroups) -}}{{- end -}}
{{- $own := dict "annotationPrefix" $v.annotationPrefix "binding" $v.binding "debugEndpoints" $v.debugEndpoints "nodeLock" $lock -}}
{{- if $v.sharding.enabled -}}
{{- $group := default (include "ascheduler.fullname" . | trunc 40 | trimSuffix "-") $v.sharding.group -}}
{{- $_ := set $own "sharding" (dict "enabled" true "group" $group "memberDuration" $v.sharding.memberDuration) -}}
{{- end -}}
{{- $cfg := dict "apiVersion" "kubescheduler.config.k8s.io/v1" "kind" "KubeSchedulerConfiguration" "leaderElection" $le "profiles" $profiles "ascheduler" $own -}}
{{- with $v.extenders -}}{{- $_ := set $cfg "extenders" . -}}{{- end -}}
{{- if not (kindIs "invalid" $v.percentageOfNodesToScore) -}}{{- $_ := set $cfg "percentageOfNodesToScore" $v.percentageOfNodesToScore -}}{{- end -}}
{{- $cfg = mustMergeOverwrite $cfg (deepCopy $v.schedulerConfig) -}}
{{- if not (hasKey $cfg "leaderElection") -}}{{- $_ := set $cfg "leaderElection" dict -}}{{- end -}}
{{- $_ := set $cfg.leaderElection "resourceNamespace" .Release.Namespace -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* The leader-election Lease's name, as the rendered configuration has it. */}}
{{- define "ascheduler.leaseName" -}}
{{- $cfg := include "ascheduler.config" . | fromYaml -}}
{{- default "ascheduler" $cfg.leaderElection.resourceName -}}
{{- end -}}

{{/* Whether the BindRequest mode (and so the binder and its CRD) is on. */}}
{{- define "ascheduler.bindRequests" -}}
{{- $cfg := include "ascheduler.config" . | fromYaml -}}
{{- if eq (default "direct" $cfg.ascheduler.binding) "bindrequest" -}}true{{- end -}}
{{- end -}}

{{/* Whether node locks live on Nodes (nodeLock.object node, or HAMi's key with no object), as
the rendered configuration has it: only then may the ServiceAccounts patch Nodes. */}}
{{- define "ascheduler.nodeLocksOnNodes" -}}
{{- $cfg := include "ascheduler.config" . | fromYaml -}}
{{- $lock := default dict $cfg.ascheduler.nodeLock -}}
{{- $object := default "" $lock.object -}}
{{- if or (eq $object "node") (and (eq $object "") (eq (default "" $lock.key) "hami.io/mutex.lock")) -}}true{{- end -}}
{{- end -}}
