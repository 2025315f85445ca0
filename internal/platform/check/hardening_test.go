package check

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// assertViolations checks that got are the violations want begins, one each, in order: "rule
// object: message", each want a prefix of its violation said so.
func assertViolations(t *testing.T, want []string, got []Violation) {
	t.Helper()
	var said []string
	for _, v := range got {
		said = append(said, v.Rule+" "+v.Object+": "+v.Message)
	}
	if !assert.Len(t, said, len(want), "%q", said) {
		return
	}
	for i := range want {
		assert.True(t, strings.HasPrefix(said[i], want[i]), "want %q\n got %q", want[i], said[i])
	}
}

const spreadDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: llm-api}
spec:
  replicas: %s
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
%s      containers: [{name: api, image: api:1, resources: {limits: {%s}}}]`

func TestReplicasSpread(t *testing.T) {
	const sel = "labelSelector: {matchLabels: {app: api}}"
	zones := "      topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, " + sel + "}]\n"
	nodes := "      topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, " + sel + "}]\n"
	both := "      topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, " + sel +
		"}, {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchExpressions: [{key: app, operator: In, values: [api, web]}]}}]\n"
	otherPods := strings.ReplaceAll(both, "{app: api}", "{app: web}")
	otherPods = strings.ReplaceAll(otherPods, "values: [api, web]", "values: [web]")
	noSelector := "      topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}, {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}]\n"
	antiAffinityOnOthers := zones + "      affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}}}]}}\n"
	zonesAndAntiAffinity := zones + "      affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 100, podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: api}}}}]}}\n"
	hpa := `
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: api, namespace: llm-api}
spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: api}, minReplicas: 3, maxReplicas: 6}`
	for _, tc := range []struct {
		name, replicas, spread, limits, more string
		want                                 []string
	}{
		{name: "three replicas, nothing spread", replicas: "3", limits: "cpu: '1'",
			want: []string{"replicas-spread Deployment llm-api/api: Deployment llm-api/api runs 3 replicas with nothing spreading them over topology.kubernetes.io/zone and kubernetes.io/hostname"}},
		{name: "spread over zones only", replicas: "3", spread: zones, limits: "cpu: '1'",
			want: []string{"replicas-spread Deployment llm-api/api: Deployment llm-api/api runs 3 replicas with nothing spreading them over kubernetes.io/hostname"}},
		{name: "spread over nodes only", replicas: "2", spread: nodes, limits: "cpu: '1'",
			want: []string{"replicas-spread Deployment llm-api/api: Deployment llm-api/api runs 2 replicas with nothing spreading them over topology.kubernetes.io/zone"}},
		{name: "an autoscaler's minimum counts", replicas: "1", limits: "cpu: '1'", more: hpa,
			want: []string{"replicas-spread Deployment llm-api/api: Deployment llm-api/api runs 3 replicas with nothing spreading them over topology.kubernetes.io/zone and kubernetes.io/hostname"}},
		{name: "zones and nodes", replicas: "3", spread: both, limits: "cpu: '1'"},
		{name: "zones and an anti-affinity on nodes", replicas: "3", spread: zonesAndAntiAffinity, limits: "cpu: '1'"},
		{name: "one replica", replicas: "1", limits: "cpu: '1'"},
		{name: "constraints selecting other pods", replicas: "3", spread: otherPods, limits: "cpu: '1'",
			want: []string{"replicas-spread Deployment llm-api/api: Deployment llm-api/api runs 3 replicas with nothing spreading them over topology.kubernetes.io/zone and kubernetes.io/hostname (the labelSelector of its constraint on topology.kubernetes.io/zone and kubernetes.io/hostname does not match its pods' labels"}},
		{name: "constraints without a labelSelector select no pod", replicas: "3", spread: noSelector, limits: "cpu: '1'",
			want: []string{"replicas-spread Deployment llm-api/api: Deployment llm-api/api runs 3 replicas with nothing spreading them over topology.kubernetes.io/zone and kubernetes.io/hostname (the labelSelector"}},
		{name: "an anti-affinity on other pods", replicas: "3", spread: antiAffinityOnOthers, limits: "cpu: '1'",
			want: []string{"replicas-spread Deployment llm-api/api: Deployment llm-api/api runs 3 replicas with nothing spreading them over kubernetes.io/hostname (the labelSelector"}},
		{name: "a GPU workload is the GPU pool's business", replicas: "3", limits: "nvidia.com/gpu: 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := parseObjects(t, fmt.Sprintf(spreadDeployment, tc.replicas, tc.spread, tc.limits)+tc.more)
			assertViolations(t, tc.want, replicasSpread(objs))
		})
	}
}

const syncedJob = `apiVersion: batch/v1
kind: Job
metadata:
  name: weights-sync-qwen-a09a354
  namespace: llm-inference
  annotations: {%s}
