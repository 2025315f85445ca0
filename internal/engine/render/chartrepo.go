package render

// Charts from a Helm chart repository (an HTTP index.yaml), fetched as Argo CD's repo-server
// fetches them for a source with spec.source.chart, then rendered like a chart in Git.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	"sigs.k8s.io/yaml"
)

// ChartRef names a chart of a Helm chart repository: Version is a version or a semver
// constraint, as an Application's targetRevision.
type ChartRef struct {
	RepoURL, Chart, Version string
}

// Charts fetches charts from Helm chart repositories over HTTP(S), anonymously, keeping each
// chart version it fetched (a published version does not change) and each repository's index
// for IndexTTL.
type Charts struct {
	// Client is the HTTP client (default: one with a 30 s timeout).
	Client *http.Client
	// IndexTTL is how long an index is used before it is fetched again (default 5 minutes).
	IndexTTL time.Duration

	mu      sync.Mutex
	indexes map[string]indexEntry
	charts  map[string]map[string][]byte
}

type indexEntry struct {
	idx *chartIndex
	err error // a fetch that failed, answered again for FailureTTL
	at  time.Time
}

// FailureTTL is how long a chart repository that could not be read is not asked again: an
// audit does not wait on a repository out of reach at every run.
var FailureTTL = time.Minute

// chartIndex is the part of a chart repository's index.yaml a fetch reads.
type chartIndex struct {
	Entries map[string][]chartVersion `json:"entries"`
}

type chartVersion struct {
	Version string   `json:"version"`
	URLs    []string `json:"urls"`
	Digest  string   `json:"digest"`
}

