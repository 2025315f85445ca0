package notify

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/llm-gitops/platform/internal/daemon/message"
	"github.com/llm-gitops/platform/internal/daemon/notify/notifytest"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

func testOptions() Options {
	return Options{ArgoCDURL: "https://argocd.example.com/", ReadFile: notifytest.ReadDevOverlay}
}

func TestDriftMessageGolden(t *testing.T) {
	obj := notifytest.Deployment(notifytest.LogLevel, notifytest.Replicas, notifytest.Annotation, notifytest.Toleration,
		notifytest.At(drift.Field{Desired: map[string]any{"containerPort": int64(8080), "name": "http"}, Change: drift.Removed, Writer: notifytest.KubectlEdit},
			"spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "api"), "ports", fieldpath.KeyByFields("containerPort", 8080, "protocol", "TCP")))
	items := Items(notifytest.Report("dev", notifytest.Rev, obj))
	var out strings.Builder
	for _, it := range items {
		out.WriteString("=== " + it.Key + "\n" + DriftMessage(it, testOptions()).PlainText())
	}
	notifytest.Golden(t, "drift-messages.golden.txt", []byte(out.String()))
}

func TestMissingAndExtraMessages(t *testing.T) {
	missing := drift.Object{APIVersion: "v1", Kind: "Service", Namespace: "llm", Name: "rag", Status: drift.Missing}
	extra := drift.Object{APIVersion: "v1", Kind: "ConfigMap", Namespace: "llm", Name: "tmp", Status: drift.Extra, Creator: &notifytest.KubectlEdit}
	pool := drift.Object{APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: "gpu", Status: drift.Missing}
	gate := drift.Object{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding", Name: "gate",
		Status: drift.Missing, Application: "llm-policies"}
	scaled := notifytest.Deployment(drift.Field{Path: ".spec.replicas", Desired: int64(2), Live: int64(5), Change: "changed"})
	price := 5.58
	scaled.Cost = &drift.Cost{GPUs: 3, Card: "l40s", USDPerHour: &price, Note: "replicas 2 → 5 on l40s: +3 GPUs, about +5.58 USD per hour"}
	imageToo := notifytest.Deployment(drift.Field{Path: ".spec.template.spec.containers[name=vllm].image", Desired: "a", Live: "b", Change: "changed"})
	imageToo.Name, imageToo.Cost = "vllm-image", scaled.Cost // the object's cost is said by the field that costs, once
	generatedApp := drift.Object{APIVersion: "argoproj.io/v1alpha1", Kind: "Application", Namespace: "argocd", Name: "gen-a", Status: drift.Modified,
		Application: "root-dev", Source: drift.GeneratedSource + "tenants",
		Fields: []drift.Field{{Path: ".spec.syncPolicy.automated.prune", Desired: true, Live: false, Change: "changed"}}}
	tests := []struct {
		obj       drift.Object
		want, not []string
	}{
		{scaled, []string{"Cost: replicas 2 → 5 on l40s: +3 GPUs, about +5.58 USD per hour"}, nil},
		{imageToo, []string{".image"}, []string{"Cost:"}},
		// No Application syncs a generated one: its set's controller writes it.
		{generatedApp, []string{"ApplicationSet tenants's controller writes it from its template"}, []string{"argocd app sync", "auditor render"}},
		{missing, []string{"argocd app sync llm-dev --resource :Service:llm/rag", "auditor render --env dev --revision " + notifytest.Rev}, []string{"kubectl delete", "Adopt"}},
		{pool, []string{"argocd app sync llm-dev --resource karpenter.sh:NodePool:gpu"}, nil},
		// In an env of several Applications, the command syncs the object's own.
		{gate, []string{"argocd app sync llm-policies --resource admissionregistration.k8s.io:ValidatingAdmissionPolicyBinding:gate"}, []string{"llm-dev"}},
		{extra, []string{"kubectl delete configmap -n llm tmp", "add the live object to Git", "Created by: kubectl-edit (Update)"}, []string{"argocd app sync"}},
	}
	for _, tt := range tests {
		t.Run(tt.obj.Name, func(t *testing.T) {
			items := Items(notifytest.Report("dev", notifytest.Rev, tt.obj))
			if len(items) != 1 {
				t.Fatalf("items = %d", len(items))
			}
			text := DriftMessage(items[0], Options{}).PlainText()
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("missing %q in:\n%s", w, text)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(text, w) {
					t.Errorf("unexpected %q in:\n%s", w, text)
				}
			}
		})
	}
}

func TestFold(t *testing.T) {
	var fields []drift.Field
	for _, p := range []string{".a", ".b", ".c", ".d", ".e"} {
		fields = append(fields, drift.Field{Path: p, Desired: "x", Live: "y", Change: drift.Changed, Writer: notifytest.KubectlEdit})
	}
	items := Items(notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(fields...)))
	unaudited := Items(notifytest.Report("dev", notifytest.Rev, drift.Object{APIVersion: "argoproj.io/v1alpha1", Kind: "Application",
		Namespace: "argocd", Name: "gpu-operator", Status: drift.Unknown, Fields: []drift.Field{},
		Note: drift.NotAuditedPrefix + `chart repository https://helm.ngc.nvidia.com/nvidia: dial tcp: lookup helm.ngc.nvidia.com: no such host`}))
	opts := Options{MaxDigestItems: 3}
	tests := []struct {
		name            string
		added, resolved []Item
		wantKinds       []message.Kind
		wantText        []string
	}{
		{"single drift", items[:1], nil, []message.Kind{message.KindDrift}, []string{"Drift in dev"}},
		{"digest", items, nil, []message.Kind{message.KindDigest}, []string{"5 new drifts in dev", "• Deployment llm/api .c", "and 2 more", "argocd app sync llm-dev"}},
		{"single resolved", nil, items[:1], []message.Kind{message.KindResolved}, []string{"Resolved in dev"}},
		{"both", items[:2], items[2:], []message.Kind{message.KindDigest, message.KindResolved}, []string{"2 new drifts", "3 drifts resolved"}},
		// An Application that could not be audited is said as such, never counted as drift.
		{"not audited beside one drift", append(items[:1:1], unaudited...), nil, []message.Kind{message.KindNotAudited, message.KindDrift},
			[]string{"Not audited in dev: Application argocd/gpu-operator", "Cause: chart repository https://helm.ngc.nvidia.com/nvidia: dial tcp", "Runbook: " + NotAuditedRunbook, "Drift in dev: Deployment llm/api .a"}},
		{"not audited beside a digest", append(items[:2:2], unaudited...), nil, []message.Kind{message.KindNotAudited, message.KindDigest},
			[]string{"2 new drifts in dev"}},
		{"audited again", nil, unaudited, []message.Kind{message.KindResolved},
			[]string{"Audited again in dev: Application argocd/gpu-operator", "Was: Application argocd/gpu-operator: not audited (chart repository"}},
		{"audited again beside resolved drifts", nil, append(items[:2:2], unaudited...), []message.Kind{message.KindResolved, message.KindResolved},
			[]string{"Audited again in dev: Application argocd/gpu-operator", "2 drifts resolved in dev"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := Fold("dev", tt.added, tt.resolved, opts)
			var kinds []message.Kind
			var text string
			for _, m := range msgs {
				kinds = append(kinds, m.Kind)
				text += m.PlainText()
			}
			if len(kinds) != len(tt.wantKinds) {
				t.Fatalf("kinds = %v, want %v", kinds, tt.wantKinds)
			}
			for i := range kinds {
				if kinds[i] != tt.wantKinds[i] {
					t.Errorf("kinds = %v, want %v", kinds, tt.wantKinds)
				}
			}
			for _, w := range tt.wantText {
				if !strings.Contains(text, w) {
					t.Errorf("missing %q in:\n%s", w, text)
				}
			}
		})
	}
}

