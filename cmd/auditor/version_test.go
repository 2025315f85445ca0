package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVersionFlagPrintsWhatVersionPrints: `auditor --version` is `auditor version`.
func TestVersionFlagPrintsWhatVersionPrints(t *testing.T) {
	flag, err := runCmd(t, newRootCommand(), "--version")
	require.NoError(t, err)
	cmd, err := runCmd(t, newRootCommand(), "version")
	require.NoError(t, err)
	assert.Equal(t, cmd, flag)
	assert.True(t, strings.HasPrefix(flag, "auditor "), flag)
}
