package auditlog

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/llm-gitops/platform/internal/drift"
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
