package check

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const gpuPool = `{apiVersion: karpenter.sh/v1, kind: NodePool, metadata: {name: gpu}, spec: {template: {spec: {
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu},
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}}}}`

func nodeClass(name, alias, devices string) string {
	return `{apiVersion: karpenter.k8s.aws/v1, kind: EC2NodeClass, metadata: {name: ` + name + `}, spec: {
  amiSelectorTerms: [` + alias + `], blockDeviceMappings: [` + devices + `]}}`
}

func TestGPUNodeClassRoot(t *testing.T) {
	const root200 = `{deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 200Gi, volumeType: gp3}}`
	cases := []struct {
		name string
		objs string
		want []string // message substrings, one per violation, in order
	}{
		{"class in Git, 200 GiB, pinned alias", gpuPool + "\n---\n" + nodeClass("gpu", `{alias: al2023@v20260714}`, root200), nil},
		{"pinned by AMI id", gpuPool + "\n---\n" + nodeClass("gpu", `{id: ami-0123456789abcdef0}`, root200), nil},
		{"class not rendered (issue #15: default)", strings.Replace(gpuPool, "EC2NodeClass, name: gpu}", "EC2NodeClass, name: default}", 1),
			[]string{"NodePool gpu: uses EC2NodeClass default, which the env does not render"}},
		{"root volume 20 GiB and @latest", gpuPool + "\n---\n" + nodeClass("gpu", `{alias: al2023@latest}`,
			`{deviceName: /dev/xvda, ebs: {volumeSize: 20Gi}}`),
			[]string{"EC2NodeClass gpu's root volume /dev/xvda is 20Gi, below 100Gi", "EC2NodeClass gpu selects AMI alias al2023@latest"}},
		{"100G is less than 100Gi", gpuPool + "\n---\n" + nodeClass("gpu", `{alias: al2023@v20260714}`,
			`{deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 100G}}`), []string{"is 100G, below 100Gi"}},
		{"no root mapping", gpuPool + "\n---\n" + nodeClass("gpu", `{alias: al2023@v20260714}`,
			`{deviceName: /dev/xvdb, ebs: {volumeSize: 500Gi}}`), []string{"EC2NodeClass gpu has no root volume (blockDeviceMappings /dev/xvda)"}},
		{"Bottlerocket keeps images on /dev/xvdb", gpuPool + "\n---\n" + nodeClass("gpu", `{alias: bottlerocket@v1.50.0}`,
			`{deviceName: /dev/xvda, ebs: {volumeSize: 4Gi}}, {deviceName: /dev/xvdb, ebs: {volumeSize: 200Gi}}`), nil},
		{"AMI by tags floats", gpuPool + "\n---\n" + nodeClass("gpu", `{tags: {team: ml}}`, root200),
			[]string{"selects its AMI by name, tags or SSM parameter"}},
		{"a CPU pool is not checked", `{apiVersion: karpenter.sh/v1, kind: NodePool, metadata: {name: cpu}, spec: {template: {spec: {
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}}}}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := gpuNodeClassRoot(parseObjects(t, tc.objs))
			require.Len(t, got, len(tc.want), "%+v", got)
			for i, w := range tc.want {
				assert.Equal(t, "gpu-nodeclass-root", got[i].Rule)
				assert.Equal(t, "NodePool gpu", got[i].Object)
				assert.Contains(t, got[i].Message, w)
			}
		})
	}
}

func TestBatchPreemption(t *testing.T) {
	cron := func(jobSpec, annotations string) string {
		return `{apiVersion: batch/v1, kind: CronJob, metadata: {name: night, namespace: llm-batch}, spec: {schedule: "0 1 * * *", jobTemplate: {spec: {` +
			jobSpec + `template: {metadata: {annotations: {` + annotations + `}}, spec: {restartPolicy: Never, containers: [{name: job, image: "x:1",
  resources: {limits: {nvidia.com/gpu: "1"}}}]}}}}}}`
	}
	const ignore = `podFailurePolicy: {rules: [{action: Ignore, onPodConditions: [{type: DisruptionTarget}]}]}, `
	const keep = `karpenter.sh/do-not-disrupt: "true"`
	cases := []struct {
		name string
		obj  string
		want []string
	}{
		{"ignores disruptions, not disrupted", cron(ignore, keep), nil},
		{"no podFailurePolicy (issue #15)", cron("backoffLimit: 1, ", keep), []string{"CronJob llm-batch/night asks for a GPU but has no podFailurePolicy rule"}},
		{"DisruptionTarget counted (FailJob)", cron(`podFailurePolicy: {rules: [{action: FailJob, onPodConditions: [{type: DisruptionTarget}]}]}, `, keep),
			[]string{"has no podFailurePolicy rule {action: Ignore"}},
		{"Ignore on status False only", cron(`podFailurePolicy: {rules: [{action: Ignore, onPodConditions: [{type: DisruptionTarget, status: "False"}]}]}, `, keep),
			[]string{"has no podFailurePolicy rule"}},
		{"no do-not-disrupt", cron(ignore, ""), []string{"CronJob llm-batch/night's pods lack the annotation karpenter.sh/do-not-disrupt"}},
		{"a Job too", `{apiVersion: batch/v1, kind: Job, metadata: {name: once, namespace: llm-batch}, spec: {template: {spec: {restartPolicy: Never,
  containers: [{name: job, image: "x:1", resources: {limits: {nvidia.com/gpu: "1"}}}]}}}}`,
			[]string{"Job llm-batch/once asks for a GPU", "Job llm-batch/once's pods lack"}},
		{"a CPU job is not checked", `{apiVersion: batch/v1, kind: Job, metadata: {name: sync, namespace: llm-inference}, spec: {template: {spec: {containers: [{name: s, image: "x:1"}]}}}}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := batchPreemption(parseObjects(t, tc.obj))
			require.Len(t, got, len(tc.want), "%+v", got)
			for i, w := range tc.want {
				assert.Equal(t, "batch-preemption", got[i].Rule)
				assert.Contains(t, got[i].Message, w)
			}
		})
	}
}

