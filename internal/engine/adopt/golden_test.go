package adopt

import (
	"io/fs"
	"testing"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/llm-gitops/platform/internal/daemon/notify/notifytest"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

func TestAdoptPatch(t *testing.T) {
	obj := notifytest.Deployment(notifytest.LogLevel, notifytest.Replicas, notifytest.Annotation, notifytest.Toleration,
		notifytest.At(drift.Field{Desired: map[string]any{"containerPort": int64(8080)}, Change: drift.Removed},
			"spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "api"), "ports", fieldpath.KeyByFields("containerPort", 8080, "protocol", "TCP")))
	tests := []struct {
		name string
		kust []byte
	}{
		{"adopt-with-patches", notifytest.DevKustomization},
		{"adopt-no-patches", []byte("resources:\n  - ../../base/api\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := func(name string) ([]byte, error) {
				if name != "overlays/dev/kustomization.yaml" {
					return nil, fs.ErrNotExist
				}
				return tt.kust, nil
			}
			a, err := Patch("dev", read, obj)
			if err != nil {
				t.Fatal(err)
			}
			notifytest.Golden(t, tt.name+".golden.diff", []byte(a.Diff))
		})
	}
}
