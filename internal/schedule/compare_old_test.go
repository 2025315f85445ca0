package schedule

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTypedDecodeEqualsHandParser: the typed decode reads the repository's schedule files and
// the test schedules exactly as the hand parser did, and rejects what it rejected.
func TestTypedDecodeEqualsHandParser(t *testing.T) {
	files := prodFiles(t)
	inputs := map[string][]byte{"dst.yaml": []byte(dstSchedule)}
	for _, p := range repoSchedules(t) {
		inputs[p] = files[p[len(projectRoot)+1:]]
	}
	for name, data := range inputs {
		old, oldErr := parseOld(name, data)
		got, err := Parse(name, data)
		require.NoError(t, oldErr, name)
		require.NoError(t, err, name)
		assert.Equal(t, describe(old), describe(got), name)
	}
}
