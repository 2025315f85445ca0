package adopt

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// manifestFile says whether p is a file Argo CD or kustomize may read as manifests.
func manifestFile(p string) bool {
	e := path.Ext(p)
	return e == ".yaml" || e == ".yml" || e == ".json"
}

// sharedValueFile says why the value file p, which h's Application reads, is not only its own:
// the chart's own values.yaml (every Application of the chart reads it), or a file another
// Application of the repository lists, or may list (a document naming it the adopter cannot
// read as an Application: an ApplicationSet, a template). "" when this Application alone reads it.
func (h helmSource) sharedValueFile(t *tree, p string) string {
	if p == path.Join(h.chart, "values.yaml") {
		return "it is the chart's own values.yaml, which every Application of the chart reads"
	}
	src, err := t.source()
	if err != nil {
		return "the repository does not read: " + err.Error()
	}
	base := path.Base(p)
	var others []string
	for _, f := range t.paths() {
		if !manifestFile(f) {
			continue
		}
		data, _ := t.file(f)
		if !bytes.Contains(data, []byte(base)) {
			continue
		}
		docs, err := yamlValues(data)
		if err != nil {
			if bytes.Contains(data, []byte("valueFiles")) {
				others = append(others, f)
			}
			continue
		}
		for i, d := range docs {
			if f == h.m.file && i == h.m.doc {
				continue
			}
			obj, _ := d.(map[string]any)
			text, _ := yamlText(d)
			if !strings.Contains(text, base) || !strings.Contains(text, "valueFiles") {
				continue
			}
			if reads, known := appReads(src, obj, p); reads || !known {
				others = append(others, f)
				break
			}
		}
	}
	if len(others) == 0 {
		return ""
	}
	slices.Sort(others)
	return "another Application reads it too (" + strings.Join(slices.Compact(others), ", ") + ")"
}

// appReads says whether obj, an Application, lists value file p in one of its sources, and
// whether that is known (false for what is not an Application the adopter reads).
func appReads(src render.Source, obj map[string]any, p string) (reads, known bool) {
	api, _ := obj["apiVersion"].(string)
	if obj["kind"] != "Application" || !strings.HasPrefix(api, "argoproj.io/") {
		return false, false
	}
	app, err := argocd.FromUnstructured(&unstructured.Unstructured{Object: obj})
	if err != nil {
		return false, false
	}
	check := func(sourcePath string, opts *render.HelmOptions) (bool, bool) {
		for _, f := range opts.ValueFiles {
			if r, ok := refFile(app, f); ok {
				if r == p {
					return true, true
				}
				if opts.RefValues == nil {
					opts.RefValues = map[string]string{}
				}
				opts.RefValues[f] = ""
			}
		}
		opts.IgnoreMissingValueFiles = true
		files, err := src.HelmValueFiles(path.Clean(sourcePath), opts)
		if err != nil {
			return false, false
		}
		return slices.Contains(files, p), true
	}
	if len(app.Sources) == 0 {
		return check(app.Path, app.HelmOptions("", argocd.Cluster{}))
	}
	known = true
	for j, s := range app.Sources {
		r, k := check(s.Path, app.SourceHelmOptions(j, "", argocd.Cluster{}))
		reads, known = reads || r, known && k
	}
	return reads, known
}

func yamlText(v any) (string, error) {
	data, err := yaml.Marshal(v)
	return string(data), err
}