func TestGPUDisruptionBudget(t *testing.T) {
	pool := func(expire, budgets string) string {
		return `{apiVersion: karpenter.sh/v1, kind: NodePool, metadata: {name: gpu}, spec: {template: {spec: {` + expire +
			`taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}}, disruption: {consolidationPolicy: WhenEmpty, ` + budgets + `}}}`
	}
	const never = `expireAfter: Never, `
	const good = `budgets: [{nodes: "1"}, {nodes: "0", schedule: "0 5 * * 1-5", duration: 14h, reasons: [Empty, Drifted, Underutilized]}]`
	cases := []struct {
		name string
		objs string
		want []string
	}{
		{"zero in business hours, one otherwise", pool(never, good), nil},
		{"the zero budget for all reasons", pool(never, `budgets: [{nodes: "1"}, {nodes: "0", schedule: "0 6 * * mon-fri", duration: 9h}]`), nil},
		{"only one node at a time (issue #15)", pool(never, `budgets: [{nodes: "1"}]`),
			[]string{"NodePool gpu: no budget of 0 nodes for reasons Empty, Drifted covers business hours (weekdays 09:00-18:00 Europe/Moscow; first gap Mon 09:00"}},
		{"window ends too early", pool(never, `budgets: [{nodes: "1"}, {nodes: "0", schedule: "0 6 * * 1-5", duration: 8h}]`),
			[]string{"first gap Mon 17:00"}},
		{"Fridays left out", pool(never, `budgets: [{nodes: "1"}, {nodes: "0", schedule: "0 5 * * 1-4", duration: 14h}]`),
			[]string{"first gap Fri 09:00"}},
		{"zero budget not for drift", pool(never, `budgets: [{nodes: "1"}, {nodes: "0", schedule: "0 5 * * 1-5", duration: 14h, reasons: [Empty]}]`),
			[]string{"no budget of 0 nodes"}},
		{"nothing bounds the nights", pool(never, `budgets: [{nodes: "0", schedule: "0 5 * * 1-5", duration: 14h}]`),
			[]string{"no always-active budget below 100%"}},
		{"expires", pool("", good), []string{"expireAfter 720h (the default): expiration is forceful"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := gpuDisruptionBudget(parseObjects(t, tc.objs))
			require.Len(t, got, len(tc.want), "%+v", got)
			for i, w := range tc.want {
				assert.Equal(t, "gpu-disruption-budget", got[i].Rule)
				assert.Equal(t, "NodePool gpu", got[i].Object)
				assert.Contains(t, got[i].Message, w)
			}
		})
	}
}

