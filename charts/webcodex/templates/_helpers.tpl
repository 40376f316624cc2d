{{/* vim: set filetype=mustache: */}}

{{/* Chart name. */}}
{{- define "webcodex.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Fully qualified app name (release-chart, or the release name when it already contains the chart name). */}}
{{- define "webcodex.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* chart label value: name-version. */}}
{{- define "webcodex.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Common labels. */}}
{{- define "webcodex.labels" -}}
helm.sh/chart: {{ include "webcodex.chart" . }}
{{ include "webcodex.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: webcodex
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels. */}}
{{- define "webcodex.selectorLabels" -}}
app.kubernetes.io/name: {{ include "webcodex.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Name of one component's objects: <fullname>-<component>. Args: dict ctx component. */}}
{{- define "webcodex.componentName" -}}
{{- printf "%s-%s" (include "webcodex.fullname" .ctx) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of one component. Args: dict ctx component. */}}
{{- define "webcodex.componentLabels" -}}
{{ include "webcodex.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Selector labels of one component. Args: dict ctx component. */}}
{{- define "webcodex.componentSelectorLabels" -}}
{{ include "webcodex.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
Components: values key, component name (also the `serve` argument and the image name).
*/}}
{{- define "webcodex.components" -}}
gateway: gateway
toolRegistry: tool-registry
refResolver: ref-resolver
audit: audit
runnerBroker: runner-broker
{{- end -}}

{{/*
Who may call whom over Connect RPC (NetworkPolicy ingress), by component name. The gateway is
the only entry point; the broker also reaches the ref-resolver. Runner pods reach the broker
(registration, heartbeats) through their own cross-namespace rule.
*/}}
{{- define "webcodex.callers" -}}
tool-registry: [gateway]
ref-resolver: [gateway, runner-broker]
audit: [gateway]
runner-broker: [gateway]
{{- end -}}

{{/* Image of a component. Args: dict ctx image (service image name) override. */}}
{{- define "webcodex.image" -}}
{{- if .override -}}
{{- .override -}}
{{- else -}}
{{- $tag := default .ctx.Chart.AppVersion .ctx.Values.image.tag -}}
{{- $digest := index (.ctx.Values.image.digests | default dict) .image | default "" -}}
{{- printf "%s/%s:%s" (trimSuffix "/" .ctx.Values.image.repository) .image $tag -}}
{{- with $digest }}@{{ . }}{{ end -}}
{{- end -}}
{{- end -}}

{{/* Namespace of Runner pods. */}}
{{/*
The generated Runner token (base64), decided once per render: the value already in the
cluster (lookup), else a new random one. Under `helm template` (GitOps) lookup sees nothing,
so every render makes a new token: set runner.token.existingSecret there.
*/}}
{{- define "webcodex.runnerToken.generated" -}}
{{- if not (hasKey .Values.runner.token "_generated") -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "webcodex.runnerToken.secretName" .) -}}
{{- $token := randAlphaNum 48 | b64enc -}}
{{- if and $existing $existing.data (hasKey $existing.data "token") -}}
{{- $token = index $existing.data "token" -}}
{{- end -}}
{{- $_ := set .Values.runner.token "_generated" $token -}}
{{- end -}}
{{- index .Values.runner.token "_generated" -}}
{{- end -}}

{{/* What the broker's pods must restart on when the Runner token changes. */}}
{{- define "webcodex.runnerToken.checksum" -}}
{{- if .Values.runner.token.existingSecret -}}
{{- printf "existing:%s/%s" .Values.runner.token.existingSecret .Values.runner.token.existingSecretKey | sha256sum -}}
{{- else -}}
{{- include "webcodex.runnerToken.generated" . | sha256sum -}}
{{- end -}}
{{- end -}}

{{- define "webcodex.runnerNamespace" -}}
{{- default (printf "%s-runners" .Release.Namespace) .Values.runner.namespace -}}
{{- end -}}

{{/* In-cluster URL of a component. Args: dict ctx component port. */}}
{{- define "webcodex.serviceUrl" -}}
{{- printf "http://%s.%s.svc:%v" (include "webcodex.componentName" .) .ctx.Release.Namespace .port -}}
{{- end -}}

{{/* Pod-level security context (non-root numeric uid, RuntimeDefault seccomp). Not configurable beyond the ids. */}}
{{- define "webcodex.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.securityContext.runAsUser }}
runAsGroup: {{ .Values.securityContext.runAsGroup }}
fsGroup: {{ .Values.securityContext.fsGroup }}
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Container-level security context. */}}
{{- define "webcodex.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.securityContext.runAsUser }}
runAsGroup: {{ .Values.securityContext.runAsGroup }}
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* imagePullSecrets block (list of names -> LocalObjectReference). */}}
{{- define "webcodex.imagePullSecrets" -}}
{{- with .Values.image.pullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Postgres URL Secret name / key. */}}
{{- define "webcodex.postgres.secretName" -}}
{{- default (include "webcodex.componentName" (dict "ctx" . "component" "postgres")) .Values.postgres.existingSecret -}}
{{- end -}}
{{- define "webcodex.postgres.secretKey" -}}
{{- if .Values.postgres.existingSecret -}}{{ .Values.postgres.existingSecretKey }}{{- else -}}url{{- end -}}
{{- end -}}

{{/* Redis URL Secret name / key. */}}
{{- define "webcodex.redis.secretName" -}}
{{- default (include "webcodex.componentName" (dict "ctx" . "component" "redis")) .Values.redis.existingSecret -}}
{{- end -}}
{{- define "webcodex.redis.secretKey" -}}
{{- if .Values.redis.existingSecret -}}{{ .Values.redis.existingSecretKey }}{{- else -}}url{{- end -}}
{{- end -}}

{{/* Runner token Secret name / key (the same name in the release and runner namespaces). */}}
{{- define "webcodex.runnerToken.secretName" -}}
{{- default (include "webcodex.componentName" (dict "ctx" . "component" "runner-token")) .Values.runner.token.existingSecret -}}
{{- end -}}
{{- define "webcodex.runnerToken.secretKey" -}}
{{- if .Values.runner.token.existingSecret -}}{{ .Values.runner.token.existingSecretKey }}{{- else -}}token{{- end -}}
{{- end -}}

{{/* The key every gateway replica signs and checks Mcp-Session-Id with (one Secret for all replicas). */}}
{{- define "webcodex.mcpSessionKey.secretName" -}}
{{- default (include "webcodex.componentName" (dict "ctx" . "component" "mcp-session-key")) .Values.gateway.mcpSessionKey.existingSecret -}}
{{- end -}}
{{- define "webcodex.mcpSessionKey.secretKey" -}}
{{- if .Values.gateway.mcpSessionKey.existingSecret -}}{{ .Values.gateway.mcpSessionKey.existingSecretKey }}{{- else -}}key{{- end -}}
{{- end -}}

{{/* Trial mode: the static bearer token the gateway accepts besides OAuth JWTs. */}}
{{- define "webcodex.trialToken.secretName" -}}
{{- default (include "webcodex.componentName" (dict "ctx" . "component" "trial-token")) .Values.gateway.trialToken.existingSecret -}}
{{- end -}}
{{- define "webcodex.trialToken.secretKey" -}}
{{- if .Values.gateway.trialToken.existingSecret -}}{{ .Values.gateway.trialToken.existingSecretKey }}{{- else -}}token{{- end -}}
{{- end -}}

{{/* The key control-plane services sign internal calls with; never mounted into Runner pods. */}}
{{- define "webcodex.serviceKey.secretName" -}}
{{- default (include "webcodex.componentName" (dict "ctx" . "component" "service-key")) .Values.serviceKey.existingSecret -}}
{{- end -}}
{{- define "webcodex.serviceKey.secretKey" -}}
{{- if .Values.serviceKey.existingSecret -}}{{ .Values.serviceKey.existingSecretKey }}{{- else -}}key{{- end -}}
{{- end -}}

{{/* Env shared by every service container. Args: dict ctx component port. */}}
{{- define "webcodex.commonEnv" -}}
- name: WEBCODEX_PORT
  value: {{ .port | quote }}
- name: WEBCODEX_LOG_LEVEL
  value: {{ .ctx.Values.logLevel | quote }}
- name: WEBCODEX_GRPC_REFLECTION
  value: {{ ternary "true" "false" (eq .ctx.Values.grpcReflection true) | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ printf "%s-%s" .ctx.Values.otel.serviceNamePrefix .component | quote }}
{{- if .ctx.Values.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .ctx.Values.otel.endpoint | quote }}
{{- end }}
{{- end -}}

{{/* WEBCODEX_POSTGRES_URL from its Secret. */}}
{{- define "webcodex.postgresEnv" -}}
- name: WEBCODEX_POSTGRES_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "webcodex.postgres.secretName" . }}
      key: {{ include "webcodex.postgres.secretKey" . }}
{{- end -}}

{{/* WEBCODEX_REDIS_URL from its Secret. */}}
{{- define "webcodex.redisEnv" -}}
- name: WEBCODEX_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "webcodex.redis.secretName" . }}
      key: {{ include "webcodex.redis.secretKey" . }}
{{- end -}}

{{/* Host header values the gateway accepts (DNS-rebinding protection). */}}
{{- define "webcodex.gateway.allowedHosts" -}}
{{- $gw := include "webcodex.componentName" (dict "ctx" . "component" "gateway") -}}
{{- $ns := .Release.Namespace -}}
{{- $port := .Values.gateway.port -}}
{{- $hosts := list (urlParse .Values.gateway.publicUrl).host -}}
{{- range (list $gw (printf "%s.%s" $gw $ns) (printf "%s.%s.svc" $gw $ns) (printf "%s.%s.svc.cluster.local" $gw $ns)) -}}
{{- $hosts = append $hosts . -}}
{{- $hosts = append $hosts (printf "%s:%v" . $port) -}}
{{- end -}}
{{- range .Values.gateway.ingress.hosts -}}
{{- $hosts = append $hosts . -}}
{{- end -}}
{{- range .Values.gateway.allowedHosts -}}
{{- $hosts = append $hosts . -}}
{{- end -}}
{{- $hosts | uniq | join "," -}}
{{- end -}}

{{/*
Deployment of one service. Args: dict
  ctx        root context
  key        values key (gateway, toolRegistry, ...)
  component  component name (gateway, tool-registry, ...)
  env        rendered YAML list of service-specific env vars
  serviceAccountName, automountToken (bool)
  volumes, volumeMounts  optional rendered YAML lists
  checksums  optional dict of annotation-name -> value
*/}}
{{- define "webcodex.deployment" -}}
{{- $ctx := .ctx -}}
{{- $v := index $ctx.Values .key -}}
{{- $nameArgs := dict "ctx" $ctx "component" .component -}}
{{- $hpa := and (hasKey $v "hpa") $v.hpa.enabled -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "webcodex.componentName" $nameArgs }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "webcodex.componentLabels" $nameArgs | nindent 4 }}
spec:
  {{- if not $hpa }}
  replicas: {{ $v.replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 25%
      maxUnavailable: 0
  selector:
    matchLabels:
      {{- include "webcodex.componentSelectorLabels" $nameArgs | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "webcodex.componentLabels" $nameArgs | nindent 8 }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        {{- range $k, $val := .checksums }}
        {{ $k }}: {{ $val | quote }}
        {{- end }}
        {{- if $ctx.Values.metrics.podAnnotations }}
        prometheus.io/scrape: "true"
        prometheus.io/port: {{ $ctx.Values.metrics.port | quote }}
        prometheus.io/path: /metrics
        {{- end }}
        {{- with $v.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ .serviceAccountName }}
      automountServiceAccountToken: {{ .automountToken }}
      enableServiceLinks: false
      {{- /* preStop keeps serving while endpoints drop the pod; then SIGTERM drains calls in flight. */}}
      terminationGracePeriodSeconds: {{ add $v.shutdown.preStopSeconds $v.shutdown.drainSeconds 5 }}
      securityContext:
        {{- include "webcodex.podSecurityContext" $ctx | nindent 8 }}
      {{- with include "webcodex.imagePullSecrets" $ctx }}
      {{- . | nindent 6 }}
      {{- end }}
      containers:
        - name: {{ .component }}
          image: {{ include "webcodex.image" (dict "ctx" $ctx "image" .component "override" $v.image) | quote }}
          imagePullPolicy: {{ $ctx.Values.image.pullPolicy }}
          workingDir: /app
          args: ["node", "tools/cli/bin/webcodex.js", "serve", {{ .component | quote }}]
          ports:
            - name: http
              containerPort: {{ $v.port }}
              protocol: TCP
            {{- if $v.registrationPort }}
            - name: registration
              containerPort: {{ $v.registrationPort }}
              protocol: TCP
            {{- end }}
            - name: metrics
              containerPort: {{ $ctx.Values.metrics.port }}
              protocol: TCP
          {{- if $v.shutdown.preStopSeconds }}
          lifecycle:
            preStop:
              exec:
                command: ["node", "-e", {{ printf "setTimeout(() => {}, %d)" (mul $v.shutdown.preStopSeconds 1000) | quote }}]
          {{- end }}
          env:
            {{- include "webcodex.commonEnv" (dict "ctx" $ctx "component" .component "port" $v.port) | nindent 12 }}
            - name: WEBCODEX_METRICS_PORT
              value: {{ $ctx.Values.metrics.port | quote }}
            - name: WEBCODEX_READINESS
              value: {{ $ctx.Values.probes.readiness | quote }}
            - name: WEBCODEX_SHUTDOWN_DRAIN_MS
              value: {{ mul $v.shutdown.drainSeconds 1000 | int64 | quote }}
            - name: WEBCODEX_SERVICE_KEY
              valueFrom:
                secretKeyRef:
                  name: {{ include "webcodex.serviceKey.secretName" $ctx }}
                  key: {{ include "webcodex.serviceKey.secretKey" $ctx }}
            {{- with .env }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- with $v.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          startupProbe:
            httpGet:
              path: /healthz
              port: http
            periodSeconds: 2
            timeoutSeconds: 2
            failureThreshold: 30
          livenessProbe:
            httpGet:
              path: /healthz
              port: http
            periodSeconds: 10
            timeoutSeconds: 3
            failureThreshold: 3
          readinessProbe:
            {{- if eq $ctx.Values.probes.type "grpc" }}
            grpc:
              port: {{ $v.port }}
            {{- else }}
            httpGet:
              path: /readyz
              port: http
            {{- end }}
            periodSeconds: 5
            timeoutSeconds: 3
            failureThreshold: 3
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          securityContext:
            {{- include "webcodex.containerSecurityContext" $ctx | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- with .volumeMounts }}
            {{- . | nindent 12 }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: 256Mi
        {{- with .volumes }}
        {{- . | nindent 8 }}
        {{- end }}
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      affinity:
        {{- if $v.affinity }}
        {{- toYaml $v.affinity | nindent 8 }}
        {{- else }}
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector:
                  matchLabels:
                    {{- include "webcodex.componentSelectorLabels" $nameArgs | nindent 20 }}
        {{- end }}
      {{- with $v.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- range . }}
        - {{- toYaml (omit . "labelSelector") | nindent 10 }}
          labelSelector:
            {{- if .labelSelector }}
            {{- toYaml .labelSelector | nindent 12 }}
            {{- else }}
            matchLabels:
              {{- include "webcodex.componentSelectorLabels" $nameArgs | nindent 14 }}
            {{- end }}
        {{- end }}
      {{- end }}
{{- end -}}

{{/* Service of one component. Args: dict ctx key component. */}}
{{- define "webcodex.service" -}}
{{- $ctx := .ctx -}}
{{- $v := index $ctx.Values .key -}}
{{- $nameArgs := dict "ctx" $ctx "component" .component -}}
{{- $svc := default (dict "type" "ClusterIP" "annotations" (dict)) $v.service -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "webcodex.componentName" $nameArgs }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "webcodex.componentLabels" $nameArgs | nindent 4 }}
  {{- with $svc.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ $svc.type }}
  selector:
    {{- include "webcodex.componentSelectorLabels" $nameArgs | nindent 4 }}
  ports:
    - name: http
      port: {{ $v.port }}
      targetPort: http
      protocol: TCP
      {{- if ne .component "gateway" }}
      appProtocol: kubernetes.io/h2c
      {{- end }}
    {{- if $v.registrationPort }}
    - name: registration
      port: {{ $v.registrationPort }}
      targetPort: registration
      protocol: TCP
      appProtocol: kubernetes.io/h2c
    {{- end }}
    - name: metrics
      port: {{ $ctx.Values.metrics.port }}
      targetPort: metrics
      protocol: TCP
{{- end -}}

{{/* PodDisruptionBudget of one component. Args: dict ctx key component. */}}
{{- define "webcodex.pdb" -}}
{{- $ctx := .ctx -}}
{{- $v := index $ctx.Values .key -}}
{{- $nameArgs := dict "ctx" $ctx "component" .component -}}
{{- if $v.pdb.enabled }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "webcodex.componentName" $nameArgs }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "webcodex.componentLabels" $nameArgs | nindent 4 }}
spec:
  maxUnavailable: {{ $v.pdb.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "webcodex.componentSelectorLabels" $nameArgs | nindent 6 }}
{{- end }}
{{- end -}}

{{/* HorizontalPodAutoscaler of one component. Args: dict ctx key component. */}}
{{- define "webcodex.hpa" -}}
{{- $ctx := .ctx -}}
{{- $v := index $ctx.Values .key -}}
{{- $nameArgs := dict "ctx" $ctx "component" .component -}}
{{- if $v.hpa.enabled }}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "webcodex.componentName" $nameArgs }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "webcodex.componentLabels" $nameArgs | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "webcodex.componentName" $nameArgs }}
  minReplicas: {{ $v.hpa.minReplicas }}
  maxReplicas: {{ $v.hpa.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $v.hpa.targetCPUUtilizationPercentage }}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 300
{{- end }}
{{- end -}}

{{/*
Egress rules every chart pod gets: DNS (and OTLP export when configured). Args: root ctx, or
dict ctx strict: with strict (Runner pods), OTLP egress exists only towards the destinations
networkPolicy.otel.to names: never to any IP on the OTLP ports.
*/}}
{{- define "webcodex.np.baseEgress" -}}
{{- $ctx := .ctx | default . -}}
{{- $strict := and (hasKey . "strict") .strict -}}
- to:
    {{- toYaml $ctx.Values.networkPolicy.dns | nindent 4 }}
  ports:
    - protocol: UDP
      port: 53
    - protocol: TCP
      port: 53
{{- if and $ctx.Values.otel.endpoint (or (not $strict) $ctx.Values.networkPolicy.otel.to) }}
{{ include "webcodex.np.egressTarget" $ctx.Values.networkPolicy.otel }}
{{- end }}
{{- end -}}

{{/* One egress rule from an egressTarget value ({ports, to}). */}}
{{- define "webcodex.np.egressTarget" -}}
- ports:
    {{- range .ports }}
    - protocol: TCP
      port: {{ . }}
    {{- end }}
  {{- with .to }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* Egress to another chart component in the release namespace. Args: dict ctx component port. */}}
{{- define "webcodex.np.egressToComponent" -}}
- to:
    - podSelector:
        matchLabels:
          {{- include "webcodex.componentSelectorLabels" . | nindent 10 }}
  ports:
    - protocol: TCP
      port: {{ .port }}
{{- end -}}

{{/*
NetworkPolicy of one service. Args: dict ctx key component egress (rendered YAML list of
extra egress rules).
*/}}
{{- define "webcodex.networkPolicy" -}}
{{- $ctx := .ctx -}}
{{- if $ctx.Values.networkPolicy.enabled }}
{{- $v := index $ctx.Values .key -}}
{{- $nameArgs := dict "ctx" $ctx "component" .component -}}
{{- $callers := index (include "webcodex.callers" $ctx | fromYaml) .component }}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "webcodex.componentName" $nameArgs }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "webcodex.componentLabels" $nameArgs | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "webcodex.componentSelectorLabels" $nameArgs | nindent 6 }}
  policyTypes:
    - Ingress
    - Egress
  ingress:
    {{- if eq .component "gateway" }}
    - ports:
        - protocol: TCP
          port: {{ $v.port }}
      {{- with $ctx.Values.networkPolicy.gatewayIngressFrom }}
      from:
        {{- toYaml . | nindent 8 }}
        {{- if $ctx.Values.tests.enabled }}
        # the helm test pods
        - podSelector:
            matchLabels:
              {{- include "webcodex.componentSelectorLabels" (dict "ctx" $ctx "component" "test") | nindent 14 }}
        {{- end }}
      {{- end }}
    {{- else }}
    - from:
        {{- range $callers }}
        - podSelector:
            matchLabels:
              {{- include "webcodex.componentSelectorLabels" (dict "ctx" $ctx "component" .) | nindent 14 }}
        {{- end }}
      ports:
        - protocol: TCP
          port: {{ $v.port }}
    {{- end }}
    {{- with $ctx.Values.networkPolicy.metricsFrom }}
    - from:
        {{- toYaml . | nindent 8 }}
      ports:
        - protocol: TCP
          port: {{ $ctx.Values.metrics.port }}
    {{- end }}
    {{- with .ingress }}
    {{- . | nindent 4 }}
    {{- end }}
  egress:
    {{- include "webcodex.np.baseEgress" $ctx | nindent 4 }}
    {{- with .egress }}
    {{- . | nindent 4 }}
    {{- end }}
{{- end }}
{{- end -}}