spec:
  template:
    spec: {restartPolicy: Never, containers: [{name: sync, image: aws-cli:2}]}`

func TestJobsSyncAgain(t *testing.T) {
	const msg = "job-sync-again Job llm-inference/weights-sync-qwen-a09a354: Job llm-inference/weights-sync-qwen-a09a354 is synced as a plain resource, and a Job's pod template cannot change"
	for _, tc := range []struct {
		name, annotations string
		want              []string
	}{
		{name: "a plain Job", annotations: "", want: []string{msg}},
		{name: "Replace alone fails too: the template is immutable", annotations: "argocd.argoproj.io/sync-options: Replace=true", want: []string{msg}},
		{name: "Force and Replace", annotations: "argocd.argoproj.io/sync-options: 'Force=true,Replace=true'"},
		{name: "with other options", annotations: "argocd.argoproj.io/sync-options: 'Prune=false, Replace=true, Force=true'"},
		{name: "a hook", annotations: "argocd.argoproj.io/hook: PreSync"},
		{name: "a Helm hook, which Argo CD runs as one", annotations: "helm.sh/hook: pre-upgrade"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := parseObjects(t, fmt.Sprintf(syncedJob, tc.annotations))
			assertViolations(t, tc.want, jobsSyncAgain(objs))
		})
	}
}

const routedBackend = `apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm-qwen, namespace: llm-inference, annotations: {argocd.argoproj.io/sync-wave: "1"}}
spec:
  selector: {matchLabels: {model: qwen}}
  template:
    metadata: {labels: {model: qwen, track: stable}}
    spec: {containers: [{name: vllm, image: vllm:1}]}
