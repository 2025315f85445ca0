// Package testfixture gives integration tests their own copy of the platform: the project's
// manifests in a Git repository of the test's own, every llm- name prefixed so tests do not see
// each other's objects, synced to the real test cluster the way Argo CD does.
package testfixture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// Platform is one test's copy of the platform: the project's manifests in a Git repository of its
// own, with every llm- name (namespaces, priority classes, the Application) prefixed, so that
// tests do not see each other's objects. It is synced to the test cluster as Argo CD would.
type Platform struct {
	t       testing.TB
	cluster *testcluster.Cluster
	// Prefix is put before every llm- name; Dir is the work tree of the fixture's Git repository; Head its last commit.
	Prefix string
	Dir    string
	Head   string
	// Env is the overlay the fixture syncs (prod unless made with NewEnv).
	Env    string
	syncer *testcluster.Syncer
	opts   Options
}

// Options shape a fixture.
type Options struct {
	// Env is the overlay (default prod).
	Env string
	// SelfHeal and ManualSync set the Application's sync policy where Argo CD runs: with
	// ManualSync there is no automated sync; otherwise automated with prune, and selfHeal as set.
	SelfHeal, ManualSync bool
}

var llmName = regexp.MustCompile(`\bllm-`)

// New copies the project at root into a fresh Git repository and syncs prod to the cluster.
func New(t testing.TB, c *testcluster.Cluster, root string) *Platform {
	t.Helper()
	return NewEnv(t, c, root, "prod")
}

// NewEnv is New for another overlay (dev, staging, prod). Every env uses the same namespace names,
// as separate clusters would; the prefix keeps fixtures of different envs apart in one cluster.
func NewEnv(t testing.TB, c *testcluster.Cluster, root, env string) *Platform {
	t.Helper()
	return NewWith(t, c, root, Options{Env: env})
}

