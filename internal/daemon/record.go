package daemon

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/util/retry"
)

// recordAnnotation prefixes the Lease annotation holding one sink's delivery record.
const recordAnnotation = "auditor.platform.llm/delivered."

// leaseRecord keeps one sink's delivery record (report.RecordStore) in an annotation of the
// leader Lease, gzipped and base64-encoded: the replica that leads next reads what the last
// leader delivered, so a leader change announces every drift once. The Lease is the only object
// the daemon writes; the election's own renewals retry on the conflicts these writes cause.
type leaseRecord struct {
	leases     coordinationv1.LeaseInterface
	name       string
	annotation string
}

func (r *leaseRecord) Load(ctx context.Context) ([]byte, error) {
	l, err := r.leases.Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("lease %s: %w", r.name, err)
	}
	v := l.Annotations[r.annotation]
	if v == "" {
		return nil, nil
	}
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return nil, fmt.Errorf("lease %s annotation %s: %w", r.name, r.annotation, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("lease %s annotation %s: %w", r.name, r.annotation, err)
	}
	data, err := io.ReadAll(io.LimitReader(zr, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("lease %s annotation %s: %w", r.name, r.annotation, err)
	}
	return data, nil
}

func (r *leaseRecord) Save(ctx context.Context, data []byte) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	v := base64.StdEncoding.EncodeToString(buf.Bytes())
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := r.leases.Get(ctx, r.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[r.annotation] = v
		_, err = r.leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: "llm-auditor"})
		return err
	})
	if err != nil {
		return fmt.Errorf("lease %s: %w", r.name, err)
	}
	return nil
}
