package render

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
)

// ServeWorkerIfChild makes this process a render worker when a Worker started it (WorkerEnv is
// set): it reads the request on standard input, renders, writes the render to standard output
// and exits. Otherwise it returns at once. Call it first thing in main, before flags are parsed.
func ServeWorkerIfChild() {
	if os.Getenv(WorkerEnv) != "1" {
		workerHook.Store(true)
		return
	}
	if err := serveWorker(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "render worker: %v\n", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// workerHook records that this process called ServeWorkerIfChild: only then does a copy of its
// own executable serve a render instead of running the whole program again (a test binary
// without the hook in its TestMain would start copies of itself, each running every test).
var workerHook atomic.Bool

// serveWorker answers one request. A render that fails is reported in the header (the parent
// returns its error); an error here is the protocol's.
func serveWorker(in io.Reader, out io.Writer) error {
	dec := json.NewDecoder(bufio.NewReaderSize(in, 256<<10))
	var req workerRequest
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	src, err := requestSource(dec, req)
	if err != nil {
		return err
	}
	for rel, data := range req.Overrides {
		src.fs = &overrideFS{FileSystem: src.fs, path: filepath.Join(src.root, filepath.FromSlash(rel)), data: data}
	}
	rec := &recordingFS{FileSystem: src.fs, root: src.root, probes: map[string]string{}}
	res, err := Source{fs: rec, root: src.root, revision: src.revision, variant: req.Variant, helm: req.Helm, dirOptions: req.Directory}.build(req.Env)
	bw := bufio.NewWriterSize(out, 256<<10)
	enc := json.NewEncoder(bw)
	if err != nil {
		h := workerHeader{Error: err.Error(), PeakRSS: selfPeakRSS()}
		var ye *YAMLError
		if errors.As(err, &ye) {
			h.YAML = ye
		}
		if err := enc.Encode(h); err != nil {
			return fmt.Errorf("write error: %w", err)
		}
		return bw.Flush()
	}
	h := workerHeader{Path: res.Path, Digest: res.Digest, Count: len(res.Objects), Probes: rec.recorded(), Remote: rec.remote}
	if err := enc.Encode(h); err != nil {
		return fmt.Errorf("write header: %w", err)
	}
	for _, o := range res.Objects {
		data, err := o.MarshalJSON()
		if err != nil {
			return fmt.Errorf("%s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		// Unstructured's encoder ends the JSON with a newline already: one line per object.
		data = append(bytes.TrimRight(data, "\n"), '\n')
		if _, err := bw.Write(data); err != nil {
			return fmt.Errorf("write %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	if err := enc.Encode(workerTrailer{PeakRSS: selfPeakRSS()}); err != nil {
		return fmt.Errorf("write trailer: %w", err)
	}
	return bw.Flush()
}

// requestSource is the Source a request names: a work tree, or the snapshot whose files follow.
func requestSource(dec *json.Decoder, req workerRequest) (Source, error) {
	if req.Dir != "" {
		src, err := FromDir(req.Dir)
		src.revision = req.Revision
		return src, err
	}
	files := map[string][]byte{}
	for {
		var f workerFile
		err := dec.Decode(&f)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Source{}, fmt.Errorf("read files: %w", err)
		}
		files[f.Name] = f.Data
	}
	src, err := fromFiles(files, req.Omitted, req.Revision)
	src.symlinks = req.Symlinks
	return src, err
}
