package ledger

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// pinnedDigest is the vLLM image digest overlays/prod pins.
const pinnedDigest = "sha256:8a69ffad015f138d7170c4ddc429e230a3bc1c1719f67e14324749df200a4b90"

// TestCanaryLifecycle walks a canary of new qwen weights through prod: added at 10 %, 50 %
// (+ a warm replica), 100 % (+ a new vLLM image), promoted (the old Deployment gets the new
// weights, the canary is retired), reverted with the git CLI, then an earlier step rolled back
// with Rollback. The ledger is synced after every commit; Rebuild must produce the same records.
func TestCanaryLifecycle(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, withoutCanary)
	c1 := f.git("rev-parse", "HEAD")
	f.sync("prod")

	f.write(prodKust, strings.Replace(f.read(prodKust), "  - ../../base/auditor\n", "  - ../../base/auditor\n"+canaryResource, 1))
	f.replace(prodKust, "  - path: scaling.yaml  # replicas / min / max\n", "  - path: scaling.yaml  # replicas / min / max\n"+canaryPatch)
	c2 := f.commit("prod: canary of qwen bb46c15 at 10%")
	f.sync("prod")

	f.setSplit(50, 50)
	f.replace("overlays/prod/canary/canary.yaml", "  minReplicaCount: 1\n", "  minReplicaCount: 2\n")
	c3 := f.commit("prod: qwen canary 50%")
	f.sync("prod")

	f.setSplit(0, 100)
	// from the pinned v0.30.0 digest to the v0.30.1 tag
	f.replace(prodKust, "newTag: v0.30.0", "newTag: v0.30.1")
	f.replace(prodKust, "    digest: "+pinnedDigest+"\n", "")
	c4 := f.commit("prod: qwen canary 100%, vLLM v0.30.1")
	f.sync("prod")

	f.replace(qwenBase, "a09a35458c702b33eeacc393d103063234e8bc28", "bb46c15ee4bb56c5b63245ef50fd7637234d6f75")
	f.replace(qwenBase, `platform.llm/model-version: "a09a354"`, `platform.llm/model-version: "bb46c15"`)
	withoutCanary(f)
	c5 := f.commit("qwen: promote bb46c15, retire the canary")
	f.sync("prod")

	c6 := f.revert(c5) // by hand, with the git CLI
	f.sync("prod")

	rb, err := Rollback(ctx, f.remote(), c4, RollbackRequest{Envs: []string{"prod"}})
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	c7 := rb.Revert.Commit
	if c7 == "" || rb.Synced["prod"].Appended != 3 {
		t.Fatalf("rollback: revert %q, synced %+v", c7, rb.Synced["prod"])
	}

	repo := f.open()
	got, err := Read(repo, "prod", "main")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"added vllm-llama 100", "added vllm-qwen 100", // c1
		"changed vllm-qwen 90 share", "added vllm-qwen-canary 10", // c2
		"changed vllm-qwen 50 share", "changed vllm-qwen-canary 50 share,replicas", // c3
		"changed vllm-llama 100 image", "changed vllm-qwen 0 share,image", "changed vllm-qwen-canary 100 share,image", // c4
		"changed vllm-qwen 100 weights,version,share", "retired vllm-qwen-canary 0", // c5
		"rollback/changed vllm-qwen 0 weights,version,share", "rollback/added vllm-qwen-canary 100", // c6
		"rollback/changed vllm-llama 100 image", "rollback/changed vllm-qwen 50 share,image", "rollback/changed vllm-qwen-canary 50 share,image", // c7
	}
	if s := summary(got); !reflect.DeepEqual(s, want) {
		t.Fatalf("ledger:\n%s\nwant:\n%s", strings.Join(s, "\n"), strings.Join(want, "\n"))
	}
	revs := []string{c1, c1, c2, c2, c3, c3, c4, c4, c4, c5, c5, c6, c6, c7, c7, c7}
	for i, r := range got {
		if r.Revision != revs[i] {
			t.Errorf("record %d (%s) revision %s, want %s", i, r.Deployment, r.Revision, revs[i])
		}
		if r.Env != "prod" || r.Model == "" || r.Overlay != "overlays/prod" || r.SyncedAt != nil || len(r.ID) != 12 {
			t.Errorf("record %d: %+v", i, r)
		}
	}
	// Rollback records link the reverted commit: c5 reverted by the CLI, c4 by Rollback.
	for i, sha := range map[int]string{11: c5, 12: c5, 13: c4, 14: c4, 15: c4} {
		if got[i].Reverts != sha {
			t.Errorf("record %d reverts %q, want %s", i, got[i].Reverts, sha)
		}
	}
	canary := got[3]
	if canary.WeightsRevision != "bb46c15ee4bb56c5b63245ef50fd7637234d6f75" || canary.Version != "bb46c15" ||
		canary.WeightsURI != "s3://models/Qwen/Qwen2.5-7B-Instruct" || canary.Image != "vllm/vllm-openai:v0.30.0@"+pinnedDigest ||
		canary.Replicas != 1 || canary.Model != "qwen" || canary.Subject != "prod: canary of qwen bb46c15 at 10%" ||
		canary.Author != "Alice <alice@example.com>" || !canary.CommittedAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("canary record: %+v", canary)
	}
	if got[1].Replicas != 2 || got[5].Replicas != 2 || got[8].Image != "vllm/vllm-openai:v0.30.1" {
		t.Errorf("replicas/image: %+v %+v %+v", got[1], got[5], got[8])
	}

	// The ledger commits come from the bot with the Synced-Revision trailer.
	hist, err := repo.Log(ctx, "main", Path("prod"))
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 7 {
		t.Errorf("%d ledger commits, want 7", len(hist))
	}
	for _, c := range hist {
		if c.Author.Name != "auditor-bot" || c.Author.Email != "auditor@llm-platform.local" {
			t.Errorf("ledger commit %s by %v", c.Hash, c.Author)
		}
		if v, ok := c.Trailer(TrailerSyncedRevision); !ok || len(v) != 40 {
			t.Errorf("ledger commit %s: trailers %v", c.Hash, c.Trailers)
		}
	}
	if v, _ := hist[0].Trailer(TrailerSyncedRevision); v != c7 {
		t.Errorf("last Synced-Revision %s, want %s", v, c7)
	}

	// Rebuild from history alone equals the incremental ledger, byte for byte.
	rebuilt, err := Rebuild(ctx, repo, "prod")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := Marshal(Derived(got))
	b, _ := Marshal(rebuilt)
	if string(a) != string(b) {
		t.Fatalf("rebuild differs from the incremental ledger:\n%s\nvs\n%s", b, a)
	}
	// Syncing again appends nothing.
	if res := f.sync("prod"); res.Appended != 0 || !res.Result.NoChange {
		t.Errorf("second sync: %+v", res)
	}

	// What served when.
	shares := func(at time.Time) string {
		var s []string
		for _, m := range At(got, "prod", at).Models {
			s = append(s, m.Deployment+"="+strconv.FormatFloat(m.SharePercent, 'f', -1, 64))
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{t0.Add(-time.Minute), ""},
		{t0, "vllm-llama=100 vllm-qwen=100"},
		{t0.Add(90 * time.Minute), "vllm-llama=100 vllm-qwen=90 vllm-qwen-canary=10"},
		{t0.Add(150 * time.Minute), "vllm-llama=100 vllm-qwen=50 vllm-qwen-canary=50"},
		{t0.Add(3*time.Hour + time.Second), "vllm-llama=100 vllm-qwen=0 vllm-qwen-canary=100"},
		{t0.Add(4*time.Hour + 59*time.Minute), "vllm-llama=100 vllm-qwen=100"},
		{t0.Add(5 * time.Hour), "vllm-llama=100 vllm-qwen=0 vllm-qwen-canary=100"},
		{time.Now().Add(time.Hour), "vllm-llama=100 vllm-qwen=50 vllm-qwen-canary=50"},
	} {
		if s := shares(tc.at); s != tc.want {
			t.Errorf("at %s: %q, want %q", tc.at, s, tc.want)
		}
	}
	if st := At(got, "prod", t0.Add(4*time.Hour)); st.Revision != c5 || st.Models[1].WeightsRevision != "bb46c15ee4bb56c5b63245ef50fd7637234d6f75" {
		t.Errorf("at c5: %+v", st)
	}
	if r, ok := Find(got, got[3].ID[:6]); !ok || r.ID != got[3].ID {
		t.Errorf("find by prefix: %v %+v", ok, r)
	}
	f.fsck()
}