// get picks a version as helm's repository index does: the exact version when listed, else the
// newest that satisfies the constraint.
func (i *chartIndex) get(name, version string) (*chartVersion, error) {
	vs := i.Entries[name]
	if len(vs) == 0 {
		return nil, fmt.Errorf("no chart %s in the repository's index", name)
	}
	for j := range vs {
		if version != "" && vs[j].Version == version {
			return &vs[j], nil
		}
	}
	c := version
	if c == "" {
		c = "*"
	}
	constraint, err := semver.NewConstraint(c)
	if err != nil {
		return nil, fmt.Errorf("version %q: %w", version, err)
	}
	var best *chartVersion
	var bestV *semver.Version
	for j := range vs {
		v, err := semver.NewVersion(vs[j].Version)
		if err != nil || !constraint.Check(v) {
			continue
		}
		if bestV == nil || v.GreaterThan(bestV) {
			best, bestV = &vs[j], v
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no chart version found for %s-%s", name, version)
	}
	return best, nil
}

// resolveURL resolves a chart URL of an index against the repository's URL, as helm does.
func resolveURL(base, ref string) (string, error) {
	r, err := url.Parse(ref)
	if err != nil {
		return "", err
	}
	if r.IsAbs() {
		return ref, nil
	}
	b, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	b.Path = strings.TrimSuffix(b.Path, "/") + "/"
	return b.ResolveReference(r).String(), nil
}

// maxCharts is how many fetched chart versions are kept.
const maxCharts = 64

// maxChartSize bounds a chart archive's and an index's download.
const maxChartSize = 64 << 20

// Fetch resolves ref's version in its repository's index and returns the chart's files (paths
// inside the chart: Chart.yaml, templates/...) and the version resolved. An OCI registry, a
// repository out of reach or a version it lacks is an error naming it.
func (c *Charts) Fetch(ctx context.Context, ref ChartRef) (map[string][]byte, string, error) {
	u, err := url.Parse(ref.RepoURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, "", limitf("chart %s from %s: the auditor fetches charts from HTTP(S) chart repositories only (not OCI registries yet)", ref.Chart, ref.RepoURL)
	}
	idx, err := c.index(ctx, ref.RepoURL, false)
	if err != nil {
		return nil, "", err
	}
	cv, err := idx.get(ref.Chart, ref.Version)
	if err != nil {
		// A version published since the index was read: read it again once.
		if idx, err = c.index(ctx, ref.RepoURL, true); err != nil {
			return nil, "", err
		}
		if cv, err = idx.get(ref.Chart, ref.Version); err != nil {
			return nil, "", fmt.Errorf("chart %s %s in %s: %w", ref.Chart, ref.Version, ref.RepoURL, err)
		}
	}
	if len(cv.URLs) == 0 {
		return nil, "", fmt.Errorf("chart %s %s in %s: the index lists no URL", ref.Chart, cv.Version, ref.RepoURL)
	}
	// A version re-published with other content has another digest in the index.
	key := strings.TrimSuffix(ref.RepoURL, "/") + "\x00" + ref.Chart + "\x00" + cv.Version + "\x00" + cv.Digest
	c.mu.Lock()
	files, ok := c.charts[key]
	c.mu.Unlock()
	if ok {
		return files, cv.Version, nil
	}
	where, err := resolveURL(ref.RepoURL, cv.URLs[0])
	if err != nil {
		return nil, "", fmt.Errorf("chart %s %s: %w", ref.Chart, cv.Version, err)
	}
	data, err := c.get(ctx, where)
	if err != nil {
		return nil, "", fmt.Errorf("chart %s %s: %w", ref.Chart, cv.Version, err)
	}
	if d := cv.Digest; d != "" {
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != d {
			return nil, "", fmt.Errorf("chart %s %s from %s: its digest is not the index's", ref.Chart, cv.Version, where)
		}
	}
	bufs, err := archive.LoadArchiveFiles(bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("chart %s %s from %s: %w", ref.Chart, cv.Version, where, err)
	}
	files = make(map[string][]byte, len(bufs))
	for _, f := range bufs {
		files[f.Name] = f.Data
	}
	c.mu.Lock()
	if c.charts == nil {
		c.charts = map[string]map[string][]byte{}
	}
	for k := range c.charts { // a bounded number of charts kept
		if len(c.charts) < maxCharts {
			break
		}
		delete(c.charts, k)
	}
	c.charts[key] = files
	c.mu.Unlock()
	return files, cv.Version, nil
}

func (c *Charts) index(ctx context.Context, repoURL string, fresh bool) (*chartIndex, error) {
	ttl := c.IndexTTL
	if ttl == 0 {
		ttl = 5 * time.Minute
	}
	c.mu.Lock()
	e, ok := c.indexes[repoURL]
	c.mu.Unlock()
	switch {
	case ok && e.err != nil && time.Since(e.at) < FailureTTL:
		return nil, e.err
	case ok && e.err == nil && time.Since(e.at) < ttl && !fresh:
		return e.idx, nil
	}
	idx := &chartIndex{}
	data, err := c.get(ctx, strings.TrimSuffix(repoURL, "/")+"/index.yaml")
	if err != nil {
		err = fmt.Errorf("chart repository %s: %w", repoURL, err)
	} else if yerr := yaml.Unmarshal(data, idx); yerr != nil {
		err = fmt.Errorf("chart repository %s: index.yaml: %w", repoURL, yerr)
	}
	if ctx.Err() != nil {
		return nil, err // the caller gave up: nothing learnt of the repository
	}
	c.mu.Lock()
	if c.indexes == nil {
		c.indexes = map[string]indexEntry{}
	}
	c.indexes[repoURL] = indexEntry{idx: idx, err: err, at: time.Now()}
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return idx, nil
}

func (c *Charts) get(ctx context.Context, where string) ([]byte, error) {
	client := c.Client
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, where, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", where, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxChartSize+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", where, err)
	}
	if len(data) > maxChartSize {
		return nil, fmt.Errorf("GET %s: larger than %d bytes", where, maxChartSize)
	}
	return data, nil
}

// ChartTarget is the render target of a fetched chart in a Source made by FromChart.
func ChartTarget(ref ChartRef, version string) string {
	sum := sha256.Sum256([]byte(ref.RepoURL + "\x00" + ref.Chart + "\x00" + version))
	return AppTarget(path.Join(".charts", hex.EncodeToString(sum[:6]), ref.Chart))
}

// FromChart is a Source holding a fetched chart's files at ChartTarget(ref, version): rendered
// with WithHelm and Render(ChartTarget(...)) like a chart in Git. Its revision is the chart's
// version.
func FromChart(ref ChartRef, version string, files map[string][]byte) (Source, error) {
	dir := TargetPath(ChartTarget(ref, version))
	in := make(map[string][]byte, len(files))
	for name, data := range files {
		in[path.Join(dir, name)] = data
	}
	s, err := fromFiles(in, nil, version)
	s.valuesRoot = dir
	return s, err
}
