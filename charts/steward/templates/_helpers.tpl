{{/* Names, labels and the image, shared by every template. */}}

{{/* The chart's name, for the app.kubernetes.io/name label. */}}
{{- define "steward.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: the release name, with the chart's name added unless the release name
already holds it (so `helm install steward` gives "steward", not "steward-steward"). 63 characters at most:
some name fields are DNS labels.
*/}}
{{- define "steward.fullname" -}}
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

{{/* Labels of every object the chart creates. */}}
{{- define "steward.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "steward.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: steward
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels that select the operator's Pods; never changed by values, since a Deployment's selector is immutable. */}}
{{- define "steward.selectorLabels" -}}
app.kubernetes.io/name: {{ include "steward.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The ServiceAccount the operator runs as. */}}
{{- define "steward.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "steward.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The operator's image: the tag defaults to the release this chart was built with. */}}
{{- define "steward.image" -}}
{{- printf "%s:%s" .Values.image.repository (default (printf "v%s" .Chart.AppVersion) .Values.image.tag) }}
{{- end }}

{{/* The namespace of the leader election Lease: the operator's default is its own namespace. */}}
{{- define "steward.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace }}
{{- end }}

{{/*
The prefix of the names of cluster-scoped objects a release creates in every mode (the metrics endpoint's
ClusterRoles): the fullname, and the release namespace too when namespaced, so that releases in several
namespaces coexist.
*/}}
{{- define "steward.clusterScopedName" -}}
{{- if .Values.watchNamespaces }}
{{- printf "%s-%s" (include "steward.fullname" .) .Release.Namespace | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- include "steward.fullname" . | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
