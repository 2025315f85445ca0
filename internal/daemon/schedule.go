package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/llm-gitops/platform/internal/daemon/message"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// ScheduleConfig turns on the in-process firing of clusters/<env>/schedule.yaml.
type ScheduleConfig struct {
	Enabled bool `json:"enabled"`
	// Branch the commits go to (default main).
	Branch string `json:"branch,omitempty"`
	// Remote is where scale-up commits are pushed, credentials from files.
	Remote gitrepo.RemoteConfig `json:"remote"`
}

// runSchedules fires every env's schedule until ctx ends. Every replica runs them — a firing is
// committed exactly once whoever pushes first (trailers are checked on the head being committed
// on) — but only the leader alerts the chat when a scale-up cannot land in time.
func (d *Daemon) runSchedules(ctx context.Context) {
	for _, ch := range []<-chan struct{}{d.connected, d.lead.Decided()} {
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
	remote, err := gitrepo.NewRemote(d.onDisk(d.cfg.Schedule.Remote, "schedule"))
	if err != nil {
		d.log.Error("schedules disabled", "err", err)
		return
	}
	repo := d.git.Repo()
	snap, err := repo.Snapshot("")
	if err != nil {
		d.log.Error("schedules disabled", "err", err)
		return
	}
	done := make(chan struct{})
	running := 0
	for _, env := range d.cfg.Envs {
		// Every env gets a runner, with an empty schedule until Git has one (or one that parses):
		// a schedule added or fixed later is picked up from the next fetched revision.
		s, err := schedule.Load(snap, env)
		switch {
		case errors.Is(err, schedule.ErrNoSchedule):
			s = &schedule.Schedule{}
		case err != nil:
			d.log.Error("schedule not loaded", "env", env, "err", err)
			s = &schedule.Schedule{}
		}
		wake := d.git.Subscribe() // a revision was fetched
		r := &schedule.Runner{Schedule: s, Remote: remote, Options: schedule.FireOptions{Branch: d.cfg.Schedule.Branch},
			OnEvent: func(e schedule.Event) { d.scheduleEvent(env, e) }, Reload: d.scheduleReloader(env, snap), Wake: wake}
		running++
		go func() {
			defer func() { done <- struct{}{} }()
			_ = r.Run(ctx)
		}()
		d.log.Info("schedule running", "env", env, "peaks", len(s.Peaks))
	}
	for range running {
		<-done
	}
}

// scheduleReloader returns the Runner's Reload: env's schedule as the last fetched revision has
// it, read again only when the revision moved (a schedule that no longer parses is logged and the
// running one kept).
func (d *Daemon) scheduleReloader(env string, loaded *gitrepo.Snapshot) func() *schedule.Schedule {
	current := string(loaded.Files[schedule.Path(env)])
	last := loaded.Revision
	return func() *schedule.Schedule {
		repo := d.git.Repo()
		head, err := repo.Resolve("")
		if err != nil || head == last {
			return nil
		}
		last = head
		snap, err := repo.Snapshot(head)
		if err != nil {
			d.log.Error("schedule not reloaded", "env", env, "err", err)
			return nil
		}
		s, err := schedule.Load(snap, env)
		switch {
		case errors.Is(err, schedule.ErrNoSchedule):
			s = &schedule.Schedule{}
		case err != nil:
			d.log.Error("schedule not reloaded: keeping the running one", "env", env, "revision", head, "err", err)
			return nil
		}
		// A revision that leaves schedule.yaml as it was (the runner's own scale-up commits among
		// them) changes nothing: the runner keeps its place.
		text := string(snap.Files[schedule.Path(env)])
		if text == current {
			return nil
		}
		current = text
		d.log.Info("schedule reloaded", "env", env, "revision", head, "peaks", len(s.Peaks))
		return s
	}
}

func (d *Daemon) scheduleEvent(env string, e schedule.Event) {
	f := e.Firing
	// One alert per firing and kind, however often it is retried.
	key := fmt.Sprintf("%s/%s/%s/%s", env, f.Peak.Name, f.FireTime.UTC().Format(time.RFC3339), f.Phase)
	var missed *schedule.MissedError
	switch {
	case errors.As(e.Err, &missed):
		d.log.Error("peak missed: no scale-up before it ended", "env", env, "peak", f.Peak.Name, "err", e.Err)
		if d.lead.Leading() {
			d.alert(env, key+"/missed", fmt.Sprintf("Peak %q missed", f.Peak.Name), e.Err.Error())
		}
	case e.Skipped:
		d.log.Warn("scheduled firing skipped: its window has passed", "env", env, "peak", f.Peak.Name, "fire", f.FireTime)
	case e.Err != nil:
		d.log.Error("scheduled firing failed, will retry", "env", env, "peak", f.Peak.Name, "phase", f.Phase, "fire", f.FireTime, "err", e.Err)
		if d.lead.Leading() {
			what := "scale-up"
			if f.Phase == schedule.ScaleDown {
				what = "scale-down (GPUs stay warm until it lands)"
			}
			d.alert(env, key+"/failed", fmt.Sprintf("Scheduled %s of %q failing", what, f.Peak.Name),
				fmt.Sprintf("fire time %s, peak %s–%s, retried until it lands: %v", f.FireTime.Format(time.RFC3339),
					f.Start.Format(time.RFC3339), f.End.Format("15:04"), e.Err))
		}
	default:
		d.log.Info("scheduled firing done", "env", env, "peak", f.Peak.Name, "phase", f.Phase, "fire", f.FireTime)
	}
}

// alertKeyPrefix starts the dedupe key of an alert.
const alertKeyPrefix = "alert/"

// alert puts a one-off message in every sink's outbox; key makes it announced once.
func (d *Daemon) alert(env, key, title, text string) {
	sum := sha256.Sum256([]byte(key))
	m := message.Message{ID: hex.EncodeToString(sum[:8]), Kind: message.KindDigest, Env: env, Title: title,
		Lines: []message.Line{{Text: text}}, Keys: []string{alertKeyPrefix + key}}
	for _, ob := range d.outboxes {
		if err := ob.Enqueue(m); err != nil {
			d.log.Error("enqueue alert", "err", err)
		}
	}
}