// sharedManifest says why the Application name declared in file must not be edited for one
// environment's drift: a kustomization that reaches it patches the Application, or more than one
// kustomization or Application path of the repository includes it. "" when neither.
func sharedManifest(t *tree, file, name string) string {
	kusts := map[string]map[string]any{} // directory → kustomization
	for _, p := range t.paths() {
		switch path.Base(p) {
		case "kustomization.yaml", "kustomization.yml", "Kustomization":
		default:
			continue
		}
		data, _ := t.file(p)
		docs, err := yamlValues(data)
		k, _ := firstMap(docs)
		if err != nil || k == nil {
			k = map[string]any{}
		}
		kusts[path.Dir(p)] = k
	}
	// includes: the directories and files each kustomization lists.
	listed := func(dir string) []string {
		var out []string
		for _, key := range []string{"resources", "bases", "components"} {
			l, _ := kusts[dir][key].([]any)
			for _, r := range l {
				if s, ok := r.(string); ok && !strings.Contains(s, "://") {
					out = append(out, path.Join(dir, s))
				}
			}
		}
		return out
	}
	reach := map[string]bool{} // kustomization directories that include file
	var reaches func(dir string, seen map[string]bool) bool
	reaches = func(dir string, seen map[string]bool) bool {
		if seen[dir] {
			return false
		}
		seen[dir] = true
		for _, r := range listed(dir) {
			if r == file {
				return true
			}
			if _, ok := kusts[r]; ok && reaches(r, seen) {
				return true
			}
		}
		return false
	}
	for dir := range kusts {
		if reaches(dir, map[string]bool{}) {
			reach[dir] = true
		}
	}
	users := map[string]bool{}
	// In order: with several kustomizations patching the Application, the message names the
	// same one every time.
	for _, dir := range slices.Sorted(maps.Keys(reach)) {
		top := true
		for other := range reach {
			if other != dir && slices.Contains(listed(other), dir) {
				top = false
			}
		}
		if top {
			users[dir] = true
		}
		if ps := kustPatches(t, dir, kusts[dir], name); ps != "" {
			return fmt.Sprintf("%s declares its Application, and the kustomization in %s patches it (%s): set the value in that patch or by hand", file, dir, ps)
		}
	}
	// Application paths of the repository that render the file's directory or a kustomization
	// that includes it.
	dirs := []string{path.Dir(file)}
	for dir := range reach {
		dirs = append(dirs, dir)
	}
	for _, p := range t.paths() {
		if !manifestFile(p) {
			continue
		}
		data, _ := t.file(p)
		if !bytes.Contains(data, []byte("Application")) {
			continue
		}
		docs, _ := yamlValues(data)
		for _, d := range docs {
			obj, _ := d.(map[string]any)
			if obj["kind"] != "Application" {
				continue
			}
			spec, _ := obj["spec"].(map[string]any)
			sources, _ := spec["sources"].([]any)
			if s, ok := spec["source"]; ok {
				sources = append(sources, s)
			}
			for _, s := range sources {
				sp, _ := s.(map[string]any)
				if ap, ok := sp["path"].(string); ok && slices.Contains(dirs, path.Clean(ap)) {
					if _, isKust := kusts[path.Clean(ap)]; isKust || path.Clean(ap) == path.Dir(file) {
						users[path.Clean(ap)] = true
					}
				}
			}
		}
	}
	if len(users) > 1 {
		var us []string
		for u := range users {
			us = append(us, u)
		}
		slices.Sort(us)
		return fmt.Sprintf("%s declares its Application and is included by %s: an edit there changes each of them; set the value in the one that counts, by a patch", file, strings.Join(us, ", "))
	}
	return ""
}

func firstMap(docs []any) (map[string]any, bool) {
	if len(docs) == 0 {
		return nil, false
	}
	m, ok := docs[0].(map[string]any)
	return m, ok
}

// kustPatches names the patches of kustomization k (in dir) that may patch Application name:
// a patch whose target may be it, a strategic merge patch of it. "" when none.
func kustPatches(t *tree, dir string, k map[string]any, name string) string {
	var out []string
	targets := func(target map[string]any) bool {
		if kind, _ := target["kind"].(string); kind != "" && !regexMatch(kind, "Application") {
			return false
		}
		if n, _ := target["name"].(string); n != "" && !regexMatch(n, name) {
			return false
		}
		return true
	}
	patchNames := func(text string) bool {
		docs, err := yamlValues([]byte(text))
		if err != nil {
			return true // cannot tell: it may
		}
		for _, d := range docs {
			obj, _ := d.(map[string]any)
			meta, _ := obj["metadata"].(map[string]any)
			if l, ok := d.([]any); ok && len(l) > 0 {
				return true // a JSON 6902 patch with no target names nothing itself
			}
			if (obj["kind"] == nil || obj["kind"] == "Application") && (meta["name"] == nil || meta["name"] == name) {
				return true
			}
		}
		return false
	}
	body := func(p map[string]any) string {
		if s, ok := p["patch"].(string); ok {
			return s
		}
		if s, ok := p["path"].(string); ok {
			data, _ := t.file(path.Join(dir, s))
			return string(data)
		}
		return ""
	}
	for _, key := range []string{"patches", "patchesJson6902", "patchesStrategicMerge"} {
		l, _ := k[key].([]any)
		for i, p := range l {
			label := fmt.Sprintf("%s[%d]", key, i)
			switch p := p.(type) {
			case string: // patchesStrategicMerge: a file or an inline patch
				text := p
				if data, ok := t.file(path.Join(dir, p)); ok {
					text = string(data)
				}
				if patchNames(text) {
					out = append(out, label)
				}
			case map[string]any:
				target, hasTarget := p["target"].(map[string]any)
				if hasTarget && targets(target) || !hasTarget && patchNames(body(p)) {
					out = append(out, label)
				}
			}
		}
	}
	return strings.Join(out, ", ")
}

// regexMatch matches s against a kustomize target's pattern (anchored, as kustomize does).
func regexMatch(pattern, s string) bool {
	re, err := regexp.Compile("^(?:" + pattern + ")$")
	return err != nil || re.MatchString(s)
}
