package render

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func chartArchive(t *testing.T, name, version string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for p, c := range map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: " + name + "\nversion: " + version + "\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  version: {{ .Chart.Version | quote }}\n",
	} {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name + "/" + p, Mode: 0o644, Size: int64(len(c)), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(c))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return buf.Bytes()
}

// TestChartsFetchAsHelmResolves: a version constraint picks the newest match, an exact version
// itself; archives are checked against the index's digest and kept (an index for IndexTTL); the
// fetched chart renders like a chart in Git.
func TestChartsFetchAsHelmResolves(t *testing.T) {
	old, latest := chartArchive(t, "svc", "1.2.0"), chartArchive(t, "svc", "1.2.3")
	sum := sha256.Sum256(latest)
	var gets atomic.Int64
	var published atomic.Bool // 1.2.5, published after the index was first read
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		switch r.URL.Path {
		case "/stable/index.yaml":
			if published.Load() {
				_, _ = w.Write([]byte("apiVersion: v1\nentries:\n  svc:\n  - {name: svc, version: 1.2.5, urls: [svc-1.2.0.tgz]}\n"))
				return
			}
			_, _ = w.Write([]byte(`apiVersion: v1
entries:
  svc:
  - {name: svc, version: 1.2.0, urls: [svc-1.2.0.tgz]}
  - {name: svc, version: 1.2.3, urls: [charts/svc-1.2.3.tgz], digest: ` + hex.EncodeToString(sum[:]) + `}
  - {name: svc, version: 2.0.0, urls: [svc-2.0.0.tgz], digest: 0000}
`))
		case "/stable/svc-1.2.0.tgz":
			_, _ = w.Write(old)
		case "/stable/charts/svc-1.2.3.tgz":
			_, _ = w.Write(latest)
		case "/stable/svc-2.0.0.tgz":
			_, _ = w.Write(latest) // not what the index's digest says
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := &Charts{}
	ctx := context.Background()
	for _, tc := range []struct{ version, want string }{{"1.2.*", "1.2.3"}, {"1.2.0", "1.2.0"}, {"~1.2", "1.2.3"}} {
		ref := ChartRef{RepoURL: srv.URL + "/stable", Chart: "svc", Version: tc.version}
		files, v, err := c.Fetch(ctx, ref)
		require.NoError(t, err, tc.version)
		assert.Equal(t, tc.want, v, tc.version)
		src, err := FromChart(ref, v, files)
		require.NoError(t, err)
		res, err := Engine{}.Render(context.Background(), src, Target{Name: ChartTarget(ref, v), Variant: Variant{Helm: &HelmOptions{ReleaseName: "api"}}})
		require.NoError(t, err)
		require.Len(t, res.Objects, 1)
		assert.Equal(t, tc.want, res.Objects[0].Object["data"].(map[string]any)["version"])
	}
	assert.EqualValues(t, 3, gets.Load(), "one index and two archives: the rest from memory")
	published.Store(true)
	_, v, err := c.Fetch(ctx, ChartRef{RepoURL: srv.URL + "/stable", Chart: "svc", Version: "1.2.5"})
	require.NoError(t, err, "a version the cached index lacks: the index is read again")
	assert.Equal(t, "1.2.5", v)
	published.Store(false)

	_, _, err = c.Fetch(ctx, ChartRef{RepoURL: srv.URL + "/stable", Chart: "svc", Version: "2.0.0"})
	assert.ErrorContains(t, err, "its digest is not the index's")
	_, _, err = c.Fetch(ctx, ChartRef{RepoURL: srv.URL + "/stable", Chart: "svc", Version: "9.*"})
	assert.ErrorContains(t, err, "no chart version found for svc-9.*")
	n := gets.Load()
	_, _, err = c.Fetch(ctx, ChartRef{RepoURL: srv.URL + "/gone", Chart: "svc", Version: "1.2.0"})
	assert.ErrorContains(t, err, "chart repository "+srv.URL+"/gone")
	_, _, err = c.Fetch(ctx, ChartRef{RepoURL: srv.URL + "/gone", Chart: "svc", Version: "1.2.0"})
	assert.ErrorContains(t, err, "chart repository "+srv.URL+"/gone")
	assert.Equal(t, n+1, gets.Load(), "a repository that failed is not asked again for FailureTTL")
	_, _, err = c.Fetch(ctx, ChartRef{RepoURL: "oci://registry.example.com/charts", Chart: "svc", Version: "1.2.0"})
	var limit *LimitError
	assert.ErrorAs(t, err, &limit)
}
