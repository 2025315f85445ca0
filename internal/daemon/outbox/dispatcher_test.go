package outbox

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/llm-gitops/platform/internal/daemon/message"
	"github.com/llm-gitops/platform/internal/daemon/notify/notifytest"
	"github.com/llm-gitops/platform/internal/daemon/sinks"
)

func fastConfig() DispatcherConfig {
	return DispatcherConfig{BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, Rate: -1, SendTimeout: 2 * time.Second, MaxRetryAfter: 50 * time.Millisecond}
}

func testMessages(n int) []message.Message {
	var out []message.Message
	for i := range n {
		out = append(out, message.New(message.KindDrift, "dev", fmt.Sprintf("drift %d", i), []message.Line{{Text: "x"}}, []string{fmt.Sprintf("key-%d", i)}, ""))
	}
	return out
}

func TestDeliveryRetriesUntilExactlyOnce(t *testing.T) {
	tests := []struct {
		name   string
		behave func(n int, w http.ResponseWriter) int
	}{
		{"500 then recover", func(n int, w http.ResponseWriter) int {
			if n < 4 {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		}},
		{"429 with Retry-After", func(n int, w http.ResponseWriter) int {
			if n%3 == 0 && n < 9 {
				w.Header().Set("Retry-After", "1")
				return http.StatusTooManyRequests
			}
			return http.StatusOK
		}},
		{"stall then recover", func(n int, w http.ResponseWriter) int {
			if n < 2 {
				return -1
			}
			return http.StatusOK
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rcv := notifytest.NewReceiver(t, tt.behave)
			ob, err := OpenOutbox(t.TempDir(), 100)
			if err != nil {
				t.Fatal(err)
			}
			msgs := testMessages(6)
			for _, m := range msgs {
				if err := ob.Enqueue(m); err != nil {
					t.Fatal(err)
				}
				if err := ob.Enqueue(m); err != nil { // same id: stored once
					t.Fatal(err)
				}
			}
			cfg := fastConfig()
			cfg.SendTimeout = 100 * time.Millisecond
			d := NewDispatcher(rcv.Slack(t, 0), ob, cfg)
			notifytest.WaitFor(t, 10*time.Second, "delivery", func() bool { return ob.Depth() == 0 })
			d.Close()
			counts := rcv.TextCounts(t)
			for _, m := range msgs {
				if counts[m.Title] != 1 {
					t.Errorf("%s delivered %d times", m.Title, counts[m.Title])
				}
			}
			if len(counts) != len(msgs) {
				t.Errorf("delivered %v", counts)
			}
			if d.SinkFailures() == 0 {
				t.Errorf("no failure counted")
			}
			if d.Sent() != uint64(len(msgs)) {
				t.Errorf("sent = %d", d.Sent())
			}
		})
	}
}

func TestOutboxSurvivesRestart(t *testing.T) {
	// The receiver is down while the first dispatcher runs, and up (a new server: requests the
	// first dispatcher abandoned cannot land there) for the second.
	down := notifytest.NewReceiver(t, func(int, http.ResponseWriter) int { return http.StatusServiceUnavailable })
	rcv := notifytest.NewReceiver(t, nil)
	dir := t.TempDir()
	ob, err := OpenOutbox(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDispatcher(down.Slack(t, 0), ob, fastConfig())
	msgs := testMessages(3)
	for _, m := range msgs {
		if err := ob.Enqueue(m); err != nil {
			t.Fatal(err)
		}
	}
	notifytest.WaitFor(t, 5*time.Second, "a failure", func() bool { return d.SinkFailures() > 0 })
	d.Close()
	if ob.Depth() != 3 {
		t.Fatalf("depth %d", ob.Depth())
	}

	ob2, err := OpenOutbox(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	if ob2.Depth() != 3 {
		t.Fatalf("reopened depth %d", ob2.Depth())
	}
	d2 := NewDispatcher(rcv.Slack(t, 0), ob2, fastConfig())
	notifytest.WaitFor(t, 5*time.Second, "delivery after restart", func() bool { return ob2.Depth() == 0 })
	d2.Close()
	got := rcv.TextCounts(t)
	for _, m := range msgs {
		if got[m.Title] != 1 {
			t.Errorf("%s delivered %d times", m.Title, got[m.Title])
		}
	}

	// Delivered keys are remembered across restarts: the same announcement is suppressed.
	ob3, err := OpenOutbox(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !ob3.Announced(msgs[0]) {
		t.Fatal("delivered message not remembered")
	}
	resolved := message.New(message.KindResolved, "dev", "resolved 0", nil, msgs[0].Keys, "")
	if ob3.Announced(resolved) {
		t.Fatal("resolution considered announced")
	}
	d3 := NewDispatcher(rcv.Slack(t, 0), ob3, fastConfig())
	if err := ob3.Enqueue(msgs[0]); err != nil {
		t.Fatal(err)
	}
	if err := ob3.Enqueue(resolved); err != nil {
		t.Fatal(err)
	}
	notifytest.WaitFor(t, 5*time.Second, "drain", func() bool { return ob3.Depth() == 0 })
	d3.Close()
	if d3.Suppressed() != 1 || d3.Sent() != 1 {
		t.Errorf("suppressed %d sent %d, want 1 and 1", d3.Suppressed(), d3.Sent())
	}
}

func TestOutboxBound(t *testing.T) {
	ob, err := OpenOutbox(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	msgs := testMessages(5)
	for _, m := range msgs {
		if err := ob.Enqueue(m); err != nil {
			t.Fatal(err)
		}
	}
	if ob.Depth() != 3 || ob.Dropped() != 2 {
		t.Fatalf("depth %d dropped %d", ob.Depth(), ob.Dropped())
	}
	p, ok, err := ob.Peek()
	if err != nil || !ok || p.Message.ID != msgs[2].ID {
		t.Fatalf("oldest kept = %v %v %v, want %s", p.Message.Title, ok, err, msgs[2].Title)
	}
}

// TestRejectedMessageDoesNotBlockTheQueue: a message the sink rejects as invalid (400) is
// retried on its own clock while the messages behind it go out, then dead-lettered.
func TestRejectedMessageDoesNotBlockTheQueue(t *testing.T) {
	var mu sync.Mutex
	var events []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(string(body), "drift 0") {
			events = append(events, "reject 0")
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		for _, title := range []string{"drift 1", "drift 2"} {
			if strings.Contains(string(body), title) {
				events = append(events, "ok "+title[len(title)-1:])
			}
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	ob, err := OpenOutbox(t.TempDir(), 10)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := sinks.NewSlack(sinks.SlackConfig{URLFile: notifytest.SecretFile(t, srv.URL+"/hook/T000/B000/XXXXsupersecretXXXX")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.MaxPermanentAttempts = 3
	cfg.BackoffBase, cfg.BackoffMax = 50*time.Millisecond, 200*time.Millisecond
	for _, m := range testMessages(3) {
		if err := ob.Enqueue(m); err != nil {
			t.Fatal(err)
		}
	}
	d := NewDispatcher(sink, ob, cfg)
	notifytest.WaitFor(t, 5*time.Second, "drain", func() bool { return ob.Depth() == 0 })
	d.Close()
	if ob.DeadLettered() != 1 || d.Sent() != 2 {
		t.Errorf("dead %d sent %d, want 1 and 2", ob.DeadLettered(), d.Sent())
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"reject 0", "ok 1", "ok 2", "reject 0", "reject 0"}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("the rejected message held the others back (-want +got):\n%s", diff)
	}
}

func TestDispatcherRateLimit(t *testing.T) {
	rcv := notifytest.NewReceiver(t, nil)
	ob, err := OpenOutbox(t.TempDir(), 10)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.Rate, cfg.Burst = 20, 1 // one per 50ms
	start := time.Now()
	d := NewDispatcher(rcv.Slack(t, 0), ob, cfg)
	for _, m := range testMessages(5) {
		if err := ob.Enqueue(m); err != nil {
			t.Fatal(err)
		}
	}
	notifytest.WaitFor(t, 5*time.Second, "drain", func() bool { return ob.Depth() == 0 })
	d.Close()
	if el := time.Since(start); el < 180*time.Millisecond {
		t.Errorf("5 messages at 20/s took %v", el)
	}
}

func TestDispatcherCloseNoLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	rcv := notifytest.NewReceiver(t, func(int, http.ResponseWriter) int { return -1 })
	ob, err := OpenOutbox(t.TempDir(), 10)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.SendTimeout = time.Minute
	d := NewDispatcher(rcv.Slack(t, 0), ob, cfg)
	_ = ob.Enqueue(testMessages(1)[0])
	time.Sleep(20 * time.Millisecond) // let it block in Send
	done := make(chan struct{})
	go func() { d.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not return")
	}
	if ob.Depth() != 1 {
		t.Errorf("message lost on close: depth %d", ob.Depth())
	}
	rcv.CloseClientConnections()
	notifytest.WaitFor(t, 2*time.Second, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before+2 })
}

// TestRetryBackoff: retry n waits between w/2 and w, w = BackoffBase·2^(n-1) up to BackoffMax.
func TestRetryBackoff(t *testing.T) {
	cfg := DispatcherConfig{BackoffBase: time.Second, BackoffMax: 5 * time.Minute}.withDefaults()
	for range 100 {
		b := cfg.retryBackoff()
		w := cfg.BackoffBase
		for n := 1; n <= 12; n++ {
			got := b.Step()
			if got < w/2 || got > w {
				t.Fatalf("retry %d waits %v, want within [%v, %v]", n, got, w/2, w)
			}
			w = min(2*w, cfg.BackoffMax)
		}
	}
}