---
apiVersion: v1
kind: Service
metadata: {name: vllm-qwen, namespace: llm-inference, annotations: {argocd.argoproj.io/sync-wave: "1"}}
spec: {selector: {model: qwen}, ports: [{port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: qwen, namespace: llm-inference, annotations: {argocd.argoproj.io/sync-wave: "%s"}}
spec:
  parentRefs: [{name: llm-gateway}]
  rules: [{backendRefs: [%s]}]`

func TestRoutesAfterBackends(t *testing.T) {
	const sameWave = "route-after-backend HTTPRoute llm-inference/qwen: HTTPRoute llm-inference/qwen (sync wave 1) sends traffic to Deployment llm-inference/vllm-qwen (sync wave 1)"
	for _, tc := range []struct {
		name, wave, backends string
		want                 []string
	}{
		{name: "the route with its backend", wave: "1", backends: "{name: vllm-qwen, port: 80}", want: []string{sameWave}},
		{name: "the route before its backend", wave: "0", backends: "{name: vllm-qwen, port: 80}",
			want: []string{"route-after-backend HTTPRoute llm-inference/qwen: HTTPRoute llm-inference/qwen (sync wave 0) sends traffic to Deployment llm-inference/vllm-qwen (sync wave 1)"}},
		{name: "the route a wave after", wave: "2", backends: "{name: vllm-qwen, port: 80}"},
		{name: "a backend named with its kind", wave: "1", backends: "{kind: Service, name: vllm-qwen, namespace: llm-inference, port: 80}", want: []string{sameWave}},
		{name: "a Service the env does not render", wave: "1", backends: "{name: elsewhere, port: 80}"},
		{name: "a backend of another kind", wave: "1", backends: "{group: inference.networking.k8s.io, kind: InferencePool, name: vllm-qwen}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := parseObjects(t, fmt.Sprintf(routedBackend, tc.wave, tc.backends))
			assertViolations(t, tc.want, routesAfterBackends(objs))
		})
	}
}

func TestImageDigests(t *testing.T) {
	const digest = "@sha256:6ac4807063bbecddca0250bfbcff52acf18c22263b904d12919349e6d0a408f1"
	const workload = `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: qdrant, namespace: llm-rag}
spec:
  template:
    spec:
      initContainers: [{name: init, image: "%s"}]
      containers: [{name: qdrant, image: "%s"}]`
	const cnpg = `apiVersion: postgresql.cnpg.io/v1
kind: Cluster
metadata: {name: pgvector, namespace: llm-rag}
spec: {instances: 3, imageName: "%s"}`
	const pod = `apiVersion: v1
kind: Pod
metadata: {name: debug, namespace: llm-rag}
spec:
  containers: [{name: sh, image: "%s"}]`
	for _, tc := range []struct {
		name, manifest string
		want           []string
	}{
		{name: "every image by digest", manifest: fmt.Sprintf(workload, "busybox:1.37"+digest, "qdrant/qdrant:v1.15.4"+digest)},
		{name: "a container by tag", manifest: fmt.Sprintf(workload, "busybox:1.37"+digest, "qdrant/qdrant:v1.15.4"),
			want: []string{"image-digest StatefulSet llm-rag/qdrant: container qdrant: image qdrant/qdrant:v1.15.4 is pinned by tag only"}},
		{name: "an init container by tag", manifest: fmt.Sprintf(workload, "busybox:1.37", "qdrant/qdrant:v1.15.4"+digest),
			want: []string{"image-digest StatefulSet llm-rag/qdrant: container init: image busybox:1.37 is pinned by tag only"}},
		{name: "the template's registry is site-values' business", manifest: fmt.Sprintf(workload, "registry.example.com/llm/init:1", "qdrant/qdrant:v1.15.4"+digest)},
		{name: "a PostgreSQL cluster by tag", manifest: fmt.Sprintf(cnpg, "ghcr.io/cloudnative-pg/postgresql:17.5"),
			want: []string{"image-digest Cluster llm-rag/pgvector: imageName: image ghcr.io/cloudnative-pg/postgresql:17.5 is pinned by tag only"}},
		{name: "a PostgreSQL cluster by digest", manifest: fmt.Sprintf(cnpg, "ghcr.io/cloudnative-pg/postgresql:17.5"+digest)},
		{name: "a bare Pod by tag", manifest: fmt.Sprintf(pod, "busybox:1.37"),
			want: []string{"image-digest Pod llm-rag/debug: container sh: image busybox:1.37 is pinned by tag only"}},
		{name: "a bare Pod by digest", manifest: fmt.Sprintf(pod, "busybox:1.37"+digest)},
		{name: "a digest cut short", manifest: fmt.Sprintf(workload, "busybox:1.37"+digest, "qdrant/qdrant:v1.15.4@sha256:0123"),
			want: []string{"image-digest StatefulSet llm-rag/qdrant: container qdrant: image qdrant/qdrant:v1.15.4@sha256:0123 has no sha256 digest of 64 hex digits"}},
		{name: "a digest of another algorithm", manifest: fmt.Sprintf(workload, "busybox:1.37@sha512:"+strings.Repeat("0", 128), "qdrant/qdrant:v1.15.4"+digest),
			want: []string{"image-digest StatefulSet llm-rag/qdrant: container init: image busybox:1.37@sha512:"}},
		{name: "a digest in capitals", manifest: fmt.Sprintf(workload, "busybox:1.37"+strings.ToUpper(digest), "qdrant/qdrant:v1.15.4"+digest),
			want: []string{"image-digest StatefulSet llm-rag/qdrant: container init: image busybox:1.37@SHA256:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertViolations(t, tc.want, imageDigests(parseObjects(t, tc.manifest)))
		})
	}
}