// TestRollbackConflict: Rollback refuses a revert a later commit conflicts with, naming it, and
// writes no ledger record.
func TestRollbackConflict(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	f.sync("prod")
	f.setSplit(50, 50)
	c2 := f.commit("prod: qwen canary 50%")
	f.setSplit(20, 80)
	c3 := f.commit("prod: qwen canary 80%")
	f.sync("prod")
	before := f.ledgerFile("prod")
	_, err := Rollback(ctx, f.remote(), c2, RollbackRequest{Envs: []string{"prod"}})
	var conflict *gitrepo.RevertConflictError
	if !errors.As(err, &conflict) || conflict.LaterCommit != c3 {
		t.Fatalf("rollback: %v", err)
	}
	if after := f.ledgerFile("prod"); after != before {
		t.Errorf("ledger changed by a refused rollback")
	}
}

// TestMalformedLedger: a bad line is reported with file and line, and Append/Sync write nothing.
func TestMalformedLedger(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	f.sync("prod")
	good := f.ledgerFile("prod")
	lines := strings.Split(good, "\n")
	if len(lines) < 3 {
		t.Fatalf("ledger too short: %q", good)
	}
	lines[2] = `{"id": "x", "kind": "added", "env": "prod",` // truncated JSON on line 3
	f.pull()
	f.write(Path("prod"), strings.Join(lines, "\n")+"\n")
	f.commit("oops: hand-edited ledger")
	bad := f.ledgerFile("prod")
	head := f.git("rev-parse", "HEAD")

	_, err := Read(f.open(), "prod", "main")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.File != "clusters/prod/model-ledger.jsonl" || pe.Line != 3 ||
		!strings.HasPrefix(err.Error(), "clusters/prod/model-ledger.jsonl:3: ") {
		t.Fatalf("read: %v", err)
	}
	rec := Record{ID: "abcdefabcdef", Kind: KindAdded, Env: "prod", Model: "m", Deployment: "d", Version: "v", Revision: head}
	_, _, err = Append(ctx, f.remote(), AppendRequest{Env: "prod", Records: []Record{rec}})
	if !errors.As(err, &pe) || pe.Line != 3 {
		t.Fatalf("append: %v", err)
	}
	f.setSplit(50, 50)
	f.commit("prod: 50%")
	if _, err := Sync(ctx, f.remote(), SyncRequest{Env: "prod"}); !errors.As(err, &pe) || pe.Line != 3 {
		t.Fatalf("sync: %v", err)
	}
	if f.ledgerFile("prod") != bad {
		t.Fatal("malformed ledger was overwritten")
	}

	// Other malformations.
	for _, tc := range []struct{ data, want string }{
		{`{"id":"a","kind":"added","env":"p","model":"m","deployment":"d","revision":"r"}` + "\n" + `{"id":"a","kind":"added","env":"p","model":"m","deployment":"d","revision":"r"}`, "f:2: duplicate id a (first on line 1)"},
		{"\n" + `{"id":"a","kind":"born","env":"p","model":"m","deployment":"d","revision":"r"}`, `f:2: record a: unknown kind "born"`},
		{`{"id":"a","kind":"rollback","env":"p","model":"m","deployment":"d","revision":"r"}`, "f:1: record a: rollback without reverts"},
		{`{"id":"a","kind":"added","env":"p","model":"m","deployment":"d","revision":"r","extra":1}`, `f:1: json: unknown field "extra"`},
	} {
		if _, err := Parse("f", []byte(tc.data)); err == nil || err.Error() != tc.want {
			t.Errorf("parse %q: %v, want %s", tc.data, err, tc.want)
		}
	}
}