func TestFolderWindow(t *testing.T) {
	got := make(chan []message.Message, 10)
	f := NewFolder(50*time.Millisecond, Options{}, func(m []message.Message) { got <- m })
	defer f.Close()
	var fields []drift.Field
	for _, p := range []string{".a", ".b", ".c"} {
		fields = append(fields, drift.Field{Path: p, Desired: "x", Live: "y", Change: drift.Changed})
	}
	items := Items(notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(fields...)))
	prod := Items(notifytest.Report("prod", notifytest.Rev, notifytest.Deployment(fields[0])))
	f.Add("dev", items[:1], nil)
	f.Add("prod", prod, nil)
	f.Add("dev", items[1:], nil)
	f.Add("dev", nil, items[2:]) // appeared and went away within the window: both said
	byEnv := map[string][]message.Message{}
	for range 2 {
		select {
		case ms := <-got:
			byEnv[ms[0].Env] = ms
		case <-time.After(2 * time.Second):
			t.Fatal("folder did not emit")
		}
	}
	type said struct {
		Kind message.Kind
		Keys int
	}
	summary := func(ms []message.Message) []said {
		var out []said
		for _, m := range ms {
			out = append(out, said{m.Kind, len(m.Keys)})
		}
		return out
	}
	assert.Equal(t, []said{{message.KindDigest, 3}, {message.KindResolved, 1}}, summary(byEnv["dev"]), "dev")
	assert.Equal(t, []said{{message.KindDrift, 1}}, summary(byEnv["prod"]), "prod")
	select {
	case ms := <-got:
		t.Errorf("unexpected extra emit %v", ms)
	case <-time.After(80 * time.Millisecond):
	}
}

