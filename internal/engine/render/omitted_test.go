package render

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// A file a snapshot left out for its size renders nowhere: an overlay that does not read it
// renders, one that does fails naming it — in process and in a render worker alike.
func TestOmittedFileFailsOnlyTheRenderThatReadsIt(t *testing.T) {
	files := map[string][]byte{}
	for k, v := range miniRepo {
		files[k] = []byte(v)
	}
	omitted := map[string]int64{"overlays/prod/weights.bin": 165051024}
	src, err := FromSnapshot(&gitrepo.Snapshot{Revision: "r1", Files: files, Omitted: omitted})
	require.NoError(t, err)
	res, err := Engine{}.Render(context.Background(), src, Target{Name: "prod"})
	require.NoError(t, err, "the binary is not a manifest the overlay reads")
	assert.NotEmpty(t, res.Objects)

	reads := map[string][]byte{}
	for k, v := range files {
		reads[k] = v
	}
	reads["overlays/prod/kustomization.yaml"] = append([]byte("configMapGenerator:\n  - name: bin\n    files: [weights.bin]\n"), files["overlays/prod/kustomization.yaml"]...)
	bad, err := FromSnapshot(&gitrepo.Snapshot{Revision: "r2", Files: reads, Omitted: omitted})
	require.NoError(t, err)
	_, inProcess := Engine{}.Render(context.Background(), bad, Target{Name: "prod"})
	require.Error(t, inProcess)
	assert.Contains(t, inProcess.Error(), "overlays/prod/weights.bin is 165051024 bytes, larger than the 8388608 a snapshot reads")

	c := NewCache("", 2)
	c.Worker = NewWorker()
	_, inWorker := Engine{Cache: c}.Render(context.Background(), bad, Target{Name: "prod"})
	require.Error(t, inWorker)
	assert.Contains(t, inWorker.Error(), "overlays/prod/weights.bin is 165051024 bytes, larger than the 8388608 a snapshot reads")
	assert.EqualValues(t, 1, c.Worker.Started(), "a render worker ran it")
}
