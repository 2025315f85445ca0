package auditlog

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// BenchmarkWhoFor10000FieldsWith100000EventsHeld times what attribution adds to a full audit of
// 10,000 drifted objects: one field each, matched among 100,000 held write events (10 per object,
// the last one the field's). It also reports the memory the held events take.
func BenchmarkWhoFor10000FieldsWith100000EventsHeld(b *testing.B) {
	const objects, perObject = 10_000, 10
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := NewStore(objects * perObject)
	for i := range objects {
		for j := range perObject {
			ev := event(fmt.Sprintf("user%d", j), "patch", "kubectl-edit", "", fmt.Sprint(i*perObject+j), t0.Add(time.Duration(j)*time.Minute))
			ev.ObjectRef.Name = fmt.Sprintf("obj-%d", i)
			s.Add(ev)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	field := &drift.Field{Writer: drift.Writer{Manager: "kubectl-edit", Time: t0.Add(9 * time.Minute).Format(time.RFC3339)}}
	b.ResetTimer()
	for b.Loop() {
		for i := range objects {
			obj := qdrant
			obj.Name = fmt.Sprintf("obj-%d", i)
			if a := s.Who(obj, Live{ResourceVersion: "none"}, field, "argocd-controller"); a == nil || a.User != "user9" {
				b.Fatalf("obj-%d: %+v", i, a)
			}
		}
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB-held")
}

// BenchmarkAdd100000WritesTo10000Deployments times adding 100,000 write events (10 patches to
// each of 10,000 Deployments, every response a full Deployment with its replicas and image
// changed) to a Store, and reports the memory the Store holds after the last of them.
func BenchmarkAdd100000WritesTo10000Deployments(b *testing.B) {
	const objects, perObject = 10_000, 10
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	evs := make([]*auditv1.Event, 0, objects*perObject)
	for j := range perObject {
		for i := range objects {
			ev := event(fmt.Sprintf("user%d", j), "patch", "kubectl-edit", fmt.Sprintf("uid-%d", i), fmt.Sprint(j*objects+i+1), t0.Add(time.Duration(j)*time.Minute))
			ev.ObjectRef.Resource, ev.ObjectRef.Name = "deployments", fmt.Sprintf("vllm-%d", i)
			ev.ResponseObject = &k8sruntime.Unknown{Raw: deploymentJSON(b, fmt.Sprintf("vllm-%d", i), fmt.Sprintf("uid-%d", i), fmt.Sprint(j*objects+i+1), j)}
			evs = append(evs, ev)
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := NewStore(objects * perObject)
	for _, ev := range evs {
		s.Add(ev)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if s.Len() != objects*perObject {
		b.Fatalf("held %d events", s.Len())
	}
	held := float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
	s = nil
	for b.Loop() {
		s := NewStore(objects * perObject)
		for _, ev := range evs {
			s.Add(ev)
		}
	}
	b.ReportMetric(held, "MiB-held")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(evs)), "ns/event")
}

// BenchmarkWhoFor20000ChangedFieldsWith100000WritesHeld times matching by the writes' changes:
// the store of BenchmarkAdd100000WritesTo10000Deployments (10 writes to each of 10,000
// Deployments, each changing the replicas, the image and the revision annotation), and two
// drifted fields per Deployment (replicas and image, live as the last write left them), each
// matched to its write by what the writes changed.
func BenchmarkWhoFor20000ChangedFieldsWith100000WritesHeld(b *testing.B) {
	const objects, perObject = 10_000, 10
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	s := NewStore(objects * perObject)
	for j := range perObject {
		for i := range objects {
			ev := event(fmt.Sprintf("user%d", j), "patch", "kubectl-edit", fmt.Sprintf("uid-%d", i), fmt.Sprint(j*objects+i+1), t0.Add(time.Duration(j)*time.Minute))
			ev.ObjectRef.Resource, ev.ObjectRef.Name = "deployments", fmt.Sprintf("vllm-%d", i)
			ev.ResponseObject = &k8sruntime.Unknown{Raw: deploymentJSON(b, fmt.Sprintf("vllm-%d", i), fmt.Sprintf("uid-%d", i), fmt.Sprint(j*objects+i+1), j)}
			s.Add(ev)
		}
	}
	edit := drift.Writer{Manager: "kubectl-edit", Operation: "Update", Time: t0.Add(9 * time.Minute).Format(time.RFC3339)}
	fields := []drift.Field{
		{Path: ".spec.replicas", Live: int64(perObject), Change: drift.Changed, Writer: edit},
		{Path: ".spec.template.spec.containers[name=vllm].image", Live: fmt.Sprintf("vllm/vllm-openai:v0.11.%d", perObject-1), Change: drift.Changed, Writer: edit},
	}
	for b.Loop() {
		for i := range objects {
			obj := Object{Group: "apps", Resource: "deployments", Namespace: "llm-rag", Name: fmt.Sprintf("vllm-%d", i)}
			live := Live{UID: fmt.Sprintf("uid-%d", i), ResourceVersion: "none"}
			for k := range fields {
				if a := s.Who(obj, live, &fields[k], "argocd-controller"); a == nil || a.User != "user9" || a.Match != MatchChanges {
					b.Fatalf("vllm-%d %s: %+v", i, fields[k].Path, a)
				}
			}
		}
	}
}

// deploymentJSON is a vLLM Deployment as the API server returns it (without managedFields and
// status), its replicas and image tag set from n.
func deploymentJSON(b *testing.B, name, uid, rv string, n int) []byte {
	b.Helper()
	obj := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": "llm-inference", "uid": uid, "resourceVersion": rv, "generation": n + 1,
			"creationTimestamp": "2026-11-30T08:00:00Z",
			"labels":            map[string]any{"app.kubernetes.io/name": name, "platform.llm/component": "vllm", "platform.llm/env": "prod"},
			"annotations":       map[string]any{"argocd.argoproj.io/sync-wave": "1", "platform.llm/model": "qwen", "deployment.kubernetes.io/revision": fmt.Sprint(n + 1)}},
		"spec": map[string]any{
			"replicas": n + 1, "revisionHistoryLimit": 3,
			"selector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": name}},
			"strategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": 1, "maxUnavailable": 0}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app.kubernetes.io/name": name, "platform.llm/component": "vllm"}},
				"spec": map[string]any{
					"priorityClassName": "llm-interactive", "terminationGracePeriodSeconds": 60,
					"containers": []any{map[string]any{
						"name": "vllm", "image": fmt.Sprintf("vllm/vllm-openai:v0.11.%d", n),
						"args": []any{"--model=/models/qwen", "--served-model-name=qwen", "--max-model-len=32768", "--port=8000"},
						"env":  []any{map[string]any{"name": "HF_HUB_OFFLINE", "value": "1"}},
						"resources": map[string]any{"limits": map[string]any{"nvidia.com/gpu": "1", "memory": "48Gi"},
							"requests": map[string]any{"nvidia.com/gpu": "1", "cpu": "4", "memory": "48Gi"}},
						"ports": []any{map[string]any{"name": "http", "containerPort": 8000, "protocol": "TCP"}},
					}},
					"tolerations": []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}},
				},
			},
		},
	}
	data, err := json.Marshal(obj)
	if err != nil {
		b.Fatal(err)
	}
	return data
}
