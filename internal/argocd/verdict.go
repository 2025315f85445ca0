package argocd

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	argodiff "github.com/argoproj/argo-cd/v3/util/argo/diff"
	"github.com/argoproj/argo-cd/v3/util/argo/normalizers"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// OutOfSync runs Argo CD's own diff — argo-cd/v3 util/argo/diff, the default (non-server-side)
// comparison Argo CD's controller makes, with the Application's ignoreDifferences and annotation
// tracking — over pairs of desired and live objects (live nil for a missing object), and says for
// each whether Argo CD would mark it OutOfSync.
func (a *App) OutOfSync(ctx context.Context, desired, live []*unstructured.Unstructured) ([]bool, error) {
	if len(desired) != len(live) {
		return nil, fmt.Errorf("argo cd diff: %d desired objects but %d live ones", len(desired), len(live))
	}
	ignores := a.rawIgnores
	if ignores == nil {
		ignores = []v1alpha1.ResourceIgnoreDifferences{}
	}
	cfg, err := argodiff.NewDiffConfigBuilder().
		WithDiffSettings(ignores, map[string]v1alpha1.ResourceOverride{}, false, normalizers.IgnoreNormalizerOpts{}).
		WithTracking("", string(v1alpha1.TrackingMethodAnnotation)).
		WithNoCache().
		Build()
	if err != nil {
		return nil, fmt.Errorf("argo cd diff config: %w", err)
	}
	res, err := argodiff.StateDiffs(ctx, live, desired, cfg)
	if err != nil {
		return nil, fmt.Errorf("argo cd diff: %w", err)
	}
	out := make([]bool, len(res.Diffs))
	for i, d := range res.Diffs {
		out[i] = d.Modified || live[i] == nil
	}
	return out, nil
}

// parseIgnores keeps the Application's ignoreDifferences in Argo CD's own type (with
// jqPathExpressions, which the auditor's own comparison does not evaluate).
func parseIgnores(raw []any) ([]v1alpha1.ResourceIgnoreDifferences, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var out []v1alpha1.ResourceIgnoreDifferences
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}
