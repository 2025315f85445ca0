package testcluster

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

// recorder is a testing.TB that records a skip or a failure instead of ending the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                      {}
func (r *recorder) Skip(args ...any)             { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Skipf(f string, args ...any)  { r.skipped = fmt.Sprintf(f, args...) }
func (r *recorder) Fatal(args ...any)            { r.failed = fmt.Sprint(args...) }
func (r *recorder) Fatalf(f string, args ...any) { r.failed = fmt.Sprintf(f, args...) }

// withMain sets what Main recorded for the length of one test.
func withMain(t *testing.T, ran bool, why error) {
	oldRan, oldWhy := mainRan, absent
	mainRan, absent = ran, why
	t.Cleanup(func() { mainRan, absent = oldRan, oldWhy })
}

// TestNeedSkipsWithoutBinariesUnlessRequired: without the binaries a test that needs the cluster
// is skipped naming `make tools`; AUDITOR_TEST_CLUSTER=required fails it instead.
func TestNeedSkipsWithoutBinariesUnlessRequired(t *testing.T) {
	withMain(t, true, fmt.Errorf("%w (missing /nowhere/kube-apiserver)", ErrNoBinaries))
	t.Setenv(EnvVar, "")
	r := &recorder{TB: t}
	Need(r)
	assert.Contains(t, r.skipped, "make tools")
	assert.Empty(t, r.failed)

	t.Setenv(EnvVar, "required")
	r = &recorder{TB: t}
	Need(r)
	assert.Contains(t, r.failed, "make tools")
	assert.Empty(t, r.skipped)
}

// TestNeedOff: AUDITOR_TEST_CLUSTER=off skips, also in a package that starts clusters of its own.
func TestNeedOff(t *testing.T) {
	withMain(t, false, nil)
	t.Setenv(EnvVar, "off")
	r := &recorder{TB: t}
	Need(r)
	assert.Contains(t, r.skipped, "AUDITOR_TEST_CLUSTER=off")
	assert.Empty(t, r.failed)
}

// TestNeedPassesWithACluster: with Main's cluster running, Need does nothing.
func TestNeedPassesWithACluster(t *testing.T) {
	withMain(t, true, nil)
	t.Setenv(EnvVar, "required")
	r := &recorder{TB: t}
	Need(r)
	assert.Empty(t, r.skipped)
	assert.Empty(t, r.failed)
}

// TestNeedRefusesAnUnknownMode: a misspelt AUDITOR_TEST_CLUSTER fails rather than skipping.
func TestNeedRefusesAnUnknownMode(t *testing.T) {
	withMain(t, true, nil)
	t.Setenv(EnvVar, "of")
	r := &recorder{TB: t}
	Need(r)
	assert.Contains(t, r.failed, `AUDITOR_TEST_CLUSTER="of"`)
}

// TestNeedToolSkipsAMissingTool: a missing CLI oracle skips its test, or fails it when required.
func TestNeedToolSkipsAMissingTool(t *testing.T) {
	missing := func(Binaries) string { return "/nowhere/helm" }
	t.Setenv(EnvVar, "")
	r := &recorder{TB: t}
	assert.Empty(t, NeedTool(r, missing))
	assert.Contains(t, r.skipped, "make tools")

	t.Setenv(EnvVar, "required")
	r = &recorder{TB: t}
	NeedTool(r, missing)
	assert.Contains(t, r.failed, "/nowhere/helm")
}

// TestParseMode: the values of AUDITOR_TEST_CLUSTER are unset, "required" and "off"; any other,
// a typo or another case included, is an error that names the variable and the valid values.
func TestParseMode(t *testing.T) {
	for _, v := range []string{"", "required", "off"} {
		mode, err := parseMode(v)
		assert.NoError(t, err, v)
		assert.Equal(t, v, mode)
	}
	for _, v := range []string{"requierd", "Required", "OFF", "on", "1", " off"} {
		_, err := parseMode(v)
		if assert.Error(t, err, v) {
			assert.Contains(t, err.Error(), fmt.Sprintf("AUDITOR_TEST_CLUSTER=%q", v))
			assert.Contains(t, err.Error(), `"required", "off" or unset`)
		}
	}
}

// TestNeedToolRefusesAnUnknownMode: a misspelt AUDITOR_TEST_CLUSTER fails a test that needs a
// tool, even when the tool is there, rather than acting as unset.
func TestNeedToolRefusesAnUnknownMode(t *testing.T) {
	present := func(Binaries) string { return os.Args[0] } // this test binary: a file that exists
	t.Setenv(EnvVar, "requierd")
	r := &recorder{TB: t}
	assert.Empty(t, NeedTool(r, present))
	assert.Contains(t, r.failed, `AUDITOR_TEST_CLUSTER="requierd"`)
	assert.Empty(t, r.skipped)

	t.Setenv(EnvVar, "off")
	r = &recorder{TB: t}
	assert.Equal(t, os.Args[0], NeedTool(r, present), "off still runs a test that needs only a tool")
	assert.Empty(t, r.failed)
}
