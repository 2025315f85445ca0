package notify

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/llm-gitops/platform/internal/daemon/notify/notifytest"
	"github.com/llm-gitops/platform/internal/daemon/outbox"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

func keysOf(items []Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Key)
	}
	return out
}

func TestTracker(t *testing.T) {
	missing := drift.Object{APIVersion: "v1", Kind: "Service", Namespace: "llm", Name: "rag", Status: drift.Missing}
	extra := drift.Object{APIVersion: "v1", Kind: "ConfigMap", Namespace: "llm", Name: "tmp", Status: drift.Extra, Creator: &notifytest.KubectlEdit}
	kLog := ItemKey("dev", notifytest.Deployment(), notifytest.LogLevel.Path, "kubectl-edit", notifytest.Rev)
	kRep := ItemKey("dev", notifytest.Deployment(), ".spec.replicas", "kube-controller-manager", notifytest.Rev)
	kMissing := "dev|v1/Service/llm/rag||" + "|" + notifytest.Rev
	kExtra := "dev|v1/ConfigMap/llm/tmp||kubectl-edit|" + notifytest.Rev
	rev2 := "feedfacefeedfacefeedfacefeedfacefeedface"
	fLogOther := notifytest.LogLevel
	fLogOther.Manager = "helm"

	type step struct {
		report          *drift.Report
		added, resolved []string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first report: everything new", []step{
			{notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel, notifytest.Replicas), missing, extra), []string{kExtra, kLog, kRep, kMissing}, nil},
		}},
		{"same drift again: nothing", []step{
			{notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel)), []string{kLog}, nil},
			{notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel)), nil, nil},
		}},
		{"drift gone: resolved", []step{
			{notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel, notifytest.Replicas)), []string{kLog, kRep}, nil},
			{notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.Replicas)), nil, []string{kLog}},
			{notifytest.Report("dev", notifytest.Rev), nil, []string{kRep}},
		}},
		{"other manager: new key, old resolved", []step{
			{notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel)), []string{kLog}, nil},
			{notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(fLogOther)), []string{ItemKey("dev", notifytest.Deployment(), notifytest.LogLevel.Path, "helm", notifytest.Rev)}, []string{kLog}},
		}},
		{"new synced revision while the drift stands: not announced again, not resolved", []step{
			{notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel)), []string{kLog}, nil},
			{notifytest.Report("dev", rev2, notifytest.Deployment(notifytest.LogLevel)), nil, nil},
			{notifytest.Report("dev", rev2), nil, []string{ItemKey("dev", notifytest.Deployment(), notifytest.LogLevel.Path, "kubectl-edit", rev2)}},
		}},
		{"envs are independent", []step{
			{notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel)), []string{kLog}, nil},
			{notifytest.Report("prod", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel)), []string{ItemKey("prod", notifytest.Deployment(), notifytest.LogLevel.Path, "kubectl-edit", notifytest.Rev)}, nil},
			{notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel)), nil, nil},
		}},
		{"flapping drift comes back", []step{
			{notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel)), []string{kLog}, nil},
			{notifytest.Report("dev", notifytest.Rev), nil, []string{kLog}},
			{notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel)), []string{kLog}, nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker()
			for i, s := range tt.steps {
				// persist and restore between steps, as the daemon does
				b, err := json.Marshal(tr)
				if err != nil {
					t.Fatal(err)
				}
				tr = NewTracker()
				if err := json.Unmarshal(b, tr); err != nil {
					t.Fatal(err)
				}
				added, resolved, err := tr.Observe(s.report)
				if err != nil {
					t.Fatal(err)
				}
				want := []string(nil)
				if s.added != nil {
					want = append(want, s.added...)
				}
				if diff := cmp.Diff(sorted(want), keysOf(added)); diff != "" {
					t.Errorf("step %d added (-want +got):\n%s", i, diff)
				}
				if diff := cmp.Diff(sorted(s.resolved), keysOf(resolved)); diff != "" {
					t.Errorf("step %d resolved (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func sorted(s []string) []string {
	if s == nil {
		return nil
	}
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestTrackerMasksSecrets(t *testing.T) {
	sec := drift.Object{APIVersion: "v1", Kind: "Secret", Namespace: "llm", Name: "creds", Status: drift.Modified, Fields: []drift.Field{
		{Path: `.data["password"]`, Desired: "sha256:0123456789ab", Live: "aHVudGVyMg==", Change: drift.Changed, Writer: notifytest.KubectlEdit},
		{Path: ".stringData.token", Desired: "plain-token-value", Change: drift.Removed, Writer: notifytest.KubectlEdit},
		{Path: ".metadata.annotations", Live: map[string]any{lastApplied: `{"data":{"password":"aHVudGVyMg=="}}`, "ok": "visible"}, Change: drift.Added},
	}}
	tr := NewTracker()
	added, _, err := tr.Observe(notifytest.Report("dev", notifytest.Rev, sec))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(tr)
	a, _ := json.Marshal(added)
	for _, s := range []string{string(b), string(a)} {
		for _, secret := range []string{"aHVudGVyMg==", "plain-token-value"} {
			if strings.Contains(s, secret) {
				t.Errorf("secret %q leaked: %s", secret, s)
			}
		}
		if !strings.Contains(s, "sha256:0123456789ab") || !strings.Contains(s, "visible") {
			t.Errorf("digest or non-secret value lost: %s", s)
		}
	}
}

// TestStateLeavesOutWhatIsStillBeingFolded: drift that appeared inside the fold window and is in
// no outbox yet is not in the persisted state, so a crash before the window ends announces it
// after the restart; once enqueued, it is in the state.
func TestStateLeavesOutWhatIsStillBeingFolded(t *testing.T) {
	ob, err := outbox.OpenOutbox(t.TempDir(), 100)
	if err != nil {
		t.Fatal(err)
	}
	n := NewNotifier(NotifierConfig{Window: time.Hour, Outboxes: []*outbox.Outbox{ob}, Leading: true})
	defer n.Close()
	// The first drift goes out at once (leading edge); the second waits for the window.
	if err := n.Observe(notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel))); err != nil {
		t.Fatal(err)
	}
	if err := n.Observe(notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel, notifytest.Replicas))); err != nil {
		t.Fatal(err)
	}
	kLog := ItemKey("dev", notifytest.Deployment(), notifytest.LogLevel.Path, "kubectl-edit", notifytest.Rev)
	kRep := ItemKey("dev", notifytest.Deployment(), ".spec.replicas", "kube-controller-manager", notifytest.Rev)
	keys := func() []string {
		data, err := n.State()
		if err != nil {
			t.Fatal(err)
		}
		restored := NewTracker()
		if err := json.Unmarshal(data, restored); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range restored.Current("dev") {
			out = append(out, it.Key)
		}
		return out
	}
	if diff := cmp.Diff([]string{kLog}, keys()); diff != "" {
		t.Errorf("state inside the window (-want +got):\n%s", diff)
	}
	n.Flush()
	if diff := cmp.Diff([]string{kRep, kLog}, keys()); diff != "" {
		t.Errorf("state after the flush (-want +got):\n%s", diff)
	}
	if got := ob.Depth(); got != 2 {
		t.Errorf("outbox holds %d messages, want 2 (the leading one and the digest)", got)
	}
}