{{/*
Cross-field checks the schema cannot express. Every failed check adds one line; the install
fails with all of them at once.
*/}}
{{- define "webcodex.validateValues" -}}
{{- $messages := list -}}
{{- if eq (include "webcodex.runnerNamespace" .) .Release.Namespace -}}
{{- $messages = append $messages (printf "runner.namespace: Runners must live in a namespace other than the release's (%s), one that enforces Pod Security \"restricted\"" .Release.Namespace) -}}
{{- end -}}
{{- if and .Values.migrations.enabled (ge (int .Values.migrations.activeDeadlineSeconds) (int .Values.migrations.helmTimeoutSeconds)) -}}
{{- $messages = append $messages (printf "migrations.activeDeadlineSeconds (%v) does not fit in helm's --timeout (%v s, migrations.helmTimeoutSeconds; helm's default is 5m): helm would give up on the migration hook before its Job ends. Lower the deadline, or run helm with a longer --timeout and set migrations.helmTimeoutSeconds to it" .Values.migrations.activeDeadlineSeconds .Values.migrations.helmTimeoutSeconds) -}}
{{- end -}}
{{- if and .Values.migrations.enabled (ge (int .Values.migrations.waitForDatabaseSeconds) (int .Values.migrations.activeDeadlineSeconds)) -}}
{{- $messages = append $messages "migrations.waitForDatabaseSeconds must be less than migrations.activeDeadlineSeconds (the Job needs time to migrate after the database is up)" -}}
{{- end -}}
{{- $scraped := or .Values.metrics.podAnnotations .Values.metrics.serviceMonitor.enabled -}}
{{- if and $scraped .Values.networkPolicy.enabled (not .Values.networkPolicy.metricsFrom) -}}
{{- $messages = append $messages "metrics: scraping is on (metrics.podAnnotations or metrics.serviceMonitor.enabled) but networkPolicy.metricsFrom names no scraper, so the NetworkPolicies would block it; set networkPolicy.metricsFrom (e.g. your Prometheus namespace)" -}}
{{- end -}}
{{- range .Values.runner.cloneEgress -}}
{{- if or (not .name) (not .cidr) (not .ports) -}}
{{- $messages = append $messages "runner.cloneEgress: every entry needs name, cidr and ports" -}}
{{- end -}}
{{- if and (hasSuffix "/0" (toString .cidr)) (not .except) -}}
{{- $messages = append $messages (printf "runner.cloneEgress %s: %s allows every address; list what it excludes in except (link-local, metadata and runner.clusterCIDRs are added)" (toString .name) (toString .cidr)) -}}
{{- end -}}
{{- end -}}
{{- $needsPostgres := or .Values.refResolver.enabled .Values.audit.enabled .Values.runnerBroker.enabled .Values.migrations.enabled -}}
{{- if and $needsPostgres (not .Values.postgres.url) (not .Values.postgres.existingSecret) -}}
{{- $messages = append $messages "postgres: set postgres.url or postgres.existingSecret (ref-resolver, audit, runner-broker and the migration Job need PostgreSQL)" -}}
{{- end -}}
{{- if and .Values.postgres.url .Values.postgres.existingSecret -}}
{{- $messages = append $messages "postgres: set only one of postgres.url and postgres.existingSecret" -}}
{{- end -}}
{{- if and .Values.runnerBroker.enabled (not .Values.redis.url) (not .Values.redis.existingSecret) -}}
{{- $messages = append $messages "redis: set redis.url or redis.existingSecret (runner-broker needs Redis)" -}}
{{- end -}}
{{- if and .Values.redis.url .Values.redis.existingSecret -}}
{{- $messages = append $messages "redis: set only one of redis.url and redis.existingSecret" -}}
{{- end -}}
{{- range $key, $component := (include "webcodex.components" . | fromYaml) -}}
{{- $v := index $.Values $key -}}
{{- if lt (int $v.replicas) 0 -}}
{{- $messages = append $messages (printf "%s.replicas: must be >= 0, got %v" $key $v.replicas) -}}
{{- end -}}
{{- if and (hasKey $v "hpa") (gt (int $v.hpa.minReplicas) (int $v.hpa.maxReplicas)) -}}
{{- $messages = append $messages (printf "%s.hpa: minReplicas (%v) must be <= maxReplicas (%v)" $key $v.hpa.minReplicas $v.hpa.maxReplicas) -}}
{{- end -}}
{{- end -}}
{{- if .Values.gateway.enabled -}}
{{- range $key := list "toolRegistry" "refResolver" "audit" "runnerBroker" -}}
{{- if not (index $.Values $key).enabled -}}
{{- $messages = append $messages (printf "gateway: the gateway calls %s, so %s.enabled must be true while gateway.enabled is true" $key $key) -}}
{{- end -}}
{{- end -}}
{{- if not .Values.oauth.issuer -}}
{{- $messages = append $messages "oauth.issuer: required; the gateway never serves MCP without bearer-token authentication" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.gateway.ingress.enabled (not .Values.gateway.ingress.hosts) -}}
{{- $messages = append $messages "gateway.ingress: enabled but gateway.ingress.hosts is empty" -}}
{{- end -}}
{{- if and .Values.tests.enabled (not .Values.gateway.enabled) -}}
{{- $messages = append $messages "tests: the helm test pods call the gateway; set gateway.enabled=true or tests.enabled=false" -}}
{{- end -}}
{{- if and .Values.runner.createNamespace (eq (include "webcodex.runnerNamespace" .) .Release.Namespace) -}}
{{- $messages = append $messages "runner.createNamespace: needs a runner namespace other than the release namespace" -}}
{{- end -}}
{{- if and .Values.runner.resourceQuota.enabled (not .Values.runner.resourceQuota.hard) -}}
{{- $messages = append $messages "runner.resourceQuota: enabled but runner.resourceQuota.hard is empty" -}}
{{- end -}}
{{- if $messages -}}
{{- printf "\nVALUES VALIDATION:\n  - %s" (join "\n  - " $messages) | fail -}}
{{- end -}}
{{- end -}}

