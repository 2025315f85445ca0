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

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
// as YAML, or as JSON when its name ends in .json, each document an object. Empty documents are
// skipped, a List is its items, and a file naming none of apiVersion, kind and metadata (values,
// settings) is skipped.
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
			data := f.text
			if !(bytes.Contains(data, []byte("apiVersion")) && bytes.Contains(data, []byte("kind")) && bytes.Contains(data, []byte("metadata"))) {
				continue // not a manifest, as Argo CD tells
			}
			if !strings.HasSuffix(f.name, ".json") {
				if err := checkYAML(f.rel, data); err != nil {
					return nil, fmt.Errorf("render %s: %w", rel, err)
				}
			}
			if objs, err = decodeManifests(f.rel, data); err != nil {
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

// decodeManifests decodes every document of one file into objects; a document that is not an
// object with apiVersion, kind and a name is an error naming the file and the document.
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
