package outbox

import (
	"context"
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/llm-gitops/platform/internal/daemon/message"
	"github.com/llm-gitops/platform/internal/daemon/sinks"
)

// DispatcherConfig tunes delivery. Zero values take the defaults in brackets.
type DispatcherConfig struct {
	// BackoffBase is the first retry delay [1s]; it doubles per failure up to BackoffMax [5m],
	// with jitter (each delay is drawn from [d/2, d]).
	BackoffBase, BackoffMax time.Duration
	// Rate is the sustained sends per second [1]; Burst how many may go at once [5]. A negative
	// Rate disables rate limiting.
	Rate  float64
	Burst int
	// SendTimeout bounds one Send [30s].
	SendTimeout time.Duration
	// MaxPermanentAttempts is how many times a message the sink rejects as invalid (a 4xx other
	// than 408/429) is tried before it moves to the outbox's dead/ directory [5].
	MaxPermanentAttempts int
	// MaxRetryAfter caps a server's Retry-After [1h].
	MaxRetryAfter time.Duration
	// Logger receives delivery failures (already redacted) [discard].
	Logger *slog.Logger
	// Paused, when set, holds delivery while it says true (a replica that does not lead: what
	// it queued while it led is sent when it leads again, unless announced meanwhile). Call
	// Dispatcher.Wake when its answer changes.
	Paused func() bool
	// Claim, when set, is asked before each send whether this replica posts m (replicas that
	// share the work post for their own shards): Post, then done is called once the send and
	// its record are over, so that a shard is not handed over while one of its messages is in
	// flight; Drop, and m leaves the outbox unsent (its keys' new poster announces what stands);
	// Wait, and m is asked about again a moment later, the other messages going on meanwhile.
	Claim func(m message.Message) (v Verdict, done func())
}

// Verdict is Claim's answer about a message.
type Verdict int

// Claim's answers.
const (
	Post Verdict = iota
	Drop
	Wait
)