func TestGPUPodDisruptionBudgets(t *testing.T) {
	const deploy = `{apiVersion: apps/v1, kind: Deployment, metadata: {name: vllm-llama, namespace: llm-inference}, spec: {replicas: 1,
  template: {metadata: {labels: {app.kubernetes.io/name: vllm-llama}}, spec: {containers: [{name: vllm, image: "v:1", resources: {limits: {nvidia.com/gpu: "1"}}}]}}}}`
	scaled := func(minR string) string {
		return `{apiVersion: keda.sh/v1alpha1, kind: ScaledObject, metadata: {name: vllm-llama, namespace: llm-inference}, spec: {scaleTargetRef: {name: vllm-llama}, minReplicaCount: ` + minR + `}}`
	}
	pdb := func(spec string) string {
		return `{apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: vllm-llama, namespace: llm-inference}, spec: {` + spec +
			`, selector: {matchLabels: {app.kubernetes.io/name: vllm-llama}}}}`
	}
	cases := []struct {
		name   string
		objs   []string
		object string
		want   string
	}{
		{"maxUnavailable 1 with two replicas", []string{deploy, scaled("2"), pdb("maxUnavailable: 1")}, "", ""},
		// the only replica must be drainable (rule drain-possible): this rule leaves it alone
		{"maxUnavailable 1 with the only replica", []string{deploy, scaled("1"), pdb("maxUnavailable: 1")}, "", ""},
		{"maxUnavailable 2 with two replicas", []string{deploy, scaled("2"), pdb("maxUnavailable: 2")},
			"PodDisruptionBudget llm-inference/vllm-llama", "lets every replica of Deployment llm-inference/vllm-llama (minimum 2) be evicted at once: maxUnavailable 2 allows 2 of 2"},
		{"maxUnavailable 50% of three rounds up to 2: one kept", []string{deploy, scaled("3"), pdb(`maxUnavailable: "50%"`)}, "", ""},
		{"maxUnavailable 100% of three", []string{deploy, scaled("3"), pdb(`maxUnavailable: "100%"`)},
			"PodDisruptionBudget llm-inference/vllm-llama", "maxUnavailable 100% allows 3 of 3"},
		{"minAvailable 0", []string{deploy, scaled("3"), pdb("minAvailable: 0")},
			"PodDisruptionBudget llm-inference/vllm-llama", "minAvailable 0 keeps 0 of 3, allows 3"},
		{"no PDB, replicas from the Deployment", []string{deploy}, "Deployment llm-inference/vllm-llama", "has no PodDisruptionBudget"},
		{"scales to zero (dev)", []string{deploy, scaled("0")}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := gpuDisruptionBudget(parseObjects(t, strings.Join(tc.objs, "\n---\n")))
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1, "%+v", got)
			assert.Equal(t, "gpu-disruption-budget", got[0].Rule)
			assert.Equal(t, tc.object, got[0].Object)
			assert.Contains(t, got[0].Message, tc.want)
		})
	}
}