// TestConcurrentAppend: two writers (each its own Remote, as two processes) append different
// records at the same time, plus one record both append; every record is there exactly once.
func TestConcurrentAppend(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	head := f.git("rev-parse", "HEAD")
	mk := func(i int, who string) Record {
		d := who + "-" + string(rune('a'+i))
		return Record{ID: ID("prod", "qwen", d, "v1", head), Kind: KindAdded, Env: "prod", Model: "qwen",
			Deployment: d, Version: "v1", Revision: head, CommittedAt: t0}
	}
	shared := mk(0, "shared")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for w, who := range []string{"w1", "w2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			remote := f.remote()
			for i := 0; i < 4; i++ {
				recs := []Record{mk(i, who)}
				if i == 2 {
					recs = append(recs, shared)
				}
				_, _, err := Append(ctx, remote, AppendRequest{Env: "prod", Records: recs,
					Backoff: gitrepo.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}})
				if err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got, err := Read(f.open(), "prod", "main")
	if err != nil {
		t.Fatal(err) // Parse also rejects duplicate ids
	}
	if len(got) != 9 {
		t.Fatalf("%d records, want 9:\n%s", len(got), strings.Join(summary(got), "\n"))
	}
	f.fsck()
}

// TestMergeCommit: a change merged with --no-ff (the merge's tree equals its second parent, so
// git log with paths does not list it) is recorded at the merge, the commit on main.
func TestMergeCommit(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	f.git("checkout", "-q", "-b", "canary-50")
	f.setSplit(50, 50)
	f.git("add", "-A")
	if out, err := gitRun(f.work, f.dateEnv(), "commit", "-q", "-m", "prod: qwen canary 50%"); err != nil {
		t.Fatal(out)
	}
	f.git("checkout", "-q", "main")
	if out, err := gitRun(f.work, f.dateEnv(), "merge", "-q", "--no-ff", "-m", "Merge canary-50", "canary-50"); err != nil {
		t.Fatal(out)
	}
	merge := f.push()
	recs, err := Rebuild(ctx, f.open(), "prod")
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(summary(recs), "; "); len(recs) != 5 || s != "added vllm-llama 100; added vllm-qwen 90; added vllm-qwen-canary 10; "+
		"changed vllm-qwen 50 share; changed vllm-qwen-canary 50 share" || recs[4].Revision != merge || recs[4].Subject != "Merge canary-50" {
		t.Fatalf("rebuild: %s", s)
	}
}

// TestSyncAgainstAStalledServerGivesUp: a Git server that accepts the connection and never
// answers fails the sync once FetchTimeout has passed (the daemon's ledger syncs share one lock:
// a hung one would stop every env's ledger for good).
func TestSyncAgainstAStalledServerGivesUp(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	remote, err := gitrepo.NewRemote(gitrepo.RemoteConfig{URL: srv.URL + "/platform.git", Dir: t.TempDir()})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err = Sync(ctx, remote, SyncRequest{Env: "prod", FetchTimeout: time.Second})
	require.Error(t, err)
	assert.Less(t, time.Since(start), 30*time.Second, "the sync waited for the test's own deadline: %v", err)
	assert.NoError(t, ctx.Err())
}