func (c DispatcherConfig) withDefaults() DispatcherConfig {
	if c.BackoffBase <= 0 {
		c.BackoffBase = time.Second
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 5 * time.Minute
	}
	if c.BackoffMax < c.BackoffBase {
		c.BackoffMax = c.BackoffBase
	}
	if c.Rate == 0 {
		c.Rate = 1
	}
	if c.Burst <= 0 {
		c.Burst = 5
	}
	if c.SendTimeout <= 0 {
		c.SendTimeout = 30 * time.Second
	}
	if c.MaxPermanentAttempts <= 0 {
		c.MaxPermanentAttempts = 5
	}
	if c.MaxRetryAfter <= 0 {
		c.MaxRetryAfter = time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Dispatcher delivers the messages of one Outbox to one sinks.Sink from its own goroutine, oldest
// first, at least once: a message leaves the outbox only after the sink accepted it (or when
// its dedupe keys were already announced). Failures are retried with exponential backoff and
// jitter, honouring Retry-After; sends are rate limited (a token bucket, golang.org/x/time/rate).
type Dispatcher struct {
	sink    sinks.Sink
	outbox  *Outbox
	cfg     DispatcherConfig
	limiter *rate.Limiter

	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{}

	failures, sent, suppressed atomic.Uint64
}

// NewDispatcher starts delivering ob's messages to sink; call Close to stop it.
func NewDispatcher(sink sinks.Sink, ob *Outbox, cfg DispatcherConfig) *Dispatcher {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	d := &Dispatcher{sink: sink, outbox: ob, cfg: cfg, limiter: newLimiter(cfg.Rate, cfg.Burst), cancel: cancel, wake: make(chan struct{}, 1)}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.run(ctx)
	}()
	return d
}

// Wake makes a paused dispatcher ask Paused again.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Close stops delivery and waits for the goroutine to end. Pending messages stay in the
// outbox for the next Dispatcher.
func (d *Dispatcher) Close() {
	d.cancel()
	d.wg.Wait()
}

// SinkFailures returns the number of failed send attempts.
func (d *Dispatcher) SinkFailures() uint64 { return d.failures.Load() }

// Sent returns the number of messages the sink accepted.
func (d *Dispatcher) Sent() uint64 { return d.sent.Load() }

// Suppressed returns the number of messages removed unsent as already announced.
func (d *Dispatcher) Suppressed() uint64 { return d.suppressed.Load() }

// OutboxDepth returns the number of messages waiting.
func (d *Dispatcher) OutboxDepth() int { return d.outbox.Depth() }

// Dropped returns the number of messages the outbox dropped because it was full.
func (d *Dispatcher) Dropped() uint64 { return d.outbox.Dropped() }

// rejected is a message the sink refused as invalid, waiting for its own next attempt.
type rejected struct {
	attempts  int
	backoff   wait.Backoff
	notBefore time.Time
}

func (d *Dispatcher) run(ctx context.Context) {
	log := d.cfg.Logger.With("sink", d.sink.Name())
	attempt := 0 // consecutive failures of the sink itself (down, throttling)
	backoff := d.cfg.retryBackoff()
	// Messages the sink rejected wait apart: the others go out meanwhile (no head-of-line block).
	held := map[string]*rejected{}
	waiting := map[string]time.Time{} // messages Claim said to wait, until when
	for ctx.Err() == nil {
		if d.cfg.Paused != nil && d.cfg.Paused() {
			select {
			case <-ctx.Done():
			case <-d.wake:
			}
			continue
		}
		skip := map[string]bool{}
		var wake time.Time
		now := time.Now()
		for id, until := range waiting {
			if now.Before(until) {
				skip[id] = true
				if wake.IsZero() || until.Before(wake) {
					wake = until
				}
			} else {
				delete(waiting, id)
			}
		}
		for id, r := range held {
			if now.Before(r.notBefore) {
				skip[id] = true
				if wake.IsZero() || r.notBefore.Before(wake) {
					wake = r.notBefore
				}
			}
		}
		p, ok, err := d.outbox.PeekExcept(skip)
		if err != nil {
			log.Error("read outbox", "err", err)
			attempt++
			_ = sleepCtx(ctx, backoff.Step())
			continue
		}
		if !ok {
			var timer *time.Timer
			var fire <-chan time.Time
			if !wake.IsZero() {
				timer = time.NewTimer(time.Until(wake))
				fire = timer.C
			}
			select {
			case <-ctx.Done():
			case <-d.outbox.Ready():
			case <-fire:
			}
			if timer != nil {
				timer.Stop()
			}
			continue
		}
		if d.outbox.Announced(p.Message) {
			if err := d.outbox.Remove(p); err != nil {
				log.Error("remove suppressed message", "id", p.Message.ID, "err", err)
				next := backoff // the delay of one more failure, not counted as one
				_ = sleepCtx(ctx, next.Step())
				continue
			}
			d.suppressed.Add(1)
			continue
		}
		if err := d.limiter.Wait(ctx); err != nil {
			return
		}
		if d.cfg.Paused != nil && d.cfg.Paused() { // paused while waiting for the limiter
			continue
		}
		done := func() {}
		if d.cfg.Claim != nil {
			v, claimed := d.cfg.Claim(p.Message)
			switch v {
			case Drop:
				if err := d.outbox.Remove(p); err != nil {
					log.Error("remove a message of a shard handed over", "id", p.Message.ID, "err", err)
				}
				log.Info("message dropped: its shard is another replica's now", "id", p.Message.ID)
				d.suppressed.Add(1)
				continue
			case Wait:
				waiting[p.Message.ID] = time.Now().Add(500 * time.Millisecond)
				continue
			}
			done = claimed
		}
		sctx, cancel := context.WithTimeout(ctx, d.cfg.SendTimeout)
		err = d.sink.Send(sctx, p.Message)
		cancel()
		if err == nil {
			attempt, backoff = 0, d.cfg.retryBackoff()
			delete(held, p.Message.ID)
			d.sent.Add(1)
			if err := d.outbox.MarkDelivered(p.Message); err != nil {
				log.Error("record delivery", "id", p.Message.ID, "err", err)
			}
			done()
			if err := d.outbox.Remove(p); err != nil {
				log.Error("remove delivered message", "id", p.Message.ID, "err", err)
			}
			continue
		}
		done()
		if ctx.Err() != nil {
			return // closing: the message stays pending
		}
		d.failures.Add(1)
		if sinks.IsPermanent(err) {
			// This message is the problem, not the sink: retry it on its own clock.
			r := held[p.Message.ID]
			if r == nil {
				r = &rejected{backoff: d.cfg.retryBackoff()}
				held[p.Message.ID] = r
			}
			r.attempts++
			if r.attempts >= d.cfg.MaxPermanentAttempts {
				log.Error("message rejected, moved to dead letters", "id", p.Message.ID, "err", err)
				if err := d.outbox.DeadLetter(p); err != nil {
					log.Error("dead-letter", "id", p.Message.ID, "err", err)
				}
				delete(held, p.Message.ID)
				continue
			}
			r.notBefore = time.Now().Add(r.backoff.Step())
			log.Warn("message rejected, will retry it after the others", "id", p.Message.ID, "attempt", r.attempts, "err", err)
			continue
		}
		attempt++
		delay := backoff.Step()
		if ra, ok := sinks.RetryAfter(err); ok {
			delay = min(ra, d.cfg.MaxRetryAfter)
		}
		log.Warn("send failed, will retry", "id", p.Message.ID, "attempt", attempt, "in", delay, "err", err)
		_ = sleepCtx(ctx, delay)
	}
}

// newLimiter allows r sends per second, burst at once; r < 0 is unlimited.
func newLimiter(r float64, burst int) *rate.Limiter {
	if r < 0 {
		return rate.NewLimiter(rate.Inf, burst)
	}
	return rate.NewLimiter(rate.Limit(r), burst)
}

// sleepCtx sleeps d or until ctx ends (returning its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryBackoff is the backoff of consecutive failures: delays double from BackoffBase up to
// BackoffMax, each drawn from [d/2, d]. wait.Backoff jitters upwards (d to d·(1+Jitter)), so it
// starts from half the delays with a jitter of 1.
func (c DispatcherConfig) retryBackoff() wait.Backoff {
	return wait.Backoff{Duration: max(c.BackoffBase/2, 1), Factor: 2, Jitter: 1, Steps: math.MaxInt32, Cap: max(c.BackoffMax/2, 1)}
}
