package audit

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// kubectlDiff runs `kubectl diff --server-side` of the rendered synced revision as the applier and
// returns, for every object it finds different (Kind/namespace/name), the minimal field paths in
// which kubectl's LIVE and MERGED documents differ. kubectl hands both documents to the program in
// KUBECTL_EXTERNAL_DIFF; they are compared here as typed values of the cluster's own schema, so
// lists are keyed as the API server keys them.
func kubectlDiff(t *testing.T, f *fixture) map[string][]fieldpath.Path {
	t.Helper()
	res := f.Rendered(f.Head)
	// The objects as the applier sends them: with Argo CD's tracking annotation.
	var stream []byte
	for _, o := range res.Objects {
		o = o.DeepCopy()
		gvk := o.GroupVersionKind()
		ann := o.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[testcluster.TrackingAnnotation] = f.App() + ":" + gvk.Group + "/" + gvk.Kind + ":" + o.GetNamespace() + "/" + o.GetName()
		o.SetAnnotations(ann)
		doc, err := yaml.Marshal(o.Object)
		require.NoError(t, err)
		stream = append(append(stream, "---\n"...), doc...)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, f.Env+".yaml")
	require.NoError(t, os.WriteFile(file, stream, 0o644))
	keep := filepath.Join(dir, "kept")
	script := filepath.Join(dir, "keep-diff.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\nmkdir -p "+keep+"\ncp -r \"$1\" "+keep+"/live && cp -r \"$2\" "+keep+"/merged\n"), 0o755))
	cmd := cluster.Kubectl(context.Background(), "diff", "--server-side", "--field-manager=argocd-controller", "--force-conflicts", "-f", file)
	cmd.Env = append(cmd.Env, "KUBECTL_EXTERNAL_DIFF="+script)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl diff:\n%s", out)

	// kubectl names the documents group.version.Kind.namespace.name.
	index := map[string]*unstructured.Unstructured{}
	var gvs []schema.GroupVersion
	for _, o := range res.Objects {
		gvk := o.GroupVersionKind()
		name := strings.ReplaceAll(strings.Join([]string{gvk.GroupVersion().String(), gvk.Kind, o.GetNamespace(), o.GetName()}, "."), "/", ".")
		index[name] = o
		gvs = append(gvs, gvk.GroupVersion())
	}
	cache, err := live.New(context.Background(), cluster.Config)
	require.NoError(t, err)
	models, _, err := cache.OpenAPIModels(context.Background(), gvs)
	require.NoError(t, err)
	types, err := drift.NewSchema(models)
	require.NoError(t, err)

	noise := []fieldpath.Path{ // what every server-side apply changes
		fieldpath.MakePathOrDie("metadata", "managedFields"),
		fieldpath.MakePathOrDie("metadata", "resourceVersion"),
		fieldpath.MakePathOrDie("metadata", "generation"),
	}
	diffs := map[string][]fieldpath.Path{}
	entries, err := os.ReadDir(filepath.Join(keep, "merged"))
	require.NoError(t, err, "kubectl diff ran no diff program:\n%s", out)
	for _, e := range entries {
		o, ok := index[e.Name()]
		require.True(t, ok, "kubectl diff named %s, which is not in the rendered overlay", e.Name())
		id := o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
		pt := types.Type(o.GroupVersionKind())
		require.NotNil(t, pt, "no schema for %s", id)
		read := func(side string) map[string]any {
			data, err := os.ReadFile(filepath.Join(keep, side, e.Name()))
			if os.IsNotExist(err) {
				return nil
			}
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, yaml.Unmarshal(data, &m))
			return m
		}
		lv, mv := read("live"), read("merged")
		if lv == nil { // missing live: the whole object differs
			diffs[id] = []fieldpath.Path{{}}
			continue
		}
		ltv, err := pt.FromUnstructured(lv)
		require.NoError(t, err, "%s live", id)
		mtv, err := pt.FromUnstructured(mv)
		require.NoError(t, err, "%s merged", id)
		c, err := ltv.Compare(mtv)
		require.NoError(t, err, "%s compare", id)
		all := c.Added.Union(c.Removed).Union(c.Modified)
		var paths []fieldpath.Path
		all.Iterate(func(p fieldpath.Path) {
			for _, n := range noise {
				if hasPrefix(p, n) {
					return
				}
			}
			paths = append(paths, p.Copy())
		})
		if paths = minimalPaths(paths); len(paths) > 0 {
			diffs[id] = paths
		}
	}
	return diffs
}

