package testcluster

import (
	"errors"
	"fmt"
	"os"
	"testing"
)

// EnvVar says whether the tests of a package may use the test cluster. Unset, a package without
// the cluster binaries skips the tests that need them. "required" fails them instead (`make
// test` sets it). "off" never starts the cluster and skips those tests (`make test-unit`).
const EnvVar = "AUDITOR_TEST_CLUSTER"

const (
	modeRequired = "required"
	modeOff      = "off"
)

// errOff is why there is no cluster when EnvVar is "off".
var errOff = errors.New(EnvVar + "=off: the test cluster is not started (unset it to run the tests that need it; `make tools` builds its binaries)")

var (
	mainRan bool  // Main ran in this test binary: absent says whether its cluster exists
	absent  error // why Main started no cluster; nil when it did
)

// clusterMode reads EnvVar. Main, Need and NeedTool all read it here, so a misspelt value fails
// each of them the same way instead of acting as unset.
func clusterMode() (string, error) { return parseMode(os.Getenv(EnvVar)) }

// parseMode checks a value of EnvVar: "" (unset), "required" or "off"; anything else is an error.
func parseMode(v string) (string, error) {
	switch v {
	case "", modeRequired, modeOff:
		return v, nil
	default:
		return "", fmt.Errorf("%s=%q: want %q, %q or unset", EnvVar, v, modeRequired, modeOff)
	}
}

// unavailable says why a test cannot have a cluster, or nil when it can. In a package whose
// TestMain is Main that is Main's verdict; elsewhere (tests that Start clusters of their own)
// it is EnvVar and whether the binaries exist.
func unavailable() error {
	mode, err := clusterMode()
	if err != nil {
		return err
	}
	if mainRan {
		return absent
	}
	if mode == modeOff {
		return errOff
	}
	_, err = FindBinaries()
	return err
}

// Need skips the test when there is no test cluster: the binaries are missing (`make tools`
// builds them) or AUDITOR_TEST_CLUSTER=off. With AUDITOR_TEST_CLUSTER=required it fails the
// test instead. Every test that uses the package's cluster, or starts one, calls it first.
func Need(t testing.TB) {
	t.Helper()
	err := unavailable()
	if err == nil {
		return
	}
	if mode, merr := clusterMode(); merr != nil || mode == modeRequired {
		t.Fatalf("needs the test cluster: %v", err)
		return
	}
	t.Skipf("needs the test cluster, skipped: %v", err)
}

// NeedTool returns the path of one of the tools `make tools` builds (the kustomize or helm CLI a
// test uses as its oracle), picked from the Binaries. When it is missing the test is skipped,
// or fails with AUDITOR_TEST_CLUSTER=required. It needs no cluster, so "off" still runs it. A
// value of AUDITOR_TEST_CLUSTER other than those fails the test.
func NeedTool(t testing.TB, pick func(Binaries) string) string {
	t.Helper()
	mode, err := clusterMode()
	if err != nil {
		t.Fatalf("needs a tool `make tools` builds: %v", err)
		return ""
	}
	bins, _ := FindBinaries() // the paths of the tools are set even when the cluster binaries are missing
	path := pick(bins)
	if path != "" {
		if _, err := os.Stat(path); err == nil {
			return path
		}
	}
	msg := fmt.Sprintf("needs %q, built by `make tools`", path)
	if mode == modeRequired {
		t.Fatal(msg)
		return ""
	}
	t.Skip(msg + ", skipped")
	return ""
}
