package policy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llm-gitops/platform/internal/engine/manifest"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Options{}, &cluster))
}

// TestAdmissionVerdictsEqualOffline installs policies/ into the real API server and checks, file
// by file, that admission (kubectl create --dry-run=server) denies exactly the corpus objects the
// offline evaluation denies.
func TestAdmissionVerdictsEqualOffline(t *testing.T) {
	testcluster.Need(t)
	ctx := context.Background()
	kubectl := func(args ...string) (string, error) {
		out, err := cluster.Kubectl(ctx, args...).CombinedOutput()
		return string(out), err
	}
	for _, ns := range []string{"llm-inference", "llm-api", "llm-rag", "llm-batch", "llm-monitoring", "llm-system"} {
		if out, err := kubectl("create", "namespace", ns); err != nil && !strings.Contains(out, "AlreadyExists") {
			t.Fatalf("create namespace %s: %v\n%s", ns, err, out)
		}
		// No controller-manager here: the ServiceAccount admission of Pods needs "default" by hand.
		if out, err := kubectl("-n", ns, "create", "serviceaccount", "default"); err != nil && !strings.Contains(out, "AlreadyExists") {
			t.Fatalf("create default service account in %s: %v\n%s", ns, err, out)
		}
		if out, err := kubectl("label", "--overwrite", "namespace", ns, "platform.llm/env=prod"); err != nil {
			t.Fatalf("label %s: %v\n%s", ns, err, out)
		}
	}
	if out, err := kubectl("apply", "--server-side", "-k", "../../../policies"); err != nil {
		t.Fatalf("install policies/: %v\n%s", err, out)
	}
	set, err := LoadDir("../../../policies")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/corpus/*.yaml")
	if len(files) < 20 {
		t.Fatalf("corpus has %d files, want >= 20", len(files))
	}
	// The admission plugin picks new policies up asynchronously: wait until a known-bad object is denied.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := kubectl("create", "--dry-run=server", "-f", "testdata/corpus/bad-image-latest.yaml")
		if err != nil && strings.Contains(out, "ValidatingAdmissionPolicy") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("policies not enforced after 30s: %s", out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	nsLabels := map[string]string{"platform.llm/env": "prod"}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifest.Decode(data)
		if err != nil || len(objs) != 1 {
			t.Fatalf("%s: %v (%d objects)", f, err, len(objs))
		}
		offline := set.Evaluate(objs[0], nsLabels)
		out, err := kubectl("create", "--dry-run=server", "-f", f)
		denied := err != nil
		if ee := (*exec.ExitError)(nil); err != nil && !asExit(err, &ee) {
			t.Fatalf("%s: kubectl: %v", f, err)
		}
		if denied != (len(offline) > 0) {
			t.Errorf("%s: API server denied=%v (%s), offline violations %v", filepath.Base(f), denied, strings.TrimSpace(out), offline)
			continue
		}
		// Where the API server names a policy, it must be one the offline evaluation names.
		if denied && strings.Contains(out, "ValidatingAdmissionPolicy") {
			named := false
			for _, v := range offline {
				if strings.Contains(out, "'"+v.Policy+"'") {
					named = true
				}
			}
			if !named {
				t.Errorf("%s: API server denied with %q, offline found %v", filepath.Base(f), strings.TrimSpace(out), offline)
			}
		}
	}
}

func asExit(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*target = e
	}
	return ok
}