// minimalPaths drops every path below another of the set.
func minimalPaths(paths []fieldpath.Path) []fieldpath.Path {
	var out []fieldpath.Path
	for i, p := range paths {
		top := true
		for j, q := range paths {
			if i != j && len(q) < len(p) && hasPrefix(p, q) {
				top = false
				break
			}
		}
		if top {
			out = append(out, p)
		}
	}
	return out
}

func hasPrefix(p, prefix fieldpath.Path) bool {
	if len(prefix) > len(p) {
		return false
	}
	for i := range prefix {
		if !p[i].Equals(prefix[i]) {
			return false
		}
	}
	return true
}

// kubectlDiffObjects is the set of objects kubectl diff finds different.
func kubectlDiffObjects(t *testing.T, f *fixture) []string {
	t.Helper()
	var objs []string
	for id := range kubectlDiff(t, f) {
		objs = append(objs, id)
	}
	sort.Strings(objs)
	return objs
}

// oracleMismatch compares the auditor's fields with kubectl diff's paths, object by object, as
// sets: every path kubectl diff shows must be at, above or below a field the auditor reports, and
// every reported field must be at, above or below one of kubectl diff's. Extra objects are left
// out (kubectl diff only sees what Git renders). onlyOurs names, as "Kind/name path", the fields
// the auditor legitimately reports and kubectl diff cannot see: fields another manager added,
// which a server-side apply keeps. The result lists each side's leftovers; empty means they agree.
func oracleMismatch(rep *drift.Report, theirs map[string][]fieldpath.Path, onlyOurs ...string) []string {
	expected := map[string]bool{}
	for _, e := range onlyOurs {
		expected[e] = true
	}
	ours := map[string][]fieldpath.Path{}
	var out []string
	for _, o := range rep.Objects {
		id := o.Kind + "/" + o.Namespace + "/" + o.Name
		switch o.Status {
		case drift.Extra:
			continue
		case drift.Missing:
			ours[id] = []fieldpath.Path{{}}
			continue
		}
		for _, fl := range o.Fields {
			if expected[o.Kind+"/"+o.Name+" "+fl.Path] {
				delete(expected, o.Kind+"/"+o.Name+" "+fl.Path)
				continue
			}
			ours[id] = append(ours[id], fl.FieldPath.Path())
		}
	}
	for e := range expected {
		out = append(out, "expected only in the auditor but not reported: "+e)
	}
	related := func(p fieldpath.Path, set []fieldpath.Path) bool {
		for _, q := range set {
			if hasPrefix(p, q) || hasPrefix(q, p) {
				return true
			}
		}
		return false
	}
	for id, paths := range theirs {
		for _, p := range paths {
			if !related(p, ours[id]) {
				out = append(out, "only kubectl diff: "+id+" "+drift.Display(p))
			}
		}
	}
	for id, paths := range ours {
		for _, p := range paths {
			if !related(p, theirs[id]) {
				out = append(out, "only auditor: "+id+" "+drift.Display(p))
			}
		}
	}
	sort.Strings(out)
	return out
}

// runAuditor runs the CLI and returns its combined output and exit code.
func runAuditor(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := runAuditorStreams(t, bin, args...)
	return out + errOut, code
}

// runAuditorStdout runs the CLI and returns what it printed on stdout (a report to decode) and
// its exit code; what it said on stderr is logged.
func runAuditorStdout(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := runAuditorStreams(t, bin, args...)
	if errOut != "" {
		t.Logf("auditor %s: stderr:\n%s", strings.Join(args, " "), errOut)
	}
	return out, code
}

func runAuditorStreams(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run auditor: %v", err)
	}
	return stdout.String(), stderr.String(), code
}
