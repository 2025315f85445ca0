package daemon

import (
	"context"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// BenchmarkEditToMessage measures how long a manual change takes to reach a chat receiver through
// the running daemon (watch → re-audit → message → HTTP POST), over 100 edits per run: each edit
// alternates qdrant's replicas between 1 (Git) and 2, so every edit yields one message (a drift or
// its resolution). Edits are spaced past the fold window so none is folded into a digest.
// Reported: p50/p99 from the moment the edit is stored (kubectl returned) and from kubectl start.
func BenchmarkEditToMessage(b *testing.B) {
	testcluster.Need(b)
	h := newHarness(b)
	cfg := h.config(b.TempDir())
	cfg.FoldWindow = Duration{100 * time.Millisecond}
	start(b, cfg)
	r := h.receivers[1]
	const edits = 100
	var fromStored, fromStart []time.Duration
	for b.Loop() {
		for i := range edits {
			replicas := 2
			if i%2 == 1 {
				replicas = 1
			}
			before := len(r.messages())
			t0 := time.Now()
			out, err := cluster.Kubectl(context.Background(), "-n", h.p.NS("rag"), "scale", "statefulset/qdrant", "--replicas="+strconv.Itoa(replicas)).CombinedOutput()
			if err != nil {
				b.Fatalf("kubectl scale: %v\n%s", err, out)
			}
			t1 := time.Now()
			r.waitMessages(b, before+1, 10*time.Second)
			r.mu.Lock()
			got := r.at[len(r.at)-1]
			r.mu.Unlock()
			fromStored = append(fromStored, got.Sub(t1))
			fromStart = append(fromStart, got.Sub(t0))
			time.Sleep(150 * time.Millisecond)
		}
	}
	b.ReportMetric(pct(fromStored, 50).Seconds()*1000, "p50-ms")
	b.ReportMetric(pct(fromStored, 99).Seconds()*1000, "p99-ms")
	b.ReportMetric(pct(fromStart, 99).Seconds()*1000, "p99-from-kubectl-start-ms")
	b.ReportMetric(float64(len(fromStored)), "edits")
}

func pct(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := (len(s)*p + 99) / 100
	if idx > 0 {
		idx--
	}
	return s[idx]
}
