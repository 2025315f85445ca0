package version

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestReleaseVersionNamesTheBuild: a binary `make release` stamped reports that version; without
// a stamp a work-tree build is (devel).
func TestReleaseVersionNamesTheBuild(t *testing.T) {
	defer func(v string) { Version = v }(Version)
	Version = ""
	assert.Equal(t, "(devel)", Get().Version)
	Version = "v1.4.0"
	got := Get()
	assert.Equal(t, "v1.4.0", got.Version)
	assert.True(t, strings.HasPrefix(got.String(), "auditor v1.4.0 "), got.String())
}
