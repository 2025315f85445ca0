package drift_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/drift"
)

// TestInstallKey: made once (0600, 32 random bytes), the same on every later call; a damaged
// file is an error that says what to do, not a silently new key.
func TestInstallKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "secret-hmac.key")
	k1, err := drift.InstallKey(path)
	require.NoError(t, err)
	assert.Len(t, k1, 32)
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	k2, err := drift.InstallKey(path)
	require.NoError(t, err)
	assert.Equal(t, k1, k2)
	entries, _ := os.ReadDir(filepath.Dir(path))
	assert.Len(t, entries, 1, "no temporary file left beside the key")

	require.NoError(t, os.WriteFile(path, nil, 0o600))
	_, err = drift.InstallKey(path)
	assert.ErrorContains(t, err, "remove it to make a new one")
}
