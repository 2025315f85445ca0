package render

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing/fstest"

	"github.com/bmatcuk/doublestar/v4"
	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/strvals"
)

// helmValues merges the values `helm template` would be given, in its order.
func (s Source) helmValues(rel string, opts *HelmOptions) (map[string]any, error) {
	files, err := s.valueFiles(rel, opts)
	if err != nil {
		return nil, err
	}
	base := map[string]any{}
	for _, f := range files {
		data := []byte(opts.RefValues[f])
		if !strings.HasPrefix(f, "$") {
			if data, err = s.fs.ReadFile(filepath.Join(s.root, f)); err != nil {
				return nil, fmt.Errorf("values file %s: %w", f, err)
			}
		}
		m, err := chartloader.LoadValues(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("failed to parse %s: %w", f, err)
		}
		base = chartloader.MergeMaps(base, m)
	}
	if strings.TrimSpace(opts.Values) != "" {
		m, err := chartloader.LoadValues(strings.NewReader(opts.Values))
		if err != nil {
			return nil, fmt.Errorf("the Application's helm values: %w", err)
		}
		base = chartloader.MergeMaps(base, m)
	}
	for _, p := range opts.Parameters {
		if p.ForceString {
			continue
		}
		if err := strvals.ParseInto(p.Name+"="+setValue(p.Value), base); err != nil {
			return nil, fmt.Errorf("helm parameter %s: %w", p.Name, err)
		}
	}
	for _, p := range opts.Parameters {
		if !p.ForceString {
			continue
		}
		if err := strvals.ParseIntoString(p.Name+"="+setValue(p.Value), base); err != nil {
			return nil, fmt.Errorf("helm parameter %s: %w", p.Name, err)
		}
	}
	for _, p := range opts.FileParameters {
		if strings.HasPrefix(p.Value, "$") {
			return nil, limitf("helm file parameter %s: %s is another source's file: the auditor does not render those yet", p.Name, p.Value)
		}
		f, err := s.resolveValueFile(rel, p.Value)
		if err != nil {
			return nil, fmt.Errorf("helm file parameter %s: %w", p.Name, err)
		}
		reader := func([]rune) (any, error) {
			data, err := s.fs.ReadFile(filepath.Join(s.root, f))
			if err != nil {
				return nil, fmt.Errorf("helm file parameter %s: %s: %w", p.Name, f, err)
			}
			return string(data), nil
		}
		if err := strvals.ParseIntoFile(p.Name+"="+setValue(f), base, reader); err != nil {
			return nil, fmt.Errorf("helm file parameter %s: %w", p.Name, err)
		}
	}
	return base, nil
}

// HelmValueFiles are the value files the chart at rel is rendered with under opts, in helm's
// order, as paths from the repository's root (another source's as opts names it, $ref/...).
func (s Source) HelmValueFiles(rel string, opts *HelmOptions) ([]string, error) {
	return s.valueFiles(rel, opts)
}

// valueFiles resolves the Application's value files to repository paths, as Argo CD does: a
// relative path from the chart, an absolute one from the repository root, never outside it; a
// glob expands in lexical order, an explicit entry keeping its own place; a missing file is an
// error unless IgnoreMissingValueFiles. Another source's ($ref/...) comes from RefValues; URLs
// are refused.
func (s Source) valueFiles(rel string, opts *HelmOptions) ([]string, error) {
	explicit := map[string]bool{}
	for _, v := range opts.ValueFiles {
		if p, err := s.resolveValueFile(rel, v); err == nil && !isGlob(p) {
			explicit[p] = true
		}
	}
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, v := range opts.ValueFiles {
		if _, ok := opts.RefValues[v]; ok {
			add(v) // another source's, read by the caller
			continue
		}
		p, err := s.resolveValueFile(rel, v)
		if err != nil {
			return nil, err
		}
		if isGlob(p) {
			matches, err := s.glob(p)
			if err != nil {
				return nil, fmt.Errorf("values file %s: %w", v, err)
			}
			if len(matches) == 0 && !opts.IgnoreMissingValueFiles {
				return nil, fmt.Errorf("values file glob %s matched no files", v)
			}
			for _, m := range matches {
				if !explicit[m] {
					add(m)
				}
			}
			continue
		}
		if !s.fs.Exists(filepath.Join(s.root, p)) {
			if opts.IgnoreMissingValueFiles {
				continue
			}
			return nil, fmt.Errorf("values file %s: %s does not exist in the repository", v, p)
		}
		add(p)
	}
	return out, nil
}

// resolveValueFile is a value file's path from the repository root.
func (s Source) resolveValueFile(rel, v string) (string, error) {
	if strings.HasPrefix(v, "$") {
		return "", fmt.Errorf("values file %s names a source the Application does not have (no ref %s among its sources)", v, strings.SplitN(v, "/", 2)[0])
	}
	if i := strings.Index(v, "://"); i > 0 && !strings.ContainsAny(v[:i], "/.") {
		return "", limitf("values file %s is a URL: the auditor renders value files from the repository only", v)
	}
	p := path.Join(rel, v)
	if path.IsAbs(v) {
		p = path.Join(s.valuesRoot, strings.TrimPrefix(v, "/"))
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("values file %s is outside the repository", v)
	}
	return p, nil
}

// glob expands a value file pattern (from the repository root; ** crosses directories) as Argo
// CD does with doublestar.FilepathGlob: the matching files in the order a walk of sorted
// directories finds them.
func (s Source) glob(pattern string) ([]string, error) {
	if !doublestar.ValidatePattern(pattern) {
		return nil, fmt.Errorf("%s is not a valid pattern", pattern)
	}
	// doublestar itself, over the files below the pattern's fixed part: its walk order is
	// Argo CD's.
	base, _ := doublestar.SplitPattern(pattern)
	tree := fstest.MapFS{}
	err := s.fs.Walk(filepath.Join(s.root, base), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return nil
		}
		if rel, rerr := filepath.Rel(s.root, p); rerr == nil {
			tree[filepath.ToSlash(rel)] = &fstest.MapFile{}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return doublestar.Glob(tree, pattern, doublestar.WithFilesOnly())
}
