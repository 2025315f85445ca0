package reposerver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func TestConfigTimeoutIsAGoDuration(t *testing.T) {
	for doc, want := range map[string]time.Duration{
		"address: a:1\ntimeout: 90s\n":        90 * time.Second,
		"address: a:1\ntimeout: 2m\n":         2 * time.Minute,
		"address: a:1\ntimeout: 1000000000\n": time.Second, // nanoseconds, as before
		"address: a:1\n":                      0,
	} {
		var c Config
		require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &c), doc)
		assert.Equal(t, want, c.Timeout, doc)
		assert.Equal(t, "a:1", c.Address, doc)
	}
	var c Config
	assert.ErrorContains(t, yaml.Unmarshal([]byte("timeout: soon\n"), &c), "timeout")
	assert.ErrorContains(t, yaml.Unmarshal([]byte("adress: a:1\n"), &c), "unknown field")
}
