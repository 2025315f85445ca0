package auditlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// File is a Source reading a JSON-lines audit log (kube-apiserver --audit-log-path with
// --audit-log-format=json), or a file of such lines a managed cluster's log export wrote.
// Cluster names the cluster whose API server wrote it ("" for Argo CD's own).
type File struct{ Path, Cluster string }

// Load reads every event of the file into s. A line that is not an event is an error naming
// the file and line.
func (f File) Load(ctx context.Context, s *Store) error {
	fh, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	defer fh.Close()
	return readLines(ctx, fh, f.Path, f.Cluster, s)
}

func readLines(ctx context.Context, r io.Reader, name, cluster string, s *Store) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	sc.Split(completeLines)
	line := 0
	for sc.Scan() {
		line++
		if line%1000 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		var ev auditv1.Event
		if err := json.Unmarshal(b, &ev); err != nil {
			return fmt.Errorf("audit log %s:%d: %w", name, line, err)
		}
		s.AddFrom(cluster, &ev)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("audit log %s:%d: %w", name, line, err)
	}
	return nil
}

// completeLines splits at newlines and drops a last line without one: the API server may be
// writing it.
func completeLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF {
		return len(data), nil, nil
	}
	return 0, nil, nil
}

// Handler receives kube-apiserver's webhook backend: POSTed EventLists (batch mode) are added to
// s. Put it behind the same authentication as the API.
func Handler(s *Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST an audit.k8s.io/v1 EventList", http.StatusMethodNotAllowed)
			return
		}
		var list auditv1.EventList
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<20))
		if err := dec.Decode(&list); err != nil && !errors.Is(err, io.EOF) {
			http.Error(w, "decode EventList: "+err.Error(), http.StatusBadRequest)
			return
		}
		for i := range list.Items {
			s.addEvent("", &list.Items[i], SourceAuditWebhook)
		}
		w.WriteHeader(http.StatusOK)
	})
}

// Follow reads the file as kube-apiserver appends to it, every interval until ctx ends: new
// complete lines are added to s (a line still being written is read at the next poll). A file
// that shrank (rotated: --audit-log-maxsize) is read again from its start. A line that is not an
// event is skipped and reported to onErr (nil: ignored), as are errors opening the file, which is
// tried again at the next poll.
func (f File) Follow(ctx context.Context, s *Store, interval time.Duration, onErr func(error)) {
	var offset int64
	for {
		if err := f.readFrom(ctx, s, &offset, onErr); err != nil && onErr != nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// readFrom adds the complete lines from *offset on, advancing it past each line read.
func (f File) readFrom(ctx context.Context, s *Store, offset *int64, onErr func(error)) error {
	fh, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	if st.Size() < *offset { // rotated
		*offset = 0
	}
	if _, err := fh.Seek(*offset, io.SeekStart); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	r := bufio.NewReaderSize(fh, 1<<20)
	for ctx.Err() == nil {
		line, err := r.ReadBytes('\n')
		if err != nil { // EOF: a partial line waits for its newline
			return nil
		}
		*offset += int64(len(line))
		var ev auditv1.Event
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			if onErr != nil {
				onErr(fmt.Errorf("audit log %s at byte %d: %w", f.Path, *offset-int64(len(line)), err))
			}
			continue
		}
		s.AddFrom(f.Cluster, &ev)
	}
	return ctx.Err()
}
