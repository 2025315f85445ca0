package gpustack

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nvidia is NVIDIA's table as policies/gpu-stack.yaml keeps it.
var nvidia = CUDATable{Source: "NVIDIA CUDA Toolkit release notes",
	MinorCompatibility: map[string]string{"12": "525.60.13", "13": "580"},
	Full:               map[string]string{"12.8": "570.26", "12.9": "575.51.03", "13.0": "580.65.06"}}

func TestCompatible(t *testing.T) {
	for _, tc := range []struct {
		driver, cuda string
		want         Verdict
	}{
		{"580.159.03", "13.0", Verdict{OK: true, How: "full", Minimum: "580.65.06"}},
		{"580.65.06", "13.0.2", Verdict{OK: true, How: "full", Minimum: "580.65.06"}},
		{"580.10", "13.0", Verdict{OK: true, How: "minor-version compatibility", Minimum: "580"}},
		{"575.51.03", "13.0", Verdict{How: "minor-version compatibility", Minimum: "580"}},
		{"570.26", "12.9", Verdict{OK: true, How: "minor-version compatibility", Minimum: "525.60.13"}},
		{"575.51.03", "12.9", Verdict{OK: true, How: "full", Minimum: "575.51.03"}},
		{"525.60.12", "12.8", Verdict{How: "minor-version compatibility", Minimum: "525.60.13"}},
		{"600.1", "14.0", Verdict{How: "no minimum known for CUDA 14.0"}},
	} {
		got, err := nvidia.Compatible(tc.driver, tc.cuda)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "driver %s, CUDA %s", tc.driver, tc.cuda)
	}
}

func TestParse(t *testing.T) {
	_, err := Parse([]byte("amis: [{alias: al2023@v20260714, driver: 580.159.03}]\ncuda: {source: nvidia}"))
	assert.ErrorContains(t, err, "alias and source are required", "a row without its source")
	_, err = Parse([]byte("images: [{image: vllm, digest: sha256:1, cuda: twelve, source: x}]\ncuda: {source: nvidia}"))
	assert.ErrorContains(t, err, `version "twelve" is not dotted numbers`)
	tab, err := Parse([]byte("soak: 24h\ncuda: {source: nvidia}\nimages: [{image: vllm, digest: sha256:1, cuda: '13.0', source: x}]"))
	require.NoError(t, err)
	assert.Equal(t, "24h0m0s", tab.Soak.String())
	assert.Equal(t, Triple{Image: "sha256:1", CUDA: "13.0"}, tab.Fill(Triple{Image: "sha256:1"}))
}
