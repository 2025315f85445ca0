package daemon

import (
	"k8s.io/utils/ptr"

	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

func TestKubectlEditReachesEveryReceiverOnceThenResolves(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	d := start(t, h.config(t.TempDir()))
	time.Sleep(500 * time.Millisecond)
	for _, r := range h.receivers {
		if n := len(r.messages()); n != 0 {
			t.Fatalf("%s got %d messages for an env in sync:\n%v", r.name, n, r.messages())
		}
	}
	h.p.KubectlEdit(h.p.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	for _, r := range h.receivers {
		msgs := r.waitMessages(t, 1, 10*time.Second)
		for _, want := range []string{"qdrant", "spec.replicas", "kubectl-edit", "argocd app sync", "kubectl apply --server-side"} {
			if !strings.Contains(msgs[0], want) {
				t.Errorf("%s message lacks %q:\n%s", r.name, want, msgs[0])
			}
		}
	}
	// The report is also served as JSON, the same as `auditor diff -o json`.
	code, body := d.get(t, "/api/v1/drift?env=prod")
	if code != http.StatusOK || !strings.Contains(body, `"status": "Modified"`) || !strings.Contains(body, `"manager": "kubectl-edit"`) {
		t.Errorf("GET /api/v1/drift: %d\n%s", code, body)
	}
	_, metrics := d.get(t, "/metrics")
	if !strings.Contains(metrics, `auditor_drifted_objects{env="prod",kind="StatefulSet"} 1`) {
		t.Errorf("metrics lack the drifted StatefulSet:\n%s", grep(metrics, "auditor_"))
	}
	// The render ran in a render worker, a child process, not in the daemon's heap (the default).
	if !regexp.MustCompile(`(?m)^auditor_render_workers_total [1-9]`).MatchString(metrics) ||
		!regexp.MustCompile(`(?m)^auditor_render_worker_peak_rss_bytes [1-9]`).MatchString(metrics) {
		t.Errorf("no render worker ran:\n%s", grep(metrics, "auditor_render"))
	}
	// Undo by hand: one resolution notice per receiver.
	time.Sleep(400 * time.Millisecond) // let the fold window close so the notice is not folded
	h.p.KubectlEdit(h.p.NS("rag"), "statefulset/qdrant", `s/^  replicas: 3$/  replicas: 1/`)
	for _, r := range h.receivers {
		msgs := r.waitMessages(t, 2, 10*time.Second)
		if !strings.Contains(strings.ToLower(msgs[1]), "resolved") {
			t.Errorf("%s second message is not a resolution:\n%s", r.name, msgs[1])
		}
	}
	time.Sleep(time.Second)
	for _, r := range h.receivers {
		if n := len(r.messages()); n != 2 {
			t.Errorf("%s got %d messages, want exactly 2:\n%s", r.name, n, strings.Join(r.messages(), "\n---\n"))
		}
	}
}

// TestEachHandEditIsOneMessage makes five hand edits that kubectl diff sees, one after the
// other: each reaches chat once, names the field, and names who made it — removals included, from
// the update the daemon's watch saw. The two that change GPU capacity say what they cost.
func TestEachHandEditIsOneMessage(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	start(t, h.config(t.TempDir()))
	inference, api := h.p.NS("inference"), h.p.NS("api")
	edits := []struct {
		do   []string
		want []string
	}{
		{[]string{"-n", inference, "set", "env", "deploy/vllm-qwen", "-c", "vllm", "HF_HUB_OFFLINE-"},
			// A pure removal stamps no managedFields entry: the message says the writer is unknown
			// (the API server's audit log is what can name it).
			[]string{"vllm-qwen", "env[name=HF_HUB_OFFLINE]", "removed", "unknown"}},
		{[]string{"-n", inference, "patch", "deploy/vllm-llama", "--type=json", `-p=[` +
			`{"op":"remove","path":"/spec/template/spec/containers/0/resources/requests/nvidia.com~1gpu"},` +
			`{"op":"remove","path":"/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"}]`},
			[]string{"vllm-llama", `requests["nvidia.com/gpu"]`, `limits["nvidia.com/gpu"]`, "writer unknown",
				"Cost", "nvidia.com/gpu 1 → 0 per pod on l40s: -1 GPUs, about -1.86 USD per hour"}},
		{[]string{"-n", api, "patch", "deploy/rag-api", "--field-manager=argocd-controller",
			`-p={"spec":{"template":{"spec":{"containers":[{"name":"api","image":"registry.example.com/llm/rag-api:6.6.6"}]}}}}`},
			[]string{"rag-api", "containers[name=api].image", "6.6.6", "argocd-controller"}},
		{[]string{"-n", inference, "annotate", "--overwrite", "deploy/vllm-llama", "argocd.argoproj.io/sync-wave=1.0"},
			[]string{"vllm-llama", "argocd.argoproj.io/sync-wave", "1.0", "kubectl-annotate"}},
		// A floor KEDA keeps whatever the load: the message says what it costs.
		{[]string{"-n", inference, "patch", "scaledobject/vllm-qwen", "--type=merge", `-p={"spec":{"minReplicaCount":4}}`},
			[]string{"vllm-qwen", "minReplicaCount", "kubectl-patch", "Cost", "minimum replicas of vllm-qwen 2 → 4 on l40s: at least +2 GPUs"}},
	}
	mm := h.receivers[1]
	for i, e := range edits {
		h.p.Kubectl(e.do...)
		msgs := mm.waitMessages(t, i+1, 15*time.Second)
		var body struct{ Text string }
		if err := json.Unmarshal([]byte(msgs[i]), &body); err != nil {
			t.Fatalf("mattermost body: %v\n%s", err, msgs[i])
		}
		text := strings.ReplaceAll(body.Text, `\`, "") // Markdown escapes
		for _, want := range e.want {
			if !strings.Contains(text, want) {
				t.Errorf("edit %d: message lacks %q:\n%s", i+1, want, msgs[i])
			}
		}
	}
	// Wait for a positive signal that the daemon is still auditing (one more edit, one more
	// message), then check nothing was announced twice.
	h.p.Kubectl("-n", api, "label", "deploy/rag-api", "team=search")
	msgs := mm.waitMessages(t, len(edits)+1, 15*time.Second)
	if !strings.Contains(msgs[len(edits)], "team") {
		t.Errorf("last message is not the label:\n%s", msgs[len(edits)])
	}
	if n := len(mm.messages()); n != len(edits)+1 {
		t.Errorf("got %d messages, want %d:\n%s", n, len(edits)+1, strings.Join(mm.messages(), "\n---\n"))
	}
}

func TestReceiverOutageAndRestartLoseNothing(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	state := t.TempDir()
	cfg := h.config(state)
	slack := h.receivers[0]
	slack.setFail(-1) // down
	d := start(t, cfg)
	h.p.Kubectl("-n", h.p.NS("api"), "set", "image", "deployment/rag-api", "api=registry.example.com/llm/rag-api:9.9.9")
	h.receivers[1].waitMessages(t, 1, 10*time.Second) // the others get it at once
	time.Sleep(500 * time.Millisecond)                // slack keeps failing and retrying
	d.stop()
	if n := len(slack.messages()); n != 0 {
		t.Fatalf("slack was down but recorded %d messages", n)
	}
	slack.setFail(0) // back
	start(t, h.config(state))
	msgs := slack.waitMessages(t, 1, 10*time.Second)
	if !strings.Contains(msgs[0], "9.9.9") {
		t.Errorf("delivered message is not the queued drift:\n%s", msgs[0])
	}
	time.Sleep(time.Second)
	for _, r := range h.receivers {
		if n := len(r.messages()); n != 1 {
			t.Errorf("%s got %d messages after the restart, want exactly 1 (no duplicate):\n%s", r.name, n, strings.Join(r.messages(), "\n---\n"))
		}
	}
}

// TestAPIServerRestartMidRunThenWatchesHold restarts the API server under a running daemon: a
// hand edit made before the watches are back is still announced, each informer reconnects about
// once, and then the watches hold for two minutes without a single reconnect (a client timeout
// would cut them every 30 s). The count comes from the informers' own watch requests.
func TestAPIServerRestartMidRunThenWatchesHold(t *testing.T) {
	testcluster.Need(t)
	if testing.Short() {
		t.Skip("holds the watches for two minutes")
	}
	h := newHarness(t)
	d := start(t, h.config(t.TempDir()))
	c := d.d.conn.Cache()
	informers := int64(len(c.Kinds()))
	before := c.WatchStarts()
	require.NoError(t, cluster.RestartAPIServer(context.Background(), 500*time.Millisecond))
	// Right after the restart, before the daemon's watches are back, someone scales by hand.
	h.p.Kubectl("-n", h.p.NS("rag"), "scale", "statefulset/qdrant", "--replicas=4")
	msgs := h.receivers[1].waitMessages(t, 1, 30*time.Second)
	assert.Contains(t, msgs[0], "qdrant", "message after reconnect; log:\n%s", d.log.String())
	assert.Contains(t, msgs[0], "scale")
	// Settled: every informer watches again and no watch has started for 5 s. A freshly started
	// API server ends the first watch of each kind once while its watch cache fills, so a
	// restart costs each informer up to two.
	var reconnected int64
	last, since := c.WatchStarts(), time.Now()
	require.Eventually(t, func() bool {
		if n := c.WatchStarts(); n != last {
			last, since = n, time.Now()
		}
		reconnected = last
		return last-before >= informers && time.Since(since) > 5*time.Second
	}, 60*time.Second, 100*time.Millisecond, "every informer watches again")
	assert.LessOrEqual(t, reconnected-before, 2*informers, "watches accepted for %d informers across one restart", informers)

	time.Sleep(2 * time.Minute)
	// The positive signal that the watches are alive: an edit after the hold is announced.
	h.p.Kubectl("-n", h.p.NS("rag"), "scale", "statefulset/qdrant", "--replicas=1")
	h.receivers[1].waitMessages(t, 2, 30*time.Second)
	assert.Equal(t, reconnected, c.WatchStarts(), "watch requests during the two-minute hold")
}

func TestSecretValueNeverLeaves(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	const gitValue, liveValue = "git-s3cr3t-0d1e", "live-s3cr3t-9f8a"
	if err := h.p.Write("base/api/secret.yaml", fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: api-key\n  namespace: %s\nstringData:\n  key: %s\n", h.p.NS("api"), gitValue)); err != nil {
		t.Fatal(err)
	}
	h.p.Edit("base/api/kustomization.yaml", "resources:", "resources:\n  - secret.yaml")
	h.p.Sync(h.p.Commit("add a secret"))
	state := t.TempDir()
	d := start(t, h.config(state))
	h.p.Kubectl("-n", h.p.NS("api"), "patch", "secret", "api-key", "-p",
		fmt.Sprintf(`{"data":{"key":"%s"}}`, base64.StdEncoding.EncodeToString([]byte(liveValue))))
	for _, r := range h.receivers {
		r.waitMessages(t, 1, 10*time.Second)
	}
	_, api := d.get(t, "/api/v1/drift?env=prod")
	haystacks := []string{d.log.String(), api}
	for _, r := range h.receivers {
		haystacks = append(haystacks, r.messages()...)
	}
	for _, v := range []string{gitValue, liveValue} {
		for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
			for _, hay := range haystacks {
				if strings.Contains(hay, form) {
					t.Fatalf("secret value %q found in a payload, the API or the log", form)
				}
			}
		}
	}
	if !strings.Contains(h.receivers[0].messages()[0], "api-key") {
		t.Errorf("the Secret drift was not reported:\n%s", h.receivers[0].messages()[0])
	}
	// The value is stood for by an HMAC under the install's key, kept in the state dir (0600) so
	// reports stay comparable across restarts.
	keyFile := filepath.Join(state, "secret-hmac.key")
	info, err := os.Stat(keyFile)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("install key %s: %v, mode %v", keyFile, err, info)
	}
	key, _ := os.ReadFile(keyFile)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(liveValue))
	if want := "hmac-sha256:" + hex.EncodeToString(mac.Sum(nil)[:12]); !strings.Contains(api, want) {
		t.Errorf("the API report does not stand for the live value by %s under the install key:\n%s", want, api)
	}
}

func TestTwoDaemonsPostOneSetOfMessages(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	mk := func(id string) *Config {
		cfg := h.config(t.TempDir())
		cfg.LeaderElection = LeaderElectionConfig{Enabled: true, Namespace: "default", Name: h.p.Prefix + "-auditor", Identity: id,
			LeaseDuration: Duration{4 * time.Second}, RenewDeadline: Duration{3 * time.Second}, RetryPeriod: Duration{500 * time.Millisecond}}
		return cfg
	}
	a := start(t, mk("replica-a"))
	b := start(t, mk("replica-b"))
	h.p.KubectlEdit(h.p.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 2/`)
	h.receivers[0].waitMessages(t, 1, 15*time.Second)
	time.Sleep(2 * time.Second)
	if n := len(h.receivers[0].messages()); n != 1 {
		t.Errorf("two replicas sent %d messages, want 1", n)
	}
	leaders := 0
	for _, r := range []*running{a, b} {
		if r.d.lead.Leading() {
			leaders++
		}
	}
	if leaders != 1 {
		t.Errorf("%d leaders, want 1", leaders)
	}
}

func TestGitWebhookAuthAndFetch(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	cfg.Webhook = &WebhookConfig{SecretFile: h.secretFile("webhook", "hook-secret")}
	d := start(t, cfg)
	post := func(sig string, body string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+d.d.Addr()+"/api/v1/git-webhook", strings.NewReader(body))
		if sig != "" {
			req.Header.Set("X-Hub-Signature-256", sig)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	body := `{"ref":"refs/heads/main"}`
	mac := hmac.New(sha256.New, []byte("hook-secret"))
	mac.Write([]byte(body))
	good := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	if c := post("", body); c != http.StatusUnauthorized {
		t.Errorf("unsigned webhook: %d, want 401", c)
	}
	if c := post("sha256=00", body); c != http.StatusUnauthorized {
		t.Errorf("badly signed webhook: %d, want 401", c)
	}
	if c := post(good, strings.Repeat("x", 2<<20)); c != http.StatusRequestEntityTooLarge {
		t.Errorf("2 MiB webhook: %d, want 413", c)
	}
	// A commit ahead of the synced revision shows up as pending sync after the webhook.
	h.p.Edit("base/api/rag-api.yaml", "rag-api:1.4.2", "rag-api:1.5.0")
	h.p.Edit("overlays/prod/kustomization.yaml", "newTag: 1.4.2", "newTag: 1.5.0")
	head := h.p.Commit("rag-api 1.5.0")
	if c := post(good, body); c != http.StatusAccepted {
		t.Fatalf("signed webhook: %d, want 202", c)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		_, rep := d.get(t, "/api/v1/drift?env=prod")
		if strings.Contains(rep, `"pendingSync": true`) && strings.Contains(rep, head) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, rep := d.get(t, "/api/v1/drift?env=prod")
	t.Errorf("after the webhook the report does not show pending sync to %s:\n%s", head, rep)
}

// TestWithoutArgoCDTheBranchHeadIsAudited: an env without an Application follows what Git says it
// runs (here its release file says main): a commit on a local repository is audited after the
// next fetch, and the change it makes shows as drift (Git now says 1.5.0, the cluster runs 1.4.2).
// With an Application the synced revision is audited instead, and a new commit is only pending
// (TestGitWebhookAuthAndFetch).
func TestWithoutArgoCDTheBranchHeadIsAudited(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	cfg.AppNamePrefix = ptr.To("no-such-app-")
	d := start(t, cfg)
	before := d.d.status().Envs[0]
	require.Empty(t, before.Error)
	h.p.Edit("base/api/rag-api.yaml", "rag-api:1.4.2", "rag-api:1.5.0")
	h.p.Edit("overlays/prod/kustomization.yaml", "newTag: 1.4.2", "newTag: 1.5.0")
	head := h.p.Commit("rag-api 1.5.0")
	require.NotEqual(t, head, before.Revision)
	d.d.TriggerFetch()
	deadline := time.Now().Add(30 * time.Second)
	var st EnvStatus
	for time.Now().Before(deadline) {
		if st = d.d.status().Envs[0]; st.Revision == head {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Equal(t, head, st.Revision, "the audited revision after the commit and a fetch (was %s): %+v", before.Revision, st)
	assert.False(t, st.PendingSync)
	rep, err := d.d.Report("prod")
	require.NoError(t, err)
	var images []string
	for _, o := range rep.Objects {
		for _, f := range o.Fields {
			if o.Kind == "Deployment" && o.Name == "rag-api" && strings.HasSuffix(f.Path, ".image") {
				images = append(images, fmt.Sprintf("%v -> %v", f.Desired, f.Live))
			}
		}
	}
	assert.Equal(t, []string{"registry.example.com/llm/rag-api:1.5.0 -> registry.example.com/llm/rag-api:1.4.2"}, images, "report: %s", jsonOf(rep))
}

// TestEnvThatDoesNotRenderLeavesTheDaemonReady: a daemon started while one env's commit does
// not render (a manifest that does not parse) becomes ready; that env's status names the file
// and line, and a hand edit in the other env reaches chat.
func TestEnvThatDoesNotRenderLeavesTheDaemonReady(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	require.NoError(t, h.p.Write("overlays/dev/broken.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: broken\ndata: {a: [\n"))
	h.p.Edit("overlays/dev/kustomization.yaml", "resources:\n", "resources:\n  - broken.yaml\n")
	h.p.Commit("dev: a manifest that does not parse")
	cfg := h.config(t.TempDir())
	cfg.Envs = []string{"dev", "prod"}
	d := start(t, cfg) // waits for /readyz
	st := d.d.status()
	require.True(t, st.Ready)
	require.Len(t, st.Envs, 2)
	assert.Contains(t, st.Envs[0].Error, "broken.yaml", "dev's status names the file: %+v", st.Envs[0])
	assert.Empty(t, st.Envs[1].Error, "prod: %+v", st.Envs[1])
	assert.True(t, st.Envs[1].InSync, "prod: %+v", st.Envs[1])

	h.p.KubectlEdit(h.p.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	msgs := h.receivers[0].waitMessages(t, 1, 30*time.Second)
	assert.Contains(t, msgs[0], "qdrant")
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// peakSchedule is a schedule.yaml with one peak at peak (UTC), whose lead time puts its firing
// before now: it fires as soon as a runner sees it.
func peakSchedule(peak time.Time) string {
	return fmt.Sprintf(`leadTime:
  argoSyncDelay: 3m
  coldStart: {nodeProvisioning: 90s, imageSize: 10GB, pullBandwidth: 1Gbit/s, weightsSize: 16GB, downloadBandwidth: 1Gbit/s, loadBandwidth: 2GB/s, engineInit: 30s}
  margin: 6m
peaks:
  - name: test-peak
    recurrence:
      dates: [%s]
      at: "%s"
      timeZone: UTC
    duration: 1h
    target: {path: overlays/prod/scaling.yaml, kind: ScaledObject, name: vllm-qwen, field: spec.minReplicaCount}
    warm: 5
`, peak.Format("2006-01-02"), peak.Format("15:04"))
}

// scaleUps counts the scheduled commits of test-peak on the bare repository's main.
func scaleUps(bare string) int {
	out, _ := exec.Command("git", "--git-dir", bare, "log", "--format=%H %(trailers:key=Schedule-Id,valueonly,separator=)", "main").Output()
	return strings.Count(string(out), "test-peak")
}

// TestScheduleAddedLaterIsReloadedAndFires starts the daemon on a repository without a schedule,
// then pushes one: the daemon fetches the new revision, reloads the schedule without a restart
// and commits the scale-up of a peak that begins in two minutes (its firing time already past).
func TestScheduleAddedLaterIsReloadedAndFires(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	bare := filepath.Join(t.TempDir(), "platform.git")
	h.p.Git("clone", "-q", "--bare", h.p.Dir, bare)
	cfg := h.config(t.TempDir())
	cfg.Repo = "file://" + bare
	cfg.FetchInterval = Duration{time.Second}
	cfg.Schedule = ScheduleConfig{Enabled: true, Remote: gitrepo.RemoteConfig{URL: "file://" + bare}}
	d := start(t, cfg)
	require.Zero(t, scaleUps(bare))

	require.NoError(t, h.p.Write("clusters/prod/schedule.yaml", peakSchedule(time.Now().UTC().Add(2*time.Minute).Truncate(time.Minute))))
	h.p.Commit("schedule a peak")
	h.p.Git("push", "-q", bare, "HEAD:main")
	require.Eventually(t, func() bool { return scaleUps(bare) > 0 }, 30*time.Second, 200*time.Millisecond,
		"no scale-up commit after the schedule was pushed; daemon log:\n%s", d.log.String())
	assert.Contains(t, d.log.String(), "schedule reloaded")
	assert.Equal(t, 1, scaleUps(bare), "scale-up commits")
}

// TestScheduledScaleUpIsCommittedByTheDaemon gives the daemon a schedule whose peak starts in
// two minutes (so its firing, 14m36s before, is late but still useful) and checks the scale-up
// lands in the bare repository exactly once, with its trailers.
func TestScheduledScaleUpIsCommittedByTheDaemon(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	peak := time.Now().UTC().Add(2 * time.Minute).Truncate(time.Minute)
	sched := peakSchedule(peak)
	if err := h.p.Write("clusters/prod/schedule.yaml", sched); err != nil {
		t.Fatal(err)
	}
	h.p.Commit("schedule a peak")
	bare := filepath.Join(t.TempDir(), "platform.git")
	h.p.Git("clone", "-q", "--bare", h.p.Dir, bare)
	cfg := h.config(t.TempDir())
	cfg.Repo = "file://" + bare
	cfg.Schedule = ScheduleConfig{Enabled: true, Remote: gitrepo.RemoteConfig{URL: "file://" + bare}}
	start2 := time.Now()
	d := start(t, cfg)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if n := scaleUps(bare); n > 0 {
			if n != 1 {
				t.Fatalf("%d scale-up commits, want 1", n)
			}
			t.Logf("scale-up committed %s after the daemon started", time.Since(start2).Round(10*time.Millisecond))
			show, _ := exec.Command("git", "--git-dir", bare, "show", "main", "--", "overlays/prod/scaling.yaml").Output()
			if !strings.Contains(string(show), "+  minReplicaCount: 5") {
				t.Errorf("commit does not raise minReplicaCount to 5:\n%s", show)
			}
			// What Argo CD would sync next: it renders and the real API server accepts it.
			repo, err := gitrepo.Open("file://" + bare)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := repo.Snapshot("main")
			if err != nil {
				t.Fatal(err)
			}
			src, _ := render.FromSnapshot(snap)
			res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: "prod"})
			if err != nil {
				t.Fatalf("the scheduled commit does not render: %v", err)
			}
			syncer, _ := testcluster.NewSyncer(cluster.Config)
			if err := syncer.Sync(context.Background(), h.p.App(), res.Objects, true); err != nil {
				t.Errorf("the API server's dry-run rejects the scheduled commit: %v", err)
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no scale-up commit after 30s; daemon log:\n%s", d.log.String())
}

// TestLedgerRecordsTheSyncedRevision runs the daemon with the ledger on: the synced revision's
// served models are appended to clusters/prod/model-ledger.jsonl in the bare repository, stamped
// with the time the daemon first saw the revision synced.
func TestLedgerRecordsTheSyncedRevision(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	bare := filepath.Join(t.TempDir(), "platform.git")
	h.p.Git("clone", "-q", "--bare", h.p.Dir, bare)
	cfg := h.config(t.TempDir())
	cfg.Repo = "file://" + bare
	cfg.Ledger = LedgerConfig{Enabled: true, Remote: gitrepo.RemoteConfig{URL: "file://" + bare}}
	before := time.Now().UTC().Add(-time.Second)
	d := start(t, cfg)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		out, err := exec.Command("git", "--git-dir", bare, "show", "main:clusters/prod/model-ledger.jsonl").Output()
		if err == nil && len(out) > 0 {
			text := string(out)
			for _, want := range []string{`"model":"qwen"`, `"model":"llama"`, `"deployment":"vllm-qwen-canary"`, `"sharePercent":10`, `"syncedAt":"`} {
				if !strings.Contains(text, want) {
					t.Errorf("ledger lacks %s:\n%s", want, text)
				}
			}
			i := strings.Index(text, `"syncedAt":"`) + len(`"syncedAt":"`)
			stamp := text[i : i+strings.Index(text[i:], `"`)]
			if ts, err := time.Parse(time.RFC3339Nano, stamp); err != nil || ts.Before(before) {
				t.Errorf("syncedAt %q is not the time the daemon saw the sync (after %s)", stamp, before)
			}
			msg, _ := exec.Command("git", "--git-dir", bare, "log", "-1", "--format=%an%n%B", "main").Output()
			if !strings.Contains(string(msg), "Synced-Revision: "+h.p.Head) {
				t.Errorf("ledger commit lacks the Synced-Revision trailer:\n%s", msg)
			}
			rendered := d.d.ledger.Stats()
			assert.Positive(t, rendered.Rendered, "the ledger's commits were rendered")
			assert.Equal(t, rendered.Rendered, rendered.InWorker, "the ledger's commits were rendered in render workers, not in the daemon")
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("no ledger after 60s; log:\n%s", d.log.String())
}

// TestAPIRequiresKubernetesAuth: with the default API auth, /api/v1/drift answers 401 without a
// token and 403 to an authenticated user the cluster's RBAC does not allow (Kubernetes' default
// roles let every such user get the non-resource URL /api/*, so the check is on a resource); a
// ClusterRole granting get on drift and status in auditor.platform.llm lets that user in.
// /healthz stays open.
func TestAPIRequiresKubernetesAuth(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	cfg.API = APIConfig{Auth: APIAuthKubernetes}
	d := start(t, cfg)
	getPath := func(path, token string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+d.d.Addr()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	get := func(token string) int { return getPath("/api/v1/drift?env=prod", token) }
	// /mcp: each MCP request is a POST; reading, it needs get on mcp.
	postMCP := func(token string) int {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
		req, err := http.NewRequest(http.MethodPost, "http://"+d.d.Addr()+"/mcp", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, postMCP(""), "/mcp without a token")
	assert.Equal(t, http.StatusForbidden, getPath("/mcp", testcluster.ReaderToken), "/mcp for a user without RBAC") // verdicts are kept per method and path: POST is asked below
	// The web view and every API route are behind the same authentication.
	for _, path := range []string{"/", "/blame?env=prod&kind=StatefulSet&name=qdrant", "/api/v1/episodes", "/api/v1/blame?env=prod&kind=StatefulSet&name=qdrant"} {
		assert.Equal(t, http.StatusUnauthorized, getPath(path, ""), "%s without a token", path)
		if path != "/blame?env=prod&kind=StatefulSet&name=qdrant" { // asked once granted: verdicts are kept per path
			assert.Equal(t, http.StatusForbidden, getPath(path, testcluster.ReaderToken), "%s for a user without RBAC", path)
		}
	}
	if code := get(""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code := get("not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("bad token: %d, want 401", code)
	}
	if code := get(testcluster.ReaderToken); code != http.StatusForbidden {
		t.Errorf("user without RBAC: %d, want 403", code)
	}
	if code, _ := d.get(t, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d, want 200 without a token", code)
	}
	role := h.p.Prefix + "-drift-reader"
	// kubectl create clusterrole checks resources against discovery; these are virtual.
	manifest := filepath.Join(t.TempDir(), "role.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: `+role+`}
rules: [{apiGroups: [`+APIGroup+`], resources: [drift, status, pages, mcp], verbs: [get]}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	h.p.Kubectl("apply", "-f", manifest)
	h.p.Kubectl("create", "clusterrolebinding", role, "--clusterrole="+role, "--user="+testcluster.ReaderUser)
	t.Cleanup(func() {
		_, _ = cluster.Kubectl(context.Background(), "delete", "clusterrolebinding,clusterrole", role).CombinedOutput()
	})
	// Verdicts are kept 30 s per token and path: ask for another path the role covers.
	req, _ := http.NewRequest(http.MethodGet, "http://"+d.d.Addr()+"/api/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+testcluster.ReaderToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("user granted get on /api/v1/*: %d, want 200", resp.StatusCode)
	}
	// pages is the web view (a path not asked before: verdicts are kept per path); episodes is
	// not granted by this role.
	assert.Equal(t, http.StatusOK, getPath("/blame?env=prod&kind=StatefulSet&name=qdrant&namespace="+h.p.NS("rag"), testcluster.ReaderToken))
	assert.Equal(t, http.StatusForbidden, getPath("/api/v1/episodes?env=prod", testcluster.ReaderToken))
	assert.Equal(t, http.StatusOK, postMCP(testcluster.ReaderToken), "/mcp for a user granted get on mcp")
}

// TestStopWhileConnecting: a daemon told to stop before it ever reached the cluster returns
// cleanly, without auditing with no cache.
func TestStopWhileConnecting(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	unreachable := rest.CopyConfig(cluster.Config)
	unreachable.Host = "https://127.0.0.1:1"
	buf := &syncBuffer{}
	d, err := New(cfg, unreachable, slog.New(slog.NewTextHandler(buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(buf.String(), "connect") { // a failed attempt: it is starting up
		if time.Now().After(deadline) {
			t.Fatalf("no connect attempt logged:\n%s", buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after a stop during startup: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the stop")
	}
}

// bigEnv writes overlays/big: n ConfigMaps in one file, which kustomize takes seconds to render
// (its resource map is quadratic in the objects; 10,000 take minutes). None is in the cluster.
func bigEnv(t *testing.T, p interface {
	Write(rel, content string) error
}, ns string, n int, comment string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# " + comment + "\n")
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: big-%05d, namespace: %s}\ndata: {i: %q}\n", i, ns, strconv.Itoa(i))
	}
	require.NoError(t, p.Write("overlays/big/configmaps.yaml", b.String()))
	require.NoError(t, p.Write("overlays/big/kustomization.yaml", "resources:\n  - configmaps.yaml\n"))
}

// TestNewRevisionRendersInTheBackground: a commit that changes a large env's render is rendered
// in the background. Meanwhile a hand edit in another env reaches chat and the large env's last
// report stands (its status says which revision is rendering); a hand edit in the large env and
// a further commit (not touching it) wait for that render, which is not started again; once it
// is in, the large env is audited at the newest revision, the hand edit included.
func TestNewRevisionRendersInTheBackground(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	const n = 5000
	ns := h.p.Prefix + "-big" // no namespace of prod's: its Extra objects are not big's
	bigEnv(t, h.p, ns, n, "first")
	h.p.Commit("a big env")
	cfg := h.config(t.TempDir())
	cfg.AppNamePrefix = ptr.To("no-such-app-") // the envs follow the branch head
	cfg.Envs = []string{"prod", "big"}
	d := start(t, cfg)
	envStatus := func(env string) EnvStatus {
		for _, es := range d.d.status().Envs {
			if es.Env == env {
				return es
			}
		}
		t.Fatalf("no status for %s", env)
		return EnvStatus{}
	}
	before := envStatus("big")
	require.Empty(t, before.Error)
	require.Equal(t, h.p.Head, before.Revision)

	bigEnv(t, h.p, ns, n, "second") // a new render, the same objects
	head := h.p.Commit("touch the big env")
	workers := d.d.worker.Started()
	d.d.TriggerFetch()
	deadline := time.Now().Add(30 * time.Second)
	for d.d.worker.Started() == workers { // the new revision's render has started
		require.True(t, time.Now().Before(deadline), "no render of big's new revision: %+v\n%s", envStatus("big"), d.log.String())
		time.Sleep(20 * time.Millisecond)
	}
	edited := time.Now()
	h.p.KubectlEdit(h.p.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	var msg string
	for msg == "" {
		for _, m := range h.receivers[0].messages() {
			if strings.Contains(m, "qdrant") {
				msg = m
			}
		}
		require.True(t, time.Since(edited) < 30*time.Second, "no message for the hand edit in prod:\n%s", strings.Join(h.receivers[0].messages(), "\n---\n"))
		time.Sleep(10 * time.Millisecond)
	}
	assert.Contains(t, msg, "spec.replicas")
	during := envStatus("big")
	t.Logf("the hand edit in prod reached chat %s after it was made", time.Since(edited))
	assert.Equal(t, head, during.Rendering, "the hand edit in prod was announced only after big's render (%s after the edit)", time.Since(edited))
	assert.Equal(t, before.Revision, during.Revision, "big's last report stands while its new revision renders")
	assert.Equal(t, head, envStatus("prod").Revision, "prod's render did not change: audited at the new head from the cache")

	// While big renders: a hand-made ConfigMap of big's (Git says i: "7"), and a commit that
	// changes no file big reads. Neither restarts the render; both are in big's next audit.
	h.p.Kubectl("create", "namespace", ns)
	t.Cleanup(func() { h.p.Kubectl("delete", "namespace", ns, "--wait=false") })
	h.p.Kubectl("-n", ns, "create", "configmap", "big-00007", "--from-literal=i=hand-made")
	require.NoError(t, h.p.Write("NOTES.md", "not part of any env\n"))
	head = h.p.Commit("notes")
	d.d.TriggerFetch()
	require.Equal(t, during.Revision, envStatus("big").Revision, "big's render ended before the test's edits: its margin is gone")

	deadline = time.Now().Add(2 * time.Minute)
	for envStatus("big").Revision != head {
		require.True(t, time.Now().Before(deadline), "big not audited at %s after its render: %+v", head, envStatus("big"))
		time.Sleep(50 * time.Millisecond)
	}
	after := envStatus("big")
	t.Logf("big audited at its new revision %s after the edit", time.Since(edited))
	assert.Empty(t, after.Rendering)
	assert.Empty(t, after.Error)
	rep, err := d.d.Report("big")
	require.NoError(t, err)
	var others []string
	for _, o := range rep.Objects {
		if !strings.HasPrefix(o.Name, "big-") {
			others = append(others, o.Kind+"/"+o.Name+":"+string(o.Status))
		}
	}
	assert.Equal(t, n, after.Drifted, "every ConfigMap of big is out of sync; others: %v", others)
	statuses := map[string]string{}
	for _, o := range rep.Objects {
		if o.Name == "big-00006" || o.Name == "big-00007" {
			statuses[o.Name] = string(o.Status)
		}
	}
	assert.Equal(t, map[string]string{"big-00006": "Missing", "big-00007": "Modified"}, statuses, "the ConfigMap made by hand during the render")
	assert.Equal(t, workers+1, d.d.worker.Started(), "big's render ran once: the commit made during it did not restart it")
}

// TestTwoAuditWorkersAuditTwoEnvs: with auditWorkers 2, dev and prod are audited by two workers
// sharing one Auditor and one render worker. Both envs get their report, prod in sync (dev is
// not deployed in this cluster: every object of it is missing), and a hand edit in prod reaches
// chat with its field and tool. Run with -race, it is the check that the reconcile step is safe
// for several workers.
func TestTwoAuditWorkersAuditTwoEnvs(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	cfg.Envs = []string{"dev", "prod"}
	cfg.AuditWorkers = 2
	d := start(t, cfg) // waits for /readyz: every env has a report
	st := d.d.status()
	require.Len(t, st.Envs, 2)
	for _, e := range st.Envs {
		assert.Empty(t, e.Error, "%s: %+v", e.Env, e)
		assert.NotEmpty(t, e.Revision, "%s has a report: %+v", e.Env, e)
	}
	assert.False(t, st.Envs[0].InSync, "dev is not deployed here: %+v", st.Envs[0])
	assert.True(t, st.Envs[1].InSync, "prod: %+v", st.Envs[1])

	prodMessages := func() []string {
		var out []string
		for _, m := range h.receivers[0].messages() {
			if strings.Contains(m, "in prod") {
				out = append(out, m)
			}
		}
		return out
	}
	require.Empty(t, prodMessages(), "prod is in sync")
	h.p.KubectlEdit(h.p.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	require.Eventually(t, func() bool { return len(prodMessages()) > 0 }, 30*time.Second, 20*time.Millisecond,
		"no message for prod's edit; dev's and others:\n%s", strings.Join(h.receivers[0].messages(), "\n---\n"))
	prod := prodMessages()
	assert.Contains(t, prod[0], "qdrant")
	assert.Contains(t, prod[0], "spec.replicas")
	assert.Contains(t, prod[0], "kubectl-edit")
}
