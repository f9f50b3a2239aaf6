{{/* The pod template the Deployment and the StatefulSet share. */}}
{{- define "firstword.podTemplate" -}}
{{- $secret := include "firstword.secretName" . -}}
metadata:
  annotations:
    # A changed config or secret rolls the pods.
    checksum/config: {{ include "firstword.config" . | sha256sum }}
    {{- if and .Values.secrets (not .Values.existingSecret) }}
    checksum/secret: {{ toJson .Values.secrets | sha256sum }}
    {{- end }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  labels:
    {{- include "firstword.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "firstword.serviceAccountName" . }}
  automountServiceAccountToken: {{ .Values.serviceAccount.automountToken }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  terminationGracePeriodSeconds: {{ include "firstword.gracePeriod" . }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  containers:
    - name: firstword
      image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args: ["--config", "/etc/firstword/firstword.yaml"]
      ports:
        - name: http
          containerPort: {{ .Values.port }}
          protocol: TCP
        {{- if include "firstword.metricsOn" . }}
        - name: metrics
          containerPort: {{ .Values.metrics.port }}
          protocol: TCP
        {{- end }}
      {{- if $secret }}
      envFrom:
        - secretRef:
            name: {{ $secret }}
      {{- end }}
      {{- with .Values.env }}
      env:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      startupProbe:
        httpGet:
          path: /healthz
          port: http
        periodSeconds: {{ .Values.probes.startup.periodSeconds }}
        failureThreshold: {{ .Values.probes.startup.failureThreshold }}
      readinessProbe:
        httpGet:
          path: /readyz
          port: http
        periodSeconds: {{ .Values.probes.readiness.periodSeconds }}
        failureThreshold: {{ .Values.probes.readiness.failureThreshold }}
        timeoutSeconds: {{ .Values.probes.readiness.timeoutSeconds }}
      livenessProbe:
        httpGet:
          path: /healthz
          port: http
        periodSeconds: {{ .Values.probes.liveness.periodSeconds }}
        failureThreshold: {{ .Values.probes.liveness.failureThreshold }}
        timeoutSeconds: {{ .Values.probes.liveness.timeoutSeconds }}
      {{- if gt (int .Values.shutdown.preStopSleepSeconds) 0 }}
      lifecycle:
        preStop:
          # Endpoints and load balancers drop the pod while it sleeps;
          # SIGTERM (and draining) comes after.
          sleep:
            seconds: {{ .Values.shutdown.preStopSleepSeconds }}
      {{- end }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      volumeMounts:
        - name: config
          mountPath: /etc/firstword
          readOnly: true
        - name: data
          mountPath: /data
        - name: tmp
          mountPath: /tmp
  volumes:
    - name: config
      configMap:
        name: {{ include "firstword.fullname" . }}
    {{- if not (include "firstword.statefulSet" .) }}
    {{- /* The StatefulSet's data is its volumeClaimTemplate. */}}
    - name: data
      {{- if .Values.persistence.existingClaim }}
      persistentVolumeClaim:
        claimName: {{ .Values.persistence.existingClaim }}
      {{- else }}
      emptyDir: {}
      {{- end }}
    {{- end }}
    - name: tmp
      emptyDir: {}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  {{- /* A constraint without a labelSelector spreads this release's pods. */}}
  {{- $spread := list }}
  {{- range . }}
  {{- $c := deepCopy . }}
  {{- if not (hasKey $c "labelSelector") }}
  {{- $_ := set $c "labelSelector" (dict "matchLabels" (include "firstword.selectorLabels" $ | fromYaml)) }}
  {{- end }}
  {{- $spread = append $spread $c }}
  {{- end }}
  topologySpreadConstraints:
    {{- toYaml $spread | nindent 4 }}
  {{- end }}
{{- end }}
