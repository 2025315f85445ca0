// Package lifecycle starts a program's long-running parts together and stops them together:
// the first part that fails stops the others, and Run returns once every part has returned.
package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"golang.org/x/sync/errgroup"
)

// Runnable is one long-running part: it runs until ctx ends, or fails.
type Runnable func(ctx context.Context) error

// Group is a set of named parts run as one.
type Group struct {
	log   *slog.Logger
	parts []part
	stops []part
}

type part struct {
	name string
	run  Runnable
}

// NewGroup returns an empty group that logs each part's end to log (nil: slog's default).
func NewGroup(log *slog.Logger) *Group {
	if log == nil {
		log = slog.Default()
	}
	return &Group{log: log}
}

// Add adds a part; it starts when Run does. A part that returns nil before ctx ends is done:
// the others go on.
func (g *Group) Add(name string, run Runnable) {
	g.parts = append(g.parts, part{name: name, run: run})
}

// OnStop adds a step run once every part has returned: what outlives the parts' goroutines
// (a queue flushed, a cache's informers ended, files closed). Steps run in the reverse order
// they were added, after a failure as after ctx ended.
func (g *Group) OnStop(name string, stop func()) {
	g.stops = append(g.stops, part{name: name, run: func(context.Context) error { stop(); return nil }})
}

// Names lists the parts in the order they were added.
func (g *Group) Names() []string {
	out := make([]string, len(g.parts))
	for i, p := range g.parts {
		out[i] = p.name
	}
	return out
}

// Run starts every part and waits for all of them, then runs the stop steps. The first part
// to fail cancels the others' context; Run returns its error, named. When ctx ends, every part
// is asked to stop and Run returns nil once they have.
func (g *Group) Run(ctx context.Context) error {
	defer func() {
		for _, s := range slices.Backward(g.stops) {
			g.log.Debug("stopping", "step", s.name)
			_ = s.run(context.Background())
		}
	}()
	eg, ctx := errgroup.WithContext(ctx)
	for _, p := range g.parts {
		eg.Go(func() error {
			err := p.run(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				g.log.Error("part failed: stopping the others", "part", p.name, "err", err)
				return fmt.Errorf("%s: %w", p.name, err)
			case ctx.Err() == nil:
				g.log.Debug("part done", "part", p.name)
			}
			return nil
		})
	}
	return eg.Wait()
}
