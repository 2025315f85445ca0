package render

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestAppTargetRendersAPlainDirectoryAsArgoCDReadsIt(t *testing.T) {
	src, err := fromFiles(map[string][]byte{
		"extras/b.yaml":                 []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {count: \"1\"}\n---\n# only a comment\n"),
		"extras/a.json":                 []byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}]}`),
		"extras/README.md":              []byte("not a manifest"),
		"extras/sub/c.yaml":             []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"),
		"extras/bad/x.yaml":             []byte("apiVersion: v1\nkind: [\nmetadata: {}\n"),
		"extras/values.yaml":            []byte("a: [\n"),
		"extras/SHOUT.YAML":             []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shout}\n"),
		"extras/skip.yaml":              []byte("# +argocd:skip-file-rendering\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: skipped}\n"),
		"chart/Chart.yaml":              []byte("apiVersion: v2\nname: c\nversion: 1.0.0\n"),
		"chart/templates/cm.yaml":       []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n"),
		"kustomized/kustomization.yaml": []byte("resources: [cm.yaml]\nnamePrefix: k-\n"),
		"kustomized/cm.yaml":            []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\n"),
	}, nil, "abc")
	require.NoError(t, err)

	res, err := Engine{}.Render(context.Background(), src, Target{Name: AppTarget("extras")})
	require.NoError(t, err)
	var names []string
	for _, o := range res.Objects {
		names = append(names, o.GetName())
	}
	assert.Equal(t, []string{"a", "b"}, names, "the directory's files in name order, a List as its items; no subdirectory, no .YAML, no skipped file, no values file")
	assert.Equal(t, "@extras", res.Env)
	n, _, _ := unstructured.NestedString(res.Objects[1].Object, "data", "count")
	assert.Equal(t, "1", n, "%v", res.Objects[1].Object)

	res, err = Engine{}.Render(context.Background(), src, Target{Name: AppTarget("./kustomized/")})
	require.NoError(t, err)
	require.Len(t, res.Objects, 1)
	assert.Equal(t, "k-d", res.Objects[0].GetName(), "a path with a kustomization is built by kustomize")

	_, err = Engine{}.Render(context.Background(), src, Target{Name: AppTarget("extras/bad")})
	assert.ErrorContains(t, err, "extras/bad/x.yaml:")
	res, err = Engine{}.Render(context.Background(), src, Target{Name: AppTarget("chart")})
	require.NoError(t, err)
	require.Len(t, res.Objects, 1)
	assert.Equal(t, "release-name", res.Objects[0].GetName(), "a path with a Chart.yaml is rendered by helm")
	_, err = Engine{}.Render(context.Background(), src, Target{Name: AppTarget("nowhere")})
	assert.ErrorContains(t, err, "no such directory")
	_, err = Engine{}.Render(context.Background(), src, Target{Name: AppTarget("../etc")})
	assert.ErrorContains(t, err, "leaves the repository")
}