// NewWith is New with options.
func NewWith(t testing.TB, c *testcluster.Cluster, root string, opts Options) *Platform {
	t.Helper()
	testcluster.Need(t) // the copy is synced to the cluster
	if opts.Env == "" {
		opts.Env = "prod"
	}
	f := &Platform{t: t, cluster: c, Prefix: freePrefix(t, c), Dir: t.TempDir(), Env: opts.Env, opts: opts}
	for _, top := range []string{"base", "components", "overlays", "apps"} {
		err := filepath.Walk(filepath.Join(root, top), func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			// Names and the files named after them (apps/<env>/llm-<env>.yaml, which its
			// kustomization lists) get the prefix alike.
			rel = filepath.Join(filepath.Dir(rel), llmName.ReplaceAllString(filepath.Base(rel), f.Prefix+"-llm-"))
			data = llmName.ReplaceAll(data, []byte(f.Prefix+"-llm-"))
			if env, ok := releaseFile(rel); ok {
				// The copy has none of the project's history: every env follows the copy's
				// main branch, as its Application does (createApplication).
				if data, err = release.Set(env, data, "main", ""); err != nil {
					return err
				}
			}
			return f.Write(rel, string(data))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	f.Git("init", "-q", "-b", "main")
	f.Commit("platform")
	if c.RunsArgoCD() {
		f.createApplication()
		if opts.ManualSync {
			f.ArgoSync(f.Head)
		} else {
			f.WaitSynced(f.Head)
		}
		return f
	}
	var err error
	if f.syncer, err = testcluster.NewSyncer(c.Config); err != nil {
		t.Fatal(err)
	}
	f.Sync(f.Head)
	return f
}

// releaseFile says whether rel is an env's release file (apps/<env>/release.yaml).
func releaseFile(rel string) (env string, ok bool) {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if len(parts) == 3 && parts[0] == "apps" && parts[2] == "release.yaml" {
		return parts[1], true
	}
	return "", false
}

// freePrefix draws a prefix no namespace of the cluster has yet: a fixture's namespaces outlive it
// (they are marked Delete=false, so Argo CD keeps them when it deletes the Application).
func freePrefix(t testing.TB, c *testcluster.Cluster) string {
	t.Helper()
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	for {
		p := fmt.Sprintf("t%06x", rand.Uint32()&0xffffff)
		_, err := cs.CoreV1().Namespaces().Get(context.Background(), p+"-llm-api", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return p
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Write writes a file of the repository (not committed).
func (f *Platform) Write(rel, content string) error {
	p := filepath.Join(f.Dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o644)
}

// Git runs the git CLI in the repository.
func (f *Platform) Git(args ...string) string {
	f.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = f.Dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=dev", "GIT_COMMITTER_EMAIL=dev@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		f.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Commit records the work tree and returns the new head.
func (f *Platform) Commit(msg string) string {
	f.Git("add", "-A")
	f.Git("commit", "-qm", msg)
	f.Head = f.Git("rev-parse", "HEAD")
	return f.Head
}

// Edit rewrites a file of the fixture's repository (old must occur).
func (f *Platform) Edit(rel, old, new string) {
	f.t.Helper()
	p := filepath.Join(f.Dir, rel)
	data, err := os.ReadFile(p)
	if err != nil {
		f.t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		f.t.Fatalf("%s does not contain %q", rel, old)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// NS names the fixture's namespace of a layer (inference, api, rag, ...).
func (f *Platform) NS(layer string) string { return f.Prefix + "-llm-" + layer }

// App is the name of the fixture's Application.
func (f *Platform) App() string { return f.Prefix + "-llm-" + f.Env }

// Rendered renders the fixture's env at a revision.
func (f *Platform) Rendered(rev string) *render.Result {
	f.t.Helper()
	repo, err := gitrepo.Open(f.Dir)
	if err != nil {
		f.t.Fatal(err)
	}
	snap, err := repo.Snapshot(rev)
	if err != nil {
		f.t.Fatal(err)
	}
	src, err := render.FromSnapshot(snap)
	if err != nil {
		f.t.Fatal(err)
	}
	res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: f.Env})
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

// Sync brings the cluster to rev. Where the cluster runs Argo CD, rev must be the head of main:
// Sync returns once Argo CD has synced it (on its own, or asked to with ManualSync). Elsewhere, the fixture
// applies the env at rev as Argo CD's server-side sync would and records it in the Application.
func (f *Platform) Sync(rev string) {
	f.t.Helper()
	if f.cluster.RunsArgoCD() {
		if f.opts.ManualSync {
			f.ArgoSync(rev)
		} else {
			f.Refresh()
			f.WaitSynced(rev)
		}
		return
	}
	ctx := context.Background()
	res := f.Rendered(rev)
	if err := f.syncer.Sync(ctx, f.App(), res.Objects, false); err != nil {
		f.t.Fatal(err)
	}
	if err := f.syncer.RecordSync(ctx, f.applicationManifest(), "file://"+f.Dir, rev); err != nil {
		f.t.Fatal(err)
	}
}

// Kubectl runs the real kubectl against the test cluster.
func (f *Platform) Kubectl(args ...string) string {
	f.t.Helper()
	out, err := f.cluster.Kubectl(context.Background(), args...).CombinedOutput()
	if err != nil {
		f.t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// KubectlEdit runs `kubectl edit` with a non-interactive editor applying a sed expression.
func (f *Platform) KubectlEdit(ns, obj, sedExpr string) {
	f.t.Helper()
	script := filepath.Join(f.t.TempDir(), "editor.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsed -i '"+sedExpr+"' \"$1\"\n"), 0o755); err != nil {
		f.t.Fatal(err)
	}
	cmd := f.cluster.Kubectl(context.Background(), "-n", ns, "edit", obj)
	cmd.Env = append(cmd.Env, "EDITOR="+script)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "edited") {
		f.t.Fatalf("kubectl edit %s: %v\n%s", obj, err, out)
	}
}

// KubectlApplyAsApplier server-side applies, with the real kubectl under the applier's field
// manager name, the object Git renders at the fixture's head (with Argo CD's tracking annotation)
// after mutate changed it: a hand edit made to look like a sync.
func (f *Platform) KubectlApplyAsApplier(kind, namespace, name string, mutate func(map[string]any)) {
	f.t.Helper()
	for _, o := range f.Rendered(f.Head).Objects {
		if o.GetKind() != kind || o.GetNamespace() != namespace || o.GetName() != name {
			continue
		}
		o = o.DeepCopy()
		gvk := o.GroupVersionKind()
		ann := o.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[testcluster.TrackingAnnotation] = f.App() + ":" + gvk.Group + "/" + gvk.Kind + ":" + namespace + "/" + name
		o.SetAnnotations(ann)
		mutate(o.Object)
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			f.t.Fatal(err)
		}
		file := filepath.Join(f.t.TempDir(), "edited.yaml")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			f.t.Fatal(err)
		}
		f.Kubectl("apply", "--server-side", "--field-manager=argocd-controller", "--force-conflicts", "-f", file)
		return
	}
	f.t.Fatalf("%s %s/%s is not in the rendered overlay", kind, namespace, name)
}