{{/* PDB and HPA of one component, each after a document separator when rendered. Args: dict ctx key component. */}}
{{- define "webcodex.extras" -}}
{{- with include "webcodex.pdb" . }}
---
{{ . }}
{{- end }}
{{- if hasKey (index .ctx.Values .key) "hpa" }}
{{- with include "webcodex.hpa" . }}
---
{{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
Spec of a `helm test` pod up to its single container's `image`; callers append args and env
(indented as container fields). Runs the gateway image, which carries node.
*/}}
{{- define "webcodex.testPodSpec" -}}
restartPolicy: Never
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- include "webcodex.podSecurityContext" . | nindent 2 }}
{{- with include "webcodex.imagePullSecrets" . }}
{{- . }}
{{- end }}
volumes:
  - name: tmp
    emptyDir:
      sizeLimit: 16Mi
containers:
  - name: test
    image: {{ include "webcodex.image" (dict "ctx" . "image" "gateway" "override" .Values.gateway.image) | quote }}
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    resources:
      requests:
        cpu: 10m
        memory: 64Mi
      limits:
        cpu: 200m
        memory: 128Mi
    securityContext:
      {{- include "webcodex.containerSecurityContext" . | nindent 6 }}
    volumeMounts:
      - name: tmp
        mountPath: /tmp
{{- end -}}
