{{/* The name of the namespaced objects: the release's name, "auditor" when it holds it. */}}
{{- define "auditor.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains "auditor" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-auditor" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The prefix of cluster-scoped names (ClusterRoles and their bindings), unique per cluster. */}}
{{- define "auditor.clusterName" -}}
{{- default (printf "%s-%s" .Release.Namespace (include "auditor.fullname" .)) .Values.rbac.clusterNamePrefix | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "auditor.selectorLabels" -}}
app.kubernetes.io/name: auditor
{{- if .Values.helmLabels }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
{{- end -}}

{{- define "auditor.labels" -}}
{{ include "auditor.selectorLabels" . }}
{{- if .Values.helmLabels }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The repo-server's address: the value, else Argo CD's Service in its namespace. */}}
{{- define "auditor.repoServerAddress" -}}
{{- default (printf "argocd-repo-server.%s.svc:8081" .Values.argocd.namespace) .Values.repoServer.address -}}
{{- end -}}

{{/* The Secret holding the repo-server's ca.crt: the value, else Argo CD's own when the auditor shares its namespace. */}}
{{- define "auditor.repoServerCASecret" -}}
{{- if .Values.repoServer.caSecret -}}
{{- .Values.repoServer.caSecret -}}
{{- else if and (eq .Release.Namespace .Values.argocd.namespace) (not .Values.repoServer.plaintext) -}}
argocd-repo-server-tls
{{- end -}}
{{- end -}}

{{- define "auditor.image" -}}
{{- $tag := default (printf "v%s" .Chart.AppVersion) .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* Leader election is on with more than one replica or with sharding. */}}
{{- define "auditor.leaderElection" -}}
{{- if or (gt (int .Values.replicas) 1) .Values.sharding -}}true{{- end -}}
{{- end -}}
