package check

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDrainPossible(t *testing.T) {
	workload := func(kind, name, replicas string) string {
		spec := ""
		if replicas != "" {
			spec = "replicas: " + replicas + ", "
		}
		return `{apiVersion: apps/v1, kind: ` + kind + `, metadata: {name: ` + name + `, namespace: llm-rag}, spec: {` + spec +
			`template: {metadata: {labels: {app.kubernetes.io/name: ` + name + `}}, spec: {containers: [{name: c, image: "i:1"}]}}}}`
	}
	pdb := func(name, spec string) string {
		return `{apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: ` + name + `, namespace: llm-rag}, spec: {` + spec +
			`, selector: {matchLabels: {app.kubernetes.io/name: ` + name + `}}}}`
	}
	hpa := func(target, minR string) string {
		m := ""
		if minR != "" {
			m = ", minReplicas: " + minR
		}
		return `{apiVersion: autoscaling/v2, kind: HorizontalPodAutoscaler, metadata: {name: ` + target + `, namespace: llm-rag}, spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: ` + target + `}, maxReplicas: 9` + m + `}}`
	}
	scaledObject := func(target, minR string) string {
		return `{apiVersion: keda.sh/v1alpha1, kind: ScaledObject, metadata: {name: ` + target + `, namespace: llm-rag}, spec: {scaleTargetRef: {name: ` + target + `}, minReplicaCount: ` + minR + `}}`
	}
	cases := []struct {
		name string
		objs []string
		want []string // per violation, in object order: "object: message substring"; none = pass
	}{
		{"StatefulSet of one with maxUnavailable 0",
			[]string{workload("StatefulSet", "qdrant", "1"), pdb("qdrant", "maxUnavailable: 0")},
			[]string{"PodDisruptionBudget llm-rag/qdrant: allows no eviction at the minimum scale of StatefulSet llm-rag/qdrant (1): maxUnavailable 0 allows 0 of 1"}},
		{"one replica by default with minAvailable 1",
			[]string{workload("Deployment", "api", ""), pdb("api", "minAvailable: 1")},
			[]string{"PodDisruptionBudget llm-rag/api: allows no eviction at the minimum scale of Deployment llm-rag/api (1): minAvailable 1 keeps 1 of 1, allows 0"}},
		{"the autoscaler's minimum, not spec.replicas: KEDA keeps 1 of a Deployment of 3",
			[]string{workload("Deployment", "vllm", "3"), scaledObject("vllm", "1"), pdb("vllm", "minAvailable: 1")},
			[]string{"PodDisruptionBudget llm-rag/vllm: allows no eviction at the minimum scale of Deployment llm-rag/vllm (1)"}},
		{"an HPA without minReplicas keeps 1",
			[]string{workload("Deployment", "api", "4"), hpa("api", ""), pdb("api", `minAvailable: "100%"`)},
			[]string{"PodDisruptionBudget llm-rag/api: allows no eviction at the minimum scale of Deployment llm-rag/api (1): minAvailable 100% keeps 1 of 1"}},
		{"minAvailable 50% of 3 rounds up to 2: one eviction",
			[]string{workload("Deployment", "api", "1"), hpa("api", "3"), pdb("api", `minAvailable: "50%"`)}, nil},
		{"minAvailable 67% of 3 rounds up to 3: none",
			[]string{workload("Deployment", "api", "3"), pdb("api", `minAvailable: "67%"`)},
			[]string{"PodDisruptionBudget llm-rag/api: allows no eviction at the minimum scale of Deployment llm-rag/api (3): minAvailable 67% keeps 3 of 3, allows 0"}},
		{"maxUnavailable 10% of 2 rounds up to 1",
			[]string{workload("Deployment", "api", "2"), pdb("api", `maxUnavailable: "10%"`)}, nil},
		{"maxUnavailable 1 of the only replica",
			[]string{workload("StatefulSet", "qdrant", "1"), pdb("qdrant", "maxUnavailable: 1")}, nil},
		{"minAvailable 1 with two replicas",
			[]string{workload("Deployment", "api", "2"), pdb("api", "minAvailable: 1")}, nil},
		{"scaled to zero by KEDA: while there is work it runs one, which minAvailable 1 pins",
			[]string{workload("Deployment", "vllm", "0"), scaledObject("vllm", "0"), pdb("vllm", "minAvailable: 1")},
			[]string{"PodDisruptionBudget llm-rag/vllm: allows no eviction at the minimum scale of Deployment llm-rag/vllm (1): minAvailable 1 keeps 1 of 1, allows 0"}},
		{"scaled to zero by KEDA, maxUnavailable 1",
			[]string{workload("Deployment", "vllm", "0"), scaledObject("vllm", "0"), pdb("vllm", "maxUnavailable: 1")}, nil},
		{"turned off (replicas 0, no autoscaler): nothing to drain",
			[]string{workload("Deployment", "vllm", "0"), pdb("vllm", "minAvailable: 1")}, nil},
		{"a budget over no rendered workload (an operator's pods)",
			[]string{pdb("pgvector", "maxUnavailable: 0")}, nil},
		{"neither field set",
			[]string{workload("Deployment", "api", "2"), `{apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: api, namespace: llm-rag}, spec: {selector: {matchLabels: {app.kubernetes.io/name: api}}}}`},
			[]string{"PodDisruptionBudget llm-rag/api: allows no eviction at the minimum scale of Deployment llm-rag/api (2): neither minAvailable nor maxUnavailable is set"}},
		{"another namespace's workload is not the budget's",
			[]string{strings.Replace(workload("Deployment", "api", "1"), "llm-rag", "llm-api", 1), pdb("api", "maxUnavailable: 0")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := drainPossible(parseObjects(t, strings.Join(tc.objs, "\n---\n")))
			require.Len(t, got, len(tc.want), "%+v", got)
			for i, w := range tc.want {
				object, msg, _ := strings.Cut(w, ": ")
				assert.Equal(t, "drain-possible", got[i].Rule)
				assert.Equal(t, object, got[i].Object)
				assert.Contains(t, got[i].Message, msg)
			}
		})
	}
}

// TestCheckDrainPossible puts back the budgets of issue 31 in a copy of the repository (Qdrant's
// maxUnavailable 0, a one-replica model's minAvailable 1): auditor check fails in the envs that
// run them at that scale, naming the budgets.
func TestCheckDrainPossible(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit("base/rag/qdrant.yaml", "spec:\n  maxUnavailable: 1\n", "spec:\n  maxUnavailable: 0\n")
	edit("base/vllm/llama.yaml", "\n  maxUnavailable: 1\n", "\n  minAvailable: 1\n")
	commit("budgets that block drains")
	res := runCheck(t, dir)
	assert.False(t, res.Passed)
	want := map[string][]string{
		// dev's llama scales to zero, and runs one replica while there is work; staging's and
		// prod's keep one
		"dev":     {"PodDisruptionBudget llm-inference/vllm-llama", "PodDisruptionBudget llm-rag/qdrant"},
		"staging": {"PodDisruptionBudget llm-inference/vllm-llama", "PodDisruptionBudget llm-rag/qdrant"},
		"prod":    {"PodDisruptionBudget llm-inference/vllm-llama", "PodDisruptionBudget llm-rag/qdrant"},
	}
	for _, env := range res.Envs {
		var got []string
		for _, v := range env.Violations {
			if v.Rule == "drain-possible" {
				got = append(got, v.Object)
			}
		}
		assert.Equal(t, want[env.Env], got, "%s: %+v", env.Env, env.Violations)
	}
}
