package audit

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/testcluster"
)

var diffHeader = regexp.MustCompile(`(?m)^diff -u -N \S+/LIVE-\d+/(\S+) \S+/MERGED-\d+/\S+$`)

// kubectlDiffObjects runs `kubectl diff --server-side` of the rendered synced revision as the
// applier and returns the differing objects as Kind/namespace/name.
func kubectlDiffObjects(t *testing.T, f *fixture) []string {
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
		if err != nil {
			t.Fatal(err)
		}
		stream = append(append(stream, "---\n"...), doc...)
	}
	file := filepath.Join(t.TempDir(), "prod.yaml")
	if err := os.WriteFile(file, stream, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := cluster.Kubectl(context.Background(), "diff", "--server-side", "--field-manager=argocd-controller", "--force-conflicts", "-f", file)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
		t.Fatalf("kubectl diff: %v\n%s", err, out)
	}
	// kubectl names the temporary files group.version.Kind.namespace.name.
	index := map[string]string{}
	for _, o := range res.Objects {
		gvk := o.GroupVersionKind()
		name := strings.Join([]string{gvk.GroupVersion().String(), gvk.Kind, o.GetNamespace(), o.GetName()}, ".")
		name = strings.ReplaceAll(name, "/", ".")
		index[name] = o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
	}
	var objs []string
	for _, m := range diffHeader.FindAllStringSubmatch(string(out), -1) {
		id, ok := index[m[1]]
		if !ok {
			t.Fatalf("kubectl diff named %s, which is not in the rendered overlay", m[1])
		}
		objs = append(objs, id)
	}
	sort.Strings(objs)
	return objs
}

// runAuditor runs the CLI and returns its combined output and exit code.
func runAuditor(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run auditor: %v", err)
	}
	return string(out), code
}