// TestFolderAnnouncesAnEditRevertedWithinTheWindow: with the leading edge on, a first item opens
// the window; a hand edit made and reverted (selfHeal) inside that window is still announced, its
// drift and then its resolution. Argo CD's verdict alone, there and gone inside the window (its
// status lagging the revert), is not said. An item resolved and back inside the window stays
// open: its resolution is not said.
func TestFolderAnnouncesAnEditRevertedWithinTheWindow(t *testing.T) {
	got := make(chan []message.Message, 10)
	f := NewFolder(100*time.Millisecond, Options{}, func(m []message.Message) { got <- m })
	f.SetLeading(true)
	defer f.Close()
	field := func(p string) drift.Field {
		return drift.Field{Path: p, Desired: "1", Live: "3", Change: drift.Changed}
	}
	first := Items(notifytest.Report("prod", notifytest.Rev, notifytest.Deployment(field(".spec.paused"))))
	edit := Items(notifytest.Report("prod", notifytest.Rev, notifytest.Deployment(field(".spec.replicas"))))
	// Argo CD's status still says OutOfSync after the auditor saw the revert: its verdict alone.
	lagging := notifytest.Deployment(field(".spec.template"))
	lagging.Name, lagging.Note = "lagging", drift.ArgoCDOnlyNote
	argoOnly := Items(notifytest.Report("prod", notifytest.Rev, lagging))
	f.Add("prod", first, nil)    // leading edge: sent at once, opens the window
	f.Add("prod", edit, nil)     // alice's edit, inside the window
	f.Add("prod", argoOnly, nil) // Argo CD's status lags ...
	f.Add("prod", nil, edit)     // selfHeal put it back, inside the window
	f.Add("prod", nil, argoOnly) // ... and catches up: cancels out
	f.Add("prod", nil, first)    // resolved ...
	f.Add("prod", first, nil)    // ... and back: still open
	var kinds []message.Kind
	var keys []string
	for range 2 {
		select {
		case ms := <-got:
			for _, m := range ms {
				kinds = append(kinds, m.Kind)
				keys = append(keys, m.Keys...)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("folder emitted only %v", kinds)
		}
	}
	assert.Equal(t, []message.Kind{message.KindDrift, message.KindDrift, message.KindResolved}, kinds)
	assert.Equal(t, []string{first[0].Key, edit[0].Key, edit[0].Key}, keys)
}

// TestItemSummaryNamesWhoMadeOrDeletedAnObject: the resolution notice's "Was" line of a Missing
// or Extra object names the person the audit events give.
func TestItemSummaryNamesWhoMadeOrDeletedAnObject(t *testing.T) {
	alice := &drift.Actor{User: "alice", Verb: "create", Match: "created"}
	bob := &drift.Actor{User: "bob", Verb: "delete", Match: "deleted"}
	creator := &drift.Writer{Manager: "kubectl-create", Operation: "Update"}
	cm := func(status string, c *drift.Writer, a *drift.Actor) Item {
		return Item{Env: "prod", Object: drift.Object{APIVersion: "v1", Kind: "ConfigMap", Namespace: "llm-rag", Name: "x", Status: status, Creator: c, Actor: a}}
	}
	cases := []struct {
		name string
		it   Item
		want string
	}{
		{"missing", cm(drift.Missing, nil, nil), ": missing"},
		{"missing, deleted by", cm(drift.Missing, nil, bob), ": missing (deleted by bob)"},
		{"extra, tool", cm(drift.Extra, creator, nil), ": extra (created by kubectl-create)"},
		{"extra, person and tool", cm(drift.Extra, creator, alice), ": extra (created by alice, kubectl-create)"},
		{"extra, person", cm(drift.Extra, nil, alice), ": extra (created by alice)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := itemSummary(tc.it)
			if !strings.HasSuffix(got, tc.want) {
				t.Errorf("itemSummary = %q, want it to end in %q", got, tc.want)
			}
		})
	}
}