// TestCheckGPUNegatives puts back each bad pattern of issue #15 part 6 in a copy of the
// repository: auditor check fails, naming the objects.
func TestCheckGPUNegatives(t *testing.T) {
	type edit struct{ file, old, new string }
	cases := []struct {
		name  string
		edits []edit
		rule  string
		want  map[string][]string // env -> objects named
	}{
		{"GPU pool on the default node class", []edit{{"base/node-pools/gpu.yaml", "name: gpu # >= 100 GiB", "name: default # >= 100 GiB"}},
			"gpu-nodeclass-root", map[string][]string{"dev": {"NodePool gpu"}, "staging": {"NodePool gpu"}, "prod": {"NodePool gpu"}}},
		{"GPU root of 20 GiB on @latest", []edit{{"base/node-pools/nodeclass-gpu.yaml", "volumeSize: 200Gi", "volumeSize: 20Gi"},
			{"base/node-pools/nodeclass-gpu.yaml", "alias: al2023@v20260714", "alias: al2023@latest"}},
			"gpu-nodeclass-root", map[string][]string{"prod": {"NodePool gpu", "NodePool gpu"}}},
		{"batch without podFailurePolicy", []edit{{"base/batch/night-transcription.yaml", "            onPodConditions:\n              - type: DisruptionTarget\n", "            onExitCodes: {operator: In, values: [42]}\n"}},
			"batch-preemption", map[string][]string{"dev": {"CronJob llm-batch/night-transcription"}, "prod": {"CronJob llm-batch/night-transcription"}}},
		{"GPU budgets without business hours", []edit{{"base/node-pools/gpu.yaml", `        schedule: "0 5 * * 1-5"`, `        schedule: "0 22 * * 1-5"`}},
			"gpu-disruption-budget", map[string][]string{"staging": {"NodePool gpu"}, "prod": {"NodePool gpu"}}},
		{"vLLM PDB that lets every replica go", []edit{{"base/vllm/qwen.yaml", "\n  maxUnavailable: 1\n", "\n  maxUnavailable: 2\n"}},
			// prod's qwen keeps 2 replicas (min 2), staging's 1 (drainable, as it must be); dev's scales to zero
			"gpu-disruption-budget", map[string][]string{"dev": nil, "staging": nil, "prod": {"PodDisruptionBudget llm-inference/vllm-qwen"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, commit, edit := repoCopy(t)
			for _, e := range tc.edits {
				edit(e.file, e.old, e.new)
			}
			commit(tc.name)
			res := runCheck(t, dir)
			assert.False(t, res.Passed)
			for _, env := range res.Envs {
				want, ok := tc.want[env.Env]
				if !ok {
					continue
				}
				var got []string
				for _, v := range env.Violations {
					if v.Rule == tc.rule {
						got = append(got, v.Object)
						t.Logf("%s: %s", env.Env, v.Message)
					}
				}
				assert.Equal(t, want, got, env.Env)
			}
		})
	}
}

// TestCheckGPUPoolsOnHead: the repository's GPU pool passes the GPU rules in every env, and the
// check's GPU section says why (node class, root, pinned AMI, budgets, expiry).
func TestCheckGPUPoolsOnHead(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit("overlays/prod/kustomization.yaml", "newTag: 1.4.2", "newTag: 1.4.3")
	commit("an unrelated change")
	res := runCheck(t, dir)
	for _, env := range res.Envs {
		for _, v := range env.Violations {
			assert.NotContains(t, []string{"gpu-nodeclass-root", "gpu-disruption-budget", "batch-preemption"}, v.Rule, "%s: %+v", env.Env, v)
		}
		require.Len(t, env.GPUPools, 1, env.Env)
		p := env.GPUPools[0]
		assert.Equal(t, GPUPool{Pool: "gpu", NodeClass: "gpu", RootVolume: "200Gi on /dev/xvda", AMI: "al2023@v20260714",
			Budgets: []string{"1 nodes", `0 nodes from "0 5 * * 1-5" for 14h (Empty, Drifted, Underutilized)`}, ExpireAfter: "Never"}, p, env.Env)
	}
}
