package site

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Change is one value Set changed in one file.
type Change struct {
	File string `json:"file"`
	Path string `json:"path"` // the field, as kustomize's fieldPath spells it
	Old  string `json:"old"`
	New  string `json:"new"`
}

// Set writes the values of pairs (key → value) for env into the repository work tree at dir: the
// env's site file, which loses its template mark, and what kustomize cannot reach (the bootstrap
// Application's repoURL, the overlay's image names). Files are edited as text: comments, order
// and quoting stay, and the diff shows only the values. Nothing is written when a key or value
// is invalid or a file does not parse.
func Set(dir, env string, pairs map[string]string) ([]Change, error) {
	keys, err := checkedKeys(pairs)
	if err != nil {
		return nil, err
	}

	siteFile := Path(env)
	st, err := load(dir, siteFile)
	if err != nil {
		return nil, err
	}
	old, err := Parse(env, st.bytes())
	if err != nil {
		return nil, err
	}
	edits := map[string]*text{siteFile: st}
	var changes []Change
	for _, k := range keys {
		if old.Values[k] == pairs[k] {
			continue
		}
		if err := st.setMapValue([]string{"data"}, k, pairs[k]); err != nil {
			return nil, fmt.Errorf("%s: %w", siteFile, err)
		}
		changes = append(changes, Change{File: siteFile, Path: "data." + k, Old: old.Values[k], New: pairs[k]})
	}
	if old.Template {
		if err := st.deleteMapKey([]string{"metadata", "annotations"}, TemplateAnnotation); err != nil {
			return nil, fmt.Errorf("%s: %w", siteFile, err)
		}
		changes = append(changes, Change{File: siteFile, Path: "metadata.annotations." + TemplateAnnotation, Old: "true"})
	}

	if v, ok := pairs["gitURL"]; ok && old.Values["gitURL"] != "" && v != old.Values["gitURL"] {
		root := path.Join("clusters", env, "root.yaml")
		t, err := load(dir, root)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			n, err := t.replaceEqual(old.Values["gitURL"], v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", root, err)
			}
			if n > 0 {
				edits[root] = t
				changes = append(changes, Change{File: root, Path: "spec.source.repoURL", Old: old.Values["gitURL"], New: v})
			}
		}
	}
	if v, ok := pairs["registry"]; ok && old.Values["registry"] != "" && v != old.Values["registry"] {
		kust := path.Join("overlays", env, "kustomization.yaml")
		t, err := load(dir, kust)
		if err != nil {
			return nil, err
		}
		c, err := t.renameImages(old.Values["registry"], v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kust, err)
		}
		for i := range c {
			c[i].File = kust
		}
		changes = append(changes, c...)
		edits[kust] = t
	}

	// Every edit is parsed again before anything is written.
	if err := verifyEdits(env, siteFile, st, edits, keys, pairs); err != nil {
		return nil, err
	}
	if err := writeAll(dir, edits); err != nil {
		return nil, err
	}
	return changes, nil
}

// checkedKeys is the keys of pairs in the order of Names, each a known site key whose value
// passes its check.
func checkedKeys(pairs map[string]string) ([]string, error) {
	var keys []string
	for k, v := range pairs {
		key, ok := Lookup(k)
		if !ok {
			return nil, fmt.Errorf("unknown site key %q (known: %s)", k, strings.Join(Names(), ", "))
		}
		if err := key.Check(v); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return slices.Index(Names(), a) - slices.Index(Names(), b) })
	return keys, nil
}

// verifyEdits parses every edit again, and the site file st of env, whose keys must read what
// pairs sets: before anything is written.
func verifyEdits(env, siteFile string, st *text, edits map[string]*text, keys []string, pairs map[string]string) error {
	for name, t := range edits {
		var doc yaml.Node
		if err := yaml.Unmarshal(t.bytes(), &doc); err != nil {
			return fmt.Errorf("%s: the edit does not parse: %w", name, err)
		}
	}
	if now, err := Parse(env, st.bytes()); err != nil {
		return err
	} else {
		for _, k := range keys {
			if now.Values[k] != pairs[k] {
				return fmt.Errorf("%s: data.%s reads %q after the edit, not %q", siteFile, k, now.Values[k], pairs[k])
			}
		}
	}
	return nil
}

// writeAll writes every edited file beside itself first, with the file's mode, and renames them
// into place only when all are written: a full disk or a read-only file leaves every file as it
// was.
func writeAll(dir string, edits map[string]*text) error {
	type staged struct{ tmp, path string }
	var done []staged
	cleanup := func() {
		for _, s := range done {
			_ = os.Remove(s.tmp)
		}
	}
	for name, t := range edits {
		p := filepath.Join(dir, filepath.FromSlash(name))
		info, err := os.Stat(p)
		if err != nil {
			cleanup()
			return err
		}
		f, err := os.CreateTemp(filepath.Dir(p), ".site-*")
		if err != nil {
			cleanup()
			return fmt.Errorf("write %s: %w", name, err)
		}
		done = append(done, staged{f.Name(), p})
		_, err = f.Write(t.bytes())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(f.Name(), info.Mode().Perm())
		}
		if err != nil {
			cleanup()
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	for _, s := range done {
		if err := os.Rename(s.tmp, s.path); err != nil {
			cleanup()
			return fmt.Errorf("write %s: %w", s.path, err)
		}
	}
	return nil
}

// renameImages gives every `images` entry whose image comes from the old registry the name it has
// under the new one (newName), keeping the path after the registry.
func (t *text) renameImages(oldReg, newReg string) ([]Change, error) {
	images := t.lookup("images")
	if images == nil || images.Kind != yaml.SequenceNode {
		return nil, nil
	}
	type entry struct{ name, nameVal, newName *yaml.Node }
	var entries []entry
	for _, it := range images.Content {
		if it.Kind != yaml.MappingNode {
			continue
		}
		var e entry
		for i := 0; i+1 < len(it.Content); i += 2 {
			switch it.Content[i].Value {
			case "name":
				e.name, e.nameVal = it.Content[i], it.Content[i+1]
			case "newName":
				e.newName = it.Content[i+1]
			}
		}
		if e.name != nil {
			entries = append(entries, e)
		}
	}
	var out []Change
	// Bottom up: an inserted line moves the lines after it.
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		nameVal := e.nameVal.Value
		eff := nameVal
		if e.newName != nil {
			eff = e.newName.Value
		}
		rest, ok := strings.CutPrefix(eff, oldReg+"/")
		if !ok {
			continue
		}
		name := newReg + "/" + rest
		var err error
		if e.newName != nil {
			err = t.replaceScalar(e.newName, name)
		} else {
			err = t.insertLine(e.name.Line, e.name.Column-1, "newName: "+quote(name))
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Change{Path: "images.[name=" + nameVal + "].newName", Old: eff, New: name})
	}
	slices.Reverse(out)
	return out, nil
}

func load(dir, rel string) (*text, error) {
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	return parseText(rel, data)
}
