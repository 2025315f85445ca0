package daemon

import (
	"k8s.io/utils/ptr"

	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llm-gitops/platform/internal/daemon/sinks"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/manifest"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestRolloutsAreNotAnnouncedEditsAre is the false-drift scenario through the daemon: an env of
// 50 Deployments and 50 ConfigMaps whose manifests carry no annotations, applied server-side as
// the GitOps applier, on a cluster of its own where the real Deployment controller writes each
// Deployment's revision annotation. The daemon's report is in sync; after five `kubectl set
// image` edits it names exactly those five Deployments, and so does chat.
func TestRolloutsAreNotAnnouncedEditsAre(t *testing.T) {
	testcluster.Need(t)
	ctx := context.Background()
	kc, err := testcluster.Start(ctx, testcluster.Options{ControllerManager: true, Controllers: []string{"deployment"}})
	require.NoError(t, err)
	t.Cleanup(kc.Stop)

	const ns = "shop"
	var docs []string
	for i := range 50 {
		docs = append(docs, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web-%02[1]d, namespace: %[2]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: web-%02[1]d}}
  template:
    metadata: {labels: {app: web-%02[1]d}}
    spec:
      containers: [{name: web, image: registry.example.com/web:1.0}]
`, i, ns), fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-%02d, namespace: %s}\ndata: {mode: fast}\n", i, ns))
	}
	all := "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns + "}\n---\n" + strings.Join(docs, "---\n")
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "overlays", "shop"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "overlays", "shop", "objects.yaml"), []byte(all), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "overlays", "shop", "kustomization.yaml"), []byte("resources: [objects.yaml]\n"), 0o644))
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "shop"}} {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	objs, err := manifest.Decode([]byte(all))
	require.NoError(t, err)
	syncer, err := testcluster.NewSyncer(kc.Config)
	require.NoError(t, err)
	for _, o := range objs {
		require.NoError(t, syncer.ApplyAs(ctx, o, testcluster.ArgoManager))
	}
	cs, err := kc.Clientset()
	require.NoError(t, err)
	deadline := time.Now().Add(time.Minute)
	for annotated := 0; annotated < 50; {
		require.True(t, time.Now().Before(deadline), "the Deployment controller annotated %d of 50 Deployments", annotated)
		time.Sleep(200 * time.Millisecond)
		list, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		annotated = 0
		for _, d := range list.Items {
			if d.Annotations["deployment.kubernetes.io/revision"] != "" {
				annotated++
			}
		}
	}

	chat := newReceiver(t, "slack")
	secret := filepath.Join(t.TempDir(), "slack")
	require.NoError(t, os.WriteFile(secret, []byte(chat.srv.URL+"/services/T000/B000/XXXX"), 0o600))
	cfg := &Config{
		Repo: dir, Envs: []string{"shop"}, AppNamePrefix: ptr.To("no-such-app-"), StateDir: t.TempDir(), Listen: "127.0.0.1:0",
		API: APIConfig{Auth: APIAuthNone}, FetchInterval: Duration{time.Minute}, Debounce: Duration{20 * time.Millisecond},
		FoldWindow: Duration{300 * time.Millisecond},
		Dispatch:   DispatchConfig{BackoffBase: Duration{50 * time.Millisecond}, BackoffMax: Duration{200 * time.Millisecond}, Rate: 100, Burst: 100},
		Sinks:      []SinkConfig{{Name: "slack", Slack: &sinks.SlackConfig{URLFile: secret}}},
	}
	require.NoError(t, cfg.validate())
	d, err := New(cfg, kc.Config, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + d.Addr() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 50*time.Millisecond, "daemon not ready")
	rep, err := d.Report("shop")
	require.NoError(t, err)
	require.True(t, rep.InSync, "the rollouts are drift: %s", jsonOf(rep))

	edited := []string{"web-03", "web-11", "web-20", "web-37", "web-49"}
	for _, name := range edited {
		out, err := kc.Kubectl(ctx, "-n", ns, "set", "image", "deployment/"+name, "web=registry.example.com/web:6.6.6").CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	names := func(rep *drift.Report) []string {
		var out []string
		for _, o := range rep.Objects {
			out = append(out, o.Kind+"/"+o.Name)
		}
		slices.Sort(out)
		return out
	}
	want := []string{"Deployment/web-03", "Deployment/web-11", "Deployment/web-20", "Deployment/web-37", "Deployment/web-49"}
	require.Eventually(t, func() bool {
		rep, err = d.Report("shop")
		return err == nil && len(rep.Objects) >= len(want)
	}, 30*time.Second, 50*time.Millisecond, "the edits never reached the report")
	require.Equal(t, want, names(rep), "report: %s", jsonOf(rep))
	for _, o := range rep.Objects {
		var paths []string
		for _, f := range o.Fields {
			paths = append(paths, f.Path)
		}
		require.Equal(t, []string{".spec.template.spec.containers[name=web].image"}, paths, "%s: only the image drifted", o.Name)
	}
	msgs := strings.Join(chat.waitMessages(t, 1, 30*time.Second), "\n")
	require.Eventually(t, func() bool {
		msgs = strings.Join(chat.messages(), "\n")
		for _, n := range edited {
			if !strings.Contains(msgs, n) {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "chat does not name every edited Deployment:\n%s", msgs)
	for i := range 50 {
		if n := fmt.Sprintf("web-%02d", i); !slices.Contains(edited, n) && strings.Contains(msgs, n) {
			t.Errorf("chat names %s, which nobody edited:\n%s", n, msgs)
		}
	}
	if strings.Contains(msgs, "deployment.kubernetes.io/revision") {
		t.Errorf("chat names the Deployment controller's annotation:\n%s", msgs)
	}
}
