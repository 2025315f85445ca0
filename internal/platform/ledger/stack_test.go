package ledger

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/platform/gpustack"
)

func TestParseStacks(t *testing.T) {
	for _, tc := range []struct{ name, data, err string }{
		{"two lines", `{"env":"staging","ami":"a@v1","image":"sha256:1","revision":"c1","healthyAt":"2026-12-01T09:00:00Z"}` + "\n\n" +
			`{"env":"staging","ami":"a@v2","image":"sha256:1","revision":"c2","healthyAt":"2026-12-02T09:00:00Z"}`, ""},
		{"no healthyAt", `{"env":"staging","ami":"a@v1","image":"sha256:1","revision":"c1"}`, "gpu-stack-ledger.jsonl:1: env, ami, image, revision and healthyAt are required"},
		{"unknown field", `{"env":"staging","ami":"a@v1","image":"sha256:1","revision":"c1","healthyAt":"2026-12-01T09:00:00Z","ok":true}`, `unknown field "ok"`},
		{"another env's record", `{"env":"prod","ami":"a@v1","image":"sha256:1","revision":"c1","healthyAt":"2026-12-01T09:00:00Z"}`,
			`clusters/staging/gpu-stack-ledger.jsonl:1: env "prod" in staging's ledger`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := ParseStacks(StackPath("staging"), []byte(tc.data))
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Len(t, recs, 2)
		})
	}
}

func TestHealthySince(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 12, d, 9, 0, 0, 0, time.UTC) }
	v1 := gpustack.Triple{AMI: "a@v1", Image: "sha256:1", GPUOperator: "v26.7.0"}
	recs := []StackRecord{{Env: "staging", Triple: v1, Revision: "c1", HealthyAt: day(3)},
		{Env: "staging", Triple: v1, Revision: "c0", HealthyAt: day(2)},
		{Env: "staging", Triple: gpustack.Triple{AMI: "a@v2", Image: "sha256:1", GPUOperator: "v26.7.0"}, Revision: "c2", HealthyAt: day(1)}}
	since, ok := HealthySince(recs, gpustack.Triple{AMI: "a@v1", Driver: "580.1", Image: "sha256:1", GPUOperator: "v26.7.0"})
	assert.True(t, ok)
	assert.Equal(t, day(2), since, "the earliest record of the same parts (the driver follows the AMI)")
	_, ok = HealthySince(recs, gpustack.Triple{AMI: "a@v1", Image: "sha256:2", GPUOperator: "v26.7.0"})
	assert.False(t, ok, "another image is another triple")
}
