package testcluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Main starts a cluster for a test package, stores it in *c, runs the tests and stops it.
// Without binaries (or with AUDITOR_TEST_CLUSTER=off) it runs the tests without a cluster: *c
// stays nil and every test that calls Need is skipped. With AUDITOR_TEST_CLUSTER=required
// missing binaries fail the package, naming `make tools`. Any other start error always fails.
func Main(m *testing.M, opts Options, c **Cluster) int {
	mode, err := clusterMode()
	if err != nil {
		fmt.Fprintf(os.Stderr, "\n*** testcluster: %v\n\n", err)
		return 2
	}
	mainRan = true
	if mode == modeOff {
		absent = errOff
		fmt.Fprintf(os.Stderr, "*** testcluster: %v.\n", errOff)
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cluster, err := Start(ctx, opts)
	cancel()
	if err != nil {
		if errors.Is(err, ErrNoBinaries) && mode != modeRequired {
			absent = err
			fmt.Fprintf(os.Stderr, "*** testcluster: %v\n*** the tests that need the cluster are skipped; "+
				"run `make tools` to run them (%s=%s makes this a failure).\n", err, EnvVar, modeRequired)
			return m.Run()
		}
		fmt.Fprintf(os.Stderr, "\n*** testcluster: cannot start the test cluster: %v\n", err)
		if errors.Is(err, ErrNoBinaries) {
			fmt.Fprintf(os.Stderr, "*** run `make tools` first (or `make test`, which builds them).\n")
		}
		fmt.Fprintln(os.Stderr)
		return 1
	}
	*c = cluster
	code := m.Run()
	cluster.Stop()
	return code
}

// Namespace creates a namespace with a random name for one test and deletes it when the test ends.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	Need(t)
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("t-%x", rand.Uint32())
	ctx := context.Background()
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}
