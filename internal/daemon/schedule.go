package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/report"
	"github.com/llm-gitops/platform/internal/schedule"
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
	select {
	case <-d.decided:
	case <-ctx.Done():
		return
	}
	remote, err := gitrepo.NewRemote(d.cfg.Schedule.Remote)
	if err != nil {
		d.log.Error("schedules disabled", "err", err)
		return
	}
	d.mu.RLock()
	repo := d.repo
	d.mu.RUnlock()
	snap, err := repo.Snapshot("")
	if err != nil {
		d.log.Error("schedules disabled", "err", err)
		return
	}
	done := make(chan struct{})
	running := 0
	for _, env := range d.cfg.Envs {
		s, err := schedule.Load(snap, env)
		if errors.Is(err, schedule.ErrNoSchedule) {
			continue
		}
		if err != nil {
			d.log.Error("schedule not loaded", "env", env, "err", err)
			continue
		}
		r := &schedule.Runner{Schedule: s, Remote: remote, Options: schedule.FireOptions{Branch: d.cfg.Schedule.Branch},
			OnEvent: func(e schedule.Event) { d.scheduleEvent(env, e) }}
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

func (d *Daemon) scheduleEvent(env string, e schedule.Event) {
	f := e.Firing
	switch {
	case e.Skipped:
		d.log.Warn("scheduled firing skipped: its window has passed", "env", env, "peak", f.Peak.Name, "fire", f.FireTime)
	case e.Err != nil:
		d.log.Error("scheduled firing failed", "env", env, "peak", f.Peak.Name, "fire", f.FireTime, "err", e.Err)
		if d.leader.Load() {
			d.alert(env, fmt.Sprintf("Scheduled scale-up %q at risk", f.Peak.Name),
				fmt.Sprintf("fire time %s, peak starts %s: %v", f.FireTime.Format(time.RFC3339), f.Start.Format(time.RFC3339), e.Err))
		}
	default:
		d.log.Info("scheduled firing done", "env", env, "peak", f.Peak.Name, "phase", f.Phase, "fire", f.FireTime)
	}
}

// alert puts a one-off message in every sink's outbox.
func (d *Daemon) alert(env, title, text string) {
	sum := sha256.Sum256([]byte(env + "\x00" + title + "\x00" + text))
	m := report.Message{ID: hex.EncodeToString(sum[:8]), Kind: report.KindDigest, Env: env, Title: title,
		Lines: []report.Line{{Text: text}}, Keys: []string{"alert/" + hex.EncodeToString(sum[:8])}}
	for _, ob := range d.outboxes {
		if err := ob.Enqueue(m); err != nil {
			d.log.Error("enqueue alert", "err", err)
		}
	}
}
