package daemon

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/util/retry"
)

// recordAnnotation prefixes the Lease annotation holding one sink's delivery record.
const recordAnnotation = "auditor.platform.llm/delivered."

// leaseRecord keeps one sink's delivery record (outbox.RecordStore) in an annotation of the
// leader Lease, gzipped and base64-encoded: the replica that leads next reads what the last
// leader delivered, so a leader change announces every drift once. The Lease is the only object
// the daemon writes; the election's own renewals retry on the conflicts these writes cause.
type leaseRecord struct {
	leases     coordinationv1.LeaseInterface
	name       string
	annotation string
	// identity is this replica's: a record is saved only while the Lease names it the holder,
	// so a deposed leader cannot overwrite what its successor announced.
	identity string
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
	// A JSON patch whose first operation tests the holder: applied atomically by the API server,
	// it cannot land for a deposed leader, and it needs no resourceVersion, so it does not
	// conflict with the election's renewals of the same Lease (theirs retry on ours).
	ops := []map[string]any{
		{"op": "test", "path": "/spec/holderIdentity", "value": r.identity},
		{"op": "add", "path": "/metadata/annotations/" + strings.ReplaceAll(r.annotation, "/", "~1"), "value": v},
	}
	backoff := wait.Backoff{Duration: 20 * time.Millisecond, Factor: 2, Jitter: 0.3, Steps: 8, Cap: 2 * time.Second}
	retriable := func(err error) bool {
		return !errors.Is(err, errNotLeader) && !errors.Is(err, errRecordRejected) && ctx.Err() == nil
	}
	err := retry.OnError(backoff, retriable, func() error {
		l, err := r.leases.Get(ctx, r.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h := l.Spec.HolderIdentity; h == nil || *h != r.identity {
			return fmt.Errorf("%w (holder %v, not %s)", errNotLeader, ptrString(h), r.identity)
		}
		if l.Annotations == nil {
			// The first record: JSON patch can only add to an existing map, and creating it with
			// JSON patch would wipe what a concurrent save of another sink just added. A merge
			// patch creates it without touching what is there.
			format := fmt.Sprintf(`{"metadata":{"annotations":{%q:"1"}}}`, recordAnnotation+"format")
			if _, err := r.leases.Patch(ctx, r.name, types.MergePatchType, []byte(format), metav1.PatchOptions{FieldManager: "llm-auditor"}); err != nil {
				return err
			}
		}
		body, err := json.Marshal(ops)
		if err != nil {
			return err
		}
		_, err = r.leases.Patch(ctx, r.name, types.JSONPatchType, body, metav1.PatchOptions{FieldManager: "llm-auditor"})
		var status apierrors.APIStatus
		if errors.As(err, &status) && status.Status().Code == http.StatusUnprocessableEntity {
			// The Lease is invalid with the record (its annotations past 256 KiB); else the
			// test failed (another holder), or the add found no annotations (removed since
			// the Get: tried again).
			if tooLong(status.Status()) {
				return fmt.Errorf("%w (%d bytes encoded): %v", errRecordRejected, len(v), err)
			}
			l, gerr := r.leases.Get(ctx, r.name, metav1.GetOptions{})
			if gerr == nil && (l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != r.identity) {
				return fmt.Errorf("%w: %v", errNotLeader, err)
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("lease %s: %w", r.name, err)
	}
	return nil
}

var (
	errNotLeader = errors.New("not the leader: the delivery record is the leader's to write")
	// errRecordRejected: the API server refused the Lease with the record (the Lease's
	// annotations hold 256 KiB in all). The message was posted; a replica taking over may
	// announce its drift again.
	errRecordRejected = errors.New("the API server rejected the Lease with the delivery record")
)

// tooLong says whether the API server found the object's annotations invalid (past their size).
func tooLong(st metav1.Status) bool {
	if st.Reason != metav1.StatusReasonInvalid || st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Field == "metadata.annotations" {
			return true
		}
	}
	return false
}

func ptrString(p *string) string {
	if p == nil {
		return "none"
	}
	return *p
}