// A digest of several drifts says the cost of each object whose drift changes GPU capacity, once,
// listed or folded into "and K more".
func TestDigestSaysWhatItCosts(t *testing.T) {
	price := -1.86
	gpu := notifytest.Deployment(
		drift.Field{Path: `.spec.template.spec.containers[name=vllm].resources.limits["nvidia.com/gpu"]`, Desired: "1", Change: drift.Removed},
		drift.Field{Path: `.spec.template.spec.containers[name=vllm].resources.requests["nvidia.com/gpu"]`, Desired: "1", Change: drift.Removed})
	gpu.Name, gpu.Cost = "vllm-llama", &drift.Cost{GPUs: -1, Card: "l40s", USDPerHour: &price, Note: "nvidia.com/gpu 1 → 0 per pod on l40s: -1 GPUs"}
	label := notifytest.Deployment(drift.Field{Path: ".metadata.labels.team", Live: "x", Change: drift.Added})
	label.Name = "rag-api"
	items := Items(notifytest.Report("prod", notifytest.Rev, label, label, gpu))
	msg := DigestMessage("prod", message.KindDigest, items, Options{MaxDigestItems: 1})
	text := msg.PlainText()
	if n := strings.Count(text, "Cost:"); n != 1 {
		t.Errorf("%d Cost lines, want 1:\n%s", n, text)
	}
	for _, w := range []string{"Cost: Deployment llm/vllm-llama: nvidia.com/gpu 1 → 0 per pod on l40s: -1 GPUs", "and 3 more"} {
		if !strings.Contains(text, w) {
			t.Errorf("missing %q in:\n%s", w, text)
		}
	}
}

// TestMessagesSayWhichSourceNamedThePerson: a field's writer and a deletion name the person
// and the source that named them (the admission webhook here); a person without a source (an
// older report) reads as before.
func TestMessagesSayWhichSourceNamedThePerson(t *testing.T) {
	alice := &drift.Actor{User: "alice", Verb: "delete", Time: "2026-12-07T21:00:00Z", From: "admission"}
	missing := drift.Object{APIVersion: "v1", Kind: "Service", Namespace: "llm", Name: "rag", Status: drift.Missing, Actor: alice}
	text := DriftMessage(Items(notifytest.Report("dev", notifytest.Rev, missing))[0], testOptions()).PlainText()
	if !strings.Contains(text, "Deleted by: alice (delete at 2026-12-07T21:00:00Z) (named by the admission webhook)") {
		t.Errorf("the deletion names alice and the admission webhook:\n%s", text)
	}
	bob := &drift.Actor{User: "bob", Verb: "update", Time: "2026-12-07T21:00:00Z", From: "admission"}
	edited := notifytest.Deployment(drift.Field{Path: ".spec.replicas", Desired: int64(2), Live: int64(5), Change: "changed", Writer: notifytest.KubectlEdit, Actor: bob})
	text = DriftMessage(Items(notifytest.Report("dev", notifytest.Rev, edited))[0], testOptions()).PlainText()
	if !strings.Contains(text, "Written by: bob with kubectl-edit") || !strings.Contains(text, "(named by the admission webhook)") {
		t.Errorf("the field names bob and the admission webhook:\n%s", text)
	}
	old := *bob
	old.From = ""
	if got := fieldWriterText(drift.Field{Writer: notifytest.KubectlEdit, Actor: &old}); strings.Contains(got, "named by") {
		t.Errorf("no source, nothing said: %s", got)
	}
}
