package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"

	imagev1 "github.com/opencontainers/image-spec/specs-go/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// renderAppPath renders an Application's source path as Argo CD tells its type: a directory
// where the source sets directory options, else kustomize where the path holds a
// kustomization, helm where it holds a Chart.yaml, else a plain directory.
func (s Source) renderAppPath(rel string) (*Result, error) {
	rel = path.Clean(rel)
	if rel == ".." || strings.HasPrefix(rel, "../") || path.IsAbs(rel) {
		return nil, fmt.Errorf("render %s: the path leaves the repository", rel)
	}
	if s.dirOptions != nil {
		return s.directory(rel) // directory named as the source's type
	}
	if s.helm != nil && s.helm.Explicit && s.isChart(rel) {
		return s.renderChart(rel) // helm named as the source's type
	}
	for _, name := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		if s.fs.Exists(filepath.Join(s.root, rel, name)) {
			return s.kustomize(rel)
		}
	}
	if s.isChart(rel) {
		return s.renderChart(rel)
	}
	return s.directory(rel)
}

// directory reads a directory as Argo CD's directory source does (manifestFiles says which
// files), in walk order: each *.jsonnet file evaluated (jsonnet.go), and every other one read
// as Argo CD's repo-server reads it (directoryFileObjects).
func (s Source) directory(rel string) (*Result, error) {
	dir := filepath.Join(s.root, rel)
	if !s.fs.IsDir(dir) {
		return nil, fmt.Errorf("render %s: no such directory in the repository", rel)
	}
	if r, ok := s.fs.(*recordingFS); ok {
		r.noteDirectory(rel, s.dirOptions)
	}
	opts := s.dirOptions
	if opts == nil {
		opts = &DirectoryOptions{}
	}
	files, err := s.manifestFiles(rel, opts)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", rel, err)
	}
	res := &Result{Path: rel, Revision: s.revision}
	var stream bytes.Buffer
	evaluated := 0
	for _, f := range files {
		var objs []*unstructured.Unstructured
		switch {
		case strings.HasSuffix(f.name, ".jsonnet"):
			evaluated++
			if objs, err = s.evaluateJsonnet(rel, f, opts.Jsonnet, evaluated); err != nil {
				return nil, fmt.Errorf("render %s: %w", rel, err)
			}
		default:
			if objs, err = directoryFileObjects(f); err != nil {
				return nil, fmt.Errorf("render %s: %w", rel, err)
			}
		}
		for _, o := range objs {
			out, err := o.MarshalJSON()
			if err != nil {
				return nil, fmt.Errorf("render %s: %w", f.rel, err)
			}
			stream.WriteString("---\n")
			stream.Write(out)
			stream.WriteString("\n")
		}
		res.Objects = append(res.Objects, objs...)
	}
	res.YAML = stream.Bytes()
	sum := sha256.Sum256(res.YAML)
	res.Digest = hex.EncodeToString(sum[:])
	return res, nil
}

// decodeManifests decodes every document of helm template's output into objects; a document
// that is not an object with apiVersion, kind and a name is an error naming the file and the
// document. A directory source's files are read otherwise, as Argo CD reads them
// (directoryFileObjects).
func decodeManifests(file string, data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, doc, err)
		}
		if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" || string(t) == "{}" {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(raw, &head); err != nil || head.Kind == "" || head.APIVersion == "" {
			// Never the document itself in the message: it may be a Secret.
			return nil, fmt.Errorf("%s: document %d is not a Kubernetes object (apiVersion, kind and metadata.name are required)", file, doc)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil { // numbers as int64, as client-go expects
			return nil, fmt.Errorf("%s: document %d (%s %s) does not decode", file, doc, head.APIVersion, head.Kind)
		}
		if items, found := u.Object["items"]; u.IsList() && (!found || items == nil) {
			continue // an empty List
		}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("%s: document %d: %w", file, doc, err)
			}
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
			continue
		}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" && u.GetGenerateName() == "" {
			return nil, fmt.Errorf("%s: document %d is not a Kubernetes object (apiVersion, kind and metadata.name are required)", file, doc)
		}
		out = append(out, u)
	}
}

// directoryFileObjects are the objects of one file of a directory source but a Jsonnet one, as
// Argo CD v3.6.1's repo-server reads it (reposerver/repository getObjsFromYAMLOrJSON and
// splitYAMLOrJSON, then GenerateManifest's Lists) and its controller loads them (each needs a
// kind):
//   - A file whose name ends in .json holds one JSON value: an object with a kind. One that does
//     not decode so is kept all the same when it decodes as an OCI image manifest, which any
//     JSON object without a conflicting field does; Argo CD's controller then fails on its
//     missing kind. Either way, an error. So is an empty file and a second value.
//   - Any other file is a stream of YAML documents (or JSON values), each an object with a kind;
//     a null or empty document is skipped. When a document fails to decode and none before it
//     did, the file is ignored unless it holds all of "apiVersion:", "kind:" and "metadata:"
//     (settings, values, a kustomization's replacements); otherwise the render fails.
//   - A List is its items, a List whose items are null nothing. An object needs no apiVersion
//     nor name here: Argo CD keeps it and fails when it applies it, and so does the audit.
func directoryFileObjects(f manifestFile) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	if strings.HasSuffix(f.name, ".json") {
		var obj unstructured.Unstructured
		dec := json.NewDecoder(bytes.NewReader(f.text))
		if err := dec.Decode(&obj); err != nil {
			var oci imagev1.Manifest
			if json.NewDecoder(bytes.NewReader(f.text)).Decode(&oci) != nil {
				if errors.Is(err, io.EOF) {
					return nil, fmt.Errorf("%s: the file holds no JSON value: Argo CD's repo-server fails on it", f.rel)
				}
				return nil, fmt.Errorf("%s: %s", f.rel, decodeProblem(err))
			}
		}
		if dec.More() {
			return nil, fmt.Errorf("%s: the file holds more than one JSON value: Argo CD allows one object in a JSON file", f.rel)
		}
		objs = []*unstructured.Unstructured{&obj}
	} else {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(f.text), 4096)
		for doc := 1; ; doc++ {
			u := &unstructured.Unstructured{}
			err := dec.Decode(&u)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				if len(objs) == 0 && !(bytes.Contains(f.text, []byte("apiVersion:")) && bytes.Contains(f.text, []byte("kind:")) &&
					bytes.Contains(f.text, []byte("metadata:"))) {
					return nil, nil // not a manifest, as Argo CD tells: ignored
				}
				if yerr := checkYAML(f.rel, f.text); yerr != nil {
					return nil, yerr // the parser's line
				}
				return nil, fmt.Errorf("%s: document %d: %s", f.rel, doc, decodeProblem(err))
			}
			if u != nil {
				objs = append(objs, u)
			}
		}
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		switch {
		case o.IsList():
			err := o.EachListItem(func(item runtime.Object) error {
				out = append(out, item.(*unstructured.Unstructured))
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", f.rel, o.GetKind(), err)
			}
		case nullList(o):
		default:
			out = append(out, o)
		}
	}
	for _, o := range out {
		if o.GetKind() == "" {
			// Never the object in the message: it may be a Secret.
			return nil, fmt.Errorf("%s: an object without a kind: Argo CD's controller fails to load it (Object 'Kind' is missing)", f.rel)
		}
	}
	return out, nil
}

// decodeProblem is a decoder's error without the document it may quote (Object 'Kind' is
// missing in '...'): the document may be a Secret.
func decodeProblem(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "Object 'Kind' is missing") {
		return "not a Kubernetes object: it has no kind"
	}
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	return msg
}
