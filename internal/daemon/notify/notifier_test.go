package notify

import (
	"testing"
	"time"

	"github.com/llm-gitops/platform/internal/daemon/notify/notifytest"
	"github.com/llm-gitops/platform/internal/daemon/outbox"
)

func TestNotifierEndToEnd(t *testing.T) {
	rcv := notifytest.NewReceiver(t, nil)
	ob, err := outbox.OpenOutbox(t.TempDir(), 100)
	if err != nil {
		t.Fatal(err)
	}
	d := outbox.NewDispatcher(rcv.Slack(t, 0), ob, outbox.DispatcherConfig{BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, Rate: -1, SendTimeout: 2 * time.Second, MaxRetryAfter: 50 * time.Millisecond})
	defer d.Close()
	n := NewNotifier(NotifierConfig{Window: 30 * time.Millisecond, Outboxes: []*outbox.Outbox{ob}})
	defer n.Close()
	if err := n.Observe(notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel, notifytest.Replicas, notifytest.Annotation))); err != nil {
		t.Fatal(err)
	}
	if err := n.Observe(notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel, notifytest.Replicas, notifytest.Annotation))); err != nil {
		t.Fatal(err)
	}
	notifytest.WaitFor(t, 5*time.Second, "digest", func() bool { return len(rcv.Received()) == 1 })
	if err := n.Observe(notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel, notifytest.Replicas))); err != nil {
		t.Fatal(err)
	}
	notifytest.WaitFor(t, 5*time.Second, "resolution", func() bool { return len(rcv.Received()) == 2 })
	counts := rcv.TextCounts(t)
	if counts["3 new drifts in dev"] != 1 || counts[`Resolved in dev: Deployment llm/api .metadata.annotations["example.com/owner"]`] != 1 {
		t.Errorf("got %v", counts)
	}
}
