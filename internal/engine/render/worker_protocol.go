package render

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The protocol between a Worker and its child, one JSON value per line. Parent → child (stdin): a
// workerRequest, then, for a snapshot, one workerFile per file. Child → parent (stdout): a
// workerHeader (the render's path, digest, what it read, or its error), then exactly Count
// objects, one per line, which the parent decodes one at a time, then a workerTrailer.

// workerRequest is what the parent asks: env rendered from the work tree Dir, or from the
// snapshot at Revision whose files follow.
type workerRequest struct {
	Env      string `json:"env"`
	Revision string `json:"revision,omitempty"`
	Dir      string `json:"dir,omitempty"`
	// Variant and Overrides are an Application's patches (Source.WithPatches): the digest, and
	// the kustomization files they rewrote (path from the root → content).
	Variant   string            `json:"variant,omitempty"`
	Overrides map[string][]byte `json:"overrides,omitempty"`
	// Omitted are the snapshot's files too large to read, by size.
	Omitted map[string]int64 `json:"omitted,omitempty"`
	// Symlinks are the paths the snapshot's commit records as symlinks, which it does not hold.
	Symlinks map[string]bool `json:"symlinks,omitempty"`
	// Helm are the Application's helm options (Source.WithHelm), Directory its directory
	// options (Source.WithDirectory).
	Helm      *HelmOptions      `json:"helm,omitempty"`
	Directory *DirectoryOptions `json:"directory,omitempty"`
}

// workerFile is one file of a snapshot.
type workerFile struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// workerHeader is the first line the child writes.
type workerHeader struct {
	Path   string            `json:"path,omitempty"`
	Digest string            `json:"digest,omitempty"`
	Count  int               `json:"count"`
	Probes map[string]string `json:"probes,omitempty"`
	Remote bool              `json:"remote,omitempty"`
	// Error is the render's error message, as an in-process render would have returned it; YAML
	// is its file and line when a file does not parse.
	Error string     `json:"error,omitempty"`
	YAML  *YAMLError `json:"yaml,omitempty"`
	// PeakRSS is the child's own peak resident set size in bytes, with Error (a render's comes
	// in the trailer).
	PeakRSS int64 `json:"peakRSS,omitempty"`
}

// workerTrailer is the last line the child writes after a render's objects.
type workerTrailer struct {
	// PeakRSS is the child's own peak resident set size in bytes, after it wrote the objects.
	PeakRSS int64 `json:"peakRSS"`
}

// workerError is a render error reported by the child: the same message, and the same
// *YAMLError through errors.As, as in process.
type workerError struct {
	msg     string
	yaml    *YAMLError
	peakRSS int64
}

func (e *workerError) Error() string { return e.msg }

func (e *workerError) Unwrap() error {
	if e.yaml == nil {
		return nil
	}
	return e.yaml
}

// recordedRender is a render done by a child, with what it read.
type recordedRender struct {
	// res is the render; a child's comes with its objects as JSON in raw and res.Objects nil
	// until result decodes them: a render the cache keeps is never decoded whole.
	res    *Result
	raw    []json.RawMessage
	probes map[string]string
	remote bool
	// worker says a child rendered; peakRSS is its peak resident set size in bytes.
	worker  bool
	peakRSS int64
}

// writeRequest sends the request and, for a snapshot, its files.
func writeRequest(w io.Writer, s Source, env string) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(workerRequest{Env: env, Revision: s.revision, Dir: s.dir, Variant: s.variant, Overrides: s.overrides, Omitted: s.omitted, Symlinks: s.symlinks, Helm: s.helm, Directory: s.dirOptions}); err != nil {
		return err
	}
	if s.dir == "" {
		for name, data := range s.files {
			if err := enc.Encode(workerFile{Name: name, Data: data}); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

// readRender reads the child's stream: its header, then its objects one line at a time.
func readRender(r io.Reader, revision, env string) (*recordedRender, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	var h workerHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	if h.Error != "" {
		return nil, &workerError{msg: h.Error, yaml: h.YAML, peakRSS: h.PeakRSS}
	}
	res := &Result{Env: env, Path: h.Path, Revision: revision, Digest: h.Digest}
	raw := make([]json.RawMessage, 0, h.Count)
	for i := range h.Count {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("read object %d of %d: %w", i+1, h.Count, err)
		}
		line = bytes.TrimSuffix(line, []byte{'\n'})
		if err := checkObject(line); err != nil {
			return nil, fmt.Errorf("read object %d of %d: %w", i+1, h.Count, err)
		}
		raw = append(raw, line)
	}
	line, err = br.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("read trailer: %w", err)
	}
	var tr workerTrailer
	if err := json.Unmarshal(line, &tr); err != nil {
		return nil, fmt.Errorf("read trailer: %w", err)
	}
	return &recordedRender{res: res, raw: raw, probes: h.Probes, remote: h.Remote, worker: true, peakRSS: tr.PeakRSS}, nil
}

// checkObject fails unless data is what decoding it as an Unstructured (when a caller needs it
// decoded, maybe long after the cache kept it) accepts: a JSON object with a kind and an
// apiVersion. The rest of it is checked for JSON syntax only, without building it.
func checkObject(data []byte) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if !json.Valid(data) {
		return errors.New("not JSON")
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	if head.Kind == "" || head.APIVersion == "" {
		return errors.New("an object without a kind or an apiVersion")
	}
	return nil
}

// result returns the render with its objects decoded.
func (r *recordedRender) result() (*Result, error) {
	if r.res.Objects != nil || r.raw == nil {
		return r.res, nil
	}
	objs := make([]*unstructured.Unstructured, 0, len(r.raw))
	for i, data := range r.raw {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("render %s: object %d of %d: %w", r.res.Env, i+1, len(r.raw), err)
		}
		objs = append(objs, u)
	}
	res := *r.res
	res.Objects = objs
	return &res, nil
}
